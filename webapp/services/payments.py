"""Bonuses: compute them from the study's rule, record them in a ledger, write payment files.

The product-choice rule (``majority_choice``) pays ``payment.bonus.amount`` (in the study's
``payment.currency``) for every choice that
matches the majority choice for that pair and format among the study's completed, non-excluded,
real (not test) participants (the published study paid a base of $3 plus such a bonus). On an
exact tie both choices count as matching, so nobody loses a bonus to a coin flip.

The ledger (:class:`~webapp.models.BonusPayment`) holds one row per participant and rule; an
issued bonus is never issued again. Amounts are kept in integer cents so sums are exact. A
bonus is paid one of two ways, both through the ledger's one state machine
(:mod:`webapp.recruit.ledger`): a payment file the researcher uploads (its rows become
``filed``, which the API never pays) or the recruiter's API (``framelab recruit SLUG bonus``).

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
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import selectinload

from webapp.definition import StudyDefinition
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.i18n import format_cents
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
AMOUNT_CHANGED = "its amount changed since it was confirmed"
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
        """The amount in the study's currency with two decimals, e.g. ``'0.70'``."""
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
    from_ledger: int = 0  # issued earlier, never sent: written to a file for the first time
    # (participant code, why): issued bonuses the file does not carry, because the recruiter's
    # API holds, sent or paid them (a file never repeats what the API may pay)
    not_written: list[tuple[str, str]] = field(default_factory=list)


def check_payment_rule(definition: StudyDefinition, source: str) -> None:
    """Refuse a study whose ``payment.bonus.rule`` is unknown.

    Raises
    ------
    webapp.validation.StudyDefinitionError
        Naming ``payment.bonus.rule`` and the known rules.
    """
    from webapp.tasks import get_task_type
    from webapp.validation import StudyDefinitionError

    rule = definition.payment.bonus.rule
    if rule not in RULES:
        raise StudyDefinitionError(
            source, "payment.bonus.rule", f"unknown rule {rule!r}; known: {list(RULES)}"
        )
    if rule == "majority_choice" and not any(
        (task := get_task_type(b.type)) is not None and task.bonus_answers(b)
        for b in definition.tasks
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
    definition = study_definition(study)
    bonus = definition.payment.bonus
    if bonus.rule == "none" or not bonus.amount:
        raise PaymentError(f"study {study.slug!r} pays no bonus (payment.bonus: {bonus.to_json()})")
    check_payment_rule(definition, study.slug)
    rule = bonus.rule
    currency = definition.payment.currency
    if platform is Platform.mturk and currency != "USD":
        raise PaymentError(
            f"study {study.slug!r} pays in {currency} (payment.currency); MTurk pays in US "
            "dollars only, so its bonus file would pay the wrong amounts"
        )
    cents = round(bonus.amount * 100)
    cap = round(bonus.cap * 100)
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
        if n * cents > cap:  # a definition loaded before the bound was checked at load
            raise PaymentError(
                f"{p.code}'s bonus ({n} x {cents} cents) is above the study's bound of {cap} "
                "cents per participant (payment.bonus.max); nothing was issued"
            )
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
                    f"({format_cents(cents, currency)} each). Thank you!"
                ),
                request_token=_token(study, p, rule),
            )
        )
    return BonusPlan(lines, excluded, reconciled)


def compute_bonuses(study: Study, platform: Platform) -> list[BonusLine]:
    """Return the lines of :func:`bonus_plan` (one per eligible participant; amount may be 0)."""
    return bonus_plan(study, platform).lines


