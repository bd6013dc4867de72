"""Study YAML of k-format product-choice blocks: texts per format, labels, several blocks,
product images (checked by their bytes at upload), and the refusals with their messages."""

from __future__ import annotations

import copy
import io
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import Image

from webapp.bundle import Bundle
from webapp.definition import StudyDefinition
from webapp.studydef import load_bundle, load_study_file
from webapp.validation import StudyDefinitionError, error_lines

from ..conftest import ROOT

STUDIES = ROOT / "stimuli" / "studies"
FORMATS_DEMO = STUDIES / "product-choice-formats-demo.yaml"
PAIRS = STUDIES / "product_pairs" / "formats-demo.yaml"
PNG = (STUDIES / "product_pairs" / "images" / "kettle-harbor.png").read_bytes()


def _raw() -> dict:
    return yaml.safe_load(FORMATS_DEMO.read_text())


def _pairs() -> dict:
    return yaml.safe_load(PAIRS.read_text())


def _bundle(study: dict, pairs: dict | None = None, extra: dict | None = None) -> Bundle:
    """An uploaded bundle (the console's road) of the study, its pairs and images."""
    files = {
        "study.yaml": yaml.safe_dump(study, allow_unicode=True).encode(),
        "product_pairs/formats-demo.yaml": yaml.safe_dump(
            pairs if pairs is not None else _pairs(), allow_unicode=True
        ).encode(),
        "product_pairs/images/kettle-harbor.png": PNG,
        "product_pairs/images/kettle-stillwater.png": PNG,
        **(extra or {}),
    }
    return Bundle.from_files(files.items(), study_name="study.yaml")


def _refused(study: dict, pairs: dict | None = None, extra: dict | None = None):
    with pytest.raises(StudyDefinitionError) as info:
        load_bundle(_bundle(study, pairs, extra))
    return info.value


def _block(raw: dict) -> dict:
    return next(b for b in raw["tasks"] if b["type"] == "product_choice")


def _choice(d: StudyDefinition) -> Mapping[str, Any]:
    """The body of the product-choice block of a validated study."""
    return next(b.params for b in d.tasks if b.type == "product_choice")


def test_the_three_format_demo_loads_with_a_text_per_format_and_its_images():
    d = load_study_file(FORMATS_DEMO)
    block = _choice(d)
    assert block["formats"] == ["original", "summary", "mitigated:self-debias"]
    assert block["labels"]["mitigated:self-debias"] == "Summary of customer reviews"
    for pair in block["pairs"]:
        for side in ("target", "control"):
            assert set(pair[side]["texts"]) == set(block["formats"])
    image = block["pairs"][0]["target"]["image"]
    assert image["type"] == "image/png" and image["file"].endswith("kettle-harbor.png")
    assert image["alt"] and len(image["sha256"]) == 64


def test_a_zip_upload_of_the_demo_loads_the_same_definition():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("study.yaml", FORMATS_DEMO.read_bytes())
        archive.writestr("product_pairs/formats-demo.yaml", PAIRS.read_bytes())
        for name in ("kettle-harbor.png", "kettle-stillwater.png"):
            archive.write(
                STUDIES / "product_pairs" / "images" / name, f"product_pairs/images/{name}"
            )
    assert load_bundle(Bundle.from_zip(buffer.getvalue())) == load_study_file(FORMATS_DEMO)


def test_two_format_blocks_keep_their_earlier_shape_in_either_spelling():
    # texts: {original, summary} and review/summary are one block; no `formats` key is stored.
    study = _raw()
    block = _block(study)
    del block["formats"], block["labels"]["mitigated:self-debias"]
    del study["analysis"]  # its primary test names the mitigated format removed here
    pairs = _pairs()
    for pair in pairs["pairs"]:
        for side in ("target", "control"):
            texts = pair[side]["texts"]
            pair[side]["texts"] = {"summary": texts["summary"]}
            pair[side]["review"] = texts["original"]
    d = load_bundle(_bundle(study, pairs))
    block = _choice(d)
    assert "formats" not in block
    assert set(block["pairs"][1]["target"]) == {"manufacturer", "price", "review", "summary"}


