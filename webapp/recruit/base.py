"""The recruiter interface: what FrameLab does on Prolific or MTurk, platform-neutrally.

A :class:`Recruiter` lists a study on a platform (:meth:`~Recruiter.create`,
:meth:`~Recruiter.publish`), watches it (:meth:`~Recruiter.status`, which reconciles the
participants' platform statuses through the API), approves the submissions of people who
completed the study here (:meth:`~Recruiter.approve`; nobody else), rejects only with a reason,
pays the bonus ledger (:meth:`~Recruiter.bonus`: every ledger row once) and pauses or closes
the listing. Each platform module implements a handful of primitives (``_create``,
``_transition``, ``_submissions``, ``_approve``, ``_reject``, ``_pay``).

Money is never sent twice: a listing is created once per study and platform (the
``recruitment`` row), and a bonus row carries the platform's id for its payment and a state;
a payment whose outcome is unknown is reported, never re-sent. Every outbound call is an
``recruit.call`` event of the audit log (method, endpoint, status, platform ids; never a
token), and 429 and 5xx answers are retried with backoff where a retry cannot pay twice.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from webapp.extensions import db
from webapp.models import (
    BonusPayment,
    Participant,
    ParticipantStatus,
    Platform,
    PlatformIdentity,
    Recruitment,
    Study,
    utcnow,
)
from webapp.recruit.settings import RecruiterSettings
from webapp.services import audit
from webapp.services.entry import canonical_spelling

ACTIONS = ("plan", "create", "publish", "status", "approve", "reject", "bonus", "pause", "close")
MAX_ATTEMPTS = 5


def _sleep(seconds: float) -> None:
    """Wait between retries (a module function so tests can replace it)."""
    time.sleep(seconds)


class RecruitError(RuntimeError):
    """A recruiter action cannot be done or failed; the message says what and what to do."""


def cents(amount: int) -> str:
    """``1234`` → ``'$12.34'``."""
    return f"${amount // 100:,}.{amount % 100:02d}"


@dataclass(frozen=True)
class Cost:
    """What a study costs on a platform, in integer cents."""

    rewards: int
    reward_fees: int
    bonuses: int
    bonus_fees: int
    fee_rate: float
    note: str = ""

    @property
    def total(self) -> int:
        """Everything together."""
        return self.rewards + self.reward_fees + self.bonuses + self.bonus_fees

    def lines(self) -> list[str]:
        """Human-readable lines (CLI and console)."""
        out = [
            f"rewards   {cents(self.rewards)}",
            # Each part in money: the rates differ on MTurk (40% on rewards of 10+ assignments,
            # 20% on bonuses).
            f"fees      {cents(self.reward_fees + self.bonus_fees)} "
            f"({cents(self.reward_fees)} on rewards, {cents(self.bonus_fees)} on bonuses)",
            f"bonuses   {cents(self.bonuses)}",
            f"total     {cents(self.total)}",
        ]
        return out + ([self.note] if self.note else [])


@dataclass(frozen=True)
class Submission:
    """One person's submission on the platform (Prolific submission / MTurk assignment)."""

    submission_id: str
    worker_id: str  # canonical spelling
    status: str  # upper case, Prolific's words (MTurk's mapped onto them)
    code: str | None = None


@dataclass
class Report:
    """What an action did, line by line, plus counts for tests and the audit log."""

    action: str
    lines: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    cost: Cost | None = None


def fee(amount: int, rate: float) -> int:
    """The fee on ``amount`` cents, rounded to the cent."""
    return int(round(amount * rate))


