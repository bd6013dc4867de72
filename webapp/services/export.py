"""Export responses in the documented tidy formats (``docs/export.md``)."""

from __future__ import annotations

import csv
import importlib.util
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from webapp.export_common import (
    PLATFORM_ID_COLUMNS,
    TEST_COLUMN,
    iso_time,
    scope_participants,
    with_test_column,
)
from webapp.extensions import db
from webapp.i18n import study_language
from webapp.models import (
    ChoiceResponse,
    PageVisit,
    Participant,
    ParticipantStatus,
    Study,
    TaskResponse,
)

LONG_CHOICE_COLUMNS: tuple[str, ...] = (
    "study_slug",
    "participant_id",
    "platform",
    "status",
    "sequence",
    "seed",
    "block",
    "trial_index",
    "pair_id",
    "product_type",
    "format",
    "target_source_record",
    "control_source_record",
    "target_side",
    "chosen_side",
    "chose_target",
    "other_price_usd",
    "wtp_premium_usd",
    "wtp_premium_pct",
    "rt_ms",
    "wtp_rt_ms",
    "server_rt_ms",
    "answered_at",
    "quiz_passed",
    "quiz_attempts",
    "attention_passed",
    "duration_s",
    "finished_at",
)
# OWASP "CSV injection": a cell starting with one of these runs as a formula in spreadsheets,
# also after leading spaces (Excel and LibreOffice skip them) and in the full-width forms that
# Japanese and Chinese input methods type (＝＋－＠, normalised to =+-@ by spreadsheets).
_FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
# Skipped before the check: every Unicode space (str.lstrip) and the zero-width characters.
_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _has_attention_check(study: Study) -> bool:
    return any(b["type"] == "attention_check" for b in study.definition["tasks"])


def choice_rows(
    study: Study,
    *,
    include_platform_ids: bool = False,
    include_test: bool = False,
    include_excluded: bool = False,
) -> list[dict[str, Any]]:
    """Return one row per product-choice trial (the ``long`` export).

    Parameters
    ----------
    study : Study
    include_platform_ids : bool
        Add the raw recruiter IDs (for payments); off by default.
    include_test : bool
        Keep test participants (bots, researcher previews); rows then carry ``is_test``.
    include_excluded : bool
        Keep participants a researcher excluded (left out by default).

    Returns
    -------
    list of dict
        Keys :data:`LONG_CHOICE_COLUMNS` and ``is_test`` (plus :data:`PLATFORM_ID_COLUMNS` on
        request), ordered by participant, then block (in study order) and ``trial_index``.
    """
    blocks = [b for b in study.definition["tasks"] if b["type"] == "product_choice"]
    product_types = {p["id"]: p["product_type"] for b in blocks for p in b["pairs"]}
    # Each text's generation record, when the pairs file names it (``sources:``).
    sources = {
        (b["id"], p["id"], role): p[role]["sources"]
        for b in blocks
        for p in b["pairs"]
        for role in ("target", "control")
        if "sources" in p[role]
    }
    with_attention = _has_attention_check(study)
    query = (
        select(Participant)
        .where(Participant.study_id == study.id)
        .options(selectinload(Participant.choices), selectinload(Participant.identity))
        .order_by(Participant.id)
    )
    query = scope_participants(query, include_test, include_excluded)
    rows: list[dict[str, Any]] = []
    for p in db.session.scalars(query):
        base = _participant_cells(study, p, with_attention)
        if include_platform_ids:
            ident = p.identity
            base["platform_participant_id"] = ident.external_id if ident else None
            base["platform_study_id"] = ident.external_study_id if ident else None
            base["platform_session_id"] = ident.external_session_id if ident else None
        for c in p.choices:
            rows.append({**base, **_choice_cells(c, product_types, sources)})
    return rows


