"""Item CSVs of the sentiment tasks: read, validate, normalise.

An item CSV has at least ``item_id``, ``text`` and ``base_sentiment`` (``positive`` or
``negative``, any case). A gold file may add ``gold_label`` (default: the base sentiment).
Every other column is kept with the item (exported as ``item_<column>``). Errors name the file,
the row (1-based, header = row 1) and the column, like the study YAML errors.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from webapp.studydef import ID_RE, Where

BASE_SENTIMENTS = ("positive", "negative")
LABELS = ("positive", "negative", "neutral")
REQUIRED_COLUMNS = ("item_id", "text", "base_sentiment")


def resolve_path(raw: Any, where: Where) -> Path:
    """Return the CSV file named by ``raw``, relative to the study file's folder."""
    if not isinstance(raw, str) or not raw.strip():
        raise where.error("expected the path of a CSV file (relative to the study file)")
    if where.base_dir is None:
        raise where.error("an item file needs the study file's folder")
    return (where.base_dir / raw.strip()).resolve()


def read_items(
    raw: Any, where: Where, *, gold: bool = False, labels: tuple[str, ...] = LABELS
) -> list[dict[str, Any]]:
    """Read and validate an item CSV.

    Parameters
    ----------
    raw : Any
        The path given in the study YAML.
    where : Where
        Position of that key (errors point at the file and row).
    gold : bool
        Gold items: ``gold_label`` is read (default: ``base_sentiment``) and must be one of
        ``labels``.
    labels : tuple of str
        The labels participants can give.

    Returns
    -------
    list of dict
        ``item_id``, ``text``, ``base_sentiment``, ``gold_label`` (``None`` unless gold) and
        ``extra`` (the other columns, as strings), in file order.

    Raises
    ------
    webapp.studydef.StudyDefinitionError
        Missing file or column, empty cell, unknown sentiment, duplicate ``item_id``.
    """
    path = resolve_path(raw, where)
    file_where = Where(path.name, "", path.parent)
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = [h.strip() for h in reader.fieldnames or []]
            reader.fieldnames = header
            rows = list(reader)
    except FileNotFoundError:
        raise where.error(f"file not found: {path}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise file_where.error(f"not a readable UTF-8 CSV file: {exc}") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise file_where.error(f"missing column(s) {missing}; the header is {header}")
    extra_cols = [c for c in header if c not in {*REQUIRED_COLUMNS, "gold_label"} and c]
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, row in enumerate(rows, start=2):
        rw = Where(path.name, f"row {n}", path.parent)
        item_id = (row.get("item_id") or "").strip()
        if not ID_RE.match(item_id):
            raise rw.at("item_id").error(f"{item_id!r} is not a valid id (letters, digits, _ . -)")
        if item_id in seen:
            raise rw.at("item_id").error(f"duplicate item_id {item_id!r}")
        seen.add(item_id)
        text = (row.get("text") or "").strip()
        if not text:
            raise rw.at("text").error("is empty")
        base = (row.get("base_sentiment") or "").strip().lower()
        if base not in BASE_SENTIMENTS:
            raise rw.at("base_sentiment").error(f"{base!r} is not one of {list(BASE_SENTIMENTS)}")
        gold_label = None
        if gold:
            gold_label = (row.get("gold_label") or "").strip().lower() or base
            if gold_label not in labels:
                raise rw.at("gold_label").error(f"{gold_label!r} is not one of {list(labels)}")
        items.append(
            {
                "item_id": item_id,
                "text": text,
                "base_sentiment": base,
                "gold_label": gold_label,
                "extra": {c: (row.get(c) or "").strip() for c in extra_cols},
            }
        )
    if not items:
        raise file_where.error("has no items")
    return items
