"""The bonus ledger's state machine, for every way a bonus is paid: a payment file the
researcher uploads, or a recruiter's API.

A ledger row (:class:`~webapp.models.BonusPayment`) moves through these ``platform_state``
values; the platform's id for the payment is ``platform_payment_id``:

============  ==========================================================================
``None``      issued, nothing sent yet: the API may pay it, or a payment file may take it
``filed``     written to a payment file for the researcher to upload (``sent_at``: when);
              the API never pays it. The platform listing the bonus makes it ``paid``; only
              the researcher saying the file was not used (an audited action,
              :func:`webapp.services.payments.file_not_used`, refused until
              :data:`CONFIRM_AFTER` after ``sent_at``) makes it new again
``claimed``   a run is setting it up on Prolific (a set-up pays nothing by itself)
``set_up``    part of a Prolific bulk bonus set-up, whose pay call has not been sent
``paying``    the pay call is being sent, or was sent and its outcome is unknown (never sent
              again; on Prolific only ``settle --release`` by the researcher frees it)
``sent``      Prolific accepted the pay call (it pays asynchronously): not yet seen paid
``paid``      the platform lists the payment (``paid_at``); never sent again
``refused``   the platform refused this person's bonus (``platform_note`` says why); never
              sent again by ``bonus``; ``settle --retry-refused`` makes it new again
============  ==========================================================================

Every change of state is one UPDATE whose WHERE names the row's current state and the claim
token of the run that holds it (a compare-and-set), committed at once. A run holds rows from
:meth:`Claim.take` on; rows whose run died are taken over :data:`CLAIM_EXPIRES` later. A run
whose claim was taken over meanwhile (it stalled longer than that) finds its UPDATE changes
fewer rows than it holds, rolls back and stops with :class:`ClaimLost`: it pays nothing. The
database decides who holds a row, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Collection, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update

from webapp.extensions import db
from webapp.models import BonusPayment
from webapp.recruit.errors import RecruitError

NEW: str | None = None
FILED = "filed"
CLAIMED = "claimed"
SET_UP = "set_up"
PAYING = "paying"
SENT = "sent"
PAID = "paid"
REFUSED = "refused"
# How each state reads in the console's ledger and the command's output.
LABELS: dict[str | None, str] = {
    NEW: "issued, not yet sent",
    FILED: "sent by file (never paid through the API)",
    CLAIMED: "being set up through the API",
    SET_UP: "set up on the platform, not paid",
    PAYING: "pay call sent, outcome unknown",
    SENT: "accepted by the platform, not yet seen paid",
    PAID: "paid",
    REFUSED: "refused by the platform",
}
# A run that stops answering (killed, its machine gone) leaves its rows claimed; after this
# another run may take them. Far longer than one run's calls (five attempts of at most 30 s).
CLAIM_EXPIRES = timedelta(hours=1)
# Prolific pays an accepted pay call, and a bulk bonus pasted from a payment file, "in the
# following minutes": a payment not seen paid after this is reported as not settled, and a file
# cannot be said unused before this has passed since it was written.
CONFIRM_AFTER = timedelta(hours=1)
# A pay call whose outcome is unknown and whose payment the platform still does not list after
# this long is reported for the researcher to check; Prolific's pay call is not idempotent and
# offers no way to read its own state, so only the researcher may release it to be sent again.
SETTLE_AFTER = timedelta(hours=24)
NOTE_MAX = 300
_UNCHANGED = object()


def clock() -> datetime:
    """The current time for claims and settling, in UTC (from ``time.time``, which tests move
    to let an hour pass)."""
    return datetime.fromtimestamp(time.time(), UTC)


class ClaimLost(RecruitError):
    """Another run took over rows this run held (it stalled past the expiry); nothing more
    was done by this run."""


def _in_state(states: Iterable[str | None]) -> Any:
    states = list(states)
    conds = [BonusPayment.platform_state.is_(None) for s in states if s is None]
    named = [s for s in states if s is not None]
    if named:
        conds.append(BonusPayment.platform_state.in_(named))
    return or_(*conds)


def note(text: str) -> str:
    """``text`` cut to fit :attr:`BonusPayment.platform_note`."""
    return text if len(text) <= NOTE_MAX else text[: NOTE_MAX - 3] + "..."


class Claim:
    """One run's hold on ledger rows (a random token the rows carry while it holds them)."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(16)
        # Rows this run itself moved, by the state it moved them to: a run reports what it
        # did, never what another run did meanwhile.
        self.moved: dict[str | None, set[int]] = {}

    def take(
        self, ids: Collection[int], states: Iterable[str | None], *, to: Any = _UNCHANGED
    ) -> set[int]:
        """Hold the rows of ``ids`` that are in one of ``states`` and held by no live run
        (moving them to state ``to`` if given).

        One conditional UPDATE, committed. Returns the ids this run holds now (also those it
        held already).
        """
        ids = set(ids)
        if not ids:
            return set()
        now = clock()
        free = or_(
            BonusPayment.claim_token.is_(None),
            BonusPayment.claim_token == self.token,
            BonusPayment.claimed_at < now - CLAIM_EXPIRES,
        )
        db.session.execute(
            update(BonusPayment)
            .where(BonusPayment.id.in_(ids), _in_state(states), free)
            .values(
                claim_token=self.token,
                claimed_at=now,
                **({} if to is _UNCHANGED else {"platform_state": to}),
            )
            .execution_options(synchronize_session=False)
        )
        db.session.commit()
        held = set(
            db.session.scalars(
                select(BonusPayment.id).where(
                    BonusPayment.id.in_(ids), BonusPayment.claim_token == self.token
                )
            )
        )
        if to is not _UNCHANGED:
            self.moved.setdefault(to, set()).update(held)
        return held

    def move(
        self,
        ids: Collection[int],
        frm: str | None,
        to: str | None,
        *,
        keep: bool = True,
        **values: Any,
    ) -> None:
        """Move held rows from state ``frm`` to ``to`` (and set ``values``): all or none.

        ``keep=False`` gives the claim up in the same statement (a row that is new again, or
        waits for the platform, is then free for any run).

        Raises
        ------
        ClaimLost
            Some row is no longer held by this run or no longer in ``frm``; nothing changed.
        """
        ids = set(ids)
        if not ids:
            return
        changes: dict[str, Any] = {"platform_state": to, **values}
        if not keep:
            changes.update(claim_token=None, claimed_at=None)
        state = BonusPayment.platform_state
        result = db.session.execute(
            update(BonusPayment)
            .where(
                BonusPayment.id.in_(ids),
                BonusPayment.claim_token == self.token,
                state.is_(None) if frm is None else state == frm,
            )
            .values(**changes)
            .execution_options(synchronize_session=False)
        )
        if int(result.rowcount or 0) != len(ids):
            db.session.rollback()
            raise ClaimLost(
                f"{len(ids)} bonus(es) were taken over by another run while this one waited "
                "(it stalled past the claim's expiry); this run changed and paid nothing more"
            )
        db.session.commit()
        if to != frm:
            self.moved.setdefault(to, set()).update(ids)

    def release(self, ids: Collection[int], state: str | None, **values: Any) -> None:
        """Give held rows up, leaving them in (or returning them to) ``state``."""
        held = db.session.scalars(
            select(BonusPayment).where(
                BonusPayment.id.in_(set(ids)), BonusPayment.claim_token == self.token
            )
        ).all()
        for frm in {b.platform_state for b in held}:
            same = [b.id for b in held if b.platform_state == frm]
            self.move(same, frm, state, keep=False, **values)


def matched_amounts(
    rows: Iterable[BonusPayment], paid: dict[int, list[float]], already: dict[int, list[int]]
) -> list[BonusPayment]:
    """Rows whose amount the platform lists as paid to their participant.

    ``paid`` maps a participant to the amounts the platform lists (cents); ``already`` to the
    amounts of rows already recorded as paid. Each listed amount confirms one row at most, so
    two rows of the same amount need two listed payments.
    """
    left = {pid: [round(a) for a in amounts] for pid, amounts in paid.items()}
    for pid, amounts in already.items():
        for amount in amounts:
            if amount in left.get(pid, []):
                left[pid].remove(amount)
    out = []
    for b in rows:
        pool = left.get(b.participant_id, [])
        if b.amount_cents in pool:
            pool.remove(b.amount_cents)
            out.append(b)
    return out