def _participant_cells(study: Study, p: Participant, with_attention: bool) -> dict[str, Any]:
    """The participant-level columns shared by the long and wide exports."""
    duration = None
    if p.status is ParticipantStatus.completed and p.finished_at is not None:
        duration = round((p.finished_at - p.started_at).total_seconds(), 3)
    return {
        "study_slug": study.slug,
        "participant_id": p.code,
        "platform": p.platform.value,
        "status": p.status.value,
        "sequence": p.sequence,
        "seed": p.seed,
        "quiz_passed": _flag(p.quiz_passed),
        "quiz_attempts": p.quiz_attempts,
        "attention_passed": _flag(p.attention_passed) if with_attention else None,
        "duration_s": duration,
        # When the participant completed: the order in which interim looks count participants.
        "finished_at": iso_time(p.finished_at) if duration is not None else None,
        TEST_COLUMN: int(p.is_test),
    }


def _choice_cells(
    c: ChoiceResponse,
    product_types: Mapping[str, str],
    sources: Mapping[tuple[str, str, str], Mapping[str, str]],
) -> dict[str, Any]:
    def source(role: str) -> str | None:
        return sources.get((c.block_id, c.pair_id, role), {}).get(c.format)

    return {
        "block": c.block_id,
        "trial_index": c.trial_index,
        "pair_id": c.pair_id,
        "product_type": product_types.get(c.pair_id),
        "format": c.format,
        "target_source_record": source("target"),
        "control_source_record": source("control"),
        "target_side": c.target_side,
        "chosen_side": c.chosen_side,
        "chose_target": int(c.chose_target),
        "other_price_usd": c.other_price_usd,
        "wtp_premium_usd": c.wtp_premium_usd,
        "wtp_premium_pct": c.wtp_premium_pct,
        "rt_ms": c.rt_ms,
        "wtp_rt_ms": c.wtp_rt_ms,
        "server_rt_ms": c.server_rt_ms,
        "answered_at": iso_time(c.answered_at),
    }


def spreadsheet_safe(text: str) -> str:
    """Return ``text`` ready for a CSV cell that a spreadsheet may open.

    A leading ``'`` is added if a spreadsheet would run the text as a formula, and a lone
    carriage return becomes a newline (the writer quotes fields that hold a newline but not a
    lone carriage return, which ends the row in spreadsheets and other readers). Every CSV file the
    platform writes (exports, payment files) passes its text cells through this; numbers are
    never text here, so they stay numbers.

    Examples
    --------
    >>> spreadsheet_safe("  =1+1"), spreadsheet_safe("@SUM(A1)"), spreadsheet_safe("a=b")
    ("'  =1+1", "'@SUM(A1)", 'a=b')
    """
    if text.startswith(("\t", "\r")) or text.lstrip().lstrip(_INVISIBLE).lstrip().startswith(
        _FORMULA_START
    ):
        text = "'" + text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _cell(value: Any) -> Any:
    """Empty for missing values; text that a spreadsheet would run as a formula is quoted."""
    if value is None:
        return ""
    if isinstance(value, str):
        return spreadsheet_safe(value)
    return value


def write_csv(rows: Iterable[Mapping[str, Any]], columns: Iterable[str], out: IO[str]) -> int:
    """Write rows as CSV with a header; return the number of data rows written."""
    columns = list(columns)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    n = 0
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in columns])
        n += 1
    return n


def export_long(
    study: Study,
    out_path: str | Path,
    *,
    include_platform_ids: bool = False,
    include_test: bool = False,
    include_excluded: bool = False,
) -> int:
    """Write the ``long`` export of a product-choice study to a CSV file.

    Returns
    -------
    int
        Number of rows written.
    """
    rows = choice_rows(
        study,
        include_platform_ids=include_platform_ids,
        include_test=include_test,
        include_excluded=include_excluded,
    )
    columns = list(LONG_CHOICE_COLUMNS)
    if include_platform_ids:
        columns += PLATFORM_ID_COLUMNS
    columns = with_test_column(columns, include_test)
    with Path(out_path).open("w", newline="", encoding="utf-8") as fh:
        return write_csv(rows, columns, fh)


# -- wide, page times, codebook, Parquet (the researcher console and `framelab export`) --------

