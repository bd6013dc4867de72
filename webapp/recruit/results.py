"""What recruiter actions return: costs, submissions as the platform lists them, reports."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime

from webapp.i18n import DEFAULT_CURRENCY, format_cents
from webapp.recruit.errors import RecruitError


def cents(amount: int, currency: str = DEFAULT_CURRENCY) -> str:
    """Whole cents in ``currency`` (the study's ``payment.currency``): ``1234`` → ``'$12.34'``."""
    return format_cents(amount, currency)


@dataclass(frozen=True)
class Cost:
    """What a study costs on a platform, in integer cents."""

    rewards: int
    reward_fees: int
    bonuses: int
    bonus_fees: int
    fee_rate: float
    note: str = ""
    currency: str = DEFAULT_CURRENCY

    @property
    def total(self) -> int:
        """Everything together."""
        return self.rewards + self.reward_fees + self.bonuses + self.bonus_fees

    def lines(self) -> list[str]:
        """Human-readable lines (CLI and console)."""
        c = self.currency
        out = [
            f"rewards   {cents(self.rewards, c)}",
            # Each part in money: the rates differ on MTurk (40% on rewards of 10+ assignments,
            # 20% on bonuses).
            f"fees      {cents(self.reward_fees + self.bonus_fees, c)} "
            f"({cents(self.reward_fees, c)} on rewards, {cents(self.bonus_fees, c)} on bonuses)",
            f"bonuses   {cents(self.bonuses, c)}",
            f"total     {cents(self.total, c)}",
        ]
        return out + ([self.note] if self.note else [])


@dataclass(frozen=True)
class Submission:
    """One person's submission on the platform (Prolific submission / MTurk assignment)."""

    submission_id: str
    worker_id: str  # canonical spelling
    status: str  # upper case, Prolific's words (MTurk's mapped onto them)
    code: str | None = None
    # When the platform approves it by itself unless it is reviewed first (MTurk's
    # AutoApprovalTime), if the platform says.
    auto_approve_at: datetime | None = None


@dataclass(frozen=True)
class Confirmation:
    """Exactly what a preview offered to do: one ``(key, cents)`` per row, sorted.

    ``bonus``: the key is the participant's id (one ledger row per participant and rule) and
    the amount the bonus; ``approve``: the submission id and its reward. What is confirmed is
    done, and nothing else; a row that changed since refuses the whole action
    (:class:`ConfirmationChanged`).
    """

    action: str
    rows: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, action: str, rows: dict[str, int]) -> Confirmation:
        """The confirmation of ``rows`` (key → cents), in a canonical order."""
        return cls(action, tuple(sorted((str(k), int(v)) for k, v in rows.items())))

    @property
    def total(self) -> int:
        """The sum of the rows' amounts, in cents."""
        return sum(amount for _, amount in self.rows)

    def as_dict(self) -> dict[str, int]:
        """Key → cents."""
        return dict(self.rows)

    def digest(self) -> str:
        """A short fingerprint of the rows (shown beside the total; equal rows, equal digest)."""
        text = json.dumps([self.action, self.rows], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def changed(self, now: Confirmation) -> list[str]:
        """The keys confirmed here whose row ``now`` no longer offers at the same amount."""
        offered = now.as_dict()
        return [key for key, amount in self.rows if offered.get(key) != amount]

    def rest(self, now: Confirmation) -> Confirmation:
        """What ``now`` offers beyond this confirmation (rows that came after it)."""
        mine = self.as_dict()
        return Confirmation.of(self.action, {k: v for k, v in now.rows if k not in mine})

    def lines(self, currency: str = DEFAULT_CURRENCY) -> list[str]:
        """The line that names what is confirmed (count, total in ``currency``, fingerprint)."""
        return [
            f"this confirmation: {len(self.rows)} row(s), {cents(self.total, currency)} "
            f"(fingerprint {self.digest()})"
        ]


@dataclass
class Report:
    """What an action did, line by line, plus counts for tests and the audit log."""

    action: str
    lines: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    cost: Cost | None = None
    confirmation: Confirmation | None = None  # a preview's: exactly what it offers to do


class ConfirmationChanged(RecruitError):
    """What a preview offered changed before it was done (someone paid, rejected, or the
    majority moved): nothing was done; ``preview`` is the new offer to confirm."""

    def __init__(self, message: str, preview: Report) -> None:
        super().__init__(message)
        self.preview = preview


def fee(amount: int, rate: float) -> int:
    """The fee on ``amount`` cents, rounded to the cent."""
    return int(round(amount * rate))
