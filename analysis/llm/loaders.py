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
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

Item = dict[str, Any]


class LoaderError(ValueError):
    """An input file cannot be read as asked; the message says what to change."""


def _records(path: Path) -> Iterator[dict[str, Any]]:
    """Yield raw records of a .jsonl, .json (a list) or .csv/.tsv file."""
    if not path.exists():
        raise LoaderError(f"{path}: no such file")
    suffix = "".join(path.suffixes[-1:]).lower()
    if suffix in {".jsonl", ".ndjson"}:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise LoaderError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
                if not isinstance(record, dict):
                    raise LoaderError(f"{path}:{number}: expected a JSON object per line")
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
            yield from csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",")
    else:
        raise LoaderError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json or .csv)")


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


def load_mediasum(path: str | Path, *, n: int | None = None) -> list[Item]:
    """Read MediaSum-style interviews (``id, utt, speaker, summary``, optional ``title, program``).

    Returns
    -------
    list of dict
        ``item_id``, ``text`` (``"SPEAKER: utterance"`` lines), ``reference_summary``, ``title``,
        ``program``, ``date``.
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
        items.append(
            {
                "item_id": str(record.get("id") or content_id(text)),
                "text": text,
                "reference_summary": record.get("summary"),
                "title": record.get("title"),
                "program": record.get("program"),
                "date": record.get("date"),
            }
        )
        if n is not None and len(items) >= n:
            break
    return items


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


LOADERS = ("generic", "amazon", "mediasum", "wildframe", "polisum")


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
        items = load_mediasum(path, n=limit)
    elif kind == "wildframe":
        items = load_wildframe(path, mapping=mapping)[:limit]
    elif kind == "polisum":
        items = load_polisum(path, mapping=mapping)[:limit]
    else:
        raise LoaderError(f"unknown loader {kind!r}; choose one of {LOADERS}")
    if dataset:
        for item in items:
            item.setdefault("dataset", dataset)
    return items
