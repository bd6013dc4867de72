"""The one reader of the analysis package: platform exports, tidy CSVs, MTurk batches, models.

Every loader validates at the boundary (``docs/export.md`` is the contract) and raises
:class:`ExportFormatError` naming the offending columns, so a wrong file fails here with a readable
message rather than deep inside a model fit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ANNOTATION_LONG_COLUMNS",
    "AUTHENTICITY_COLUMNS",
    "CHOICE_LONG_COLUMNS",
    "ITEMS_COLUMNS",
    "MODEL_LABELS",
    "PAIRS_COLUMNS",
    "PREFERENCE_LONG_COLUMNS",
    "RATING_LONG_COLUMNS",
    "TIDY_CHOICE_OPTIONAL",
    "TIDY_CHOICE_REQUIRED",
    "ExportFormatError",
    "check_columns",
    "coerce_columns",
    "iter_jsonl",
    "load_annotations",
    "load_choice",
    "load_export",
    "load_metric_table",
    "load_pairs",
    "load_preferences",
    "load_ratings",
    "read_table",
]

# Column -> kind: "str", "int", "float", "bool" (0/1), "format" (FORMAT_NAME), "sequence"
# (SEQUENCE_LETTERS), or a tuple of allowed (lower-case) values.
# Copied from docs/export.md; change both together.
# A product-choice format: any name a block's ``formats:`` may give (the web app's rule):
# ``original``, ``summary``, ``mitigated:<method>`` (a summary by that mitigation method) or
# another lower-case name. Kind "format" below.
FORMAT_NAME = r"[a-z][a-z0-9_-]{0,29}(?::[a-z0-9][a-z0-9_.-]{0,32})?"
# The rows of a block's Latin square: one letter per format, at most eight formats.
SEQUENCE_LETTERS = tuple("ABCDEFGH")
PARTICIPANT_STATUSES = ("started", "screened_out", "completed", "returned", "timed_out")
CHOICE_LONG_COLUMNS: dict[str, object] = {
    "study_slug": "str",
    "participant_id": "str",
    "platform": ("prolific", "mturk", "link"),
    "status": PARTICIPANT_STATUSES,
    "sequence": "sequence",
    "seed": "int",
    "trial_index": "int",
    "pair_id": "str",
    "product_type": "str",
    "format": "format",
    "target_side": ("left", "right"),
    "chosen_side": ("left", "right"),
    "chose_target": "bool",
    "currency": "str",
    "other_price": "float",
    "wtp_premium": "float",
    "wtp_premium_pct": "float",
    "rt_ms": "int",
    "wtp_rt_ms": "int",
    "server_rt_ms": "int",
    "answered_at": "str",
    "quiz_passed": "bool",
    "quiz_attempts": "int",
    "attention_passed": "bool",
    "duration_s": "float",
}
# Amount columns of exports written before amounts were in the study's currency (always USD).
DOLLAR_COLUMNS = {"other_price_usd": "other_price", "wtp_premium_usd": "wtp_premium"}
SENTIMENTS = ("positive", "negative", "neutral")
ANNOTATION_LONG_COLUMNS: dict[str, object] = {
    "study_slug": "str",
    "participant_id": "str",
    "platform": ("prolific", "mturk", "link", "mturk_batch"),
    "status": PARTICIPANT_STATUSES,
    "item_id": "str",
    "label": SENTIMENTS,
    "base_sentiment": ("positive", "negative"),
    "is_gold": "bool",
    "gold_correct": "bool",
    "surplus": "bool",
    "trial_index": "int",
    "rt_ms": "int",
    "answered_at": "str",
}
ITEMS_COLUMNS: dict[str, object] = {
    "study_slug": "str",
    "item_id": "str",
    "text": "str",
    "base_sentiment": ("positive", "negative"),
    "n_labels": "int",
    "n_surplus": "int",
    "n_reserved": "int",
    "needed": "int",
    "shift_count": "int",
}
# Summary-rating and pairwise-preference studies (docs/export.md).
PLATFORMS = ("prolific", "mturk", "link")
RATING_LONG_COLUMNS: dict[str, object] = {
    "study_slug": "str",
    "participant_id": "str",
    "platform": PLATFORMS,
    "status": PARTICIPANT_STATUSES,
    "item_id": "str",
    "summary_id": "str",
    "system": "str",
    "perspective": "str",
    "dimension": "str",
    "rating": "int",
    "scale_min": "int",
    "scale_max": "int",
    "position": "int",
    "trial_index": "int",
    "surplus": "bool",
    "rt_ms": "int",
    "answered_at": "str",
}
PREFERENCE_LONG_COLUMNS: dict[str, object] = {
    "study_slug": "str",
    "participant_id": "str",
    "platform": PLATFORMS,
    "status": PARTICIPANT_STATUSES,
    "pair_id": "str",
    "source_id": "str",
    "system_first": "str",
    "system_second": "str",
    "chosen_system": "str",
    "chose_first": "bool",
    "order": ("a_first", "b_first"),
    "reason": "str",
    "trial_index": "int",
    "surplus": "bool",
    "rt_ms": "int",
    "answered_at": "str",
}
PAIRS_COLUMNS: dict[str, object] = {
    "study_slug": "str",
    "pair_id": "str",
    "source_id": "str",
    "system_a": "str",
    "system_b": "str",
    "summary_a": "str",
    "summary_b": "str",
    "n_judgments": "int",
    "n_a_first": "int",
    "n_b_first": "int",
}
TIDY_CHOICE_REQUIRED: dict[str, object] = {
    "participant_id": "str",
    "pair_id": "str",
    "format": "format",
    "chose_target": "bool",
    "wtp_premium_pct": "float",
}
TIDY_CHOICE_OPTIONAL: dict[str, object] = {
    "status": PARTICIPANT_STATUSES,
    "quiz_passed": "bool",
    "attention_passed": "bool",
    "duration_s": "float",
}
# The platform's authenticity columns (docs/export.md, "Authenticity columns") that the
# ``authenticity`` exclusion rule reads: typed when a file has them; files without them load
# as before, and the rule then says it could not be checked.
AUTHENTICITY_COLUMNS: dict[str, object] = {
    "auth_score": "int",
    "auth_flagged": "bool",
    "auth_canary": "int",
    "auth_signal_pages": "int",
}
# Columns only the platform's choice export writes: a file with one is that export. A pilot
# or a simulated study (analysis.plan.simulate) carries the order columns too, as tidy extras.
_LONG_ONLY_CHOICE = (set(CHOICE_LONG_COLUMNS) | set(DOLLAR_COLUMNS)) - set(TIDY_CHOICE_REQUIRED)
_LONG_ONLY_CHOICE -= set(TIDY_CHOICE_OPTIONAL) | {"sequence", "trial_index", "answered_at"}
MODEL_LABELS = ("positive", "negative", "neutral", "other")
PREDICTION_COLUMNS: dict[str, object] = {"item_id": "str", "model": "str", "label": MODEL_LABELS}

# Columns whose values must never be empty (identifiers and the outcome itself).
_NON_EMPTY = {"participant_id", "pair_id", "item_id", "format", "chose_target", "label", "model"}
_NON_EMPTY |= {"summary_id", "system", "dimension", "rating", "chosen_system"}


class ExportFormatError(ValueError):
    """A file does not follow the documented format; the message names the offending columns."""


def iter_jsonl(path: str | Path, error: type[ValueError] = ValueError) -> Iterator[Any]:
    """Yield the JSON value of each non-blank line of a JSONL file.

    Raises
    ------
    ValueError
        ``error``, naming the file and line, at a line that is not valid JSON.
    """
    with Path(path).open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise error(f"{path}:{number}: not valid JSON ({exc.msg})") from None


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV or Parquet file with every column as read (no type guessing for identifiers).

    Parameters
    ----------
    path : str or Path
        ``.csv`` (UTF-8, header row) or ``.parquet``.

    Returns
    -------
    pandas.DataFrame
        The file's columns unchanged.
    """
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.suffix.lower() in {".parquet", ".pq"}:
        return pd.read_parquet(path)
    # Read as strings first: IDs such as "007" must survive, and validation converts typed columns.
    return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])