@pytest.mark.parametrize(
    ("mutate", "path", "reason"),
    [
        (lambda b: b.update(formats=["original"]), "formats", "at least 2"),
        (lambda b: b.update(formats="original"), "formats", "expected a list"),
        (lambda b: b.update(formats=["original", "original"]), "formats[1]", "listed twice"),
        (lambda b: b.update(formats=["original", "Summary!"]), "formats[1]", "not a format name"),
        (
            lambda b: b.update(formats=[f"f{i}" for i in range(9)]),
            "formats",
            "at most 8 formats",
        ),
        (
            lambda b: b["labels"].pop("mitigated:self-debias"),
            "labels",
            "give a label for format 'mitigated:self-debias'",
        ),
        (lambda b: b["labels"].update(other="x"), "labels", "unknown key"),
    ],
)
def test_block_errors_name_the_place_and_the_reason(mutate, path, reason):
    study = _raw()
    mutate(_block(study))
    err = _refused(study)
    assert err.file == "study.yaml"
    assert err.path == f"tasks[2].{path}", err.path
    assert reason in err.reason, err.reason


def test_a_product_without_a_text_for_a_format_is_refused_naming_it():
    pairs = _pairs()
    del pairs["pairs"][3]["control"]["texts"]["mitigated:self-debias"]
    err = _refused(_raw(), pairs)
    assert err.file == "product_pairs/formats-demo.yaml"
    assert err.path == "pairs[3].control"
    assert "no text for format 'mitigated:self-debias'" in err.reason
    assert err.line is not None


def test_a_text_given_twice_is_refused():
    pairs = _pairs()
    pairs["pairs"][0]["target"]["review"] = "also here"
    err = _refused(_raw(), pairs)
    assert err.path == "pairs[0].target.texts.original" and "given twice" in err.reason


def _second_block(study: dict, pairs_file: str, block_id: str = "more") -> dict:
    block = copy.deepcopy(_block(study))
    block.update(id=block_id, pairs=pairs_file)
    study["tasks"].insert(3, block)
    return block


def test_two_blocks_with_different_pairs_load_and_shared_pairs_are_refused():
    study, pairs = _raw(), _pairs()
    other = {"pairs": copy.deepcopy(pairs["pairs"][:3])}
    for i, pair in enumerate(other["pairs"]):
        pair["id"] = f"second-{i}"
        for side in ("target", "control"):
            pair[side].pop("image", None), pair[side].pop("image_alt", None)
    _second_block(study, "product_pairs/second.yaml")
    extra = {"product_pairs/second.yaml": yaml.safe_dump(other).encode()}
    d = load_bundle(_bundle(study, pairs, extra))
    assert [b.id for b in d.tasks if b.type == "product_choice"] == ["choices", "more"]

    other["pairs"][1]["id"] = "blender"  # a pair of the first block
    extra = {"product_pairs/second.yaml": yaml.safe_dump(other).encode()}
    err = _refused(study, pairs, extra)
    assert err.path == "tasks[3].pairs"
    assert "['blender'] are also in block 'choices'" in err.reason
    assert "only one 'product_choice' block" in err.reason


def test_blocks_with_different_numbers_of_formats_are_refused():
    study = _raw()
    block = _second_block(study, "product_pairs/formats-demo.yaml")
    block["formats"] = ["original", "summary"]
    del block["labels"]["mitigated:self-debias"]
    err = _refused(study)
    # The shared pairs are reported first; with other pairs the count of formats is.
    assert "also in block" in err.reason
    pairs = _pairs()
    second = {"pairs": copy.deepcopy(pairs["pairs"][1:3])}
    for pair in second["pairs"]:
        pair["id"] += "-2"
    block["pairs"] = "product_pairs/second.yaml"
    err = _refused(study, pairs, {"product_pairs/second.yaml": yaml.safe_dump(second).encode()})
    assert err.path == "tasks[3].formats"
    assert "same number of formats" in err.reason


# -- images: hostile files are refused at upload, by their content -------------------------------

SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
HTML = b"<!doctype html><html><script>alert(document.cookie)</script></html>"


