"""Readers of files from outside the platform: MTurk batch results and model judgments.

Real data carries labels, columns and codings nobody here chose; each reader validates at the
boundary like :mod:`analysis.io` (whose helpers it uses) and says what it mapped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.io import (
    MODEL_LABELS,
    PREDICTION_COLUMNS,
    SENTIMENTS,
    ExportFormatError,
    check_columns,
    coerce_columns,
    iter_jsonl,
    read_table,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "UNMAPPED_LABEL",
    "label_mapping",
    "load_mturk",
    "load_predictions",
    "parse_label_map",
]

# A model label outside MODEL_LABELS that no --label-map entry maps: kept (never a shift) and
# listed in the report with its raw spelling.
UNMAPPED_LABEL = "unmapped"


def _pseudonym(worker_id: str) -> str:
    # Worker IDs identify people across requesters; keep only a stable one-way pseudonym.
    return "w_" + hashlib.sha256(worker_id.encode("utf-8")).hexdigest()[:16]


def load_mturk(
    paths: str | Path | Sequence[str | Path],
    *,
    item_col: str = "Input.item_id",
    label_col: str = "Answer.sentiment.label",
    base_col: str = "Input.base_sentiment",
    worker_col: str = "WorkerId",
    status_col: str = "AssignmentStatus",
    keep_rejected: bool = False,
) -> pd.DataFrame:
    """Load one or more MTurk batch-results CSVs into the annotation long shape.

    Parameters
    ----------
    paths : path or sequence of paths
        Batch results downloaded from the requester site; concatenated in order.
    item_col, label_col, base_col : str
        Columns holding the item ID, the worker's label and the item's base sentiment. Labels and
        base sentiments are matched case-insensitively (``Positive`` = ``positive``).
    worker_col : str
        Worker ID column; replaced by a pseudonym (``w_`` + 16 hex digits of SHA-256).
    status_col : str
        Assignment status column; ``Rejected`` assignments are dropped unless ``keep_rejected``.
        Ignored when the file has no such column.
    keep_rejected : bool
        Keep rejected assignments.

    Returns
    -------
    pandas.DataFrame
        Columns ``participant_id, item_id, label, base_sentiment, platform`` (``mturk_batch``),
        ``status`` (``completed``), ``is_gold`` (0), ``surplus`` (0) and ``source_file``.

    Raises
    ------
    ExportFormatError
        A mapped column is missing (named with the file) or a label is not
        positive/negative/neutral.
    """
    import pandas as pd

    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise ValueError("no MTurk batch file given")
    frames = []
    for path in paths:
        raw = read_table(path)
        source = f"{Path(path).name} (MTurk batch)"
        # The candidates for a misnamed flag are the batch's Input.*/Answer.* columns; MTurk's
        # own (HITId, AssignmentId, …) are not worth listing.
        own = [c for c in raw.columns if not str(c).startswith(("Input.", "Answer."))]
        check_columns(raw, [item_col, label_col, base_col, worker_col], source, known=own)
        if status_col in raw.columns and not keep_rejected:
            raw = raw[raw[status_col].fillna("").str.strip().str.lower() != "rejected"]
        frame = pd.DataFrame(
            {
                "participant_id": raw[worker_col].map(
                    lambda w: _pseudonym(str(w)) if isinstance(w, str) else None
                ),
                "item_id": raw[item_col],
                "label": raw[label_col],
                "base_sentiment": raw[base_col],
            }
        )
        frame = coerce_columns(
            frame,
            {
                "participant_id": "str",
                "item_id": "str",
                "label": SENTIMENTS,
                "base_sentiment": ("positive", "negative"),
            },
            f"{source}, mapped from {item_col!r}/{label_col!r}/{base_col!r}",
        )
        frame["source_file"] = Path(path).name
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    out["platform"] = "mturk_batch"
    out["status"] = "completed"
    out["is_gold"] = 0
    out["surplus"] = 0
    return out


def parse_label_map(specs: str | Iterable[str] | None) -> dict[str, str]:
    """Parse ``RAW=LABEL`` entries (``"mixed=other"``, ``"mixed=other,pos=positive"``).

    Parameters
    ----------
    specs : str or iterable of str, optional
        One or more entries, each ``RAW=LABEL`` or several of them joined by commas (the
        ``--label-map`` option may be repeated). ``RAW`` is matched case-insensitively after
        trimming; ``LABEL`` must be one of ``positive, negative, neutral, other``.

    Returns
    -------
    dict of str to str
        Lower-case raw label to model label.

    Raises
    ------
    ValueError
        An entry without ``=``, an empty side, a target outside the model labels, or one raw
        label mapped to two targets.

    Examples
    --------
    >>> parse_label_map(["Mixed=other", "pos=positive,neg=negative"])
    {'mixed': 'other', 'pos': 'positive', 'neg': 'negative'}
    """
    if specs is None:
        return {}
    if isinstance(specs, str):
        specs = [specs]
    out: dict[str, str] = {}
    for spec in specs:
        for entry in str(spec).split(","):
            if not entry.strip():
                continue
            raw, sep, target = entry.partition("=")
            raw, target = raw.strip().lower(), target.strip().lower()
            if not sep or not raw or not target:
                raise ValueError(f"label map entry {entry.strip()!r}: write RAW=LABEL")
            if target not in MODEL_LABELS:
                raise ValueError(
                    f"label map entry {entry.strip()!r}: {target!r} is not one of "
                    f"{list(MODEL_LABELS)}"
                )
            if out.get(raw, target) != target:
                raise ValueError(f"label map: {raw!r} is mapped to {out[raw]!r} and {target!r}")
            out[raw] = target
    return out


def _map_labels(raw: pd.DataFrame, label_map: dict[str, str]) -> pd.DataFrame:
    """Keep the raw label; map it (as is, by ``label_map``, or to ``unmapped``)."""
    out = raw.copy()
    present = out["label"].notna()
    key = out["label"].where(~present, out["label"].astype(str).str.strip().str.lower())
    mapped = key.map(lambda v: v if v in MODEL_LABELS else label_map.get(v, UNMAPPED_LABEL))
    out["raw_label"] = out["label"].where(~present, out["label"].astype(str).str.strip())
    out["label"] = mapped.where(present, None)
    return out


def load_predictions(
    paths: str | Path | Sequence[str | Path],
    *,
    label_map: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Load model framing judgments: CSV ``item_id, model, label`` or ``framelab generate`` JSONL.

    Parameters
    ----------
    paths : path or sequence of paths
        CSV/Parquet files with ``item_id, model, label``, or JSONL generation records
        (``docs/generation.md``) of the ``judge-framing`` task, whose ``item_id``, ``model``
        and ``label`` fields are used.
    label_map : dict of str to str, optional
        Raw label (lower case) -> one of ``positive|negative|neutral|other``, for vocabularies
        nobody here chose (``{"mixed": "other"}``; :func:`parse_label_map`). Labels are matched
        case-insensitively; one of the four model labels is kept as is.

    Returns
    -------
    pandas.DataFrame
        Columns ``item_id, model, label, raw_label``; one row per (model, item) — a repeated
        pair is an error. ``label`` is the mapped label, or ``unmapped`` for a label that is
        neither a model label nor in ``label_map`` (never a shift; the report lists it);
        ``raw_label`` is the file's spelling.

    Raises
    ------
    ExportFormatError
        Missing columns, empty labels or duplicated (model, item) pairs.
    """
    import pandas as pd

    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise ValueError("no model-judgment file given")
    label_map = label_map or {}
    frames = []
    for path in paths:
        path = Path(path)
        if path.suffix.lower() == ".jsonl":
            records = [
                rec
                for rec in iter_jsonl(path, ExportFormatError)
                if rec.get("task", "judge-framing") == "judge-framing"
            ]
            raw = pd.DataFrame(records, columns=list(PREDICTION_COLUMNS))
            raw = raw.astype(object).where(raw.notna(), None)
        else:
            raw = read_table(path)
        source = f"{path.name} (model judgments)"
        check_columns(raw, PREDICTION_COLUMNS, source)
        schema = {**PREDICTION_COLUMNS, "label": "str"}
        frames.append(
            _map_labels(coerce_columns(raw[list(PREDICTION_COLUMNS)], schema, source), label_map)
        )
    out = pd.concat(frames, ignore_index=True)
    dup = out.duplicated(["model", "item_id"], keep=False)
    if dup.any():
        first = out[dup].iloc[0]
        raise ExportFormatError(
            f"model judgments: {int(dup.sum())} rows repeat a (model, item_id) pair, e.g. "
            f"({first['model']!r}, {first['item_id']!r})"
        )
    return out


def label_mapping(predictions: pd.DataFrame) -> pd.DataFrame:
    """How each model's raw labels were read: one row per (model, raw label).

    Parameters
    ----------
    predictions : pandas.DataFrame
        Output of :func:`load_predictions` (``raw_label`` and ``label``).

    Returns
    -------
    pandas.DataFrame
        ``model, raw_label, label, how`` (``as is``, ``--label-map`` or ``unknown: counted as
        no shift``) and ``n`` (judgments), sorted by model and raw label.
    """
    import pandas as pd

    if "raw_label" not in predictions.columns:
        raw = predictions["label"]
    else:
        raw = predictions["raw_label"]
    df = pd.DataFrame(
        {"model": predictions["model"], "raw_label": raw, "label": predictions["label"]}
    )
    table = df.groupby(["model", "raw_label", "label"], sort=True).size().reset_index(name="n")
    same = table["raw_label"].str.lower() == table["label"]
    table["how"] = "--label-map"
    table.loc[same, "how"] = "as is"
    table.loc[table["label"] == UNMAPPED_LABEL, "how"] = "unknown: counted as no shift"
    return table[["model", "raw_label", "label", "how", "n"]]
