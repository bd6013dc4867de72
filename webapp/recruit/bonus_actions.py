"""A recruiter's bonus actions: what would be paid now, paying it once, settling what is open.

Mixed into :class:`webapp.recruit.base.Recruiter`; the ledger's states and claims are
:mod:`webapp.recruit.ledger`'s, the platform's calls the platform module's (``_pay``,
``_settle``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from webapp.extensions import db
from webapp.models import BonusPayment, Participant, PlatformIdentity, utcnow
from webapp.recruit import ledger
from webapp.recruit.errors import RecruitError
from webapp.recruit.results import Report, cents
from webapp.services.entry import canonical_spelling

if TYPE_CHECKING:
    from webapp.recruit.base import Recruiter

Row = tuple[BonusPayment, PlatformIdentity]
# Rows that the next pay step would send (a set-up alone pays nothing).
TO_PAY = (ledger.NEW, ledger.CLAIMED, ledger.SET_UP)


def payable(status: str | None) -> bool:
    """Whether a platform status allows a bonus now (submitted or approved; not rejected,
    returned, timed out, or absent from the platform)."""
    from webapp.services.payments import PAYABLE_STATUSES

    return status in PAYABLE_STATUSES


class BonusActions:
    """``bonus_plan``, ``bonus`` and ``settle`` of a :class:`~webapp.recruit.base.Recruiter`."""

    unsettled_note = "ask the platform's support; FrameLab never sends it again"

    def _ledger(self: Recruiter, *, open_only: bool = True) -> list[Row]:
        """This study's ledger rows on this platform (``open_only``: not yet paid).

        Rows of test participants are never listed, so never paid: the rule issues none, and a
        row that reached the ledger some other way still moves no money.
        """
        query = (
            select(BonusPayment, PlatformIdentity)
            .join(PlatformIdentity, PlatformIdentity.participant_id == BonusPayment.participant_id)
            .join(Participant, Participant.id == BonusPayment.participant_id)
            .where(
                BonusPayment.study_id == self.study.id,
                BonusPayment.platform == self.platform,
                Participant.is_test.is_(False),
            )
            .order_by(BonusPayment.id)
        )
        if open_only:
            query = query.where(BonusPayment.platform_state.is_distinct_from(ledger.PAID))
        return [(b, i) for b, i in db.session.execute(query)]

    def _unpaid_cents(self: Recruiter) -> int:
        if self.study.id is None:
            return 0
        return sum(b.amount_cents for b, _ in self._ledger() if b.platform_state in TO_PAY)

    def platform_status(self: Recruiter, ident: PlatformIdentity) -> str | None:
        """The person's status in the last listing of submissions (``None``: not listed)."""
        worker = canonical_spelling(self.platform, ident.external_id)
        return next((s.status for s in self.last_submissions if s.worker_id == worker), None)

    def bonus_plan(self: Recruiter) -> Report:
        """Sync statuses, then say what would be paid now and what not, why (nothing paid)."""
        from webapp.services.payments import PaymentError, bonus_plan

        self.status()
        try:
            plan = bonus_plan(self.study, self.platform)
        except PaymentError as exc:
            raise RecruitError(str(exc)) from None
        issued = {b.participant_id for b, _ in self._ledger(open_only=False)}
        new = sum(x.amount_cents for x in plan.lines if x.participant_id not in issued)
        due, withheld, waiting = 0, [], 0
        for b, ident in self._ledger():
            if b.platform_state not in TO_PAY:
                waiting += b.amount_cents if b.platform_state in (ledger.PAYING, ledger.SENT) else 0
                continue
            status = self.platform_status(ident)
            if payable(status):
                due += b.amount_cents
            else:
                withheld.append(
                    (ident.participant.code, status or f"not in this {self.label} study")
                )
        to_pay = new + due
        cost = self.cost(to_pay)
        bonus_fees = cost.bonus_fees
        report = Report("bonus", cost=cost)
        report.lines += [
            f"new bonuses by the study's rule: {cents(new)}; in the ledger, not yet sent: "
            f"{cents(due)}",
            *(f"left out: {code}: {why}" for code, why in plan.excluded),
            *(f"not paid now: {code}: {status} on {self.label}" for code, status in withheld),
            *(
                [f"sent earlier, not yet seen paid: {cents(waiting)} (never sent again)"]
                if waiting
                else []
            ),
            f"to pay now: {cents(to_pay)} + fees {cents(bonus_fees)} = "
            f"{cents(to_pay + bonus_fees)}",
        ]
        report.counts = {"to_pay_cents": to_pay, "to_pay_fees_cents": bonus_fees}
        return report

    def bonus(self: Recruiter, *, now: datetime | None = None) -> Report:
        """Issue new bonuses into the ledger, then pay every ledger row not yet paid, once.

        Each run first confirms the payments of earlier runs that the platform now lists, and
        re-reads every person's status on the platform just before paying them.
        """
        from webapp.services.payments import PaymentError, issue_bonuses

        report = self.bonus_plan()
        try:
            issue = issue_bonuses(
                self.study,
                self.platform,
                issued_by=str(getattr(self.actor, "username", self.actor)),
                now=now or utcnow(),
            )
            report.lines.append(f"issued {issue.newly_issued} new bonus(es) into the ledger")
        except PaymentError as exc:
            if "no new bonuses" not in str(exc):
                raise RecruitError(str(exc)) from None
        return self._ledger_step(report, self._pay)

    def settle(
        self: Recruiter, *, retry_refused: bool = False, release: frozenset[str] = frozenset()
    ) -> Report:
        """Resolve what interrupted runs left open, against the platform; send no payment.

        An interrupted create is looked up by its reference (found: recorded; absent: the
        row is dropped so ``create`` can run); a publish whose answer was lost is looked up;
        payments are confirmed from the platform's own records or, where the platform shows
        they never took effect, made new again for the next ``bonus`` run. ``retry_refused``
        makes rows the platform refused new again (once their cause is fixed). ``release``
        names participants (codes) whose unsettled Prolific payment the researcher has checked
        was not made: only those are made payable again.
        """
        row = self.row()
        if row is None:
            raise RecruitError(
                f"{self.study.slug} is not listed on {self.label}; nothing to settle"
            )
        report = Report("settle")
        if not row.external_id:
            self._settle_create(row, report)
            row = self.row()
            if row is None or not row.external_id:
                return report
        status_report, _ = self.status()
        report.lines += status_report.lines
        return self._ledger_step(
            report,
            lambda rows, rep: self._settle(rows, rep, retry_refused=retry_refused, release=release),
        )

    def _ledger_step(
        self: Recruiter, report: Report, step: Callable[[list[Row], Report], None]
    ) -> Report:
        """Run ``step`` over the open ledger rows, then summarise and audit (a lost claim
        stops the step: the run says so and has paid nothing more)."""
        rows = self._ledger()
        try:
            step(rows, report)
        except ledger.ClaimLost as exc:
            report.lines.append(f"stopped: {exc}")
            report.counts["claim_lost"] = 1
        self._summarise(report, {b.id for b, _ in rows})
        self._record(report.action, dict(report.counts))
        return report

    def _summarise(self: Recruiter, report: Report, before: set[int]) -> None:
        """Counts and lines for what the ledger holds after a run (payments by their state)."""
        db.session.expire_all()
        rows = self._ledger(open_only=False)
        now = ledger.clock()
        paid = [b for b, _ in rows if b.id in before and b.platform_state == ledger.PAID]
        by_state: dict[str | None, list[Row]] = {}
        for b, i in rows:
            by_state.setdefault(b.platform_state, []).append((b, i))
        late = [
            (b, i)
            for b, i in by_state.get(ledger.SENT, [])
            if b.sent_at is not None and b.sent_at < now - ledger.CONFIRM_AFTER
        ]
        counts: dict[str, Any] = {
            "paid": len(paid),
            "paid_cents": sum(b.amount_cents for b in paid),
            "unconfirmed": len(by_state.get(ledger.PAYING, [])),
            "awaiting": len(by_state.get(ledger.SENT, [])) - len(late),
            "unsettled": len(late),
            "refused": len(by_state.get(ledger.REFUSED, [])),
        }
        report.counts.setdefault("sent", 0)
        report.counts.setdefault("sent_cents", 0)
        report.counts.update(counts)
        lines = [
            f"paid {len(paid)} bonus(es), {cents(counts['paid_cents'])} "
            f"({self.label} lists them as paid)"
        ]
        if report.counts["sent"]:
            lines.append(
                f"sent {report.counts['sent']} bonus(es), {cents(report.counts['sent_cents'])}: "
                f"{self.label} pays them within minutes; the next `bonus` or `settle` run "
                "confirms them"
            )

        def when(b: BonusPayment) -> str:
            return f"{b.sent_at:%Y-%m-%d %H:%M} UTC" if b.sent_at else "an earlier run"

        for b, i in by_state.get(ledger.PAYING, []):
            lines.append(
                f"unconfirmed: {i.participant.code}: payment {b.platform_payment_id} "
                f"({cents(b.amount_cents)}) was sent at {when(b)} but its outcome is unknown; "
                f"{self.unconfirmed_note}"
            )
        for b, i in late:
            lines.append(
                f"not settled: {i.participant.code}: payment {b.platform_payment_id} "
                f"({cents(b.amount_cents)}) was accepted at {when(b)} but {self.label} does not "
                f"list it as paid; {self.unsettled_note}"
            )
        for b, i in by_state.get(ledger.REFUSED, []):
            lines.append(
                f"refused: {i.participant.code} ({cents(b.amount_cents)}): {b.platform_note}; "
                "never sent again: fix the cause, then `settle --retry-refused`, or pay by hand"
            )
        report.lines += lines
