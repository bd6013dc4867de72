"""Export responses in the documented tidy formats (``docs/export.md``)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from webapp.extensions import db
from webapp.models import ChoiceResponse, Participant, ParticipantStatus, Study

LONG_CHOICE_COLUMNS: tuple[str, ...] = (
    "study_slug",
    "participant_id",
    "platform",
    "status",
    "sequence",
    "seed",
    "trial_index",
    "pair_id",
    "product_type",
    "format",
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
)
PLATFORM_ID_COLUMNS = ("platform_participant_id", "platform_study_id", "platform_session_id")
# OWASP "CSV injection": a leading tab or carriage return also makes spreadsheets run a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _has_attention_check(study: Study) -> bool:
    return any(b["type"] == "attention_check" for b in study.definition["tasks"])


def choice_rows(
    study: Study, *, include_platform_ids: bool = False, include_preview: bool = False
) -> list[dict[str, Any]]:
    """Return one row per product-choice trial (the ``long`` export).

    Parameters
    ----------
    study : Study
    include_platform_ids : bool
        Add the raw recruiter IDs (for payments); off by default.
    include_preview : bool
        Keep researcher preview sessions.

    Returns
    -------
    list of dict
        Keys :data:`LONG_CHOICE_COLUMNS` (plus :data:`PLATFORM_ID_COLUMNS` on request),
        ordered by participant and ``trial_index``.
    """
    product_types = {
        p["id"]: p["product_type"]
        for b in study.definition["tasks"]
        if b["type"] == "product_choice"
        for p in b["pairs"]
    }
    with_attention = _has_attention_check(study)
    query = (
        select(Participant)
        .where(Participant.study_id == study.id)
        .options(selectinload(Participant.choices), selectinload(Participant.identity))
        .order_by(Participant.id)
    )
    if not include_preview:
        query = query.where(Participant.is_preview.is_(False))
    rows: list[dict[str, Any]] = []
    for p in db.session.scalars(query):
        duration = None
        if p.status is ParticipantStatus.completed and p.finished_at is not None:
            duration = round((p.finished_at - p.started_at).total_seconds(), 3)
        base = {
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
        }
        if include_platform_ids:
            ident = p.identity
            base["platform_participant_id"] = ident.external_id if ident else None
            base["platform_study_id"] = ident.external_study_id if ident else None
            base["platform_session_id"] = ident.external_session_id if ident else None
        for c in p.choices:
            rows.append({**base, **_choice_cells(c, product_types)})
    return rows


def _choice_cells(c: ChoiceResponse, product_types: Mapping[str, str]) -> dict[str, Any]:
    return {
        "trial_index": c.trial_index,
        "pair_id": c.pair_id,
        "product_type": product_types.get(c.pair_id),
        "format": c.format,
        "target_side": c.target_side,
        "chosen_side": c.chosen_side,
        "chose_target": int(c.chose_target),
        "other_price_usd": c.other_price_usd,
        "wtp_premium_usd": c.wtp_premium_usd,
        "wtp_premium_pct": c.wtp_premium_pct,
        "rt_ms": c.rt_ms,
        "wtp_rt_ms": c.wtp_rt_ms,
        "server_rt_ms": c.server_rt_ms,
        "answered_at": _iso(c.answered_at),
    }


def _cell(value: Any) -> Any:
    """Empty for missing values; text that a spreadsheet would run as a formula is quoted."""
    if value is None:
        return ""
    if isinstance(value, str):
        quoted = "'" + value if value.startswith(_FORMULA_START) else value
        # The writer quotes fields with "\n" but not a lone "\r", which ends the row in
        # spreadsheets and other readers: store it as a newline.
        return quoted.replace("\r\n", "\n").replace("\r", "\n")
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
    include_preview: bool = False,
) -> int:
    """Write the ``long`` export of a product-choice study to a CSV file.

    Returns
    -------
    int
        Number of rows written.
    """
    rows = choice_rows(
        study, include_platform_ids=include_platform_ids, include_preview=include_preview
    )
    columns = list(LONG_CHOICE_COLUMNS)
    if include_platform_ids:
        columns += PLATFORM_ID_COLUMNS
    with Path(out_path).open("w", newline="", encoding="utf-8") as fh:
        return write_csv(rows, columns, fh)
