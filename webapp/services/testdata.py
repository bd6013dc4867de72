"""A study's test participants (bots and researcher previews): how many, and clearing them.

Test participants are left out of every count, bonus, payment file and default export (see
:mod:`webapp.services.testmark` for how they are made). Clearing deletes them and every row that
refers to them, and nothing else: each statement names only participants marked ``is_test``
of this one study, so a real participant's answers or ledger rows are never touched.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select

from webapp.extensions import db
from webapp.models import (
    Annotation,
    BonusPayment,
    ChoiceResponse,
    MTurkAssignment,
    PageVisit,
    Participant,
    PlatformIdentity,
    QualificationResult,
    QuizAttempt,
    Researcher,
    Study,
    TaskResponse,
)
from webapp.services import audit

# Ledger states in which a payment may be on its way (webapp.recruit.ledger): a row in one of
# them is a run's business until it settles, so clearing waits.
_IN_FLIGHT = ("claimed", "set_up", "paying", "sent")
# Every table with rows of one participant, children first (foreign keys point at participant).
_ROWS_OF = (
    ("annotations", Annotation),
    ("choices", ChoiceResponse),
    ("quiz_attempts", QuizAttempt),
    ("task_responses", TaskResponse),
    ("page_visits", PageVisit),
    ("qualification_results", QualificationResult),
    ("mturk_assignments", MTurkAssignment),
    ("ledger_rows", BonusPayment),
    ("identities", PlatformIdentity),
)


class ClearRefused(Exception):
    """Clearing would touch a payment that is on its way; nothing was deleted."""


def count_test_participants(study: Study) -> dict[str, int]:
    """Test participants of the study: ``participants`` in all, of which ``previews``."""
    total, previews = db.session.execute(
        select(func.count(), func.count().filter(Participant.is_preview.is_(True))).where(
            Participant.study_id == study.id, Participant.is_test.is_(True)
        )
    ).one()
    return {"participants": total, "previews": previews}


def clear_test_data(study: Study, *, actor: Researcher | str, now: datetime) -> dict[str, int]:
    """Delete the study's test participants and all their rows, audited, in one transaction.

    The test participants' rows are locked first, so a bot answering a page meanwhile either
    finishes before (and its answer is deleted too) or finds its session gone. Their bonus
    ledger rows are deleted as well, and the audit row keeps what each said (a test participant
    is never paid by the platform, but the record of a row is not lost).

    Parameters
    ----------
    study : Study
    actor : Researcher or str
        Who clears (a researcher, or ``"cli"``), for the audit log.
    now : datetime
        Recorded in the audit detail.

    Returns
    -------
    dict
        Rows deleted per kind: ``participants`` and each key of ``_ROWS_OF``.

    Raises
    ------
    ClearRefused
        A test participant has a ledger row whose payment is in flight; nothing is deleted.
    """
    ids = list(
        db.session.scalars(
            select(Participant.id)
            .where(Participant.study_id == study.id, Participant.is_test.is_(True))
            .order_by(Participant.id)
            .with_for_update()
        )
    )
    ledger = _ledger_of(ids)
    busy = [row for row in ledger if row["state"] in _IN_FLIGHT]
    if busy:
        db.session.rollback()
        codes = ", ".join(sorted({row["participant_id"] for row in busy}))
        raise ClearRefused(
            f"{len(busy)} bonus payment(s) of test participants are on their way ({codes}); "
            "settle them first (`framelab recruit settle`). Nothing was deleted."
        )
    counts = {"participants": len(ids)}
    for name, model in _ROWS_OF:
        result = db.session.execute(
            delete(model)
            .where(model.participant_id.in_(ids))
            .execution_options(synchronize_session=False)
        )
        counts[name] = result.rowcount
    db.session.execute(
        delete(Participant)
        .where(Participant.id.in_(ids), Participant.is_test.is_(True))
        .execution_options(synchronize_session=False)
    )
    detail: dict[str, Any] = {"counts": counts, "at": now.isoformat()}
    if ledger:
        detail["ledger"] = ledger
    audit.record(actor, "study.clear_test_data", study=study, detail=detail, commit=False)
    db.session.commit()
    return counts


def _ledger_of(ids: list[int]) -> list[dict[str, Any]]:
    """The ledger rows of these participants, as the audit row keeps them."""
    rows = db.session.execute(
        select(BonusPayment, Participant.code)
        .join(Participant, Participant.id == BonusPayment.participant_id)
        .where(BonusPayment.participant_id.in_(ids))
        .order_by(BonusPayment.id)
    )
    return [
        {
            "participant_id": code,
            "rule": b.rule,
            "amount_cents": b.amount_cents,
            "platform": b.platform.value,
            "state": b.platform_state,
            "request_token": b.request_token,
        }
        for b, code in rows
    ]
