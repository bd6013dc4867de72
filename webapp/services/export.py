"""Export responses in the documented tidy formats (``docs/export.md``).

The task types own their tables (``TaskType.tables``: ``long``, ``items``, ``pairs``), their
``wide`` columns and their codebook entries; this module assembles them for a study, adds the
participant-level, page-time and codebook tables, and writes CSV or Parquet.
"""

from __future__ import annotations

import csv
import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sqlalchemy import select

from webapp.definition import TaskBlock
from webapp.definition_cache import study_definition
from webapp.export_common import (
    PLATFORM_ID_COLUMNS,
    TEST_COLUMN,
    ExportScope,
    iso_time,
    with_test_column,
)
from webapp.extensions import db
from webapp.models import PageVisit, Participant, Study
from webapp.services import authenticity
from webapp.tasks import task_types
from webapp.tasks.base import ExportTable, TaskType

# The tables every study has; the task types add theirs (``items``, ``pairs``: all_formats).
BASE_FORMATS: tuple[str, ...] = ("long", "wide", "page-times", "codebook")
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
    *authenticity.PAGE_EXPORT_COLUMNS,
)
_STATUSES = "started|screened_out|completed|returned|timed_out"
# column -> (type, meaning, allowed values) of the columns several tables share; the task types
# add their own (TaskType.codebook). The codebook, also the Parquet schema's types.
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
    "trial_index": ("int", "0-based position of the pair (or item) in the sequence", ""),
    "rt_ms": ("int", "client-measured response time, ms", ">= 0"),
    "answered_at": ("str", "server timestamp of the answer (ISO 8601, UTC)", ""),
    "quiz_passed": ("int", "1 if the comprehension quiz was passed", "0|1"),
    "quiz_attempts": ("int", "quiz attempts used", ">= 0"),
    "attention_passed": ("int", "1 if every attention check was passed; empty if none", "0|1"),
    "duration_s": ("float", "seconds from consent to completion; empty unless completed", ">= 0"),
    "finished_at": ("str", "when the participant completed (ISO 8601, UTC); else empty", ""),
    "excluded": ("int", "1 if a researcher excluded the participant", "0|1"),
    TEST_COLUMN: ("int", "1 for a test participant (a bot or a researcher preview)", "0|1"),
    "page_seq": ("int", "0-based page number within the participant's session", ">= 0"),
    "page": ("str", "block id / page name", ""),
    "shown_at": ("str", "when the page was first shown (ISO 8601, UTC)", ""),
    "submitted_at": ("str", "when its answer was accepted (ISO 8601, UTC)", ""),
    "server_ms": ("int", "submitted_at - shown_at, ms", ">= 0"),
    "platform_participant_id": ("str", "raw Prolific PID / MTurk WorkerId (payment files)", ""),
    "platform_study_id": ("str", "raw Prolific STUDY_ID / MTurk HITId", ""),
    "platform_session_id": ("str", "raw Prolific SESSION_ID / MTurk AssignmentId", ""),
    **authenticity.CODEBOOK,
}
# OWASP "CSV injection": a cell starting with one of these runs as a formula in spreadsheets,
# also after leading spaces (Excel and LibreOffice skip them) and in the full-width forms that
# Japanese and Chinese input methods type (＝＋－＠, normalised to =+-@ by spreadsheets).
_FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
# Skipped before the check: every Unicode space (str.lstrip) and the zero-width characters.
_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"


@dataclass(frozen=True)
class AssessedScope(ExportScope):
    """An export's scope whose participant cells end with the authenticity columns
    (:data:`webapp.services.authenticity.EXPORT_COLUMNS`; ``assessed``: the study's
    :func:`~webapp.services.authenticity.assess`)."""

    assessed: Mapping[int, authenticity.Authenticity] = field(default_factory=dict)

    @property
    def extra_columns(self) -> tuple[str, ...]:
        """The authenticity columns."""
        return authenticity.EXPORT_COLUMNS

    def extra_cells(self, p: Participant) -> Mapping[str, Any]:
        """The participant's authenticity cells (those of no pages when none was answered)."""
        return self.assessed.get(p.id, authenticity.NO_PAGES).cells()


