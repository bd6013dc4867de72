"""Item CSVs of the sentiment tasks: read, validate, normalise.

An item CSV has at least ``item_id``, ``text`` and ``base_sentiment`` (``positive`` or
``negative``, any case). A gold file may add ``gold_label`` (default: the base sentiment).
Every other column is kept with the item (exported as ``item_<column>``). Errors name the file,
the row (1-based, header = row 1, as a spreadsheet numbers them), the column and the line in the
file where the row starts (a quoted cell may span several lines), like the study YAML errors:
``demo_items.csv: row 3.text: is empty (line 4)``.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from webapp.validation import ID_RE, LINE_MAX, Where, check_text, n_lines, read_text, stimulus_path

BASE_SENTIMENTS = ("positive", "negative")
LABELS = ("positive", "negative", "neutral")
REQUIRED_COLUMNS = ("item_id", "text", "base_sentiment")


def read_rows(name: str, where: Where) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Read a CSV file of the study's bundle: its stripped header and (line where the row
    starts, row) pairs.

    Blank lines are skipped; empty cells beyond the header are dropped (a row with values
    there is refused) and missing cells are absent from the row. Unreadable CSV is refused
    naming the file and the line. (``csv.DictReader`` skips blank lines inside ``next()``,
    which hides where a row starts.)
    """
    text = read_text(name, where, encoding="utf-8-sig")
    # newline="" keeps newlines inside quoted cells; line_num counts physical lines read.
    # strict: a quote left open swallowed the rest of the file into one cell, and a stray
    # quote ("x"y) was read as xy; both are refused at the row's line instead.
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    rows: list[tuple[int, dict[str, str]]] = []
    last = 0  # the line on which the previous row ended
    try:
        for cells in reader:
            start, last = last + 1, reader.line_num
            if header is None:
                header = [h.strip() for h in cells]
            elif cells:
                if any(c.strip() for c in cells[len(header) :]):
                    raise Where(name, f"row {len(rows) + 2}", where.bundle, start).error(
                        f"{len(cells)} values but the header names {len(header)} columns; "
                        "put a text that holds a comma in double quotes"
                    )
                rows.append((start, dict(zip(header, cells, strict=False))))
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            line = min(last + 1, n_lines(text))
            raise Where(name, "", where.bundle, line).error(
                f'a quoted cell opened on line {line} is never closed: every " needs its '
                'partner (write "" for a quote inside a quoted cell)'
            ) from None
        line = min(max(reader.line_num, 1), n_lines(text))
        raise Where(name, "", where.bundle, line).error(f"not a readable CSV file: {exc}") from None
    return header or [], rows


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
    webapp.validation.StudyDefinitionError
        Missing file or column, empty cell, unknown sentiment, duplicate ``item_id``.
    """
    name = stimulus_path(raw, where, "a CSV file")
    file_where = Where(name, "", where.bundle, 1)
    header, rows = read_rows(name, where)
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise file_where.error(f"missing column(s) {missing}; the header is {header}")
    extra_cols = [c for c in header if c not in {*REQUIRED_COLUMNS, "gold_label"} and c]
    for c in extra_cols:  # column names become export columns (item_<column>)
        check_text(c, file_where.at(c), max_len=LINE_MAX, one_line=True)
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, (line, row) in enumerate(rows, start=2):
        rw = Where(name, f"row {n}", where.bundle, line)
        item_id = (row.get("item_id") or "").strip()
        if not ID_RE.match(item_id):
            raise rw.at("item_id").error(f"{item_id!r} is not a valid id (letters, digits, _ . -)")
        if item_id in seen:
            raise rw.at("item_id").error(f"duplicate item_id {item_id!r}")
        seen.add(item_id)
        text = (row.get("text") or "").strip()
        if not text:
            raise rw.at("text").error("is empty")
        check_text(text, rw.at("text"))
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
                "extra": {c: check_text((row.get(c) or "").strip(), rw.at(c)) for c in extra_cols},
            }
        )
    if not items:
        raise file_where.error("has no items")
    return items