def issue_bonuses(
    study: Study,
    platform: Platform,
    *,
    issued_by: str,
    now: datetime,
    to_file: bool,
    force: bool = False,
    only: Mapping[int, int] | None = None,
) -> BonusIssue:
    """Record new bonuses in the ledger and return the lines for the payment file; commit.

    With ``to_file`` (a payment file is being written) the file carries every bonus that is
    payable and not yet sent: new ones and ledger rows still new (issued by an API run that
    has not paid them); all of them become ``filed`` (:mod:`webapp.recruit.ledger`), which the
    API never pays. Without ``to_file`` (the API path) new rows stay new for the API to pay.

    Without ``force`` a run with nothing to write or issue is refused. With ``force`` the file
    also repeats the ``filed`` rows with their *recorded* amounts and request tokens (to
    re-create a lost file); rows the API holds, sent or paid are never written again
    (:attr:`BonusIssue.not_written` names them). The ledger never gets a second row.

    Parameters
    ----------
    study : Study
    platform : Platform
        ``prolific`` or ``mturk``.
    issued_by : str
        Who issues them (username or ``cli``), recorded in the ledger.
    now : datetime
    to_file : bool
        The payment-file path (``True``) or the API path (``False``); no default, so a caller
        always says which.
    force : bool
    only : Mapping, optional
        Participant id → confirmed amount in cents: issue only these, and only at that amount
        (a bonus whose amount changed since it was confirmed is left out, with the reason).

    Returns
    -------
    BonusIssue

    Raises
    ------
    PaymentError
        Unpayable platform, no bonus rule, or nothing new to issue without ``force``.
    """
    from webapp.recruit import ledger as states

    if platform not in PAYABLE_PLATFORMS:
        raise PaymentError("bonus files exist for prolific and mturk only")
    rule = study_definition(study).payment.bonus.rule
    plan = bonus_plan(study, platform)
    excluded = list(plan.excluded)
    issued = {
        b.participant_id: b
        for b in db.session.scalars(
            select(BonusPayment)
            .where(BonusPayment.study_id == study.id, BonusPayment.rule == rule)
            .execution_options(populate_existing=True)  # states as they are now
        )
    }
    lines: list[BonusLine] = []
    not_written: list[tuple[str, str]] = []
    waiting: dict[int, BonusLine] = {}  # ledger rows still new: the file takes them
    new = skipped = zero = 0
    filed_note = states.note(f"written to a payment file by {issued_by}")

    def recorded(line: BonusLine, row: BonusPayment, again: bool) -> BonusLine:
        values = {"amount_cents": row.amount_cents, "reason": row.reason}
        values.update(request_token=row.request_token, already_issued=again)
        return BonusLine(**{**line.__dict__, **values})

    for line in plan.lines:
        row = issued.get(line.participant_id)
        if row is not None:
            skipped += 1
            if not to_file:
                continue
            if row.platform_state is states.NEW and row.platform == platform:
                waiting[row.id] = recorded(line, row, False)
            elif row.platform_state == states.FILED and force:
                lines.append(recorded(line, row, True))
            elif row.platform_state != states.FILED:
                not_written.append((line.participant_code, _api_state(row)))
            continue
        if only is not None:
            if line.participant_id not in only:
                continue
            if only[line.participant_id] != line.amount_cents:
                excluded.append((line.participant_code, AMOUNT_CHANGED))
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
                **(
                    {"platform_state": states.FILED, "sent_at": now, "platform_note": filed_note}
                    if to_file
                    else {}
                ),
            )
        )
        lines.append(line)
        new += 1
    # Rows still new are taken for the file by the ledger's compare-and-set: a row an API run
    # holds at this moment stays with that run (named below), never in both.
    claim = states.Claim()
    taken = claim.take(waiting, (states.NEW,), to=states.FILED) if waiting else set()
    for row_id, line in waiting.items():
        if row_id in taken:
            lines.append(line)
        else:
            not_written.append((line.participant_code, "being paid through the API by a run"))
    if not new and not taken and not force:
        db.session.rollback()
        left_out = f"; {len(excluded)} left out" if excluded else ""
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
            "from_ledger": len(taken),
            "repeated": len(lines) - new - len(taken),
            "total_cents": sum(x.amount_cents for x in lines if not x.already_issued),
            "force": force,
            "to_file": to_file,
            "excluded": len(excluded),
            "reconciled": plan.reconciled,
        },
        commit=False,
    )
    try:
        db.session.commit()
    except IntegrityError:  # another issue of the same bonuses committed first
        db.session.rollback()
        claim.release(taken, states.NEW)
        raise PaymentError(
            "bonuses were being issued at the same time elsewhere; nothing was issued by this "
            "run; run it again to issue what is still missing"
        ) from None
    claim.release(taken, states.FILED, sent_at=now, platform_note=filed_note)
    return BonusIssue(lines, new, skipped, zero, excluded, plan.reconciled, len(taken), not_written)


