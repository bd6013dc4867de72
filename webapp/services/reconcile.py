"""Reconcile statuses with the recruiters' exports (Prolific submissions, MTurk assignments).

Recruiters know things the platform cannot: who returned a submission, who timed out, who was
approved or rejected. An import records the recruiter's status on each participant, applies
RETURNED and TIMED-OUT to people still marked as started (releasing what they held), and flags
mismatches both ways: completed here but returned, timed out or absent there; submitted there
but not completed here (or never seen here). Platform IDs are matched in their canonical form
(:func:`webapp.services.payments.normalise_platform_id`), and a participant missing from the
file loses the status of an earlier import: bonuses are paid only to people the latest file
lists (:func:`webapp.services.payments.bonus_plan`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from webapp.extensions import db
from webapp.models import Participant, ParticipantStatus, Platform, PlatformIdentity, Study
from webapp.text_rules import forbidden_character
from webapp.validation import column_length

# Prolific's submission statuses; MTurk's AssignmentStatus values are mapped onto the same words.
SUBMITTED = frozenset({"APPROVED", "AWAITING REVIEW", "REJECTED", "SUBMITTED"})
MTURK_STATUS = {"submitted": "SUBMITTED", "approved": "APPROVED", "rejected": "REJECTED"}
_COLUMNS = {
    Platform.prolific: ("participant id", "status"),
    Platform.mturk: ("workerid", "assignmentstatus"),
}


# A Prolific export of 10,000 submissions is about 2 MB; anything far beyond is not an export.
MAX_BYTES = 8 * 1024 * 1024
# Longer IDs or statuses than the columns they are compared with or stored in are not from a
# recruiter's export (and a status over Participant.platform_status failed on PostgreSQL).
_ID_MAX = column_length(PlatformIdentity.external_id)
_STATUS_MAX = column_length(Participant.platform_status)


class ReconcileError(ValueError):
    """The uploaded file is not a recognisable export; the message says why (and where).

    Messages are short and quote nothing long: the console shows them in a flash message.
    """


def _quote(value: str, limit: int = 40) -> str:
    """``repr`` of ``value``, shortened: a message never carries a whole field."""
    return repr(value if len(value) <= limit else f"{value[: limit - 3]}...")


def read_export(platform: Platform, data: bytes) -> dict[str, str]:
    """:func:`read_statuses` of an uploaded file's bytes, bounded and decoded.

    Raises
    ------
    ReconcileError
        Over :data:`MAX_BYTES`, not UTF-8 text, or anything :func:`read_statuses` refuses.
    """
    if len(data) > MAX_BYTES:
        raise ReconcileError(
            f"the file is larger than {MAX_BYTES:,} bytes; a recruiter's export is far smaller"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ReconcileError(
            f"line {line} is not UTF-8 text; upload the CSV file exactly as the recruiter "
            "exported it"
        ) from None
    return read_statuses(platform, io.StringIO(text, newline=""))


@dataclass
class ReconcileReport:
    """What an import changed and which records disagree."""

    platform: str
    rows: int = 0
    matched: int = 0
    status_changes: dict[str, int] = field(default_factory=dict)
    mismatches: list[tuple[str, str]] = field(default_factory=list)  # (participant, note)

    def as_dict(self) -> dict[str, object]:
        """JSON-serialisable form (for the audit log)."""
        return {
            "platform": self.platform,
            "rows": self.rows,
            "matched": self.matched,
            "status_changes": self.status_changes,
            "mismatches": len(self.mismatches),
        }


def _norm(name: str) -> str:
    return " ".join(name.strip().lower().replace("_", " ").split())


def read_statuses(platform: Platform, fh: IO[str]) -> dict[str, str]:
    """Read a recruiter export into ``{platform ID: STATUS}``.

    Parameters
    ----------
    platform : Platform
        ``prolific`` (submissions export: ``Participant id``, ``Status``) or ``mturk`` (batch
        results or assignment list: ``WorkerId``, ``AssignmentStatus``).
    fh : text file

    Returns
    -------
    dict
        Upper-case statuses: ``APPROVED``, ``AWAITING REVIEW``, ``REJECTED``, ``RETURNED``,
        ``TIMED-OUT``, ``SUBMITTED``, … (the last row wins for repeated IDs).

    Raises
    ------
    ReconcileError
        A required column is missing, the CSV is malformed (a field over
        ``csv.field_size_limit()`` included), or an ID or status has control characters or is
        longer than any real one; the message names the line.
    """
    reader = csv.DictReader(fh)
    try:
        return _read_rows(platform, reader)
    except csv.Error as exc:
        raise ReconcileError(
            f"near line {reader.line_num + 1}: not a readable CSV file ({str(exc)[:100]})"
        ) from None


def _read_rows(platform: Platform, reader: csv.DictReader[str]) -> dict[str, str]:
    names = {_norm(n): n for n in (reader.fieldnames or []) if n}
    id_col, status_col = _COLUMNS[platform]
    for needed in (id_col, status_col):
        if _norm(needed) not in names:
            found = [_quote(n) for n in list(names.values())[:12]]
            more = ", ..." if len(names) > 12 else ""
            raise ReconcileError(
                f"the {platform.value} file has no column {needed!r} "
                f"(found: [{', '.join(found)}{more}])"
            )
    out: dict[str, str] = {}
    for row in reader:
        pid = (row.get(names[id_col]) or "").strip()
        status = (row.get(names[status_col]) or "").strip()
        if not pid or not status:
            continue
        for value, what, limit in ((pid, id_col, _ID_MAX), (status, status_col, _STATUS_MAX)):
            if len(value) > limit or forbidden_character(value) is not None:
                raise ReconcileError(
                    f"line {reader.line_num}: {_quote(value)} is not a {what} (more than "
                    f"{limit} characters, or control characters)"
                )
        if platform is Platform.mturk:
            status = MTURK_STATUS.get(status.lower(), status.upper())
        out[pid] = status.upper()
    return out


def reconcile(
    study: Study,
    platform: Platform,
    statuses: Mapping[str, str],
    actor: object,
    *,
    now: datetime,
) -> ReconcileReport:
    """Apply recruiter statuses to a study's participants and commit (audited).

    Parameters
    ----------
    study : Study
    platform : Platform
    statuses : Mapping
        From :func:`read_statuses`.
    actor : Researcher or str
        For the audit log.
    now : datetime
        When returned / timed-out sessions end.

    Returns
    -------
    ReconcileReport
    """
    from webapp.services import audit
    from webapp.services.payments import normalise_platform_id
    from webapp.services.researchers import release_participant

    canonical: dict[str, str] = {}
    as_written: dict[str, str] = {}  # canonical ID -> as in the file (for the report)
    for written, status in statuses.items():
        key = normalise_platform_id(platform, written)
        canonical[key], as_written[key] = status, written
    statuses = canonical
    report = ReconcileReport(platform.value, rows=len(statuses))
    people: Iterable[Participant] = db.session.scalars(
        select(Participant)
        .where(
            Participant.study_id == study.id,
            Participant.platform == platform,
            Participant.is_test.is_(False),
        )
        .options(selectinload(Participant.identity))
    )
    seen: set[str] = set()
    for p in people:
        raw = p.identity.external_id if p.identity else None
        external = normalise_platform_id(platform, raw) if raw is not None else None
        theirs = statuses.get(external or "")
        note = None
        if theirs is None:
            p.reconcile_note = None
            p.platform_status = None  # not in the latest file: not reconciled (not paid)
            if p.status is ParticipantStatus.completed:
                note = f"completed here, not in the {platform.value} file"
        else:
            seen.add(external or "")
            report.matched += 1
            p.platform_status = theirs[:20]
            target = {
                "RETURNED": ParticipantStatus.returned,
                "TIMED-OUT": ParticipantStatus.timed_out,
            }.get(theirs)
            if target is not None and p.status is ParticipantStatus.started:
                release_participant(p, target, now)
                report.status_changes[target.value] = report.status_changes.get(target.value, 0) + 1
            elif target is not None and p.status is ParticipantStatus.completed:
                note = f"completed here, {theirs} on {platform.value}"
            elif theirs in SUBMITTED and p.status not in (
                ParticipantStatus.completed,
                ParticipantStatus.screened_out,
            ):
                note = f"{theirs} on {platform.value}, {p.status.value} here"
        p.reconcile_note = note
        if note:
            report.mismatches.append((p.code, note))
    for external, theirs in sorted(statuses.items()):
        if external not in seen and theirs in SUBMITTED:
            # A raw platform ID is the only handle on someone who never reached us.
            report.mismatches.append(
                (as_written[external], f"{theirs} on {platform.value}, never arrived here")
            )
    audit.record(actor, "reconcile.import", study=study, detail=report.as_dict(), commit=False)
    db.session.commit()
    return report
