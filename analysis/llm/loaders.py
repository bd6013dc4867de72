"""Read task inputs from local files: generic CSV/JSONL and the layouts of the seed datasets.

Nothing is downloaded: every loader reads a file the researcher already has. Each returns a list
of plain dicts with an ``item_id``; columns are renamed with a mapping (``{"text": "body"}`` puts
the file's ``body`` column into ``text``). Errors name the file, the missing column and the
columns that are there.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from analysis.io import iter_jsonl

Item = dict[str, Any]


class LoaderError(ValueError):
    """An input file cannot be read as asked; the message says what to change."""


def _records(path: Path) -> Iterator[dict[str, Any]]:
    """Yield raw records of a .jsonl, .json (a list) or .csv/.tsv file."""
    if not path.exists():
        raise LoaderError(f"{path}: no such file")
    suffix = "".join(path.suffixes[-1:]).lower()
    if suffix in {".jsonl", ".ndjson"}:
        for number, record in enumerate(iter_jsonl(path, LoaderError), start=1):
            if not isinstance(record, dict):
                raise LoaderError(f"{path}: record {number}: expected a JSON object per line")
            yield record
    elif suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):  # {"data": [...]} or {id: record}
            data = data.get("data", list(data.values()))
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise LoaderError(f"{path}: expected a JSON list of objects")
        yield from data
    elif suffix in {".csv", ".tsv"}:
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",")
            yield from _large_fields(reader)
    else:
        raise LoaderError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json or .csv)")


def _large_fields(reader: Iterator[dict[str, str]]) -> Iterator[dict[str, str]]:
    """Rows of ``reader`` with the csv module's field limit raised only while each row is read.

    News articles exceed the default 128 KiB limit, but the limit is process-wide: setting it
    once would also lift it for every other CSV reader in the process (the web platform's
    upload checks rely on it), so it is raised per row and put back.
    """
    rows = iter(reader)
    while True:
        previous = csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
        try:
            row = next(rows)
        except StopIteration:
            return
        finally:
            csv.field_size_limit(previous)
        yield row


def parse_mapping(pairs: Sequence[str]) -> dict[str, str]:
    """Parse ``["text=body", "item_id=review_id"]`` into ``{"text": "body", ...}``."""
    mapping = {}
    for pair in pairs:
        ours, sep, theirs = pair.partition("=")
        if not sep or not ours or not theirs:
            raise LoaderError(f"column mapping {pair!r} must look like FIELD=COLUMN")
        mapping[ours.strip()] = theirs.strip()
    return mapping


def content_id(*parts: Any) -> str:
    """A stable ID from content, for inputs without one (``h_`` + 12 hex of SHA-256)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()
    return "h_" + hashlib.sha256(blob).hexdigest()[:12]


def _apply_mapping(record: Mapping[str, Any], mapping: Mapping[str, str], path: Path) -> Item:
    item = dict(record)
    for ours, theirs in mapping.items():
        if theirs not in record:
            raise LoaderError(
                f"{path}: mapped column {theirs!r} (for {ours!r}) not found; "
                f"columns are {sorted(record)}"
            )
        item[ours] = record[theirs]
    return item


def _pick(record: Mapping[str, Any], candidates: Sequence[str], what: str, path: Path) -> str:
    for name in candidates:
        if name in record:
            return name
    raise LoaderError(
        f"{path}: no column for {what} (tried {list(candidates)}); columns are {sorted(record)}. "
        f"Map one with --map {what}=COLUMN"
    )


