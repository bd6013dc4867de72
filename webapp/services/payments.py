"""Bonuses: compute them from the study's rule, record them in a ledger, write payment files.

The product-choice rule (``majority_choice``) pays ``payment.bonus.usd`` for every choice that
matches the majority choice for that pair and format among the study's completed, non-excluded,
real (not test) participants (the published study paid a base of $3 plus such a bonus). On an
exact tie both choices count as matching, so nobody loses a bonus to a coin flip.

The ledger (:class:`~webapp.models.BonusPayment`) holds one row per participant and rule; an
issued bonus is never issued again. Amounts are kept in integer cents so sums are exact.

Who is paid: platform IDs are compared in one canonical form (:func:`normalise_platform_id`),
so ``5f1a…`` and ``5F1A…`` are one person, paid once. Once a reconciliation file of the
platform has been imported (:mod:`webapp.services.reconcile`), only participants that the
latest file lists as submitted are paid; everyone left out is named with the reason
(:attr:`BonusIssue.excluded`), in the console and in the command's output.
"""

from __future__ import annotations

import csv
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import selectinload

from webapp.extensions import db
from webapp.models import (
    AuditEvent,
    BonusPayment,
    Participant,
    ParticipantStatus,
    Platform,
    Study,
)
from webapp.services.entry import canonical_spelling
from webapp.services.export import spreadsheet_safe

RULES = ("none", "majority_choice")
PAYABLE_PLATFORMS = (Platform.prolific, Platform.mturk)
MTURK_COLUMNS = ("WorkerId", "AssignmentId", "BonusAmount", "Reason", "UniqueRequestToken")
# Recruiter statuses (from a reconciliation import) under which a bonus is paid.
PAYABLE_STATUSES = frozenset({"APPROVED", "AWAITING REVIEW", "SUBMITTED"})


def normalise_platform_id(platform: Platform, raw: str) -> str:
    """Return the canonical form of a recruiter's participant ID: the spelling entry stores
    (:func:`webapp.services.entry.canonical_spelling`), so payments and reconciliation compare
    IDs exactly as the participant pages recorded them.

    Examples
    --------
    >>> normalise_platform_id(Platform.prolific, " 5F1A2B3C4D5E6F7A8B9C0D1E ")
    '5f1a2b3c4d5e6f7a8b9c0d1e'
    """
    return canonical_spelling(platform, raw)


class PaymentError(ValueError):
    """Bonuses cannot be issued (unknown rule, nothing left to issue, …)."""


@dataclass(frozen=True)
class BonusLine:
    """One bonus: who (raw platform IDs, for the payment file only) and how much."""

    participant_id: int
    participant_code: str
    worker_id: str
    assignment_id: str | None
    amount_cents: int
    n_matching: int
    reason: str
    request_token: str
    already_issued: bool = False

    @property
    def amount(self) -> str:
        """The amount in dollars with two decimals, e.g. ``'0.70'``."""
        return f"{self.amount_cents // 100}.{self.amount_cents % 100:02d}"


@dataclass(frozen=True)
class BonusIssue:
    """What :func:`issue_bonuses` did."""

    lines: list[BonusLine]  # to write to the payment file
    newly_issued: int
    skipped_issued: int
    zero: int  # eligible participants whose bonus is 0 (left out: platforms refuse 0)
    excluded: list[tuple[str, str]]  # (participant code, why no bonus) — see bonus_plan
    reconciled: bool  # a reconciliation file of the platform decided who is paid


def check_payment_rule(definition: Mapping[str, Any], source: str) -> None:
    """Refuse a study whose ``payment.bonus.rule`` is unknown.

    Raises
    ------
    webapp.validation.StudyDefinitionError
        Naming ``payment.bonus.rule`` and the known rules.
    """
    from webapp.validation import StudyDefinitionError

    rule = definition["payment"]["bonus"]["rule"]
    if rule not in RULES:
        raise StudyDefinitionError(
            source, "payment.bonus.rule", f"unknown rule {rule!r}; known: {list(RULES)}"
        )
    if rule == "majority_choice" and not any(
        b["type"] == "product_choice" for b in definition["tasks"]
    ):
        raise StudyDefinitionError(
            source, "payment.bonus.rule", "majority_choice needs a product_choice block"
        )


def _reference(study: Study) -> list[Participant]:
    """Completed, non-excluded, real (not test) participants with their choices loaded."""
    return list(
        db.session.scalars(
            select(Participant)
            .where(
                Participant.study_id == study.id,
                Participant.status == ParticipantStatus.completed,
                Participant.is_test.is_(False),
                Participant.excluded.is_(False),
            )
            .options(selectinload(Participant.choices), selectinload(Participant.identity))
            .order_by(Participant.id)
        )
    )