def coerce_columns(df: pd.DataFrame, schema: dict[str, object], source: str) -> pd.DataFrame:
    """Convert columns to their documented types; collect every bad column before raising."""
    import numpy as np
    import pandas as pd

    problems: list[str] = []
    out = df.copy()
    for col, kind in schema.items():
        if col not in out.columns:
            continue
        raw = out[col]
        present = raw.notna()
        if col in _NON_EMPTY and not present.all():
            problems.append(f"{col!r}: {int((~present).sum())} empty cell(s)")
        if kind == "str":
            if isinstance(raw.dtype, pd.StringDtype):
                # Already text (every CSV column is read as str): no per-value str() needed.
                out[col] = raw.astype(object).where(present, None)
            else:
                out[col] = pd.Series(
                    [str(v) if ok else None for v, ok in zip(raw, present, strict=True)],
                    index=raw.index,
                    dtype=object,
                )
        elif kind in ("int", "float", "bool"):
            num = pd.to_numeric(raw, errors="coerce")
            bad = present & num.isna()
            if bad.any():
                examples = ", ".join(repr(v) for v in raw[bad].unique()[:3])
                problems.append(f"{col!r}: not numeric ({examples})")
                continue
            if kind == "bool" and not num.dropna().isin([0, 1]).all():
                examples = ", ".join(repr(v) for v in raw[present & ~num.isin([0, 1])].unique()[:3])
                problems.append(f"{col!r}: must be 0/1 ({examples})")
                continue
            if kind == "float":
                out[col] = num.astype(float)
            else:
                frac = present & (np.floor(num) != num)
                if frac.any():
                    problems.append(f"{col!r}: not an integer ({raw[frac].iloc[0]!r})")
                    continue
                out[col] = num.astype("Int64")
        elif kind == "format":
            import re

            lowered = raw.where(~present, raw.astype(str).str.strip().str.lower())
            named = lowered.astype(str).map(lambda v: bool(re.fullmatch(FORMAT_NAME, v)))
            # An empty column maps to an empty object Series: make it boolean before negating.
            bad = present & ~named.astype(bool)
            if bad.any():
                examples = ", ".join(repr(v) for v in raw[bad].unique()[:3])
                problems.append(
                    f"{col!r}: unexpected value(s) {examples}; a format is a lower-case name "
                    "such as 'original', 'summary' or 'mitigated:<method>'"
                )
                continue
            out[col] = lowered.astype(object).where(present, None)
        elif kind == "sequence":
            letters = raw.where(~present, raw.astype(str).str.strip().str.upper())
            bad = present & ~letters.isin(SEQUENCE_LETTERS)
            if bad.any():
                examples = ", ".join(repr(v) for v in raw[bad].unique()[:3])
                problems.append(
                    f"{col!r}: unexpected value(s) {examples}; a sequence is a row of the "
                    "block's Latin square, one letter A to H (A, B for two formats, A, B, C "
                    "for three, ...)"
                )
                continue
            out[col] = letters.astype(object).where(present, None)
        else:
            allowed = tuple(kind)  # type: ignore[arg-type]
            # Categories are documented lower-case; accept case variants from hand-made files.
            lowered = raw.where(~present, raw.astype(str).str.strip())
            if all(a == a.lower() for a in allowed):
                lowered = lowered.where(~present, lowered.str.lower())
            bad = present & ~lowered.isin(allowed)
            if bad.any():
                examples = ", ".join(repr(v) for v in raw[bad].unique()[:3])
                problems.append(f"{col!r}: unexpected value(s) {examples}; allowed {list(allowed)}")
                continue
            out[col] = lowered.astype(object).where(present, None)
    if problems:
        raise ExportFormatError(f"{source}: invalid column(s): " + "; ".join(problems))
    return out


