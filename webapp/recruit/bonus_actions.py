"""A recruiter's bonus actions: what would be paid now, paying it once, settling what is open.

Mixed into :class:`webapp.recruit.base.Recruiter`; the ledger's states and claims are
:mod:`webapp.recruit.ledger`'s, the platform's calls the platform module's (``_pay``,
``_settle``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from webapp.extensions import db
from webapp.models import BonusPayment, Participant, PlatformIdentity, utcnow
from webapp.recruit import ledger
from webapp.recruit.errors import RecruitError
from webapp.recruit.results import Confirmation, ConfirmationChanged, Report
from webapp.services.entry import canonical_spelling

if TYPE_CHECKING:
    from webapp.models import Platform, Recruitment, Study
    from webapp.recruit.results import Cost, Submission

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
    # States besides TO_PAY whose rows a run may send (MTurk sends an unknown outcome again
    # with the same token when ListBonusPayments has no such bonus; Prolific never does).
    resend_states: tuple[str | None, ...] = ()

    if TYPE_CHECKING:  # what the Recruiter this is mixed into provides (no import: no circle)
        study: Study
        platform: Platform
        label: str
        actor: Any
        unconfirmed_note: str
        last_submissions: list[Submission]
        currency: str

        def cents(self, amount: int) -> str: ...

        def row(self) -> Recruitment | None: ...
        def status(self) -> tuple[Report, list[Submission]]: ...
        def cost(self, bonuses_cents: int) -> Cost: ...
        def _record(self, action: str, detail: Mapping[str, Any]) -> None: ...
        def _settle_create(self, row: Recruitment, report: Report) -> None: ...
        def _pay(
            self, rows: list[Row], report: Report, claim: ledger.Claim, allowed: set[int]
        ) -> None: ...
        def _settle(
            self,
            rows: list[Row],
            report: Report,
            claim: ledger.Claim,
            *,
            retry_refused: bool,
            release: frozenset[str],
        ) -> None: ...

    def bonus_ledger(self, *, open_only: bool = True) -> list[Row]:
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
            # Rows as the database has them now, even if this session loaded them before
            # another run (or this one, through a compare-and-set) changed them.
            .execution_options(populate_existing=True)
        )
        if open_only:
            query = query.where(BonusPayment.platform_state.is_distinct_from(ledger.PAID))
        return [(b, i) for b, i in db.session.execute(query)]

    def _unpaid_cents(self) -> int:
        if self.study.id is None:
            return 0
        return sum(b.amount_cents for b, _ in self.bonus_ledger() if b.platform_state in TO_PAY)

    def platform_status(self, ident: PlatformIdentity) -> str | None:
        """The person's status in the last listing of submissions (``None``: not listed)."""
        return self.status_of(canonical_spelling(self.platform, ident.external_id))

    def status_of(self, worker: str) -> str | None:
        """The status of a canonical platform ID in the last listing (``None``: not listed)."""
        return next((s.status for s in self.last_submissions if s.worker_id == worker), None)

    def bonus_plan(self) -> Report:
        """Sync statuses, then say what would be paid now and what not, why (nothing paid).

        The report's :attr:`~webapp.recruit.results.Report.confirmation` is exactly the rows
        "to pay now" names, with their amounts: :meth:`bonus` pays those and nothing else.
        """
        from webapp.services.payments import PaymentError, bonus_plan

        self.status()
        try:
            plan = bonus_plan(self.study, self.platform)
        except PaymentError as exc:
            raise RecruitError(str(exc)) from None
        issued = {b.participant_id for b, _ in self.bonus_ledger(open_only=False)}
        offer: dict[str, int] = {}
        new = due = waiting = 0
        withheld: list[tuple[str, str]] = []
        filed: list[Row] = []

        def consider(pid: int, code: str, amount: int, status: str | None) -> bool:
            if payable(status):
                offer[str(pid)] = amount
                return True
            withheld.append((code, status or f"not in this {self.label} study"))
            return False

        for line in plan.lines:
            if line.participant_id not in issued and line.amount_cents:
                status = self.status_of(line.worker_id)
                if consider(line.participant_id, line.participant_code, line.amount_cents, status):
                    new += line.amount_cents
        for b, ident in self.bonus_ledger():
            if b.platform_state == ledger.FILED:
                filed.append((b, ident))
            elif b.platform_state in TO_PAY + self.resend_states:
                code, status = ident.participant.code, self.platform_status(ident)
                if consider(b.participant_id, code, b.amount_cents, status):
                    due += b.amount_cents
            elif b.platform_state in (ledger.PAYING, ledger.SENT):
                waiting += b.amount_cents
        to_pay = new + due
        cost = self.cost(to_pay)
        bonus_fees = cost.bonus_fees
        report = Report("bonus", cost=cost)
        report.confirmation = Confirmation.of("bonus", offer)
        report.lines += [
            f"new bonuses by the study's rule: {self.cents(new)}; in the ledger, not yet sent: "
            f"{self.cents(due)}",
            *(f"left out: {code}: {why}" for code, why in plan.excluded),
            *(f"not paid now: {code}: {status} on {self.label}" for code, status in withheld),
            *(
                [f"sent earlier, not yet seen paid: {self.cents(waiting)} (never sent again)"]
                if waiting
                else []
            ),
            *(
                f"sent by file: {i.participant.code} ({self.cents(b.amount_cents)}): never paid "
                "through the API; if that file was not used, say so with `framelab bonus "
                f"{self.study.slug} --platform {self.platform.value} --file-not-used "
                f"{i.participant.code}`"
                for b, i in filed
            ),
            f"to pay now: {self.cents(to_pay)} + fees {self.cents(bonus_fees)} = "
            f"{self.cents(to_pay + bonus_fees)} ({len(offer)} bonus(es))",
            *report.confirmation.lines(self.currency),
        ]
        report.counts = {"to_pay_cents": to_pay, "to_pay_fees_cents": bonus_fees}
        return report

    def bonus(
        self, *, confirmed: Confirmation | None = None, now: datetime | None = None
    ) -> Report:
        """Pay exactly the bonuses ``confirmed`` names (a :meth:`bonus_plan`'s confirmation),
        once; ``None`` pays what the plan offers at this moment (scripts and tests: the CLI
        and the console always pass what their preview showed).

        The plan is made again first; if any confirmed row is no longer offered at its amount
        (paid meanwhile, rejected, the majority moved) nothing is paid and
        :class:`~webapp.recruit.results.ConfirmationChanged` carries the new plan. Rows offered
        beyond the confirmation (people who finished since) are not paid: the report counts
        them (``more``) for a new confirmation. Each run first records the payments the
        platform already lists, and re-reads every person's status just before paying them.
        """
        from webapp.services.payments import AMOUNT_CHANGED, PaymentError, issue_bonuses

        report = self.bonus_plan()
        offer = report.confirmation or Confirmation.of("bonus", {})
        agreed = offer if confirmed is None else confirmed
        changed = agreed.changed(offer)
        if confirmed is not None and (confirmed.action != "bonus" or changed):
            raise ConfirmationChanged(
                f"{len(changed)} of the {len(confirmed.rows)} bonus(es) you confirmed changed "
                "since (paid, withheld, or a new amount); nothing was paid: confirm the new "
                "amounts",
                report,
            )
        amounts = {int(pid): amount for pid, amount in agreed.rows}
        try:
            issue = issue_bonuses(
                self.study,
                self.platform,
                issued_by=str(getattr(self.actor, "username", self.actor)),
                now=now or utcnow(),
                to_file=False,
                only=amounts,
            )
            report.lines.append(f"issued {issue.newly_issued} new bonus(es) into the ledger")
            report.lines += [
                f"not issued: {code}: {why}"
                for code, why in issue.excluded
                if why == AMOUNT_CHANGED
            ]
        except PaymentError as exc:
            if "no new bonuses" not in str(exc):
                raise RecruitError(str(exc)) from None
        allowed = {
            b.id for b, _ in self.bonus_ledger() if amounts.get(b.participant_id) == b.amount_cents
        }
        more = agreed.rest(offer)
        if more.rows:
            report.counts["more"] = len(more.rows)
            report.lines.append(
                f"{len(more.rows)} more bonus(es), {self.cents(more.total)}, became payable after "
                "the confirmation: not paid by this run; confirm them separately"
            )
        return self._ledger_step(
            report, lambda rows, rep, claim: self._pay(rows, rep, claim, allowed)
        )

    def settle(
        self, *, retry_refused: bool = False, release: frozenset[str] = frozenset()
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
            lambda rows, rep, claim: self._settle(
                rows, rep, claim, retry_refused=retry_refused, release=release
            ),
        )

    def _ledger_step(
        self, report: Report, step: Callable[[list[Row], Report, ledger.Claim], None]
    ) -> Report:
        """Run ``step`` over the open ledger rows with this run's one claim, then summarise and
        audit (a lost claim stops the step: the run says so and has paid nothing more)."""
        rows = self.bonus_ledger()
        claim = ledger.Claim()
        try:
            step(rows, report, claim)
        except ledger.ClaimLost as exc:
            report.lines.append(f"stopped: {exc}")
            report.counts["claim_lost"] = 1
        self._summarise(report, claim)
        self._record(report.action, dict(report.counts))
        return report

    def _summarise(self, report: Report, claim: ledger.Claim) -> None:
        """Counts and lines for what the ledger holds after a run (payments by their state;
        ``paid`` counts only the rows this run itself recorded as paid)."""
        db.session.expire_all()
        rows = self.bonus_ledger(open_only=False)
        now = ledger.clock()
        mine = claim.moved.get(ledger.PAID, set())
        paid = [b for b, _ in rows if b.id in mine and b.platform_state == ledger.PAID]
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
            f"paid {len(paid)} bonus(es), {self.cents(counts['paid_cents'])} "
            f"({self.label} lists them as paid)"
        ]
        if report.counts["sent"]:
            lines.append(
                f"sent {report.counts['sent']} bonus(es), "
                f"{self.cents(report.counts['sent_cents'])}: "
                f"{self.label} pays them within minutes; the next `bonus` or `settle` run "
                "confirms them"
            )

        def when(b: BonusPayment) -> str:
            return f"{b.sent_at:%Y-%m-%d %H:%M} UTC" if b.sent_at else "an earlier run"

        for b, i in by_state.get(ledger.PAYING, []):
            lines.append(
                f"unconfirmed: {i.participant.code}: payment {b.platform_payment_id} "
                f"({self.cents(b.amount_cents)}) was sent at {when(b)} but its outcome is unknown; "
                f"{self.unconfirmed_note}"
            )
        for b, i in late:
            lines.append(
                f"not settled: {i.participant.code}: payment {b.platform_payment_id} "
                f"({self.cents(b.amount_cents)}) was accepted at {when(b)} but {self.label} "
                "does not "
                f"list it as paid; {self.unsettled_note}"
            )
        for b, i in rows:
            held = b.claim_token is not None and b.claim_token != claim.token
            if held and b.platform_state != ledger.PAID and b.claimed_at is not None:
                lines.append(
                    f"waits: {i.participant.code} ({self.cents(b.amount_cents)}, "
                    f"{b.platform_state or 'new'}): held by another run since "
                    f"{b.claimed_at:%Y-%m-%d %H:%M} UTC, which is still running or stopped "
                    "(killed, its machine gone); "
                    + (
                        "its pay call may have been sent: `settle` looks it up"
                        if b.platform_state == ledger.PAYING
                        else "nothing of it was paid yet"
                    )
                    + f"; from {b.claimed_at + ledger.CLAIM_EXPIRES:%H:%M} UTC the next `bonus` "
                    "or `settle` run takes it over"
                )
        for b, i in by_state.get(ledger.REFUSED, []):
            lines.append(
                f"refused: {i.participant.code} ({self.cents(b.amount_cents)}): {b.platform_note}; "
                "never sent again: fix the cause, then `settle --retry-refused`, or pay by hand"
            )
        report.lines += lines
