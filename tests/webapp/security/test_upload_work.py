"""What one upload may cost the server: a study's design is bounded (blocks, pages per
participant), refused before its stimulus files are parsed, and YAML is parsed by libyaml.

An outside review uploaded a legal bundle of 8 formats, 150 product-choice blocks and 9,600
trials per participant: 53 s of server CPU, nearly all of it PyYAML's pure-Python scanner
(measured with cProfile: 20 of 21 s on the development machine), and ~44 MiB per worker for
its definition once anyone opened its link.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import replace

import pytest
import yaml

from webapp.bundle import Bundle
from webapp.definition_cache import study_definition
from webapp.studydef import MAX_BLOCKS, MAX_PAGES, folder_bundle, load_bundle
from webapp.tasks.product_choice.pairs import mitigation_methods
from webapp.validation import HardenedLoader, StudyDefinitionError

from ..researcher.conftest import csrf_from, login

# Eight formats, the most a block may have: six of them summaries by mitigation methods.
FORMATS = ["original", "summary"] + [f"mitigated:{m}" for m in mitigation_methods()[:6]]


def _yaml(data: object) -> bytes:
    """``data`` as YAML, written by libyaml's emitter (PyYAML's pure-Python one spent more
    time on these bundles than the loader spends checking them)."""
    return yaml.dump(data, Dumper=yaml.CSafeDumper).encode()


def _pairs(block: int, n: int, formats: list[str]) -> bytes:
    def product(maker: str, j: int) -> dict:
        texts = {f: f"{maker} {f} text of pair {j}" for f in formats}
        return {"manufacturer": maker, "price": 10.0, "texts": texts}

    pairs = [
        {
            "id": f"p{block}-{j}",
            "product_type": "kettle",
            "target": product("Alpha", j),
            "control": product("Beta", j),
        }
        for j in range(n)
    ]
    return _yaml({"pairs": pairs})


def _study(blocks: int, pairs: int, formats: list[str] = FORMATS) -> dict[str, bytes]:
    """A study of ``blocks`` product-choice blocks of ``pairs`` pairs each, one file each."""
    files: dict[str, bytes] = {}
    tasks: list[dict] = [{"type": "consent", "id": "consent", "text": "Agree?"}]
    for b in range(blocks):
        files[f"pairs/b{b}.yaml"] = _pairs(b, pairs, formats)
        tasks.append(
            {
                "type": "product_choice",
                "id": f"b{b}",
                "pairs": f"pairs/b{b}.yaml",
                "formats": list(formats),
                "labels": dict.fromkeys(formats, "Description"),
            }
        )
    tasks.append({"type": "debrief", "id": "debrief", "text": "Thanks"})
    study = {
        "slug": "heavy-study",
        "title": "Heavy",
        "recruitment": {
            "platforms": ["link"],
            "completion_codes": {"completed": "DONE1", "screened_out": "OUT1"},
        },
        "payment": {"base": 1.0},
        "tasks": tasks,
    }
    return {"study.yaml": _yaml(study), **files}


def _bundle(files: dict[str, bytes]) -> Bundle:
    return Bundle.from_files(files.items(), study_name="study.yaml")


def test_the_reviews_bundle_is_refused_by_its_block_count_before_any_pairs_file_is_read(
    tmp_path,
):
    # 8 formats and 150 blocks as in the review (its pairs files are never opened here)
    for name, content in _study(150, 2).items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(content)
    bundle = folder_bundle(tmp_path / "study.yaml")
    with pytest.raises(StudyDefinitionError) as info:
        load_bundle(bundle)
    err = info.value
    assert (err.file, err.path) == ("study.yaml", "tasks")
    assert err.line is not None
    assert f"152 task blocks; a study has at most {MAX_BLOCKS}" in err.reason
    assert "put the pairs or items of one kind into one block" in err.reason
    assert all(bundle.cached(f"pairs/b{b}.yaml") is None for b in range(150))


def test_as_many_blocks_as_the_limit_load():
    files = _study(MAX_BLOCKS - 2, 2, FORMATS[:2])
    definition = load_bundle(_bundle(files))
    assert len(definition.tasks) == MAX_BLOCKS


def test_more_pages_per_participant_than_the_limit_are_refused_naming_the_largest_blocks():
    # 2 blocks of 250 pairs: 1,000 pages of choices and WTP, plus consent and debrief.
    files = _study(2, 250, FORMATS[:2])
    with pytest.raises(StudyDefinitionError) as info:
        load_bundle(_bundle(files))
    err = info.value
    assert (err.file, err.path) == ("study.yaml", "tasks")
    assert (
        f"each participant would see 1,002 pages (largest blocks: 'b0' 500, 'b1' 500, "
        f"'consent' 1); at most {MAX_PAGES:,} per participant"
    ) in err.reason
    # One pair fewer fits.
    files["pairs/b1.yaml"] = _pairs(1, 249, FORMATS[:2])
    assert len(load_bundle(_bundle(files)).tasks) == 4


def test_the_loader_parses_with_libyaml_and_keeps_every_check():
    # libyaml's scanner made the 16 MiB bundle of the review 4x cheaper; a drift guard, the
    # behaviour of the checks is tested in test_bundles.py and tests/webapp/fuzz.
    assert yaml.__with_libyaml__
    assert yaml.cyaml.CParser in HardenedLoader.__mro__
    for text, reason in [
        ("a: &x 1\nb: *x\n", "anchors and aliases"),
        ("a: 1\na: 2\n", "appears twice"),
        ("a: {<<: {b: 1}}\n", "merge keys"),
    ]:
        with pytest.raises(yaml.YAMLError, match=reason):
            yaml.load(text, Loader=HardenedLoader)  # noqa: S506  # nosec B506
    assert yaml.load("a: [1, 2.5, x]\n", Loader=HardenedLoader) == {"a": [1, 2.5, "x"]}  # noqa: S506  # nosec B506


def test_the_console_refuses_the_reviews_bundle_and_stores_nothing(app):
    from webapp.services.researchers import set_researcher
    from webapp.services.studies import get_study

    with app.app_context():
        set_researcher("rita", "correct horse battery")
    client = app.test_client()
    assert login(client, "rita").status_code == 302
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in _study(150, 2).items():
            archive.writestr(name, content)
    token = csrf_from(client.get("/researcher/").get_data(as_text=True))
    resp = client.post(
        "/researcher/studies/upload",
        data={"csrf_token": token, "file": (io.BytesIO(buffer.getvalue()), "heavy.zip")},
        content_type="multipart/form-data",
    )
    assert resp.status_code == 422
    assert "152 task blocks; a study has at most 50" in resp.get_data(as_text=True)
    with app.app_context():
        assert get_study("heavy-study") is None


# -- the definition cache of a web process is bounded by size ---------------------------------


def test_the_definition_cache_drops_the_least_recently_used_past_its_bound():
    from webapp.definition_cache import DefinitionCache

    cache = DefinitionCache(max_bytes=100)
    for i in range(4):
        cache.put((i, "h"), {"n": i}, 30)
    assert len(cache) == 3 and cache.size_bytes == 90  # the oldest went
    assert cache.get((0, "h")) is None
    assert cache.get((1, "h")) == {"n": 1}  # now the most recently used
    cache.put((4, "h"), {"n": 4}, 30)
    assert cache.get((2, "h")) is None and cache.get((1, "h")) == {"n": 1}
    cache.put((5, "h"), {"n": 5}, 500)  # larger than the bound: kept alone
    assert len(cache) == 1 and cache.get((5, "h")) == {"n": 5} and cache.size_bytes == 500
    cache.put((5, "h"), {"n": 5}, 20)  # the same key again counts once
    assert cache.size_bytes == 20


def test_visitors_opening_many_studies_keep_each_process_within_its_bound(tmp_path):
    from webapp.definition_cache import definition_cache
    from webapp.services.studies import get_study, store_definition

    from ..conftest import dispose, make_app

    app = make_app(f"sqlite:///{tmp_path / 'db.sqlite'}", DEFINITION_CACHE_MB=0.25)
    try:
        files = _study(1, 40, FORMATS)  # about 41 kB of JSON
        definition = load_bundle(_bundle(files))
        with app.app_context():
            for i in range(8):
                store_definition(replace(definition, slug=f"study-{i}"), "upload:study.yaml")
        client = app.test_client()
        for i in range(8):  # an anonymous visitor opens every study's link
            assert client.get(f"/s/study-{i}?participant=visitor").status_code == 200
        with app.app_context():
            cache = definition_cache()
            assert 0 < cache.size_bytes <= 0.25 * 1024 * 1024
            assert 1 < len(cache) < 8
            # The most recent study is kept; its definition is the stored one.
            assert study_definition(get_study("study-7")).slug == "study-7"
    finally:
        dispose(app)


def test_a_definition_too_large_to_keep_is_refused_at_upload(monkeypatch):
    import webapp.studydef as studydef

    # A definition grows beyond its files where JSON escapes non-ASCII text (6 bytes a letter).
    monkeypatch.setattr(studydef, "MAX_DEFINITION_BYTES", 20_000)
    with pytest.raises(StudyDefinitionError) as info:
        load_bundle(_bundle(_study(1, 40, FORMATS)))
    err = info.value
    assert (err.file, err.path) == ("study.yaml", "")
    assert "MiB once its files are read in; at most 19 KiB" in err.reason
