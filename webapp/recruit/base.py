"""The recruiter interface: what FrameLab does on Prolific or MTurk, platform-neutrally.

A :class:`Recruiter` lists a study on a platform (:meth:`~Recruiter.create`,
:meth:`~Recruiter.publish`), watches it (:meth:`~Recruiter.status`, which reconciles the
participants' platform statuses through the API), approves the submissions of people who
completed the study here (:meth:`~Recruiter.approve`; nobody else), rejects only with a reason,
pays the bonus ledger (:meth:`~Recruiter.bonus`: every ledger row once), settles what an
interrupted run left open (:meth:`~Recruiter.settle`) and pauses or closes the listing. Each
platform module implements a handful of primitives (``_create``, ``_find_listing``,
``_transition``, ``fetch_submissions``, ``_approve``, ``_reject``, ``_pay``, ``_settle``).

Money is never sent twice: a listing is created once per study and platform (the
``recruitment`` row, which keeps the reference it sent so a create whose answer was lost is
looked up, not repeated), and a bonus row moves through the states of
:mod:`webapp.recruit.ledger`, each change conditional on the claim of the run holding it; a
payment whose outcome is unknown is settled against the platform, never re-sent blindly.
Every outbound call is a ``recruit.call`` event of the audit log (method, endpoint, status,
platform ids; never a token), and 429 and 5xx answers are retried with backoff where a retry
cannot pay twice.
"""

from __future__ import annotations

import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError

from webapp.definition import RecruiterSettings
from webapp.definition_cache import study_definition
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
from webapp.recruit import ledger
from webapp.recruit.bonus_actions import BonusActions
from webapp.recruit.errors import NotSent, OutcomeUnknown, RecruitError, Refused, safe_text
from webapp.recruit.results import (
    Confirmation,
    ConfirmationChanged,
    Cost,
    Report,
    Submission,
    cents,
    fee,
)
from webapp.services import audit
from webapp.services.entry import canonical_spelling
from webapp.tasks import get_task_type

__all__ = [
    "Confirmation",
    "ConfirmationChanged",
    "Cost",
    "NotSent",
    "OutcomeUnknown",
    "RecruitError",
    "Recruiter",
    "Refused",
    "Report",
    "Submission",
    "cents",
    "fee",
    "safe_text",
]

MAX_ATTEMPTS = 5
# A create whose run stopped answering leaves its listing row claimed; after this another
# create (or settle) looks the listing up and finishes it.
CREATE_CLAIM_EXPIRES = timedelta(minutes=15)


def _sleep(seconds: float) -> None:
    """Wait between retries (a module function so tests can replace it)."""
    time.sleep(seconds)