def majority_choices(participants: Iterable[Participant]) -> dict[tuple[str, str], set[bool]]:
    """Return, per (pair, format), the choice(s) of the majority (both on a tie).

    A choice is whether the target manufacturer was chosen (``chose_target``).
    """
    votes: dict[tuple[str, str], Counter[bool]] = {}
    for p in participants:
        for c in p.choices:
            votes.setdefault((c.pair_id, c.format), Counter())[c.chose_target] += 1
    out = {}
    for key, counter in votes.items():
        yes, no = counter[True], counter[False]
        out[key] = {True} if yes > no else {False} if no > yes else {True, False}
    return out


def _token(study: Study, p: Participant, rule: str) -> str:
    # MTurk's UniqueRequestToken is at most 64 characters and makes a retried SendBonus a no-op.
    digest = hashlib.sha256(f"{study.slug}:{p.code}:{rule}".encode()).hexdigest()[:32]
    return f"framelab-{digest}"


@dataclass(frozen=True)
class BonusPlan:
    """What :func:`compute_bonuses` would pay and whom it leaves out, with reasons."""

    lines: list[BonusLine]
    excluded: list[tuple[str, str]]  # (participant code, reason)
    reconciled: bool


def reconciliation_imported(study: Study, platform: Platform) -> bool:
    """True once a reconciliation file of ``platform`` was imported for ``study``."""
    events = db.session.scalars(
        select(AuditEvent.detail).where(
            AuditEvent.study_id == study.id, AuditEvent.action == "reconcile.import"
        )
    )
    return any((d or {}).get("platform") == platform.value for d in events)


def _why_not_paid(p: Participant, platform: Platform, reconciled: bool) -> str | None:
    if not reconciled:
        return None
    if p.platform_status is None:
        return f"not in the last {platform.value} reconciliation file"
    if p.platform_status not in PAYABLE_STATUSES:
        return f"{p.platform_status} on {platform.value} (last reconciliation file)"
    return None


def bonus_plan(study: Study, platform: Platform) -> BonusPlan:
    """Compute every eligible participant's bonus and who is left out, and why (nothing stored).

    Eligible: completed, non-excluded, real (not test) participants of ``platform`` with a
    platform ID; one per canonical ID (:func:`normalise_platform_id`, the earliest session
    wins); and, once a reconciliation file of ``platform`` was imported, only those the
    latest file lists with a status in :data:`PAYABLE_STATUSES`.

    Parameters
    ----------
    study : Study
    platform : Platform
        Only participants who arrived through it are paid by its file.

    Returns
    -------
    BonusPlan
        ``lines`` (one per eligible participant, amount may be 0, worker IDs canonical),
        ``excluded`` and ``reconciled``.

    Raises
    ------
    PaymentError
        The study has no bonus rule.
    """
    bonus = study.definition["payment"]["bonus"]
    rule = bonus["rule"]
    if rule == "none" or not bonus["usd"]:
        raise PaymentError(f"study {study.slug!r} pays no bonus (payment.bonus: {bonus})")
    check_payment_rule(study.definition, study.slug)
    cents = round(bonus["usd"] * 100)
    people = _reference(study)
    majority = majority_choices(people)
    reconciled = reconciliation_imported(study, platform)
    lines: list[BonusLine] = []
    excluded: list[tuple[str, str]] = []
    first_with_id: dict[str, str] = {}
    for p in people:
        if p.platform is not platform or p.identity is None:
            continue
        worker_id = normalise_platform_id(platform, p.identity.external_id)
        if worker_id in first_with_id:
            excluded.append(
                (p.code, f"same {platform.value} ID as {first_with_id[worker_id]} (paid once)")
            )
            continue
        first_with_id[worker_id] = p.code
        reason = _why_not_paid(p, platform, reconciled)
        if reason is not None:
            excluded.append((p.code, reason))
            continue
        n = sum(c.chose_target in majority[(c.pair_id, c.format)] for c in p.choices)
        lines.append(
            BonusLine(
                participant_id=p.id,
                participant_code=p.code,
                worker_id=worker_id,
                assignment_id=p.identity.external_session_id,
                amount_cents=n * cents,
                n_matching=n,
                reason=(
                    f"Bonus: {n} of your {len(p.choices)} choices matched the majority "
                    f"(${bonus['usd']:.2f} each). Thank you!"
                ),
                request_token=_token(study, p, rule),
            )
        )
    return BonusPlan(lines, excluded, reconciled)


def compute_bonuses(study: Study, platform: Platform) -> list[BonusLine]:
    """Return the lines of :func:`bonus_plan` (one per eligible participant; amount may be 0)."""
    return bonus_plan(study, platform).lines


