"""Product pairs and formats of a product-choice block: validation and lookup.

A pair is two products (``target`` and ``control``) of one product type. Each product carries
one text per format of its block: ``review`` is the text of ``original``, ``summary`` that of
``summary``, and ``texts:`` maps any format name to its text (``texts: {original: …}`` and
``review: …`` are two spellings of one text; give one). A product may show an image, a PNG,
JPEG or WebP file of the study's bundle (``image:``, with its ``image_alt:`` text), and may
name the generation record of each text (``sources: {format: record ID}``).
See ``docs/platform.md`` ("Product choice with k formats").
"""

from __future__ import annotations

import difflib
import hashlib
import io
import re
from functools import cache
from importlib import resources
from typing import Any

from PIL import Image, UnidentifiedImageError

from webapp.bundle import BundleError, size_text
from webapp.i18n import N_, default_text
from webapp.services.design import FORMATS, MAX_FORMATS
from webapp.validation import (
    Collector,
    Where,
    check_keys,
    get_id,
    get_line,
    get_list,
    get_mapping,
    get_number,
    get_str,
    stimulus_path,
    written_key,
)

# A format's name: ``original``, ``summary``, ``mitigated:self-debias`` (a method after a colon).
FORMAT_RE = re.compile(r"^[a-z][a-z0-9_-]{0,29}(:[a-z0-9][a-z0-9_.-]{0,32})?$")
FORMAT_MAX = 64  # ChoiceResponse.format's width
# The two formats with a key of their own in a product (their spelling before ``texts:``).
LEGACY_TEXT_KEYS = {"original": "review", "summary": "summary"}
DEFAULT_LABELS = {"original": N_("Customer review"), "summary": N_("Summary of customer reviews")}
MAX_IMAGE_BYTES = 2 * 1024 * 1024
SOURCE_MAX = 500  # a generation record's ID: model|task|method|prompt hash|item|variant
# Image types by their first bytes, never by the file name or a declared type.
IMAGE_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
# Decoded size: a few kilobytes of PNG can claim 20000 x 20000 pixels (1.6 GB as RGBA) for the
# server's check and every participant's browser. 4096 x 4096 is far more than a product photo
# needs, and decodes in at most 64 MiB. Frames of an animation count together.
MAX_IMAGE_PIXELS = 4096 * 4096
_PILLOW_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP"}