def check_columns(
    df: pd.DataFrame,
    required: Iterable[str],
    source: str,
    *,
    known: Iterable[str] = (),
) -> None:
    """Raise :class:`ExportFormatError` naming every column of ``required`` that ``df`` lacks
    (and, as a hint, the columns it has that neither ``required`` nor ``known`` expects)."""
    missing = [c for c in required if c not in df.columns]
    if missing:
        known_set = set(required) | set(known)
        unexpected = [
            c for c in df.columns if c not in known_set and not str(c).startswith("item_")
        ]
        hint = f"; unexpected column(s): {unexpected}" if unexpected else ""
        raise ExportFormatError(f"{source}: missing column(s): {missing}{hint}")


def _detect_kind(columns: Sequence[str]) -> str:
    cols = set(columns)
    if "rating" in cols and "summary_id" in cols:
        return "rating"
    if "chosen_system" in cols:
        return "preference"
    if "summary_a" in cols:
        return "pairs"
    if "chose_target" in cols:
        return "choice"
    if "label" in cols:
        return "annotation"
    if "shift_count" in cols or "text" in cols:
        return "items"
    raise ExportFormatError(
        "cannot tell the export's kind: expected `chose_target` (choice long), "
        f"`label` (annotation long) or `shift_count` (items); columns are {list(columns)}"
    )