def issue_bonuses(
    study: Study, platform: Platform, *, issued_by: str, now: datetime, force: bool = False
) -> BonusIssue:
    """Record new bonuses in the ledger and return the lines for the payment file; commit.

    Without ``force`` only bonuses not yet in the ledger are issued, and a run with nothing new
    is refused. With ``force`` the file also repeats earlier bonuses with their *recorded*
    amounts and request tokens (to re-create a lost file); the ledger never gets a second row.

    Parameters
    ----------
    study : Study
    platform : Platform
        ``prolific`` or ``mturk``.
    issued_by : str
        Who issues them (username or ``cli``), recorded in the ledger.
    now : datetime
    force : bool

    Returns
    -------
    BonusIssue

    Raises
    ------
    PaymentError
        Unpayable platform, no bonus rule, or nothing new to issue without ``force``.
    """
    if platform not in PAYABLE_PLATFORMS:
        raise PaymentError("bonus files exist for prolific and mturk only")
    rule = study.definition["payment"]["bonus"]["rule"]
    plan = bonus_plan(study, platform)
    computed = plan.lines
    ledger = {
        b.participant_id: b
        for b in db.session.scalars(
            select(BonusPayment).where(BonusPayment.study_id == study.id, BonusPayment.rule == rule)
        )
    }
    lines: list[BonusLine] = []
    new = skipped = zero = 0
    for line in computed:
        issued = ledger.get(line.participant_id)
        if issued is not None:
            skipped += 1
            if force:
                lines.append(
                    BonusLine(
                        **{
                            **line.__dict__,
                            "amount_cents": issued.amount_cents,
                            "reason": issued.reason,
                            "request_token": issued.request_token,
                            "already_issued": True,
                        }
                    )
                )
            continue
        if line.amount_cents == 0:
            zero += 1
            continue
        db.session.add(
            BonusPayment(
                study_id=study.id,
                participant_id=line.participant_id,
                rule=rule,
                amount_cents=line.amount_cents,
                platform=platform,
                request_token=line.request_token,
                reason=line.reason,
                issued_by=issued_by,
                issued_at=now,
            )
        )
        lines.append(line)
        new += 1
    if not new and not force:
        db.session.rollback()
        left_out = f"; {len(plan.excluded)} left out" if plan.excluded else ""
        raise PaymentError(
            f"no new bonuses to issue for {study.slug!r} on {platform.value}: {skipped} were "
            f"already issued (see the ledger){left_out}"
        )
    from webapp.services import audit

    audit.record(
        issued_by,
        "bonus.issue",
        study=study,
        detail={
            "platform": platform.value,
            "new": new,
            "repeated": len(lines) - new,
            "total_cents": sum(x.amount_cents for x in lines if not x.already_issued),
            "force": force,
            "excluded": len(plan.excluded),
            "reconciled": plan.reconciled,
        },
        commit=False,
    )
    try:
        db.session.commit()
    except IntegrityError:  # another issue of the same bonuses committed first
        db.session.rollback()
        raise PaymentError(
            "bonuses were being issued at the same time elsewhere; nothing was issued by this "
            "run; run it again to issue what is still missing"
        ) from None
    return BonusIssue(lines, new, skipped, zero, plan.excluded, plan.reconciled)


def write_prolific(lines: Iterable[BonusLine], out: IO[str]) -> int:
    """Write Prolific's bulk-bonus format: ``participant_id,amount`` lines, no header.

    Returns
    -------
    int
        Lines written.
    """
    writer = csv.writer(out, lineterminator="\n")
    n = 0
    for line in lines:
        writer.writerow([spreadsheet_safe(line.worker_id), line.amount])
        n += 1
    return n


def write_mturk(lines: Iterable[BonusLine], out: IO[str]) -> int:
    """Write a ``SendBonus`` plan: one row per call, with :data:`MTURK_COLUMNS`.

    Returns
    -------
    int
        Rows written (header excluded).
    """
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(MTURK_COLUMNS)
    n = 0
    for line in lines:
        cells = (line.worker_id, line.assignment_id or "", line.amount, line.reason)
        writer.writerow([spreadsheet_safe(c) for c in (*cells, line.request_token)])
        n += 1
    return n


def write_bonus_file(lines: Iterable[BonusLine], platform: Platform, out: IO[str]) -> int:
    """Write the payment file of ``platform`` (see :func:`write_prolific`, :func:`write_mturk`)."""
    return (write_prolific if platform is Platform.prolific else write_mturk)(lines, out)


def ledger_rows(study: Study) -> list[dict[str, Any]]:
    """Return the ledger of a study, oldest first (pseudonymous IDs only)."""
    rows = db.session.execute(
        select(BonusPayment, Participant.code)
        .join(Participant, Participant.id == BonusPayment.participant_id)
        .where(BonusPayment.study_id == study.id)
        .order_by(BonusPayment.id)
    )
    return [
        {
            "participant_id": code,
            "platform": b.platform.value,
            "rule": b.rule,
            "amount_usd": f"{b.amount_cents / 100:.2f}",
            "issued_by": b.issued_by,
            "issued_at": b.issued_at.strftime("%Y-%m-%d %H:%M:%S"),
        }
        for b, code in rows
    ]