def all_formats() -> tuple[str, ...]:
    """Every export format: :data:`BASE_FORMATS`, then the registered types' other tables."""
    extra = [t.name for task in task_types() for t in task.tables if t.name != "long"]
    return BASE_FORMATS + tuple(dict.fromkeys(extra))


def _study_tables(study: Study) -> list[tuple[TaskType, ExportTable, list[TaskBlock]]]:
    """(type, table, its blocks) of every table of the study's task types."""
    scope = ExportScope(study)
    return [
        (task, table, blocks)
        for task in task_types()
        if (blocks := scope.blocks(task.name))
        for table in task.tables
    ]


def _long(scope: ExportScope) -> tuple[list[dict[str, Any]], list[str]]:
    """The study's ``long`` rows and columns: its type's own, then the scope's participant
    columns (the authenticity columns), whatever the type; their cells come with
    :meth:`ExportScope.who`, which every answer row starts with."""
    table, blocks = _long_table(scope.study)
    rows, columns = table.build(scope, blocks)
    return rows, [*columns, *(c for c in scope.extra_columns if c not in columns)]


def _long_table(study: Study) -> tuple[ExportTable, list[TaskBlock]]:
    """The study's ``long`` table: its types' highest-ranked one (ties: the first registered);
    a study whose types have none exports the lowest-ranked registered type's, empty."""
    found = [(t, blocks) for _, t, blocks in _study_tables(study) if t.name == "long"]
    if not found:
        every = [t for task in task_types() for t in task.tables if t.name == "long"]
        return min(every, key=lambda t: t.rank), []
    return max(found, key=lambda tb: tb[0].rank)


def formats_for(study: Study) -> list[str]:
    """The export formats that apply to a study (a type's ``items`` or ``pairs`` need its
    blocks)."""
    own = {t.name for _, t, _ in _study_tables(study)}
    return [f for f in all_formats() if f in BASE_FORMATS or f in own]


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


def describe_column(column: str) -> tuple[str, str, str]:
    """Return ``(type, meaning, allowed values)`` of an export column for the codebook.

    The shared :data:`CODEBOOK` first, then the task types' entries; a type's key ending in
    ``*`` names a family of columns (``format__*``: ``format__`` and a pair ID).
    """
    if column in CODEBOOK:
        return CODEBOOK[column]
    for task in task_types():
        if column in task.codebook:
            return task.codebook[column]
    for task in task_types():
        for key, (kind, meaning, allowed) in task.codebook.items():
            if key.endswith("*") and column.startswith(key[:-1]):
                return kind, meaning.format(column[len(key) - 1 :]), allowed
    return "str", "", ""


def _design_values(study: Study) -> dict[str, str]:
    """The values ``format`` (and ``format__PAIR``) and ``sequence`` take in this study."""
    from webapp.services.design import study_formats, study_sequences

    formats = study_formats(study_definition(study).tasks)
    if not formats:
        return {}
    sequences = "|".join(study_sequences(study_definition(study).tasks))
    return {"format": "|".join(formats), "sequence": sequences}