FORMATS: tuple[str, ...] = ("long", "wide", "page-times", "codebook", "items", "pairs")
PARTICIPANT_COLUMNS: tuple[str, ...] = (
    "study_slug",
    "study_language",
    "participant_id",
    "platform",
    "status",
    "sequence",
    "seed",
    "quiz_passed",
    "quiz_attempts",
    "attention_passed",
    "duration_s",
    "excluded",
    "n_choices",
    "n_chose_target",
)
PAGE_TIME_COLUMNS: tuple[str, ...] = (
    "study_slug",
    "participant_id",
    "page_seq",
    "page",
    "shown_at",
    "submitted_at",
    "server_ms",
    "rt_ms",
)
_STATUSES = "started|screened_out|completed|returned|timed_out"
# column -> (type, meaning, allowed values); the codebook, also the Parquet schema's types.
CODEBOOK: dict[str, tuple[str, str, str]] = {
    "study_slug": ("str", "the study's slug", ""),
    "study_language": ("str", "language of the participant pages (the study's `language:`)", ""),
    "participant_id": ("str", "pseudonymous ID: p_ + 16 hex of an HMAC under the study salt", ""),
    "platform": ("str", "how the participant arrived", "prolific|mturk|link|mturk_batch"),
    "status": ("str", "participant status", _STATUSES),
    "sequence": (
        "str",
        "format sequence: the Latin-square row (A starts with the block's first format)",
        "A|B|C|D|E|F|G|H",
    ),
    "seed": ("int", "randomisation seed (re-derives pair order and sides)", ""),
    "block": ("str", "ID of the product-choice block the trial belongs to", ""),
    "trial_index": ("int", "0-based position of the pair (or item) in the sequence", ""),
    "pair_id": ("str", "product pair ID from the stimulus set", ""),
    "product_type": ("str", "product type of the pair", ""),
    "format": (
        "str",
        "how the products were described: one of the block's formats",
        "original|summary|another format name of the study",
    ),
    "target_source_record": (
        "str",
        "generation record ID of the target's text in this format (the pairs file's sources); "
        "empty if not given",
        "",
    ),
    "control_source_record": (
        "str",
        "generation record ID of the control's text in this format; empty if not given",
        "",
    ),
    "target_side": ("str", "side of the target manufacturer", "left|right"),
    "chosen_side": ("str", "side chosen", "left|right"),
    "chose_target": ("int", "1 if the target manufacturer was chosen", "0|1"),
    "other_price_usd": ("float", "price of the product not chosen, USD", ">= 0"),
    "wtp_premium_usd": ("float", "stated premium over the other price, USD", ">= 0"),
    "wtp_premium_pct": ("float", "100 * wtp_premium_usd / other_price_usd", ">= 0"),
    "rt_ms": ("int", "client-measured response time, ms", ">= 0"),
    "wtp_rt_ms": ("int", "client-measured time on the WTP page, ms", ">= 0"),
    "server_rt_ms": ("int", "server time between serving the page and the answer, ms", ">= 0"),
    "answered_at": ("str", "server timestamp of the answer (ISO 8601, UTC)", ""),
    "quiz_passed": ("int", "1 if the comprehension quiz was passed", "0|1"),
    "quiz_attempts": ("int", "quiz attempts used", ">= 0"),
    "attention_passed": ("int", "1 if every attention check was passed; empty if none", "0|1"),
    "duration_s": ("float", "seconds from consent to completion; empty unless completed", ">= 0"),
    "finished_at": ("str", "when the participant completed (ISO 8601, UTC); else empty", ""),
    "excluded": ("int", "1 if a researcher excluded the participant", "0|1"),
    TEST_COLUMN: ("int", "1 for a test participant (a bot or a researcher preview)", "0|1"),
    "n_choices": ("int", "choice trials answered", ">= 0"),
    "n_chose_target": ("int", "trials on which the target manufacturer was chosen", ">= 0"),
    "page_seq": ("int", "0-based page number within the participant's session", ">= 0"),
    "page": ("str", "block id / page name", ""),
    "shown_at": ("str", "when the page was first shown (ISO 8601, UTC)", ""),
    "submitted_at": ("str", "when its answer was accepted (ISO 8601, UTC)", ""),
    "server_ms": ("int", "submitted_at - shown_at, ms", ">= 0"),
    "platform_participant_id": ("str", "raw Prolific PID / MTurk WorkerId (payment files)", ""),
    "platform_study_id": ("str", "raw Prolific STUDY_ID / MTurk HITId", ""),
    "platform_session_id": ("str", "raw Prolific SESSION_ID / MTurk AssignmentId", ""),
}
_WIDE_PREFIX = {
    "format__": ("str", "format of pair {}", "original|summary"),
    "chose_target__": ("int", "1 if the target was chosen in pair {}", "0|1"),
    "wtp_premium_pct__": ("float", "WTP premium in pair {}, percent of the other price", ">= 0"),
    "demo_": ("str", "answer to demographics question {}", ""),
}


