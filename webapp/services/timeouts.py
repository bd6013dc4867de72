"""Abandoned sessions: mark participants idle beyond the study's time limit as timed out.

Prolific and MTurk time a submission out when it exceeds the study's maximum time; a person
who closed the tab stays ``started`` here until someone notices. The sweep does what the
researcher's "timed out" action does (the status frees the sequence slot; annotation
reservations go back to the pool) for everyone idle past the limit, and records one audit
event per sweep naming who was marked, so nothing happens silently.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select

from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import Participant, ParticipantStatus, Study
from webapp.services import audit

# Without ``recruitment.time_limit_minutes`` the limit is this many times the study's
# ``estimated_minutes`` (Prolific, too, derives its maximum time from the estimate).
DEFAULT_LIMIT_FACTOR = 3
SYSTEM_ACTOR = "system:timeout"


def time_limit(study: Study) -> timedelta:
    """How long a started participant may go without a page view before timing out:
    ``recruitment.time_limit_minutes``, else :data:`DEFAULT_LIMIT_FACTOR` times the study's
    ``estimated_minutes``."""
    definition = study_definition(study)
    minutes = definition.recruitment.time_limit_minutes
    if minutes is None:
        minutes = DEFAULT_LIMIT_FACTOR * definition.estimated_minutes
    return timedelta(minutes=minutes)


def sweep(study: Study, now: datetime, actor: str = SYSTEM_ACTOR) -> list[str]:
    """Time out every started participant not seen within the study's limit; commit.

    Test participants are left alone (an abandoned bot or preview counts for nothing). Rows are
    locked (``FOR UPDATE``) so a participant submitting a page at this moment is either
    marked before their submission (which then finds them timed out) or after it (and their
    fresh ``last_seen_at`` keeps them in).

    Returns
    -------
    list of str
        The pseudonyms marked timed out (empty: nothing to do, nothing written).
    """
    from webapp.services.allocation import end_participant

    cutoff = now - time_limit(study)
    people = list(
        db.session.scalars(
            select(Participant)
            .where(
                Participant.study_id == study.id,
                Participant.status == ParticipantStatus.started,
                Participant.is_test.is_(False),
                Participant.last_seen_at < cutoff,
            )
            .order_by(Participant.id)
            .with_for_update()
        )
    )
    if not people:
        return []
    for p in people:
        end_participant(p, ParticipantStatus.timed_out, now)
    codes = [p.code for p in people]
    audit.record(
        actor,
        "participant.timeout",
        study=study,
        detail={
            "participants": codes,
            "limit_minutes": round(time_limit(study).total_seconds() / 60, 1),
        },
        commit=False,
    )
    db.session.commit()
    return codes