def image_type(data: bytes) -> str | None:
    """The media type of a PNG, JPEG or WebP file by its magic bytes, else ``None``.

    Examples
    --------
    >>> image_type(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(8))
    'image/png'
    >>> image_type(b"<svg xmlns='http://www.w3.org/2000/svg'/>") is None
    True
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return IMAGE_TYPES["png"]
    if data.startswith(b"\xff\xd8\xff"):
        return IMAGE_TYPES["jpeg"]
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return IMAGE_TYPES["webp"]
    return None


def image_problem(data: bytes, kind: str) -> str | None:
    """Why an image of media type ``kind`` cannot be shown, or ``None`` when it decodes well.

    The header is read first and the pixel count checked against :data:`MAX_IMAGE_PIXELS`
    before anything is decoded; Pillow's own decompression-bomb check (it refuses far larger
    images while reading the header) is caught too. Then the first frame is decoded, so a
    truncated or corrupt file is refused at upload rather than broken on the participant's
    page.

    Examples
    --------
    >>> image_problem(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(8), "image/png")
    'the image cannot be read as PNG: the file is damaged or not an image'
    """
    name = _PILLOW_FORMATS[kind]
    unreadable = f"the image cannot be read as {name}: the file is damaged or not an image"
    try:
        with Image.open(io.BytesIO(data), formats=[name]) as image:
            width, height = image.size
            frames = getattr(image, "n_frames", 1)
            if width * height * frames > MAX_IMAGE_PIXELS:
                shape = f"{width} x {height} pixels" + (f" x {frames} frames" if frames > 1 else "")
                return (
                    f"the image is {shape}; at most {MAX_IMAGE_PIXELS:,} pixels are accepted "
                    "(e.g. 4096 x 4096): scale it down"
                )
            image.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        return (
            f"the image has far more than {MAX_IMAGE_PIXELS:,} pixels (e.g. 4096 x 4096): "
            "scale it down"
        )
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError):
        return unreadable
    return None


@cache
def mitigation_methods() -> tuple[str, ...]:
    """The methods ``framelab mitigate list`` prints, from the file both halves read
    (``framelab/mitigation_methods.txt``; the web app never imports the research package)."""
    text = resources.files("framelab").joinpath("mitigation_methods.txt").read_text("utf-8")
    return tuple(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    )


def unknown_methods(formats: list[str]) -> list[int]:
    """Positions of the ``mitigated:NAME`` formats whose NAME is no mitigation method."""
    return [
        i
        for i, name in enumerate(formats)
        if name.partition(":")[0] == "mitigated"
        and name.partition(":")[2] not in mitigation_methods()
    ]


def meant_formats(formats: list[str]) -> list[str]:
    """``formats`` with each unknown ``mitigated:NAME`` replaced by the method it is closest to
    (the one :func:`check_methods` suggests): the rest of the block and study are checked
    against what was meant, so one misspelling gives one message."""
    out = list(formats)
    for i in unknown_methods(formats):
        meant = _closest_method(formats[i])
        if meant is not None and meant not in out:
            out[i] = meant
    return out


def _closest_method(name: str) -> str | None:
    """The ``mitigated:METHOD`` closest to a format naming no method (by the method's name)."""
    close = difflib.get_close_matches(name.partition(":")[2], mitigation_methods(), n=1)
    return f"mitigated:{close[0]}" if close else None


def check_methods(formats: list[str], where: Where) -> None:
    """Refuse each ``mitigated:NAME`` format of ``formats`` (at ``where``) naming no method."""
    found = Collector()
    for i in unknown_methods(formats):
        meant = _closest_method(formats[i])
        found.add(
            where.at(i).error(
                f"{formats[i].partition(':')[2]!r} is not a mitigation method (`framelab "
                "mitigate list` prints them)" + (f"; did you mean {meant!r}?" if meant else "")
            )
        )
    found.check()


def validate_formats(raw: Any, where: Where) -> list[str]:
    """The block's ``formats:``: 2 to :data:`MAX_FORMATS` distinct names."""
    names = get_list(raw, where, min_len=2)
    if len(names) > MAX_FORMATS:
        raise where.error(f"at most {MAX_FORMATS} formats, got {len(names)}")
    out: list[str] = []
    for i, name in enumerate(names):
        if not isinstance(name, str) or not FORMAT_RE.match(name):
            raise where.at(i).error(
                f"{name!r} is not a format name: lower-case letters, digits, '-' and '_', "
                "optionally ':' and a method (e.g. 'summary', 'mitigated:self-debias')"
            )
        if name in out:
            raise where.at(i).error(f"format {name!r} is listed twice")
        out.append(name)
    return out


def product_text(product: dict[str, Any], fmt: str) -> str:
    """The text a normalised product shows in format ``fmt``."""
    texts = product.get("texts")
    if texts is not None:
        return texts[fmt]
    return product[LEGACY_TEXT_KEYS[fmt]]


def _image(product: dict[str, Any], where: Where) -> dict[str, str]:
    iw = where.at("image")
    name = stimulus_path(product.get("image"), iw, "an image")
    if where.bundle is None:
        raise iw.error("an image needs the study's bundle")
    try:
        data = where.bundle.read(name, limit=MAX_IMAGE_BYTES)
    except BundleError as exc:
        if "larger than" in str(exc):
            raise iw.error(f"the image is larger than {size_text(MAX_IMAGE_BYTES)}") from None
        raise iw.error(str(exc)) from None
    kind, problem, digest = where.bundle.once(("image", name), lambda: _checked_image(data))
    if problem is not None:
        raise iw.error(problem)
    alt = get_line(product, "image_alt", where, default="")
    if not alt.strip():
        raise where.at("image_alt").error(
            "give the image a text alternative (image_alt) for screen-reader users"
        )
    return {"file": name, "sha256": digest, "type": kind, "alt": alt}


def _checked_image(data: bytes) -> tuple[str, str | None, str]:
    """An image file's media type, why it cannot be shown (``None``: it can) and its SHA-256."""
    kind = image_type(data)
    if kind is None:
        return "", "not a PNG, JPEG or WebP image (judged by the file's content)", ""
    return kind, image_problem(data, kind), hashlib.sha256(data).hexdigest()


def _sources(raw: Any, where: Where, formats: list[str]) -> dict[str, str]:
    """``sources: {format: record ID}``: where each text came from (a generation record's ID).

    Carried into the long export (``target_source_record``, ``control_source_record``) so an
    answer leads back to the model, method, prompt and seed that wrote the text it read.
    """
    sources = get_mapping(raw, where)
    check_keys(sources, set(formats), where)
    return {
        fmt: get_line(sources, fmt, where, max_len=SOURCE_MAX) for fmt in formats if fmt in sources
    }


def _product(
    raw: Any, where: Where, formats: list[str], legacy: bool, reported: frozenset[str]
) -> dict[str, Any]:
    """A product's fields, its errors gathered; ``reported``: formats whose missing texts an
    error about the whole file already names."""
    p = get_mapping(raw, where)
    price = written_key(p, "price", "price_usd", where)
    check_keys(
        p,
        {
            "manufacturer",
            price,
            "review",
            "summary",
            "texts",
            "sources",
            "image",
            "image_alt",
        },
        where,
    )
    found = Collector()
    texts = found.run(_texts, p, where, formats, reported)
    out: dict[str, Any] = {
        "manufacturer": found.run(get_line, p, "manufacturer", where),
        "price": found.run(get_number, p, price, where, minimum=0.01),
    }
    if "sources" in p:
        out["sources"] = found.run(_sources, p["sources"], where.at("sources"), formats)
    if "image" in p:
        out["image"] = found.run(_image, p, where)
    elif "image_alt" in p:
        found.add(where.at("image_alt").error("image_alt without an image"))
    found.check()
    if legacy:  # the two-format shape of earlier definitions, so their hash stays the same
        out.update(review=texts.get("original"), summary=texts.get("summary"))
    else:
        out["texts"] = texts
    return out


def _texts(
    p: dict[str, Any], where: Where, formats: list[str], reported: frozenset[str]
) -> dict[str, str]:
    tw = where.at("texts")
    texts_raw = get_mapping(p.get("texts") or {}, tw)
    texts: dict[str, str] = {}
    for fmt in formats:
        key = LEGACY_TEXT_KEYS.get(fmt)
        if fmt in texts_raw and key is not None and key in p:
            raise tw.at(fmt).error(f"the {fmt!r} text is given twice: as {key!r} and in 'texts'")
        if fmt in texts_raw:
            texts[fmt] = get_str(texts_raw, fmt, tw)
        elif key is not None and key in p:
            texts[fmt] = get_str(p, key, where)
        elif fmt not in reported:
            hint = f" (or {key!r})" if key else ""
            raise where.error(f"no text for format {fmt!r}: add it under 'texts'{hint}")
    return texts


def _text_names(
    items: list[Any],
    where: Where,
    formats: list[str],
    named_at: Where | None,
    found: Collector,
) -> frozenset[str]:
    """Compare the formats with the text names of all products; report each mismatch once.

    A misspelt format (``mitigated:self-debais`` in ``formats:`` or in the products' ``texts``)
    would otherwise show as one "no text" error per product and none at the misspelling. A
    format no product has a text for is reported once: at the products' misspelling of it
    (a mitigation method's name is known, so the other spelling is the wrong one), else at
    ``formats:``. Returns the formats whose missing texts are reported (here, or by the method
    check at ``formats:``).
    """
    first: dict[str, Where] = {}
    count: dict[str, int] = {}
    has_text: set[str] = set()
    for i, item in enumerate(items):
        for role in ("target", "control"):
            product = item.get(role) if isinstance(item, dict) else None
            if not isinstance(product, dict):
                continue
            texts = product.get("texts")
            names = list(texts) if isinstance(texts, dict) else []
            names += [f for f, key in LEGACY_TEXT_KEYS.items() if key in product]
            for name in names:
                has_text.add(str(name))
                if name not in formats and name not in LEGACY_TEXT_KEYS.values():
                    first.setdefault(str(name), where.at(i).at(role).at("texts").at(str(name)))
                    count[str(name)] = count.get(str(name), 0) + 1
    unknown = {formats[i] for i in unknown_methods(formats)}  # refused at `formats:`
    reported = set(unknown)
    matched: set[str] = set()  # each misspelt name answers one format
    for i, fmt in enumerate(formats):
        if fmt in has_text or fmt in unknown:
            continue
        # Texts under other names are for formats this block does not show (a pairs file may
        # serve several designs), unless one is this format misspelt. A mitigation method's
        # name is known (unknown ones are refused at `formats:`): the texts' is then the typo.
        close = difflib.get_close_matches(fmt, [n for n in first if n not in matched], n=1)
        matched.update(close)
        if close and fmt.startswith("mitigated:"):
            reported.add(fmt)
            found.add(
                first[close[0]].error(
                    f"{close[0]!r} is not one of the block's formats {formats} "
                    f"({count[close[0]]} product(s) name it); did you mean {fmt!r}?"
                )
            )
        elif named_at is not None:
            reported.add(fmt)
            hint = (
                f"; did you mean {close[0]!r}, the name {count[close[0]]} product(s) give?"
                if close
                else ": add one under each product's 'texts'"
            )
            found.add(
                named_at.at(i).error(
                    f"no product of {where.file} has a text for format {fmt!r}{hint}"
                )
            )
    return frozenset(reported)


def _pair(
    item: Any, w: Where, formats: list[str], legacy: bool, reported: frozenset[str]
) -> dict[str, Any]:
    pair = get_mapping(item, w)
    check_keys(pair, {"id", "product_type", "target", "control"}, w)
    found = Collector()  # the two products' errors are reported together
    target = found.run(_product, pair.get("target"), w.at("target"), formats, legacy, reported)
    control = found.run(_product, pair.get("control"), w.at("control"), formats, legacy, reported)
    pair_id = found.run(get_id, pair, "id", w)
    product_type = found.run(get_line, pair, "product_type", w)
    found.check()
    if target["manufacturer"] == control["manufacturer"]:
        raise w.error("target and control need different manufacturers")
    return {"id": pair_id, "product_type": product_type, "target": target, "control": control}


def validate_pairs(
    raw: Any,
    where: Where,
    formats: list[str] | tuple[str, ...] = FORMATS,
    *,
    legacy: bool = True,
    named_at: Where | None = None,
) -> list[dict[str, Any]]:
    """Validate a list of product pairs (see ``stimuli/studies/product_pairs/demo.yaml``).

    Every pair is checked: the errors of all of them are reported together. ``legacy``
    keeps the two-format product shape (``review``, ``summary``); otherwise each product's
    texts are under ``texts``, one per format. A text name that is no format, and a format
    no product has a text for, are each reported once (with the name it is closest to);
    ``named_at`` is where the block lists its ``formats:``.
    """
    found = Collector()
    items = get_list(raw, where, min_len=2)
    formats = list(formats)
    reported = _text_names(items, where, formats, named_at, found)
    pairs = [
        found.run(_pair, item, where.at(i), formats, legacy, reported)
        for i, item in enumerate(items)
    ]
    found.check()
    ids = [p["id"] for p in pairs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise where.error(f"duplicate pair ids {dupes}")
    return pairs


def validate_labels(raw: Any, where: Where, formats: list[str]) -> dict[str, str]:
    """The heading shown above each format's texts; ``original`` and ``summary`` have defaults."""
    labels = get_mapping(raw or {}, where)
    check_keys(labels, set(formats), where)
    out = {}
    for fmt in formats:
        if fmt not in labels and fmt not in DEFAULT_LABELS:
            raise where.error(
                f"give a label for format {fmt!r}: the heading participants read above its texts"
            )
        default = default_text(DEFAULT_LABELS[fmt]) if fmt in DEFAULT_LABELS else None
        out[fmt] = get_line(labels, fmt, where, default=default)
    return out