def column_name(raw: str) -> str:
    """Make an ID usable in a column name (snake_case, identifier-safe).

    Examples
    --------
    >>> column_name("Pair-01.b")
    'pair_01_b'
    """
    return re.sub(r"[^a-z0-9_]", "_", raw.lower())


def _sentiment_codebook_tables(study: Study) -> dict[str, list[str]]:
    from webapp.tasks.sentiment.export import ANNOTATION_LONG_COLUMNS, item_rows

    return {"long": list(ANNOTATION_LONG_COLUMNS), "items": item_rows(study)[1]}


def _evaluation_codebook_tables(study: Study) -> dict[str, list[str]]:
    from webapp.tasks.rating.export import evaluation_blocks, evaluation_table

    if not evaluation_blocks(study):
        return {}
    tables = {"long": evaluation_table(study, "long")[1]}
    if any(b["type"] == "pairwise_preference" for b in evaluation_blocks(study)):
        tables["pairs"] = evaluation_table(study, "pairs")[1]
    return tables


def _design_values(study: Study) -> dict[str, str]:
    """The values ``format`` (and ``format__PAIR``) and ``sequence`` take in this study."""
    from webapp.services.design import study_formats, study_sequences

    formats = study_formats(study.definition)
    if not formats:
        return {}
    sequences = "|".join(study_sequences(study.definition))
    return {"format": "|".join(formats), "sequence": sequences}


def describe_column(column: str) -> tuple[str, str, str]:
    """Return ``(type, meaning, allowed values)`` of an export column for the codebook."""
    from webapp.tasks.rating.export import CODEBOOK as EVALUATION_CODEBOOK
    from webapp.tasks.sentiment.export import CODEBOOK as SENTIMENT_CODEBOOK

    if column in CODEBOOK:
        return CODEBOOK[column]
    if column in EVALUATION_CODEBOOK:
        return EVALUATION_CODEBOOK[column]
    if column in SENTIMENT_CODEBOOK:
        return SENTIMENT_CODEBOOK[column]
    for prefix, (kind, meaning, allowed) in _WIDE_PREFIX.items():
        if column.startswith(prefix):
            return kind, meaning.format(column[len(prefix) :]), allowed
    return "str", "", ""


def wide_rows(
    study: Study, *, include_test: bool = False, include_excluded: bool = False
) -> tuple[list[dict[str, Any]], list[str]]:
    """Return one row per participant (the ``wide`` export) and its columns.

    Per pair ``format__PAIR``, ``chose_target__PAIR`` and ``wtp_premium_pct__PAIR`` (pairs in
    the study's order) and per demographics question ``demo_QUESTION`` follow the participant
    columns :data:`PARTICIPANT_COLUMNS`.

    Returns
    -------
    rows : list of dict
    columns : list of str
    """
    from webapp.studydef import find_blocks

    pairs = [p["id"] for b in find_blocks(study.definition, "product_choice") for p in b["pairs"]]
    questions = [
        q["id"] for b in find_blocks(study.definition, "demographics") for q in b["questions"]
    ]
    columns = list(PARTICIPANT_COLUMNS)
    for pair in pairs:
        name = column_name(pair)
        columns += [f"format__{name}", f"chose_target__{name}", f"wtp_premium_pct__{name}"]
    columns += [f"demo_{column_name(q)}" for q in questions]
    columns = with_test_column(columns, include_test)
    answers: dict[int, dict[str, Any]] = {}
    demo_rows = db.session.execute(
        select(TaskResponse.participant_id, TaskResponse.payload)
        .join(Participant, Participant.id == TaskResponse.participant_id)
        .where(Participant.study_id == study.id, TaskResponse.task_type == "demographics")
    )
    for pid, payload in demo_rows:
        answers.setdefault(pid, {}).update(payload.get("answers") or {})
    query = (
        select(Participant)
        .where(Participant.study_id == study.id)
        .options(selectinload(Participant.choices))
        .order_by(Participant.id)
    )
    with_attention = _has_attention_check(study)
    language = study_language(study.definition)
    rows = []
    for p in db.session.scalars(scope_participants(query, include_test, include_excluded)):
        row: dict[str, Any] = {
            **_participant_cells(study, p, with_attention),
            "study_language": language,
            "excluded": int(p.excluded),
            "n_choices": len(p.choices),
            "n_chose_target": sum(int(c.chose_target) for c in p.choices),
        }
        for c in p.choices:
            name = column_name(c.pair_id)
            row[f"format__{name}"] = c.format
            row[f"chose_target__{name}"] = int(c.chose_target)
            row[f"wtp_premium_pct__{name}"] = c.wtp_premium_pct
        for q, value in answers.get(p.id, {}).items():
            row[f"demo_{column_name(q)}"] = None if value in ("", None) else str(value)
        rows.append(row)
    return rows, columns


