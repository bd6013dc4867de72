"""What recruiter actions return: costs, submissions as the platform lists them, reports."""

from __future__ import annotations

from dataclasses import dataclass, field


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