def _api_state(row: BonusPayment) -> str:
    """Why the API path, not a file, owns a ledger row (its state in words)."""
    from webapp.recruit import ledger as states

    return {
        states.PAID: "paid through the API",
        states.REFUSED: f"refused by the platform ({row.platform_note or 'see the ledger'})",
    }.get(row.platform_state or "", f"being paid through the API ({row.platform_state})")


def file_not_used(
    study: Study, platform: Platform, codes: Iterable[str], *, actor: Any, now: datetime
) -> list[str]:
    """The researcher says a payment file was not used: its ``filed`` rows become payable.

    ``codes`` names the participants (pseudonymous codes) whose bonus was in a file that was
    never uploaded, or is ``["all"]`` for every ``filed`` row of ``platform``. A row written to
    its file less than :data:`webapp.recruit.ledger.CONFIRM_AFTER` before ``now`` is refused:
    the platform may not list a bonus paid from the file yet. Each row moves
    ``filed`` → new by the ledger's compare-and-set, with a note, and the action is audited
    (who, when, which). The API path still reads the platform's own record before paying any
    of them, so a file that was used after all is not paid twice.

    Returns
    -------
    list of str
        The codes made payable again.

    Raises
    ------
    PaymentError
        A code that is not one of the study's participants with a ``filed`` bonus on
        ``platform``, or whose file was written less than an hour ago (nothing is changed
        then; the message says from when it can be said).
    """
    from webapp.recruit import ledger as states
    from webapp.services import audit

    wanted = list(dict.fromkeys(c.strip() for c in codes if c.strip()))
    rows = dict(
        (code, b)
        for b, code in db.session.execute(
            select(BonusPayment, Participant.code)
            .join(Participant, Participant.id == BonusPayment.participant_id)
            .where(
                BonusPayment.study_id == study.id,
                BonusPayment.platform == platform,
                BonusPayment.platform_state == states.FILED,
            )
        )
    )
    if not wanted:
        raise PaymentError("name the participants whose file was not used (their p_… codes)")
    chosen = sorted(rows) if wanted == ["all"] else wanted
    unknown = [c for c in chosen if c not in rows]
    if not chosen:
        raise PaymentError(f"no bonus on {platform.value} is waiting in a payment file")
    if unknown:
        raise PaymentError(
            f"no bonus of {', '.join(unknown)} on {platform.value} is waiting in a payment "
            "file (see the ledger); nothing was changed"
        )
    waits: dict[datetime, list[str]] = {}
    for c in chosen:
        written = rows[c].sent_at or rows[c].issued_at
        if written > now - states.CONFIRM_AFTER:
            waits.setdefault(written + states.CONFIRM_AFTER, []).append(c)
    if waits:
        raise PaymentError(
            "; ".join(
                f"{' '.join(c)}: from {t:%Y-%m-%d %H:%M} UTC" for t, c in sorted(waits.items())
            )
            + ": written to a payment file less than an hour ago. The platform lists a bonus "
            "paid from a file only minutes after it was pasted, so until then a used file "
            "cannot be told from an unused one, and saying it was not used could pay the bonus "
            "twice; nothing was changed"
        )
    claim = states.Claim()
    held = claim.take([rows[c].id for c in chosen], (states.FILED,))
    who = str(getattr(actor, "username", actor))
    claim.move(
        held,
        states.FILED,
        states.NEW,
        keep=False,
        sent_at=None,
        platform_note=states.note(f"{who} said the payment file was not used ({now:%Y-%m-%d})"),
    )
    done = [c for c in chosen if rows[c].id in held]
    audit.record(
        actor,
        "bonus.file_not_used",
        study=study,
        detail={"platform": platform.value, "participants": done},
    )
    return done


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
    """Return the ledger of a study, oldest first (pseudonymous IDs only), each row with how
    far its payment got (``state``: sent by file, paid, …; :data:`webapp.recruit.ledger.LABELS`)."""
    from webapp.recruit.ledger import LABELS

    currency = study_definition(study).payment.currency
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
            "amount": f"{b.amount_cents / 100:.2f}",
            "currency": currency,
            "issued_by": b.issued_by,
            "issued_at": b.issued_at.strftime("%Y-%m-%d %H:%M:%S"),
            "state": LABELS.get(b.platform_state, b.platform_state or ""),
        }
        for b, code in rows
    ]