def read_items(
    path: str | Path,
    *,
    mapping: Mapping[str, str] | None = None,
    id_field: str | None = None,
    dataset: str | None = None,
    limit: int | None = None,
) -> list[Item]:
    """Read a generic CSV/JSONL/JSON file into items.

    Parameters
    ----------
    path : str or Path
        ``.jsonl``, ``.json`` (list of objects) or ``.csv``/``.tsv``.
    mapping : mapping, optional
        Our field -> the file's column, applied to every record.
    id_field : str, optional
        Column with the item ID; by default ``item_id`` or ``id``. Without any, the ID is a hash
        of the record's content, which is stable across re-runs (resuming still works).
    dataset : str, optional
        Written into items that have no ``dataset``.
    limit : int, optional
        Keep only the first ``limit`` items.

    Returns
    -------
    list of dict
        One dict per record, with ``item_id`` (a string) first.
    """
    path = Path(path)
    items: list[Item] = []
    for record in _records(path):
        item = _apply_mapping(record, mapping or {}, path)
        if id_field:
            if id_field not in item:
                raise LoaderError(f"{path}: no ID column {id_field!r}; columns are {sorted(item)}")
            item_id = item[id_field]
        else:
            item_id = item.get("item_id", item.get("id"))
        if item_id is None or item_id == "":
            item_id = content_id(record)
        item = {"item_id": str(item_id), **{k: v for k, v in item.items() if k != "item_id"}}
        if dataset and not item.get("dataset"):
            item["dataset"] = dataset
        items.append(item)
        if limit is not None and len(items) >= limit:
            break
    return items


