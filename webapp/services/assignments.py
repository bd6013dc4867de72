"""Assignments of MTurk ExternalQuestion sessions: recorded per visit, settled on completion.

A worker ID is no secret (it is on every forum post and bonus e-mail), so the assignment a
session arrived with cannot be a property of the worker: each visit through the study link
records its assignment here and gets a page URL bound to it (webapp.services.flow tokens).
The completion form of a URL posts that URL's assignment — the worker's own current HIT —
and the assignment of the visit that *finishes* the study is what bonuses and exports use.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from webapp.extensions import db
from webapp.models import MTurkAssignment, Participant, PlatformIdentity, Study


def record_assignment(
    participant: Participant,
    *,
    assignment_id: str,
    hit_id: str,
    return_url: str,
    now: datetime,
) -> MTurkAssignment:
    """Add (or touch) the assignment a visit of ``participant`` arrived with; flush, no commit.

    An assignment ID seen before keeps its first HIT and submit host (a later link cannot
    redirect where a known assignment is submitted); only ``last_seen_at`` moves.
    Concurrent first visits with the same assignment insert it once (the unique key).
    """

    def existing() -> MTurkAssignment | None:
        return db.session.scalar(
            select(MTurkAssignment).where(
                MTurkAssignment.participant_id == participant.id,
                MTurkAssignment.assignment_id == assignment_id,
            )
        )

    db.session.flush()  # pending rows of the caller fail (or not) here, not in our savepoint
    row = existing()
    if row is None:
        row = MTurkAssignment(
            participant_id=participant.id,
            assignment_id=assignment_id,
            hit_id=hit_id,
            return_url=return_url,
            first_seen_at=now,
            last_seen_at=now,
        )
        try:
            with db.session.begin_nested():
                db.session.add(row)
        except IntegrityError:  # the same visit twice at once: the other insert won
            row = existing()
            assert row is not None
    row.last_seen_at = now
    db.session.flush()
    return row


def current_assignment(participant: Participant) -> MTurkAssignment | None:
    """The assignment the study was finished with, else the latest one seen (history order)."""
    rows = list(
        db.session.scalars(
            select(MTurkAssignment)
            .where(MTurkAssignment.participant_id == participant.id)
            .order_by(MTurkAssignment.last_seen_at, MTurkAssignment.id)
        )
    )
    settled = [r for r in rows if r.submitted_at is not None]
    if settled:
        return settled[-1]
    if rows:
        return rows[-1]
    ident = participant.identity  # a session from before the history (not migrated): its own
    if ident is None or not (ident.external_session_id and ident.return_url):
        return None
    return MTurkAssignment(
        participant_id=participant.id,
        assignment_id=ident.external_session_id,
        hit_id=ident.external_study_id or "",
        return_url=ident.return_url,
    )


def settle_assignment(
    participant: Participant, assignment: MTurkAssignment | None, now: datetime
) -> None:
    """Record the assignment of the visit that completed the study; commit.

    Called once the submission that completes an MTurk session is saved. That visit's
    assignment becomes the identity's (bonus files, exports and reconciliation read it there)
    and is marked in the history. Only the first completion settles it: a visit through
    another (possibly planted) assignment afterwards shows its own form but changes nothing.
    The two rows it writes are committed together.
    """
    ident = participant.identity
    if ident is None:
        return
    already = db.session.scalar(
        select(MTurkAssignment.id).where(
            MTurkAssignment.participant_id == participant.id,
            MTurkAssignment.submitted_at.is_not(None),
        )
    )
    if already is not None:
        return
    target = assignment or current_assignment(participant)
    if target is None or target.id is None:
        return
    target.submitted_at = now
    ident.external_session_id = target.assignment_id
    ident.external_study_id = target.hit_id
    ident.return_url = target.return_url
    db.session.commit()


@dataclass(frozen=True)
class AssignmentRow:
    """One line of a study's assignment history (for the researcher; raw MTurk IDs)."""

    participant_code: str
    worker_id: str
    assignment_id: str
    hit_id: str
    submit_host: str
    first_seen_at: datetime
    last_seen_at: datetime
    finished_with: bool


def assignment_history(study: Study) -> list[AssignmentRow]:
    """Every assignment the study's MTurk workers arrived with, by worker then first visit.

    ``finished_with`` marks the one each worker completed the study through (the one that
    is paid); the others are earlier HITs, or assignments someone else brought with the
    worker's ID.
    """
    rows = db.session.execute(
        select(MTurkAssignment, Participant.code, PlatformIdentity.external_id)
        .join(Participant, Participant.id == MTurkAssignment.participant_id)
        .join(PlatformIdentity, PlatformIdentity.participant_id == Participant.id)
        .where(Participant.study_id == study.id)
        .order_by(PlatformIdentity.external_id, MTurkAssignment.first_seen_at, MTurkAssignment.id)
    )
    return [
        AssignmentRow(
            participant_code=code,
            worker_id=worker,
            assignment_id=a.assignment_id,
            hit_id=a.hit_id,
            submit_host=a.return_url,
            first_seen_at=a.first_seen_at,
            last_seen_at=a.last_seen_at,
            finished_with=a.submitted_at is not None,
        )
        for a, code, worker in rows
    ]