def page_time_rows(
    study: Study, *, include_test: bool = False, include_excluded: bool = False
) -> list[dict[str, Any]]:
    """Return one row per page shown (the ``page-times`` export), by participant and page.

    Returns
    -------
    list of dict
        Keys :data:`PAGE_TIME_COLUMNS`; ``server_ms`` is empty for pages never submitted.
    """
    query = (
        select(PageVisit, Participant.code, Participant.is_test)
        .join(Participant, Participant.id == PageVisit.participant_id)
        .where(Participant.study_id == study.id)
        .order_by(Participant.id, PageVisit.page_seq)
    )
    rows = []
    for visit, code, is_test in db.session.execute(
        scope_participants(query, include_test, include_excluded)
    ):
        server_ms = None
        if visit.submitted_at is not None:
            server_ms = round((visit.submitted_at - visit.shown_at).total_seconds() * 1000)
        rows.append(
            {
                "study_slug": study.slug,
                "participant_id": code,
                "page_seq": visit.page_seq,
                "page": visit.page,
                "shown_at": iso_time(visit.shown_at),
                "submitted_at": iso_time(visit.submitted_at),
                "server_ms": server_ms,
                "rt_ms": visit.rt_ms,
                TEST_COLUMN: int(is_test),
            }
        )
    return rows


def formats_for(study: Study) -> list[str]:
    """The export formats that apply to a study (``items`` and ``pairs`` need their blocks)."""
    types = {b["type"] for b in study.definition["tasks"]}
    needs = {"items": "sentiment_annotation", "pairs": "pairwise_preference"}
    return [f for f in FORMATS if f not in needs or needs[f] in types]