_SCHEMAS = {
    "choice": CHOICE_LONG_COLUMNS,
    "annotation": ANNOTATION_LONG_COLUMNS,
    "items": ITEMS_COLUMNS,
    "rating": RATING_LONG_COLUMNS,
    "preference": PREFERENCE_LONG_COLUMNS,
    "pairs": PAIRS_COLUMNS,
}


def load_export(path: str | Path, kind: str | None = None) -> pd.DataFrame:
    """Load and validate a platform export (``framelab export``) against ``docs/export.md``.

    Parameters
    ----------
    path : str or Path
        CSV or Parquet written by the platform.
    kind : {"choice", "annotation", "items", "rating", "preference", "pairs"}, optional
        Which table the file holds; detected from its columns when omitted.

    Returns
    -------
    pandas.DataFrame
        Every documented column, typed: identifiers and timestamps as ``object`` strings, counts as
        nullable ``Int64``, booleans as ``Int64`` 0/1, amounts as ``float``, categories lower-case.
        Extra columns (e.g. ``item_*`` from an item CSV) are kept as read.

    Raises
    ------
    ExportFormatError
        A documented column is missing (the message names it) or holds values outside its type.
    """
    return _validate_export(read_table(path), Path(path).name, kind)


def _validate_export(df: pd.DataFrame, name: str, kind: str | None) -> pd.DataFrame:
    """Check and type an export already read (``load_export`` without reading it again)."""
    kind = kind or _detect_kind(list(df.columns))
    if kind not in _SCHEMAS:
        raise ValueError(f"unknown export kind {kind!r}; use one of {sorted(_SCHEMAS)}")
    if kind == "choice":
        df = _currency_columns(df)
    schema = _SCHEMAS[kind]
    source = f"{name} ({kind} export)"
    check_columns(df, schema, source)
    present = {c: k for c, k in AUTHENTICITY_COLUMNS.items() if c in df.columns}
    return coerce_columns(df, {**schema, **present}, source)


def _currency_columns(df: pd.DataFrame) -> pd.DataFrame:
    """An older export's dollar columns under their current names, with ``currency`` USD."""
    old = [c for c in DOLLAR_COLUMNS if c in df.columns]
    if not old or "currency" in df.columns:
        return df
    clash = [DOLLAR_COLUMNS[c] for c in old if DOLLAR_COLUMNS[c] in df.columns]
    if clash:
        raise ExportFormatError(f"both {old} and {clash}: keep one spelling of each amount")
    out = df.rename(columns=DOLLAR_COLUMNS)
    out.insert(list(out.columns).index(DOLLAR_COLUMNS[old[0]]), "currency", "USD")
    return out


def load_choice(path: str | Path) -> pd.DataFrame:
    """Load choice data: the platform's long export or the minimal tidy CSV.

    A file with ``study_slug``, or with any other column that only the platform's long export
    writes (``rt_ms``, ``platform``, ...), is validated as that export, every missing column
    named; anything else must have the tidy columns ``participant_id, pair_id, format,
    chose_target, wtp_premium_pct`` (plus, if present, ``status, quiz_passed,
    attention_passed, duration_s``).

    Parameters
    ----------
    path : str or Path
        CSV or Parquet.

    Returns
    -------
    pandas.DataFrame
        At least the tidy columns, typed; the optional ones are present (all empty when the file
        lacks them) so exclusion rules can tell "not recorded" from "failed".

    Raises
    ------
    ExportFormatError
        Missing or invalid columns, named in the message.
    """
    import pandas as pd

    df = read_table(path)
    # A long export that lost a column is no tidy CSV: its other columns (rt_ms) would reach
    # the statistics untyped.
    if any(c in _LONG_ONLY_CHOICE for c in df.columns):
        # Validate the frame already read: reading the file twice cost 0.4 s at 60,000 rows.
        return _validate_export(df, Path(path).name, "choice")
    source = f"{Path(path).name} (tidy choice CSV)"
    check_columns(df, TIDY_CHOICE_REQUIRED, source, known=TIDY_CHOICE_OPTIONAL)
    present = {c: k for c, k in AUTHENTICITY_COLUMNS.items() if c in df.columns}
    out = coerce_columns(df, {**TIDY_CHOICE_REQUIRED, **TIDY_CHOICE_OPTIONAL, **present}, source)
    for col, kind in TIDY_CHOICE_OPTIONAL.items():
        if col not in out.columns:
            out[col] = pd.Series(None, index=out.index, dtype=float if kind == "float" else object)
    return out