def wide_rows(scope: ExportScope) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per participant (the ``wide`` export) and its columns.

    The participant columns :data:`PARTICIPANT_COLUMNS`, then each task type's
    (``TaskType.wide``: per pair ``format__PAIR``, ``chose_target__PAIR``,
    ``wtp_premium_pct__PAIR``; per demographics question ``demo_QUESTION``; ...).
    """
    parts = [task.wide(scope, scope.blocks(task.name)) for task in task_types()]
    columns = [*PARTICIPANT_COLUMNS, *scope.extra_columns, *(c for cols, _ in parts for c in cols)]
    language = study_definition(scope.study).language
    query = select(Participant).where(Participant.study_id == scope.study.id)
    rows = []
    for p in db.session.scalars(scope.where(query.order_by(Participant.id))):
        row = {**scope.participant(p), "study_language": language, "excluded": int(p.excluded)}
        for _, cells in parts:
            row.update(cells(p))
        rows.append(row)
    return rows, with_test_column(columns, scope.include_test)


def page_time_rows(scope: ExportScope) -> list[dict[str, Any]]:
    """One row per page shown (the ``page-times`` export), by participant and page.

    Returns
    -------
    list of dict
        Keys :data:`PAGE_TIME_COLUMNS`; ``server_ms`` is empty for pages never submitted.
    """
    query = (
        select(PageVisit, Participant.code, Participant.is_test)
        .join(Participant, Participant.id == PageVisit.participant_id)
        .where(Participant.study_id == scope.study.id)
        .order_by(Participant.id, PageVisit.page_seq)
    )
    rows = []
    for visit, code, is_test in db.session.execute(scope.where(query)):
        server_ms = None
        if visit.submitted_at is not None:
            server_ms = round((visit.submitted_at - visit.shown_at).total_seconds() * 1000)
        rows.append(
            {
                "study_slug": scope.study.slug,
                "participant_id": code,
                "page_seq": visit.page_seq,
                "page": visit.page,
                "shown_at": iso_time(visit.shown_at),
                "submitted_at": iso_time(visit.submitted_at),
                "server_ms": server_ms,
                "rt_ms": visit.rt_ms,
                **authenticity.page_cells(visit),
                TEST_COLUMN: int(is_test),
            }
        )
    return rows


def codebook_rows(scope: ExportScope) -> list[dict[str, Any]]:
    """``table, column, type, meaning, allowed_values`` of every column of the study's tables:
    ``long``, its types' other tables, ``wide`` and ``page-times``."""
    tables = {"long": with_test_column(_long(scope)[1], scope.include_test)}
    for _, table, blocks in _study_tables(scope.study):
        if table.name != "long":
            tables.setdefault(table.name, table.build(scope, blocks)[1])
    tables["wide"] = wide_rows(scope)[1]
    tables["page-times"] = with_test_column(list(PAGE_TIME_COLUMNS), scope.include_test)
    design = _design_values(scope.study)
    rows = []
    for name, columns in tables.items():
        for column in columns:
            kind, meaning, allowed = describe_column(column)
            allowed = design.get(column.split("__", 1)[0], allowed)
            rows.append(
                {
                    "table": name,
                    "column": column,
                    "type": kind,
                    "meaning": meaning,
                    "allowed_values": allowed,
                }
            )
    return rows


def build_table(
    study: Study,
    fmt: str,
    *,
    include_test: bool = False,
    include_excluded: bool = False,
    include_platform_ids: bool = False,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Return the rows and columns of one export format (see :func:`all_formats`).

    The ``codebook`` lists every column of the study's tables (:func:`codebook_rows`).

    Raises
    ------
    ValueError
        Unknown format, a task type's table asked of a study without its blocks, or platform
        IDs asked for outside the ``long`` table.
    """
    if include_platform_ids and fmt != "long":
        raise ValueError("raw platform IDs are only available in the long export")
    scope = AssessedScope(
        study, include_test, include_excluded, include_platform_ids, authenticity.assess(study)
    )
    if fmt == "long":
        rows, columns = _long(scope)
        columns += PLATFORM_ID_COLUMNS if include_platform_ids else ()
        return rows, with_test_column(columns, include_test)
    if fmt == "wide":
        return wide_rows(scope)
    if fmt == "page-times":
        return page_time_rows(scope), with_test_column(list(PAGE_TIME_COLUMNS), include_test)
    if fmt == "codebook":
        return codebook_rows(scope), ["table", "column", "type", "meaning", "allowed_values"]
    found = [(t, blocks) for _, t, blocks in _study_tables(study) if t.name == fmt]
    if found:
        table, blocks = found[0]
        return table.build(scope, blocks)
    owners = [task.name for task in task_types() if fmt in {t.name for t in task.tables}]
    if owners:
        raise ValueError(f"the {fmt} export is for studies with a {' or '.join(owners)} block")
    raise ValueError(f"unknown export format {fmt!r}; use one of {list(all_formats())}")


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
        One of :func:`all_formats`.
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
    path.parent.mkdir(parents=True, exist_ok=True)  # `--out results/long.csv` in a fresh folder
    if path.suffix == ".parquet":
        return write_parquet(rows, columns, path)
    with path.open("w", newline="", encoding="utf-8") as fh:
        return write_csv(rows, columns, fh)
