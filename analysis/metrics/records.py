"""Read generation records (``docs/generation.md``) or any CSV/JSONL/Parquet with the same fields.

One reader for the metrics: every line becomes one row; the keys of the nested ``input`` object
become ``input.<key>`` columns (one level deep), so a summary's source text is ``input.text`` and a
judged summary's summarizer is ``input.model``. Metric functions then take column names, which the
CLI lets users map.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.io import iter_jsonl

__all__ = [
    "column",
    "each_group",
    "flatten_record",
    "group_means",
    "read_records",
    "select_task",
    "summary_pairs",
]


def flatten_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """Copy a record and lift the keys of its ``input`` object to ``input.<key>``.

    Examples
    --------
    >>> flatten_record({"item_id": "a", "input": {"text": "t"}, "output": "o"})
    {'item_id': 'a', 'input': {'text': 't'}, 'output': 'o', 'input.text': 't'}
    """
    row = dict(record)
    nested = row.get("input")
    if isinstance(nested, str) and nested.startswith("{"):
        # CSV exports carry the input object as a JSON string.
        try:
            nested = json.loads(nested)
            row["input"] = nested
        except json.JSONDecodeError:
            pass
    if isinstance(nested, Mapping):
        for key, value in nested.items():
            row.setdefault(f"input.{key}", value)
    return row


def _read_one(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".json" and path.read_text(encoding="utf-8").lstrip().startswith("["):
        return list(json.loads(path.read_text(encoding="utf-8")))
    if suffix in {".jsonl", ".ndjson", ".json"}:
        return list(iter_jsonl(path))
    if suffix == ".csv":
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    elif suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        raise ValueError(f"{path}: unknown file type {suffix!r} (use .jsonl, .csv or .parquet)")
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.to_dict(orient="records")


def read_records(paths: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """Read one or more record files into one flat DataFrame.

    Parameters
    ----------
    paths : path or iterable of paths
        ``.jsonl`` (one JSON object per line), ``.json`` (a list of objects, or one per line),
        ``.csv`` or ``.parquet`` files.

    Returns
    -------
    pandas.DataFrame
        One row per record with the record's fields as columns, ``input.<key>`` columns for the
        keys of a nested ``input`` object, and ``source_file``.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    rows: list[dict[str, Any]] = []
    for raw in paths:
        path = Path(raw)
        for record in _read_one(path):
            row = flatten_record(record)
            row["source_file"] = str(path)
            rows.append(row)
    return pd.DataFrame(rows)


def column(data: pd.DataFrame, name: str) -> str:
    """Resolve a field name to a column: ``name`` itself, else ``input.<name>``.

    Raises
    ------
    KeyError
        When neither exists; the message lists the available columns.
    """
    if name in data.columns:
        return name
    if f"input.{name}" in data.columns:
        return f"input.{name}"
    available = ", ".join(map(str, data.columns))
    raise KeyError(f"field {name!r} not found (nor input.{name}); available: {available}")


def select_task(data: pd.DataFrame, task: str) -> pd.DataFrame:
    """Rows of one generation task (all rows when the file has no ``task`` column)."""
    if "task" not in data.columns:
        return data
    return data.loc[data["task"] == task].reset_index(drop=True)


def _optional(data: pd.DataFrame, name: str) -> pd.Series:
    try:
        return data[column(data, name)]
    except KeyError:
        return pd.Series([None] * len(data), index=data.index, dtype=object)


def summary_pairs(
    records: pd.DataFrame, *, source: str = "text", summary: str = "output"
) -> pd.DataFrame:
    """(source, summary) pairs from ``summarize`` records (or any file with those fields).

    Parameters
    ----------
    records : pandas.DataFrame
        As read by :func:`read_records`.
    source, summary : str
        Fields with the source text (default ``text``, found as ``input.text``) and the summary.

    Returns
    -------
    pandas.DataFrame
        ``item_id``, ``dataset``, ``model``, ``method``, ``source``, ``summary``.
    """
    rows = select_task(records, "summarize")
    return pd.DataFrame(
        {
            "item_id": _optional(rows, "item_id").astype(str),
            "dataset": _optional(rows, "dataset"),
            "model": _optional(rows, "model"),
            "method": _optional(rows, "method"),
            "source": rows[column(rows, source)],
            "summary": rows[column(rows, summary)],
        }
    ).reset_index(drop=True)


def each_group(
    data: pd.DataFrame, keys: Sequence[str]
) -> Iterator[tuple[dict[str, Any], pd.DataFrame]]:
    """Yield ``({key: value}, rows)`` per group, sorted, keeping missing keys as their own group.

    With no keys, yields one group of all rows.
    """
    if not keys:
        yield {}, data
        return
    for values, rows in data.groupby(list(keys), dropna=False, sort=True):
        yield dict(zip(keys, values, strict=True)), rows


def group_means(
    data: pd.DataFrame, keys: Sequence[str], values: Sequence[str], count: str
) -> pd.DataFrame:
    """The mean of each ``values`` column per group of ``keys`` (as :func:`each_group` groups),
    after the keys a ``count`` column of the group's rows; with no keys, one row of all rows."""
    if not keys:
        out = data[list(values)].mean().to_frame().T
        out.insert(0, count, len(data))
        return out
    grouped = data.groupby(list(keys), dropna=False, sort=True)
    out = grouped[list(values)].mean().reset_index()
    out.insert(len(keys), count, grouped.size().to_numpy())
    return out