class Recruiter(BonusActions, ABC):
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
    def _create(self, row: Recruitment, *, retrying: bool) -> tuple[str, str, dict[str, Any]]:
        """Create the listing for ``row.external_url`` carrying ``row.extra["reference"]``.

        ``retrying``: an earlier create of this row may have made parts of it. Returns
        (platform id, status, the row's new ``extra``).
        """

    @abstractmethod
    def _find_listing(self, row: Recruitment) -> tuple[str, str] | None:
        """The listing an earlier create of ``row`` made, by its reference: (id, status)."""

    @abstractmethod
    def _transition(self, external_id: str, action: str) -> str:
        """``publish``, ``pause`` or ``close`` the listing; return its new status."""

    @abstractmethod
    def fetch_submissions(self, external_id: str) -> list[Submission]:
        """Every submission of the listing."""

    @abstractmethod
    def _approve(self, subs: list[Submission]) -> None:
        """Approve these submissions (all waiting for review)."""

    @abstractmethod
    def _reject(self, sub: Submission, reason: str, category: str) -> None:
        """Reject one submission with a reason."""

    @abstractmethod
    def _pay(
        self,
        rows: list[tuple[BonusPayment, PlatformIdentity]],
        report: Report,
        claim: ledger.Claim,
        allowed: set[int],
    ) -> None:
        """Pay the ledger rows of ``allowed`` (ids: what was confirmed), moving rows through
        :mod:`webapp.recruit.ledger` under this run's ``claim``. Any open row of ``rows`` the
        platform already lists as paid is recorded ``paid``, whatever its state."""

    @abstractmethod
    def _settle(
        self,
        rows: list[tuple[BonusPayment, PlatformIdentity]],
        report: Report,
        claim: ledger.Claim,
        *,
        retry_refused: bool,
        release: frozenset[str],
    ) -> None:
        """Resolve rows an earlier run left open (unknown outcomes) against the platform."""

    @abstractmethod
    def _settle_listing(self, row: Recruitment, report: Report) -> None:
        """Resolve a listing action an earlier run left open (e.g. a publish)."""

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

    def listing_row(self) -> Recruitment:
        """This study's recruitment row on this platform, once its listing exists."""
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

    @property
    def currency(self) -> str:
        """The currency of the study's rewards and bonuses (MTurk's are always USD)."""
        return study_definition(self.study).payment.currency

    def cents(self, amount: int) -> str:
        """Whole cents in the study's currency, as the reports write them."""
        return cents(amount, self.currency)

    # -- actions ------------------------------------------------------------------------------
    def max_bonus_cents(self) -> int:
        """The most bonus one person can earn under the study's rule."""
        definition = study_definition(self.study)
        bonus = definition.payment.bonus
        if bonus.rule == "none" or not bonus.amount:
            return 0
        choices = sum(get_task_type(b.type).bonus_answers(b) for b in definition.tasks)
        return round(bonus.amount * 100) * choices

    def plan(self) -> Report:
        """The cost of the listing before anything is created (no outbound call)."""
        s = self.settings
        row = self.row()
        pending = self._unpaid_cents()
        worst = self.max_bonus_cents() * s.places
        cost = self.cost(worst if row is None else pending)
        report = Report("plan", cost=cost)
        report.lines += [
            f"{self.label}: {s.places} places at {self.cents(s.reward_cents)} "
            f"(about {s.estimated_minutes} min)",
            *(
                [f"bonuses: at most {self.cents(self.max_bonus_cents())} per person (study rule)"]
                if row is None
                else [f"bonuses in the ledger not yet paid: {self.cents(pending)}"]
            ),
            *cost.lines(),
        ]
        if row is not None:
            report.lines.append(
                f"listed as {row.external_id or '(being created)'}, status {row.status}"
            )
        report.counts = {"total_cents": cost.total}
        return report

    def create(self, base_url: str) -> Report:
        """Create the listing (a Prolific draft, an MTurk HIT type); refuse a second one.

        The row is written before the call with a reference the listing carries; a create
        whose answer was lost keeps it, and the next create (or :meth:`settle`) looks the
        listing up by that reference before making one.
        """
        url = self.study_url(base_url)
        row = self.row()
        if row is not None and row.external_id:
            raise RecruitError(
                f"{self.study.slug} is already listed on {self.label} as {row.external_id} "
                f"(status {row.status}); nothing was created"
            )
        claim = secrets.token_hex(16)
        retrying = row is not None
        if row is None:
            row = Recruitment(
                study_id=self.study.id,
                platform=self.platform,
                sandbox=getattr(self, "sandbox", False),
                status="CREATING",
                external_url=url,
                extra={"reference": secrets.token_hex(8)},
                created_by=str(getattr(self.actor, "username", self.actor)),
                created_at=utcnow(),
                updated_at=utcnow(),
                claim_token=claim,
                claimed_at=utcnow(),
            )
            db.session.add(row)
            try:
                db.session.commit()  # before the call: a crash after it leaves its reference
            except IntegrityError:  # another create of the same listing got there first
                db.session.rollback()
                raise RecruitError(
                    f"{self.study.slug} is being listed on {self.label} by another run; "
                    "nothing was created by this one"
                ) from None
        elif not self._claim_listing(row, claim, url):
            raise RecruitError(
                f"{self.study.slug} is being listed on {self.label} by another run (since "
                f"{row.claimed_at:%Y-%m-%d %H:%M} UTC); nothing was created by this one; "
                "run create again later: it then looks that listing up first"
            )
        found = self._find_listing(row) if retrying else None
        if found is not None:
            external_id, status = found
            extra = dict(row.extra)
        else:
            try:
                external_id, status, extra = self._create(row, retrying=retrying)
            except (NotSent, Refused):  # nothing was made: the next create starts afresh
                self._drop_listing(row, claim)
                raise
            except RecruitError as exc:  # it may exist: keep the row and its reference
                self._finish_listing(row, claim, None, "CREATING", dict(row.extra))
                raise RecruitError(
                    f"{exc}; the listing may have been made: run create (or settle) again, it "
                    f"looks the listing up on {self.label} before making another"
                ) from None
        if not self._finish_listing(row, claim, external_id, status, extra):
            raise RecruitError(
                f"another run took over creating {self.study.slug} on {self.label} while this "
                f"one waited; {external_id} is the listing (it finds it by its reference)"
            )
        self._record("create", {"external_id": external_id, "status": status})
        verb = "found the earlier" if found is not None else "created"
        return Report("create", [f"{verb} {self.label} listing {external_id} ({status})"])

    def _claim_listing(self, row: Recruitment, claim: str, url: str) -> bool:
        """Take over a create that did not finish, if its run is gone (a conditional UPDATE);
        a listing made afresh then gets ``url``."""
        now = utcnow()
        result = db.session.execute(
            update(Recruitment)
            .where(
                Recruitment.id == row.id,
                Recruitment.external_id.is_(None),
                or_(
                    Recruitment.claim_token.is_(None),
                    Recruitment.claimed_at < now - CREATE_CLAIM_EXPIRES,
                ),
            )
            .values(claim_token=claim, claimed_at=now, external_url=url)
            .execution_options(synchronize_session=False)
        )
        db.session.commit()
        return bool(result.rowcount)

    def _finish_listing(
        self,
        row: Recruitment,
        claim: str,
        external_id: str | None,
        status: str,
        extra: dict[str, Any],
    ) -> bool:
        """Record the platform's id on the row this run holds and let it go; commit."""
        result = db.session.execute(
            update(Recruitment)
            .where(Recruitment.id == row.id, Recruitment.claim_token == claim)
            .values(
                external_id=external_id,
                status=status,
                extra=extra,
                claim_token=None,
                claimed_at=None,
                updated_at=utcnow(),
            )
            .execution_options(synchronize_session=False)
        )
        db.session.commit()
        return bool(result.rowcount)

    def _drop_listing(self, row: Recruitment, claim: str) -> None:
        """Forget a create the platform never received or refused (only while held)."""
        from sqlalchemy import delete

        db.session.execute(
            delete(Recruitment)
            .where(Recruitment.id == row.id, Recruitment.claim_token == claim)
            .execution_options(synchronize_session=False)
        )
        db.session.commit()

    def transition(self, action: str) -> Report:
        """Publish, pause or close the listing.

        A transition whose answer was lost is not simply repeated: the platform refuses a
        repeat, so the platform modules then read the listing's status and accept it when the
        transition is already done (MTurk's publish looks its HIT up, see its module).
        """
        row = self.listing_row()
        before = row.status
        status = self._transition(row.external_id or "", action)
        row = self.listing_row()  # the platform module may have recorded ids on it meanwhile
        row.status = status
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

        row = self.listing_row()
        report = Report("status")
        self._settle_listing(row, report)
        row = self.listing_row()
        subs = self.fetch_submissions(row.external_id or "")
        self.last_submissions = subs
        statuses = {s.worker_id: s.status for s in subs}
        rec = reconcile(self.study, self.platform, statuses, self.actor, now=utcnow())
        by_status: dict[str, int] = {}
        for s in subs:
            by_status[s.status] = by_status.get(s.status, 0) + 1
        report.counts = {"submissions": len(subs), **by_status}
        report.lines.insert(
            0,
            f"{self.label} {row.external_id} ({row.status}): {len(subs)} submissions"
            + (": " + ", ".join(f"{k} {n}" for k, n in sorted(by_status.items())) if subs else ""),
        )
        report.lines += [f"mismatch: {who}: {note}" for who, note in rec.mismatches]
        return report, subs

    def _completed_here(self) -> dict[str, Participant]:
        """Canonical platform ID → participant who completed here (not excluded, not a test)."""
        rows = db.session.execute(
            select(Participant, PlatformIdentity.external_id)
            .join(PlatformIdentity, PlatformIdentity.participant_id == Participant.id)
            .where(
                Participant.study_id == self.study.id,
                Participant.platform == self.platform,
                Participant.status == ParticipantStatus.completed,
                Participant.is_test.is_(False),
                Participant.excluded.is_(False),
            )
        )
        return {canonical_spelling(self.platform, ext): p for p, ext in rows}

    def approval_plan(self) -> tuple[Report, list[Submission]]:
        """Which waiting submissions would be approved (completed here) and which not, why.

        The report's confirmation names exactly the submissions (and rewards) it approves;
        a platform that approves work by itself after a while says when, for each one.
        """
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
            if s.auto_approve_at is not None:
                report.lines.append(
                    f"waiting for review: {s.submission_id}: {self.label} approves it by "
                    f"itself on {s.auto_approve_at:%Y-%m-%d %H:%M} UTC unless it is reviewed "
                    "first"
                )
        report.cost = self.cost(0)
        n = len(chosen)
        pay = self.settings.reward_cents * n
        report.confirmation = Confirmation.of(
            "approve", {s.submission_id: self.settings.reward_cents for s in chosen}
        )
        report.lines.append(
            f"approve {n} submission(s): rewards {self.cents(pay)} + fees "
            f"{self.cents(fee(pay, self.cost(0).fee_rate))}"
        )
        report.lines += report.confirmation.lines(self.currency)
        report.counts = {"approve": n, "waiting": len(waiting), "cost_cents": pay}
        return report, chosen

    def approve(self, *, confirmed: Confirmation | None = None) -> Report:
        """Approve exactly the submissions ``confirmed`` names (an :meth:`approval_plan`'s
        confirmation); ``None`` approves what the plan offers at this moment (scripts and
        tests: the CLI and the console always pass what their preview showed).

        If any confirmed submission is no longer offered (reviewed meanwhile, excluded here)
        nothing is approved and :class:`~webapp.recruit.results.ConfirmationChanged` carries
        the new plan; submissions offered beyond the confirmation are left for a new one.
        """
        report, chosen = self.approval_plan()
        offer = report.confirmation or Confirmation.of("approve", {})
        agreed = offer if confirmed is None else confirmed
        changed = agreed.changed(offer)
        if confirmed is not None and (confirmed.action != "approve" or changed):
            raise ConfirmationChanged(
                f"{len(changed)} of the {len(confirmed.rows)} submission(s) you confirmed "
                "changed since (reviewed, or no longer complete here); nothing was approved: "
                "confirm the new list",
                report,
            )
        keys = agreed.as_dict()
        chosen = [s for s in chosen if s.submission_id in keys]
        more = agreed.rest(offer)
        if chosen:
            self._approve(chosen)
        self._record("approve", {"approved": len(chosen), "waiting": report.counts["waiting"]})
        report.counts["approve"] = len(chosen)
        report.lines.append(f"approved {len(chosen)}")
        if more.rows:
            report.counts["more"] = len(more.rows)
            report.lines.append(
                f"{len(more.rows)} more submission(s) became ready for approval after the "
                "confirmation: not approved by this run; confirm them separately"
            )
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

    def _settle_create(self, row: Recruitment, report: Report) -> None:
        """Finish or forget a create whose answer was lost, by looking the listing up."""
        claim = secrets.token_hex(16)
        if not self._claim_listing(row, claim, row.external_url):
            report.lines.append(
                f"{self.label}: a create is running (since {row.claimed_at:%Y-%m-%d %H:%M} UTC); "
                "settle again later"
            )
            return
        found = self._find_listing(row)
        if found is None:
            self._drop_listing(row, claim)
            report.lines.append(
                f"the interrupted create made no listing on {self.label}; `create` can run again"
            )
            return
        self._finish_listing(row, claim, found[0], found[1], dict(row.extra))
        report.lines.append(
            f"found {self.label} listing {found[0]} ({found[1]}) made by the interrupted create"
        )