def _with_image(name: str, content: bytes | None, alt: str | None = "A kettle") -> tuple:
    pairs = _pairs()
    product = pairs["pairs"][1]["target"]
    product["image"] = name
    if alt is not None:
        product["image_alt"] = alt
    extra = {f"product_pairs/{name}": content} if content is not None else {}
    return pairs, extra


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("evil.svg", SVG, "not a PNG, JPEG or WebP image"),
        ("evil.png", SVG, "not a PNG, JPEG or WebP image"),  # the name does not decide
        ("page.jpg", HTML, "not a PNG, JPEG or WebP image"),
        ("empty.png", b"", "not a PNG, JPEG or WebP image"),
        ("riff.webp", b"RIFF\x00\x00\x00\x00WAVEfmt ", "not a PNG, JPEG or WebP image"),
        ("big.png", PNG + bytes(2 * 1024 * 1024), "larger than 2 MiB"),
        ("missing.png", None, "file not found in the study bundle"),
    ],
)
def test_hostile_or_wrong_image_files_are_refused(name, content, reason):
    pairs, extra = _with_image(name, content)
    err = _refused(_raw(), pairs, extra)
    assert err.file == "product_pairs/formats-demo.yaml"
    assert err.path == "pairs[1].target.image"
    assert reason in err.reason, err.reason


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "..\\x.png", "a/../../b.png"])
def test_image_names_cannot_leave_the_bundle(name):
    pairs, extra = _with_image(name, None)
    err = _refused(_raw(), pairs, extra)
    assert err.path == "pairs[1].target.image"
    assert "root:" not in str(err)  # refused by the name's text: nothing was read


def _encoded(kind: str, size: tuple[int, int] = (40, 30), mode: str = "RGB", **save) -> bytes:
    """An image Pillow writes: a real file of that type and size."""
    buffer = io.BytesIO()
    Image.new(mode, size).save(buffer, kind, **save)
    return buffer.getvalue()


def test_accepted_image_types_are_judged_by_magic_bytes():
    # The names do not say what the files are: the content decides.
    for name, content, kind in [
        ("a.bin", _encoded("JPEG"), "image/jpeg"),
        ("b.img", _encoded("WEBP"), "image/webp"),
        ("c.dat", _encoded("PNG", (4096, 4096), "1"), "image/png"),  # exactly the limit
    ]:
        pairs, extra = _with_image(name, content)
        d = load_bundle(_bundle(_raw(), pairs, extra))
        assert _choice(d)["pairs"][1]["target"]["image"]["type"] == kind


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        # A few kilobytes that claim 400 million pixels: Pillow's own bomb check refuses
        # the header, and the message is ours.
        (_encoded("PNG", (20000, 20000), "1", optimize=True), "far more than 16,777,216 pixels"),
        (_encoded("PNG", (5000, 4000), "1"), "the image is 5000 x 4000 pixels; at most 16,777,216"),
        (_encoded("PNG", (4097, 4096), "1"), "the image is 4097 x 4096 pixels"),
        (_encoded("JPEG", (100, 100))[:-400], "cannot be read as JPEG"),
        (PNG[:60], "cannot be read as PNG"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 " + bytes(20), "cannot be read as WEBP"),
    ],
    ids=["20000x20000", "5000x4000", "one-column-over", "truncated-jpeg", "cut-png", "fake-webp"],
)
def test_images_too_large_to_decode_or_broken_are_refused_before_decoding(content, reason):
    pairs, extra = _with_image("photo.png", content)
    err = _refused(_raw(), pairs, extra)
    assert err.file == "product_pairs/formats-demo.yaml"
    assert err.path == "pairs[1].target.image"
    assert err.line is not None and reason in err.reason, err.reason
    assert "scale it down" in err.reason or "damaged" in err.reason


def test_the_frames_of_an_animation_count_together():
    frames = [Image.new("RGB", (2048, 2048), c) for c in ("red", "blue", "green", "white", "red")]
    buffer = io.BytesIO()
    frames[0].save(buffer, "PNG", save_all=True, append_images=frames[1:])
    pairs, extra = _with_image("moving.png", buffer.getvalue())
    err = _refused(_raw(), pairs, extra)
    assert "2048 x 2048 pixels x 5 frames" in err.reason