def load_annotations(path: str | Path) -> pd.DataFrame:
    """Load and validate the platform's annotation long export (one row per label).

    Parameters
    ----------
    path : str or Path
        CSV or Parquet from ``framelab export SLUG --format long``.

    Returns
    -------
    pandas.DataFrame
        The columns of ``ANNOTATION_LONG_COLUMNS``, typed as in :func:`load_export`.
    """
    return load_export(path, "annotation")


def load_ratings(path: str | Path, *, include_surplus: bool = False) -> pd.DataFrame:
    """Load and validate a ``summary_rating`` long export (one row per rating).

    Parameters
    ----------
    path : str or Path
        CSV or Parquet from ``framelab export SLUG --format long``.
    include_surplus : bool
        Keep ratings that arrived after their reservation expired (not counted by the platform).

    Returns
    -------
    pandas.DataFrame
        The columns of ``RATING_LONG_COLUMNS``, typed as in :func:`load_export`; ratings outside
        ``scale_min..scale_max`` are an error.

    Raises
    ------
    ExportFormatError
        Missing or invalid columns, or out-of-scale ratings.
    """
    df = load_export(path, "rating")
    out_of_scale = (df["rating"] < df["scale_min"]) | (df["rating"] > df["scale_max"])
    if out_of_scale.fillna(False).any():
        bad = df.loc[out_of_scale.fillna(False)].iloc[0]
        raise ExportFormatError(
            f"{Path(path).name} (rating export): rating {bad['rating']} of summary "
            f"{bad['summary_id']!r} is outside {bad['scale_min']}..{bad['scale_max']}"
        )
    if not include_surplus:
        df = df[df["surplus"].fillna(0) == 0].reset_index(drop=True)
    return df


def load_preferences(path: str | Path, *, include_surplus: bool = False) -> pd.DataFrame:
    """Load and validate a ``pairwise_preference`` long export (one row per verdict).

    Parameters
    ----------
    path : str or Path
        CSV or Parquet from ``framelab export SLUG --format long``.
    include_surplus : bool
        Keep verdicts that arrived after their reservation expired.

    Returns
    -------
    pandas.DataFrame
        The columns of ``PREFERENCE_LONG_COLUMNS``, typed as in :func:`load_export`.

    Raises
    ------
    ExportFormatError
        Missing or invalid columns, or a chosen system that was not shown.
    """
    df = load_export(path, "preference")
    shown = (df["chosen_system"] == df["system_first"]) | (
        df["chosen_system"] == df["system_second"]
    )
    if not shown.all():
        bad = df.loc[~shown].iloc[0]
        raise ExportFormatError(
            f"{Path(path).name} (preference export): pair {bad['pair_id']!r}: chosen system "
            f"{bad['chosen_system']!r} was not shown"
        )
    if not include_surplus:
        df = df[df["surplus"].fillna(0) == 0].reset_index(drop=True)
    return df


def load_pairs(path: str | Path) -> pd.DataFrame:
    """Load and validate a ``pairwise_preference`` pairs export (one row per pair, with texts).

    Parameters
    ----------
    path : str or Path
        CSV or Parquet from ``framelab export SLUG --format pairs``.

    Returns
    -------
    pandas.DataFrame
        The columns of ``PAIRS_COLUMNS``, typed as in :func:`load_export`.
    """
    return load_export(path, "pairs")


def load_metric_table(path: str | Path, *, key: str = "summary_id") -> pd.DataFrame:
    """Load automatic metrics per summary: ``key`` plus numeric columns (CSV/Parquet/JSONL).

    Parameters
    ----------
    path : str or Path
        E.g. the ``metrics.csv`` that ``framelab generate rating-set`` writes.
    key : str
        The summary identifier column.

    Returns
    -------
    pandas.DataFrame
        ``key`` as strings and every other column that is entirely numeric, as floats.

    Raises
    ------
    ExportFormatError
        No ``key`` column, or no numeric column.
    """
    import pandas as pd

    path = Path(path)
    if path.suffix.lower() == ".jsonl":
        raw = pd.read_json(path, lines=True, dtype=False)
    else:
        raw = read_table(path)
    source = f"{path.name} (metrics table)"
    check_columns(raw, [key], source)
    out = pd.DataFrame({key: raw[key].astype(str)})
    for col in raw.columns:
        if col == key:
            continue
        num = pd.to_numeric(raw[col], errors="coerce")
        if num.notna().sum() == raw[col].notna().sum() and num.notna().any():
            out[col] = num.astype(float)
    if out.shape[1] == 1:
        raise ExportFormatError(f"{source}: no numeric metric column besides {key!r}")
    return out