def build_table(
    study: Study,
    fmt: str,
    *,
    include_test: bool = False,
    include_excluded: bool = False,
    include_platform_ids: bool = False,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Return the rows and columns of one export format (see :data:`FORMATS`).

    The ``codebook`` lists every column of the ``long``, ``wide`` and ``page-times`` tables
    of this study: ``table, column, type, meaning, allowed_values``.

    Raises
    ------
    ValueError
        Unknown format, or platform IDs asked for outside the ``long`` table.
    """
    if include_platform_ids and fmt != "long":
        raise ValueError("raw platform IDs are only available in the long export")
    scope = {"include_test": include_test, "include_excluded": include_excluded}
    from webapp.tasks.rating.export import evaluation_blocks, evaluation_table

    if evaluation_blocks(study) and fmt in {"long", "pairs"}:
        return evaluation_table(study, fmt, include_platform_ids=include_platform_ids, **scope)
    if fmt == "pairs":
        raise ValueError("the pairs export is for studies with a pairwise_preference block")
    annotation = any(b["type"] == "sentiment_annotation" for b in study.definition["tasks"])
    if fmt == "items" and not annotation:
        raise ValueError("the items export is for studies with a sentiment_annotation block")
    if annotation and fmt in {"long", "items"}:
        from webapp.tasks.sentiment.export import sentiment_table

        return sentiment_table(study, fmt, include_platform_ids=include_platform_ids, **scope)
    if fmt == "long":
        columns = list(LONG_CHOICE_COLUMNS)
        if include_platform_ids:
            columns += PLATFORM_ID_COLUMNS
        columns = with_test_column(columns, include_test)
        return choice_rows(study, include_platform_ids=include_platform_ids, **scope), columns
    if fmt == "wide":
        return wide_rows(study, **scope)
    if fmt == "page-times":
        columns = with_test_column(list(PAGE_TIME_COLUMNS), include_test)
        return page_time_rows(study, **scope), columns
    if fmt == "codebook":
        tables = {
            "long": with_test_column(list(LONG_CHOICE_COLUMNS), include_test),
            **(_sentiment_codebook_tables(study) if annotation else {}),
            **_evaluation_codebook_tables(study),
            "wide": wide_rows(study, **scope)[1],
            "page-times": with_test_column(list(PAGE_TIME_COLUMNS), include_test),
        }
        design = _design_values(study)
        rows = []
        for table, cols in tables.items():
            for col in cols:
                kind, meaning, allowed = describe_column(col)
                allowed = design.get(col.split("__", 1)[0], allowed)
                rows.append(
                    {
                        "table": table,
                        "column": col,
                        "type": kind,
                        "meaning": meaning,
                        "allowed_values": allowed,
                    }
                )
        return rows, ["table", "column", "type", "meaning", "allowed_values"]
    raise ValueError(f"unknown export format {fmt!r}; use one of {list(FORMATS)}")


PARQUET_MISSING = (
    "Parquet export needs pyarrow, which is not installed: pip install 'framelab[parquet]'. "
    "CSV export works without it."
)


class ParquetUnavailable(RuntimeError):
    """Parquet was asked for but pyarrow (the ``parquet`` extra) is not installed."""


def parquet_available() -> bool:
    """Whether Parquet export can run: pyarrow is an optional extra of the web app."""
    return importlib.util.find_spec("pyarrow") is not None


def write_parquet(
    rows: Iterable[Mapping[str, Any]], columns: Iterable[str], out: str | Path | IO[bytes]
) -> int:
    """Write rows as Parquet with the codebook's column types; return the row count.

    Text is stored as written: formula neutralising is for spreadsheets, and Parquet is read
    by analysis code. Raises :class:`ParquetUnavailable` (before anything is written) when
    pyarrow is not installed.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ParquetUnavailable(PARQUET_MISSING) from None

    columns = list(columns)
    rows = list(rows)
    types = {"int": pa.int64(), "float": pa.float64(), "str": pa.string()}
    arrays = []
    for col in columns:
        kind = describe_column(col)[0]
        values = [row.get(col) for row in rows]
        if kind == "str":
            values = [None if v is None else str(v) for v in values]
        arrays.append(pa.array(values, type=types[kind]))
    pq.write_table(pa.Table.from_arrays(arrays, names=columns), out)
    return len(rows)


def export_table(
    study: Study,
    fmt: str,
    out_path: str | Path,
    **options: bool,
) -> int:
    """Write one export format to ``out_path``: Parquet for ``.parquet``, CSV otherwise.

    Parameters
    ----------
    study : Study
    fmt : str
        One of :data:`FORMATS`.
    out_path : str or Path
    **options
        ``include_test``, ``include_excluded``, ``include_platform_ids``
        (see :func:`build_table`).

    Returns
    -------
    int
        Rows written.

    Raises
    ------
    ParquetUnavailable
        For a ``.parquet`` file when pyarrow is not installed (CSV needs nothing more).
    """
    path = Path(out_path)
    if path.suffix == ".parquet" and not parquet_available():
        raise ParquetUnavailable(PARQUET_MISSING)  # before the tables are built for nothing
    rows, columns = build_table(study, fmt, **options)
    if path.suffix == ".parquet":
        return write_parquet(rows, columns, path)
    with path.open("w", newline="", encoding="utf-8") as fh:
        return write_csv(rows, columns, fh)