class Recruiter(ABC):
    """One study on one recruiting platform.

    Parameters
    ----------
    study : Study
    settings : RecruiterSettings
    actor : Researcher or str
        For the audit log.
    sleep : callable
        Waits between retries (tests pass a no-op).
    """

    platform: Platform
    label: str = ""
    approve_status: str = "AWAITING REVIEW"  # the status of a submission waiting for review
    unconfirmed_note = "check the platform; FrameLab never sends it again"

    def __init__(
        self,
        study: Study,
        settings: RecruiterSettings,
        *,
        actor: Any = "cli",
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.study = study
        self.settings = settings
        self.actor = actor
        self.sleep = sleep or (lambda seconds: _sleep(seconds))
        self.last_submissions: list[Submission] = []  # of the last status()

    # -- platform primitives ------------------------------------------------------------------
    @abstractmethod
    def cost(self, bonuses_cents: int) -> Cost:
        """The cost of the listing's rewards plus ``bonuses_cents`` of bonuses."""

    @abstractmethod
    def _create(self, row: Recruitment) -> tuple[str, str]:
        """Create the listing for ``row.external_url``; return (platform id, status)."""

    @abstractmethod
    def _transition(self, external_id: str, action: str) -> str:
        """``publish``, ``pause`` or ``close`` the listing; return its new status."""

    @abstractmethod
    def _submissions(self, external_id: str) -> list[Submission]:
        """Every submission of the listing."""

    @abstractmethod
    def _approve(self, subs: list[Submission]) -> None:
        """Approve these submissions (all waiting for review)."""

    @abstractmethod
    def _reject(self, sub: Submission, reason: str, category: str) -> None:
        """Reject one submission with a reason."""

    @abstractmethod
    def _pay(self, rows: list[tuple[BonusPayment, PlatformIdentity]], report: Report) -> None:
        """Pay ledger rows not yet paid, recording ids and states on them (commit each step)."""

    @abstractmethod
    def study_url(self, base_url: str) -> str:
        """The URL the platform sends participants to."""

    # -- shared plumbing ----------------------------------------------------------------------
    def log_call(
        self,
        method: str,
        endpoint: str,
        status: int | str,
        *,
        ids: Mapping[str, Any] | None = None,
        attempt: int = 1,
    ) -> None:
        """Record one outbound call in the audit log (never a token or a request body)."""
        audit.record(
            self.actor,
            "recruit.call",
            study=self.study,
            detail={
                "platform": self.platform.value,
                "method": method,
                "endpoint": endpoint,
                "status": status,
                "attempt": attempt,
                **({"ids": dict(ids)} if ids else {}),
            },
        )

    def release(self) -> None:
        """End the session's transaction before an outbound call (nothing is pending here).

        On SQLite every transaction takes the write lock (``BEGIN IMMEDIATE``); holding it
        through a call of up to 30 s would stall the participants' pages meanwhile.
        """
        if not (db.session.new or db.session.dirty or db.session.deleted):
            db.session.commit()

    def backoff(self, attempt: int, retry_after: float | None = None) -> None:
        """Wait before attempt ``attempt + 1``: Retry-After if given, else 1, 2, 4, … s (≤ 30)."""
        delay = retry_after if retry_after is not None else min(30.0, 2.0 ** (attempt - 1))
        self.sleep(max(0.0, min(delay, 60.0)))

    def row(self) -> Recruitment | None:
        """This study's listing on this platform, if created."""
        return db.session.scalar(
            select(Recruitment).where(
                Recruitment.study_id == self.study.id, Recruitment.platform == self.platform
            )
        )

    def _listing(self) -> Recruitment:
        row = self.row()
        if row is None or not row.external_id:
            raise RecruitError(
                f"{self.study.slug} has no {self.label} listing yet; run `framelab recruit "
                f"{self.study.slug} create` first"
            )
        return row

    def _record(self, action: str, detail: Mapping[str, Any]) -> None:
        audit.record(
            self.actor,
            f"recruit.{action}",
            study=self.study,
            detail={"platform": self.platform.value, **detail},
        )

    # -- actions ------------------------------------------------------------------------------
    def max_bonus_cents(self) -> int:
        """The most bonus one person can earn under the study's rule."""
        bonus = self.study.definition["payment"]["bonus"]
        if bonus["rule"] == "none" or not bonus["usd"]:
            return 0
        choices = sum(
            len(b.get("pairs", []))
            for b in self.study.definition["tasks"]
            if b["type"] == "product_choice"
        )
        return round(bonus["usd"] * 100) * choices

    def plan(self) -> Report:
        """The cost of the listing before anything is created (no outbound call)."""
        s = self.settings
        row = self.row()
        pending = self._unpaid_cents()
        worst = self.max_bonus_cents() * s.places
        cost = self.cost(worst if row is None else pending)
        report = Report("plan", cost=cost)
        report.lines += [
            f"{self.label}: {s.places} places at {cents(s.reward_cents)} "
            f"(about {s.estimated_minutes} min)",
            *(
                [f"bonuses: at most {cents(self.max_bonus_cents())} per person (study rule)"]
                if row is None
                else [f"bonuses in the ledger not yet paid: {cents(pending)}"]
            ),
            *cost.lines(),
        ]
        if row is not None:
            report.lines.append(
                f"listed as {row.external_id or '(being created)'}, status {row.status}"
            )
        report.counts = {"total_cents": cost.total}
        return report

    def create(self, base_url: str, *, retry: bool = False) -> Report:
        """Create the listing (a Prolific draft, an MTurk HIT); refuse a second one.

        ``retry`` forgets an earlier create that was interrupted before the platform's id was
        recorded (check the platform for a stray listing first).
        """
        row = self.row()
        if row is not None and not row.external_id and retry:
            db.session.delete(row)
            db.session.commit()
            row = None
        if row is not None and row.external_id:
            raise RecruitError(
                f"{self.study.slug} is already listed on {self.label} as {row.external_id} "
                f"(status {row.status}); nothing was created"
            )
        if row is not None:
            raise RecruitError(
                f"an earlier create of {self.study.slug} on {self.label} did not finish; check "
                f"{self.label} for a listing of {self.study.title!r}, then run `framelab "
                f"recruit {self.study.slug} create --retry`"
            )
        row = Recruitment(
            study_id=self.study.id,
            platform=self.platform,
            sandbox=getattr(self, "sandbox", False),
            status="CREATING",
            external_url=self.study_url(base_url),
            extra={},
            created_by=str(getattr(self.actor, "username", self.actor)),
            created_at=utcnow(),
            updated_at=utcnow(),
        )
        db.session.add(row)
        try:
            db.session.commit()  # before the call: a crash after it leaves a visible trace
        except IntegrityError:  # another create of the same listing got there first
            db.session.rollback()
            raise RecruitError(
                f"{self.study.slug} is being listed on {self.label} by another run; nothing was "
                "created by this one"
            ) from None
        try:
            external_id, status = self._create(row)
        except RecruitError:
            db.session.delete(row)
            db.session.commit()
            raise
        row.external_id, row.status = external_id, status
        db.session.commit()
        self._record("create", {"external_id": external_id, "status": status})
        return Report("create", [f"created {self.label} listing {external_id} ({status})"])

    def transition(self, action: str) -> Report:
        """Publish, pause or close the listing."""
        row = self._listing()
        before = row.status
        row.status = self._transition(row.external_id or "", action)
        db.session.commit()
        self._record(action, {"external_id": row.external_id, "from": before, "to": row.status})
        return Report(action, [f"{self.label} {row.external_id}: {before} -> {row.status}"])

    def publish(self) -> Report:
        """Open the listing to participants."""
        return self.transition("publish")

    def pause(self) -> Report:
        """Hide the listing for now."""
        return self.transition("pause")

    def close(self) -> Report:
        """Stop the listing for good."""
        return self.transition("close")

    def status(self) -> tuple[Report, list[Submission]]:
        """Fetch every submission and reconcile participants' platform statuses (audited)."""
        from webapp.services.reconcile import reconcile

        row = self._listing()
        subs = self._submissions(row.external_id or "")
        self.last_submissions = subs
        statuses = {s.worker_id: s.status for s in subs}
        rec = reconcile(self.study, self.platform, statuses, self.actor, now=utcnow())
        by_status: dict[str, int] = {}
        for s in subs:
            by_status[s.status] = by_status.get(s.status, 0) + 1
        report = Report("status", counts={"submissions": len(subs), **by_status})
        report.lines.append(
            f"{self.label} {row.external_id} ({row.status}): {len(subs)} submissions"
            + (": " + ", ".join(f"{k} {n}" for k, n in sorted(by_status.items())) if subs else "")
        )
        report.lines += [f"mismatch: {who}: {note}" for who, note in rec.mismatches]
        return report, subs

    def _completed_here(self) -> dict[str, Participant]:
        """Canonical platform ID → participant who completed here (not excluded, no preview)."""
        rows = db.session.execute(
            select(Participant, PlatformIdentity.external_id)
            .join(PlatformIdentity, PlatformIdentity.participant_id == Participant.id)
            .where(
                Participant.study_id == self.study.id,
                Participant.platform == self.platform,
                Participant.status == ParticipantStatus.completed,
                Participant.is_preview.is_(False),
                Participant.excluded.is_(False),
            )
        )
        return {canonical_spelling(self.platform, ext): p for p, ext in rows}

    def approval_plan(self) -> tuple[Report, list[Submission]]:
        """Which waiting submissions would be approved (completed here) and which not, why."""
        status_report, subs = self.status()
        done = self._completed_here()
        waiting = [s for s in subs if s.status == self.approve_status]
        chosen = [s for s in waiting if s.worker_id in done]
        report = Report("approve", lines=list(status_report.lines))
        for s in waiting:
            if s.worker_id not in done:
                report.lines.append(
                    f"not approved: submission {s.submission_id}: did not complete the study "
                    "here (or was excluded); review it by hand"
                )
        report.cost = self.cost(0)
        n = len(chosen)
        pay = self.settings.reward_cents * n
        report.lines.append(
            f"approve {n} submission(s): rewards {cents(pay)} + fees "
            f"{cents(fee(pay, self.cost(0).fee_rate))}"
        )
        report.counts = {"approve": n, "waiting": len(waiting), "cost_cents": pay}
        return report, chosen

    def approve(self) -> Report:
        """Approve exactly the waiting submissions of people who completed the study here."""
        report, chosen = self.approval_plan()
        if chosen:
            self._approve(chosen)
        self._record("approve", {"approved": len(chosen), "waiting": report.counts["waiting"]})
        report.lines.append(f"approved {len(chosen)}")
        return report

    def reject(self, participant_codes: Iterable[str], reason: str, category: str) -> Report:
        """Reject the submissions of these participants (pseudonymous codes), with a reason."""
        reason = reason.strip()
        if not reason:
            raise RecruitError("a rejection needs a reason for the participant")
        codes = list(dict.fromkeys(participant_codes))
        if not codes:
            raise RecruitError("name the participants to reject (their p_… codes)")
        idents = {
            p.code: ident
            for p, ident in db.session.execute(
                select(Participant, PlatformIdentity)
                .join(PlatformIdentity, PlatformIdentity.participant_id == Participant.id)
                .where(Participant.study_id == self.study.id, Participant.code.in_(codes))
            )
        }
        unknown = [c for c in codes if c not in idents]
        if unknown:
            raise RecruitError(
                f"no participant(s) {unknown} in {self.study.slug}; nothing rejected"
            )
        _, subs = self.status()
        by_worker = {s.worker_id: s for s in subs}
        targets = []
        for code in codes:
            sub = by_worker.get(canonical_spelling(self.platform, idents[code].external_id))
            if sub is None or sub.status != self.approve_status:
                state = sub.status if sub else "no submission"
                raise RecruitError(
                    f"{code} cannot be rejected on {self.label} ({state}); nothing rejected"
                )
            targets.append(sub)
        for sub in targets:
            self._reject(sub, reason, category)
        self._record("reject", {"rejected": len(targets), "category": category})
        return Report("reject", [f"rejected {len(targets)}"], {"rejected": len(targets)})

    # -- bonuses ------------------------------------------------------------------------------
    def _ledger(self, *, unpaid: bool) -> list[tuple[BonusPayment, PlatformIdentity]]:
        query = (
            select(BonusPayment, PlatformIdentity)
            .join(PlatformIdentity, PlatformIdentity.participant_id == BonusPayment.participant_id)
            .where(BonusPayment.study_id == self.study.id, BonusPayment.platform == self.platform)
            .order_by(BonusPayment.id)
        )
        if unpaid:
            query = query.where(BonusPayment.paid_at.is_(None))
        return [(b, i) for b, i in db.session.execute(query)]

    def _unpaid_cents(self) -> int:
        if self.study.id is None:
            return 0
        return sum(b.amount_cents for b, _ in self._ledger(unpaid=True))

    def bonus_plan(self) -> Report:
        """Sync statuses, then say which bonuses would be issued and paid (nothing paid)."""
        from webapp.services.payments import PaymentError, bonus_plan

        self.status()
        try:
            plan = bonus_plan(self.study, self.platform)
        except PaymentError as exc:
            raise RecruitError(str(exc)) from None
        issued = {b.participant_id for b, _ in self._ledger(unpaid=False)}
        new = sum(x.amount_cents for x in plan.lines if x.participant_id not in issued)
        unpaid = self._unpaid_cents()
        cost = self.cost(new + unpaid)
        report = Report("bonus", cost=cost)
        report.lines += [
            f"new bonuses by the study's rule: {cents(new)}; in the ledger, not yet paid: "
            f"{cents(unpaid)}",
            *(f"left out: {code}: {why}" for code, why in plan.excluded),
            f"to pay now: {cents(new + unpaid)} + fees {cents(cost.bonus_fees)}",
        ]
        report.counts = {"to_pay_cents": new + unpaid}
        return report

    def bonus(self, *, now: datetime | None = None) -> Report:
        """Issue new bonuses into the ledger, then pay every ledger row not yet paid, once."""
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
        rows = self._ledger(unpaid=True)
        before = {b.id for b, _ in rows}
        self._pay(rows, report)
        paid = [b for b, _ in self._ledger(unpaid=False) if b.id in before and b.paid_at]
        unknown = [b for b, _ in self._ledger(unpaid=True) if b.platform_state == "paying"]
        report.counts.update(
            {
                "paid": len(paid),
                "paid_cents": sum(b.amount_cents for b in paid),
                "unconfirmed": len(unknown),
            }
        )
        report.lines.append(f"paid {len(paid)} bonus(es), {cents(report.counts['paid_cents'])}")
        for b in unknown:
            report.lines.append(
                f"unconfirmed: payment {b.platform_payment_id} ({cents(b.amount_cents)}) was "
                f"sent but its outcome is unknown; {self.unconfirmed_note}"
            )
        self._record("bonus", {k: v for k, v in report.counts.items()})
        return report