def test_an_image_several_products_show_is_decoded_once_per_upload(monkeypatch):
    """Decoding is the upload's cost (about 25 ms for a 1200 x 900 photo): an image is checked
    once however many products show it, and a broken one is refused at each of them."""
    from PIL import ImageFile

    decoded: list[tuple[int, int]] = []
    load = ImageFile.ImageFile.load

    def counting(image):
        decoded.append(image.size)
        return load(image)

    monkeypatch.setattr(ImageFile.ImageFile, "load", counting)
    pairs = _pairs()
    names = ["images/kettle-harbor.png", "images/kettle-stillwater.png"]
    products = [pair[side] for pair in pairs["pairs"] for side in ("target", "control")]
    for i, product in enumerate(products):
        product["image"], product["image_alt"] = names[i % 2], "A kettle"
    d = load_bundle(_bundle(_raw(), pairs))
    shown = [pair[side]["image"] for pair in _choice(d)["pairs"] for side in ("target", "control")]
    assert len(shown) == len(products) > 4 and {i["file"] for i in shown} == {
        f"product_pairs/{n}" for n in names
    }
    assert len(decoded) == 2
    products[0]["image"] = products[3]["image"] = "images/cut.png"
    with pytest.raises(StudyDefinitionError) as info:
        load_bundle(_bundle(_raw(), pairs, {"product_pairs/images/cut.png": PNG[:60]}))
    refused = [line for line in error_lines(info.value) if "cannot be read as PNG" in line]
    assert len(refused) == 2 and "pairs[0].target.image" in refused[0]
    assert "pairs[1].control.image" in refused[1]


def test_an_image_needs_its_text_alternative():
    pairs, extra = _with_image("ok.png", PNG, alt=None)
    err = _refused(_raw(), pairs, extra)
    assert err.path == "pairs[1].target.image_alt" and "text alternative" in err.reason
    pairs["pairs"][1]["target"].pop("image")
    pairs["pairs"][1]["target"]["image_alt"] = "alone"
    err = _refused(_raw(), pairs, extra)
    assert "image_alt without an image" in err.reason


def test_every_error_of_the_pairs_is_reported_together():
    pairs = _pairs()
    del pairs["pairs"][0]["target"]["texts"]["summary"]
    pairs["pairs"][4]["control"]["image"] = "nope.svg"
    pairs["pairs"][4]["control"]["image_alt"] = "x"
    with pytest.raises(StudyDefinitionError) as info:
        load_bundle(_bundle(_raw(), pairs, {"product_pairs/nope.svg": SVG}))
    lines = error_lines(info.value)
    assert len(lines) == 2
    assert "pairs[0].target" in lines[0] and "pairs[4].control.image" in lines[1]


def test_symbolic_link_images_in_a_folder_are_refused(tmp_path: Path):
    import shutil

    folder = tmp_path / "studies"
    shutil.copytree(STUDIES, folder)
    target = folder / "product_pairs" / "images" / "kettle-harbor.png"
    target.unlink()
    target.symlink_to("/etc/passwd")
    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(folder / "product-choice-formats-demo.yaml")
    assert "symbolic link" in info.value.reason


def test_sources_name_a_generation_record_per_format():
    pairs = _pairs()
    pairs["pairs"][0]["target"]["sources"] = {"summary": "m|summarize|plain|abc|k1|"}
    d = load_bundle(_bundle(_raw(), pairs))
    assert _choice(d)["pairs"][0]["target"]["sources"] == {"summary": "m|summarize|plain|abc|k1|"}
    assert "sources" not in _choice(d)["pairs"][0]["control"]  # the definition's shape unchanged


@pytest.mark.parametrize(
    ("sources", "reason"),
    [
        ({"mitigated:cot": "x"}, "sources: unknown key(s) ['mitigated:cot']"),
        ({"summary": "two\nlines"}, "sources.summary"),
        ("m|summarize", "sources: expected a mapping"),
    ],
)
def test_sources_outside_the_blocks_formats_are_refused(sources, reason):
    pairs = _pairs()
    pairs["pairs"][0]["target"]["sources"] = sources
    assert reason in str(_refused(_raw(), pairs))
