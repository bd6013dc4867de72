"""Per-client enrolment limit: made-up recruiter IDs sent from one place cannot fill a study.

Recruiter IDs are checked only for their format (a Prolific ID is any 24 hex digits), so anyone
can invent thousands. Each invented ID that enrols costs its sender a consent form; this limit
makes it cost an address too: one client network may enrol at most ``per_client`` people in a
study within ``window``. A client is its address's network (an IPv4 address, or an IPv6 /64,
which one household or server gets whole), stored only as a keyed hash
(:func:`webapp.services.accounts.client_hash`), and rows older than the window are deleted as
new ones come in.

Like the login limiter, the count is kept in the database the web processes share, and an
enrolment is counted (under a lock on the study and client) *before* the participant is
created, so parallel requests cannot all pass a check made before any of them was recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, select

from webapp.extensions import db
from webapp.models import EnrolmentAttempt, Study
from webapp.services.accounts import lock_keys


@dataclass(frozen=True)
class EnrolLimit:
    """At most ``per_client`` enrolments per client network and study within ``window``
    (``per_client`` 0: no limit)."""

    per_client: int
    window: timedelta


@dataclass(frozen=True)
class Admission:
    """Whether a client may enrol someone now, and if not in how many seconds."""

    allowed: bool
    retry_after_s: int = 0


def admit(study: Study, client: str, limit: EnrolLimit, now: datetime) -> Admission:
    """Count an enrolment of ``client`` in ``study`` unless its limit is reached; commit.

    Parameters
    ----------
    study : Study
    client : str
        :func:`webapp.services.accounts.client_hash` of the remote address.
    limit : EnrolLimit
    now : datetime

    Returns
    -------
    Admission
        ``allowed`` when the enrolment was counted (the participant may be created);
        otherwise ``retry_after_s``, when the oldest counted enrolment leaves the window.
    """
    if limit.per_client <= 0:
        return Admission(True)
    lock_keys(f"enrol:{study.id}:{client}")
    since = now - limit.window
    n, oldest = db.session.execute(
        select(func.count(), func.min(EnrolmentAttempt.created_at)).where(
            EnrolmentAttempt.study_id == study.id,
            EnrolmentAttempt.client_hash == client,
            EnrolmentAttempt.created_at >= since,
        )
    ).one()
    if n >= limit.per_client:
        db.session.rollback()
        if oldest.tzinfo is None:  # SQLite returns naive UTC from an aggregate
            oldest = oldest.replace(tzinfo=UTC)
        retry = int((oldest + limit.window - now).total_seconds()) + 1
        return Admission(False, max(retry, 1))
    db.session.add(EnrolmentAttempt(study_id=study.id, client_hash=client, created_at=now))
    db.session.execute(
        delete(EnrolmentAttempt).where(
            EnrolmentAttempt.study_id == study.id, EnrolmentAttempt.created_at < since
        )
    )
    db.session.commit()
    return Admission(True)