def count_words(text: str) -> int:
    """Count word and punctuation tokens: a tokenizer-free proxy for model tokens."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def load_amazon_reviews(
    path: str | Path,
    *,
    meta_path: str | Path | None = None,
    category: str | None = None,
    n: int | None = None,
    max_tokens: int = 4000,
    count_tokens: Callable[[str], int] = count_words,
) -> list[Item]:
    """Read Amazon Reviews 2023 JSONL: the ``n`` longest reviews up to ``max_tokens`` tokens.

    Parameters
    ----------
    path : str or Path
        A reviews file (``rating, title, text, asin, parent_asin, user_id, timestamp, …``).
    meta_path : str or Path, optional
        The matching ``meta_*.jsonl`` (``parent_asin, main_category, categories, title, price,
        store``); its product fields are joined in, and it is needed for ``category``.
    category : str, optional
        Keep products whose ``main_category`` or one of whose ``categories`` equals this
        (case-insensitive).
    n : int, optional
        Keep the ``n`` longest reviews (after the length cap).
    max_tokens : int
        Drop reviews longer than this (the seed study's 4,000-token context budget).
    count_tokens : callable
        Token counter; pass a model tokenizer's length for exact counts.

    Returns
    -------
    list of dict
        ``item_id, text, title, rating, asin, parent_asin, n_tokens`` plus ``product_title,
        price, store, main_category`` when ``meta_path`` is given, longest first.
    """
    path = Path(path)
    if category and meta_path is None:
        raise LoaderError("a category filter needs the product metadata file (meta_path)")
    meta: dict[str, dict[str, Any]] = {}
    if meta_path is not None:
        for record in _records(Path(meta_path)):
            if "parent_asin" in record:
                meta[str(record["parent_asin"])] = record
    wanted = category.lower() if category else None
    items = []
    for number, record in enumerate(_records(path), start=1):
        if "text" not in record:
            raise LoaderError(f"{path}:{number}: an Amazon review needs a 'text' field")
        parent = str(record.get("parent_asin") or record.get("asin") or "")
        product = meta.get(parent, {})
        if wanted is not None:
            cats = [str(product.get("main_category") or "")] + [
                str(c) for c in product.get("categories") or []
            ]
            if wanted not in {c.lower() for c in cats}:
                continue
        text = str(record["text"])
        n_tokens = count_tokens(text)
        if n_tokens > max_tokens:
            continue
        item = {
            "item_id": content_id(parent, record.get("user_id"), record.get("timestamp")),
            "text": text,
            "title": record.get("title"),
            "rating": record.get("rating"),
            "asin": record.get("asin"),
            "parent_asin": parent,
            "n_tokens": n_tokens,
        }
        if product:
            item.update(
                product_title=product.get("title"),
                price=product.get("price"),
                store=product.get("store"),
                main_category=product.get("main_category"),
            )
        items.append(item)
    items.sort(key=lambda it: -it["n_tokens"])
    return items[:n] if n is not None else items


def _draw(items: list[Item], n: int | None, seed: int) -> list[Item]:
    """A seeded random ``n`` of ``items`` in file order (all of them when ``n`` is None or more)."""
    if n is None or n >= len(items):
        return items
    if n < 0:
        raise LoaderError(f"the number of items to draw must not be negative, got {n}")
    # random.Random(seed).sample is reproducible for a given seed and list length across Python
    # versions (it documents the seeded sequence as stable), so a draw can be re-derived later.
    picked = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in picked]


def load_mediasum(
    path: str | Path,
    *,
    n: int | None = None,
    max_tokens: int | None = 4000,
    seed: int = 0,
    count_tokens: Callable[[str], int] = count_words,
) -> list[Item]:
    """Read MediaSum interviews: a seeded random ``n`` of those up to ``max_tokens`` tokens.

    The primacy study draws a random 1,000 MediaSum transcripts of at most 4,000 tokens (its
    context budget); taking the first ``n`` of the file would instead take the file's order
    (NPR before CNN, oldest first). Transcripts longer than ``max_tokens`` are dropped first,
    then ``n`` are drawn with ``random.Random(seed)``; the draw is returned in file order.

    Parameters
    ----------
    path : str or Path
        ``news_dialogue.json`` (a JSON list) or JSONL with ``id, utt, speaker, summary`` and
        optionally ``title, program, date, url``.
    n : int, optional
        How many to draw (the paper: 1,000); all eligible transcripts when None.
    max_tokens : int or None, default 4000
        Drop transcripts (``SPEAKER: utterance`` lines) longer than this; None keeps all.
    seed : int, default 0
        Seed of the draw.
    count_tokens : callable
        Token counter; pass a model tokenizer's length for exact counts.

    Returns
    -------
    list of dict
        ``item_id``, ``text`` (``"SPEAKER: utterance"`` lines), ``reference_summary``, ``title``,
        ``program``, ``date``, ``n_tokens``, in file order.
    """
    path = Path(path)
    items = []
    for record in _records(path):
        for key in ("utt", "speaker"):
            if key not in record:
                raise LoaderError(f"{path}: a MediaSum record needs {key!r}; got {sorted(record)}")
        if len(record["utt"]) != len(record["speaker"]):
            raise LoaderError(f"{path}: record {record.get('id')!r} has unequal utt and speaker")
        text = "\n".join(f"{s}: {u}" for s, u in zip(record["speaker"], record["utt"], strict=True))
        n_tokens = count_tokens(text)
        if max_tokens is not None and n_tokens > max_tokens:
            continue
        items.append(
            {
                "item_id": str(record.get("id") or content_id(text)),
                "text": text,
                "reference_summary": record.get("summary"),
                "title": record.get("title"),
                "program": record.get("program"),
                "date": record.get("date"),
                "n_tokens": n_tokens,
            }
        )
    return _draw(items, n, seed)


# The two published layouts of Andrew Thompson's "All the News" (Kaggle v1, 2017:
# articles1-3.csv; v2.0, 2020: all-the-news-2-1.csv). Both files as downloaded start with an
# unnamed pandas index column, which is accepted and ignored.
ALL_THE_NEWS_V1 = (
    "id",
    "title",
    "publication",
    "author",
    "date",
    "year",
    "month",
    "url",
    "content",
)
ALL_THE_NEWS_V2 = (
    "date",
    "year",
    "month",
    "day",
    "author",
    "title",
    "article",
    "url",
    "section",
    "publication",
)


def _news_date(record: Mapping[str, Any]) -> str | None:
    """ISO date of an All the News row: its ``date`` field, else ``year``/``month``(/``day``)."""
    raw = str(record.get("date") or "").strip()
    match = re.match(r"(\d{4})[-/](\d{1,2})[-/](\d{1,2})", raw)
    parts: list[str] = list(match.groups()) if match else []
    if not parts:
        # v1 stores year and month as floats ("2016.0"); a missing day is not guessed.
        try:
            year, month = (int(float(record.get(k) or "nan")) for k in ("year", "month"))
            day = int(float(record.get("day") or "nan"))
        except ValueError:
            return None
        parts = [str(year), str(month), str(day)]
    try:
        return date(*(int(p) for p in parts)).isoformat()
    except ValueError:
        return None


def load_all_the_news(
    path: str | Path,
    *,
    cutoff: str | date | None = None,
    n: int | None = None,
    seed: int = 0,
    max_tokens: int | None = None,
    publications: Sequence[str] | None = None,
    count_tokens: Callable[[str], int] = count_words,
) -> list[Item]:
    """Read All the News news articles (Kaggle v1 or v2.0 CSV), e.g. the pre-cutoff set.

    The hallucination study takes its pre-cutoff articles from All the News: articles dated on or
    before a model's knowledge cutoff. Rows without a usable date cannot be shown to precede the
    cutoff: with ``cutoff`` they are left out (and never counted as pre-cutoff).

    Parameters
    ----------
    path : str or Path
        A v1 file (``id,title,publication,author,date,year,month,url,content``) or a v2.0 file
        (``date,year,month,day,author,title,article,url,section,publication``); an unnamed
        leading index column is ignored. The layout is recognised from the header.
    cutoff : str or date, optional
        Keep only articles dated on or before this day (``YYYY-MM-DD``).
    n : int, optional
        Draw a seeded random ``n`` of the kept articles (returned in file order).
    seed : int, default 0
        Seed of the draw.
    max_tokens : int, optional
        Drop articles longer than this many tokens.
    publications : sequence of str, optional
        Keep only these publications (case-insensitive).
    count_tokens : callable
        Token counter for ``max_tokens`` and ``n_tokens``.

    Returns
    -------
    list of dict
        ``item_id`` (v1: the file's ``id``; v2.0, which has none: a hash of URL, title and
        date), ``text``, ``title``, ``publication``, ``author``, ``date`` (ISO or None),
        ``url``, ``section`` (v2.0 only, else None), ``n_tokens``, ``version`` (``v1``/``v2``).
    """
    path = Path(path)
    if isinstance(cutoff, str):
        try:
            cutoff = date.fromisoformat(cutoff)
        except ValueError:
            raise LoaderError(f"cutoff {cutoff!r} is not a date (YYYY-MM-DD)") from None
    wanted = {p.lower() for p in publications} if publications else None
    items: list[Item] = []
    version = None
    for number, record in enumerate(_records(path), start=2):
        if version is None:
            columns = {c for c in record if c}
            if set(ALL_THE_NEWS_V1) <= columns:
                version = "v1"
            elif set(ALL_THE_NEWS_V2) <= columns:
                version = "v2"
            else:
                raise LoaderError(
                    f"{path}: not an All the News file; expected the v1 columns "
                    f"{','.join(ALL_THE_NEWS_V1)} or the v2.0 columns {','.join(ALL_THE_NEWS_V2)}; "
                    f"columns are {sorted(columns)}"
                )
        text = str(record.get("content" if version == "v1" else "article") or "")
        if not text.strip():
            continue
        publication = record.get("publication")
        if wanted is not None and str(publication or "").lower() not in wanted:
            continue
        day = _news_date(record)
        if cutoff is not None and (day is None or date.fromisoformat(day) > cutoff):
            continue
        n_tokens = count_tokens(text)
        if max_tokens is not None and n_tokens > max_tokens:
            continue
        if version == "v1":
            if not str(record.get("id") or "").strip():
                raise LoaderError(f"{path}:{number}: a v1 row needs its id")
            item_id = str(record["id"]).strip()
        else:
            item_id = content_id(record.get("url"), record.get("title"), record.get("date"))
        items.append(
            {
                "item_id": item_id,
                "text": text,
                "title": record.get("title"),
                "publication": publication,
                "author": record.get("author") or None,
                "date": day,
                "url": record.get("url") or None,
                "section": (record.get("section") or None) if version == "v2" else None,
                "n_tokens": n_tokens,
                "version": version,
            }
        )
    return _draw(items, n, seed)


def load_wildframe(path: str | Path, *, mapping: Mapping[str, str] | None = None) -> list[Item]:
    """Read WildFrame-style statements: a text column and its base sentiment.

    The text comes from ``text``, ``statement``, ``sentence`` or ``base_text``; the sentiment
    from ``base_sentiment``, ``sentiment``, ``label`` or ``polarity`` (``pos``/``neg`` and
    ``1``/``0`` are accepted), unless ``mapping`` names them.

    Returns
    -------
    list of dict
        ``item_id, text, base_sentiment`` (``positive``/``negative``) plus the other columns.
    """
    path = Path(path)
    raw = read_items(path, mapping=mapping)
    if not raw:
        return []
    text_col = _pick(raw[0], ["text", "statement", "sentence", "base_text"], "text", path)
    sent_col = _pick(
        raw[0], ["base_sentiment", "sentiment", "label", "polarity"], "base_sentiment", path
    )
    norm = {"positive": "positive", "pos": "positive", "1": "positive", "negative": "negative"}
    norm.update({"neg": "negative", "0": "negative", "-1": "negative"})
    items = []
    for item in raw:
        value = str(item[sent_col]).strip().lower()
        if value not in norm:
            raise LoaderError(
                f"{path}: item {item['item_id']!r} has sentiment {item[sent_col]!r}; "
                "expected positive/negative"
            )
        items.append({**item, "text": item[text_col], "base_sentiment": norm[value]})
    return items


def load_polisum(path: str | Path, *, mapping: Mapping[str, str] | None = None) -> list[Item]:
    """Read PoliSum-style passages: a left and a right opinion passage per item.

    Passages come from ``left``/``left_passage``/``left_text`` and the ``right`` equivalents;
    reference summaries, if present, from ``left_summary``/``right_summary``.

    Returns
    -------
    list of dict
        ``item_id, left, right`` plus the other columns.
    """
    path = Path(path)
    raw = read_items(path, mapping=mapping)
    if not raw:
        return []
    left = _pick(raw[0], ["left", "left_passage", "left_text", "left_op"], "left", path)
    right = _pick(raw[0], ["right", "right_passage", "right_text", "right_op"], "right", path)
    return [{**item, "left": item[left], "right": item[right]} for item in raw]


LOADERS = ("generic", "amazon", "mediasum", "wildframe", "polisum", "allnews")


def load(
    kind: str,
    path: str | Path,
    *,
    mapping: Mapping[str, str] | None = None,
    id_field: str | None = None,
    dataset: str | None = None,
    limit: int | None = None,
    **options: Any,
) -> list[Item]:
    """Dispatch to a loader by name (one of :data:`LOADERS`)."""
    if kind == "generic":
        items = read_items(path, mapping=mapping, id_field=id_field, dataset=dataset, limit=limit)
    elif kind == "amazon":
        items = load_amazon_reviews(path, n=limit, **options)
    elif kind == "mediasum":
        items = load_mediasum(path, n=limit, **options)
    elif kind == "wildframe":
        items = load_wildframe(path, mapping=mapping)[:limit]
    elif kind == "polisum":
        items = load_polisum(path, mapping=mapping)[:limit]
    elif kind == "allnews":
        items = load_all_the_news(path, n=limit, **options)
    else:
        raise LoaderError(f"unknown loader {kind!r}; choose one of {LOADERS}")
    if dataset:
        for item in items:
            item.setdefault("dataset", dataset)
    return items
