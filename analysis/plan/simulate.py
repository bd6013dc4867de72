"""The study as defined, simulated under stated effects and variance components.

One simulated study is the platform's design (``docs/export.md``, ``sequence``): participants
arrive one after another and alternate between sequences ``A`` and ``B``; with ``A`` the pairs at
odd positions of the stimulus file are shown as ``original`` and the others as ``summary``,
``B`` the complement, so every participant sees each pair once and both formats. Each arriving
participant fails the exclusion rules with probability ``exclusion_share`` (an attention or
quiz failure, whichever rule the plan applies); the looks then take the completed,
non-excluded participants in arrival order exactly as on real data
(:func:`analysis.plan.looks.look_sample`).

Outcomes, for participant ``i`` and pair ``j`` (``x = 1`` with the treatment format):

- choice: ``logit P(chose_target) = logit(baseline) + log(odds_ratio) x + u_i + v_j``,
  ``u ~ N(0, sd_participant^2)``, ``v ~ N(0, sd_pair^2)`` (the GLMM's own model);
- WTP premium (percent of the other price): ``baseline + effect x + u_i + v_j + e_ij``, cut at
  0 (the platform accepts no negative premium; keep the baseline well above the SDs).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from analysis.plan.spec import AnalysisPlan

__all__ = ["Scenario", "pilot_components", "simulate_arrivals"]


@dataclass(frozen=True)
class Scenario:
    """Effect and variance components of one outcome, the one the pre-registered test models.

    Attributes
    ----------
    effect : float
        ``choice_glmm``: the conditional odds ratio, treatment vs reference; ``wtp_lmm``: the
        treatment-minus-reference difference in premium percent.
    baseline : float
        ``choice_glmm``: P(choosing the target) with the reference format for the average
        participant and pair; ``wtp_lmm``: the mean premium percent with the reference format.
    sd_participant, sd_pair : float
        SDs of the participant and pair random intercepts (logit scale for choices, percent
        for WTP).
    sd_residual : float
        ``wtp_lmm`` only: the SD of a single answer around its participant's and pair's mean.
    exclusion_share : float
        Share of arriving participants the exclusion rules remove.
    """

    effect: float
    baseline: float
    sd_participant: float
    sd_pair: float
    sd_residual: float = 0.0
    exclusion_share: float = 0.0

    def __post_init__(self) -> None:
        for name in ("sd_participant", "sd_pair", "sd_residual"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if not 0 <= self.exclusion_share < 0.9:
            raise ValueError(f"exclusion_share must be in [0, 0.9), got {self.exclusion_share}")

    def check(self, test: str) -> None:
        """Refuse values the test's outcome cannot have."""
        if test == "choice_glmm":
            if not 0 < self.baseline < 1:
                raise ValueError(
                    f"the choice baseline is a probability in (0, 1), got {self.baseline}"
                )
            if not self.effect > 0:
                raise ValueError(f"the odds ratio must be above 0, got {self.effect}")
        elif not self.sd_residual > 0:
            raise ValueError("the WTP model needs a residual SD above 0 (--sd-residual)")

    def as_dict(self) -> dict[str, float]:
        """Plain values (for the results file and the report)."""
        return asdict(self)


def simulate_arrivals(
    pairs: tuple[str, ...] | list[str],
    n_participants: int,
    scenario: Scenario,
    plan: AnalysisPlan,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Simulate ``n_participants`` arrivals of the study (all of them completing).

    Parameters
    ----------
    pairs : sequence of str
        Pair ids in stimulus-file order (their position sets their format per sequence).
    n_participants : int
        Arrivals to simulate (the looks take what they need, in order).
    scenario : Scenario
        Effects and variance components of the tested outcome.
    plan : AnalysisPlan
        Test, levels and exclusion rules.
    rng : numpy.random.Generator
        The simulation's own stream.

    Returns
    -------
    pandas.DataFrame
        One row per trial with the columns the exclusion rules and models read:
        ``participant_id, status, sequence, pair_id, format, chose_target, wtp_premium_pct,
        quiz_passed, attention_passed, duration_s, trial_index, answered_at, finished_at``
        (arrival ``i`` finishes at minute ``i``).
    """
    import numpy as np
    import pandas as pd
    from scipy.special import expit, logit

    m = len(pairs)
    n = n_participants
    ref, trt = plan.levels
    seq_b = np.arange(n) % 2 == 1  # arrivals alternate A, B
    position = np.arange(m)
    # Sequence A: even positions (1st, 3rd, ... pair) original; B: the complement.
    summary = ((position[None, :] + seq_b[:, None]) % 2) == 1
    fmt = np.where(summary, "summary", "original")
    x = (fmt == trt).astype(float)
    u = rng.normal(0, scenario.sd_participant, n)
    v = rng.normal(0, scenario.sd_pair, m)
    if plan.test == "choice_glmm":
        eta = logit(scenario.baseline) + math.log(scenario.effect) * x + u[:, None] + v[None, :]
        chose = (rng.random((n, m)) < expit(eta)).astype(int)
        wtp = np.full((n, m), 10.0)
    else:
        noise = rng.normal(0, scenario.sd_residual, (n, m))
        wtp = (scenario.baseline + scenario.effect * x + u[:, None] + v[None, :] + noise).clip(0)
        chose = (rng.random((n, m)) < 0.5).astype(int)
    excluded = rng.random(n) < scenario.exclusion_share
    rules = plan.exclusions
    attention = np.ones(n, dtype=int)
    quiz = np.ones(n, dtype=int)
    if rules.require_attention:
        attention[excluded] = 0
    elif rules.require_quiz:
        quiz[excluded] = 0
    # Durations well inside any median rule: only the flagged arrivals are excluded.
    duration = 900.0 * np.exp(rng.normal(0, 0.1, n))
    start = pd.Timestamp("2026-01-01T09:00:00Z")
    finished = (start + pd.to_timedelta(np.arange(n) + 1, unit="min")).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    answered = (start + pd.to_timedelta(np.arange(n) + 0.5, unit="min")).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    ids = np.array([f"p_{i:06d}" for i in range(n)], dtype=object)
    rep = np.repeat(np.arange(n), m)
    return pd.DataFrame(
        {
            "participant_id": ids[rep],
            "status": "completed",
            "sequence": np.where(seq_b, "B", "A")[rep],
            "trial_index": np.tile(position, n),
            "pair_id": np.tile(np.asarray(pairs, dtype=object), n),
            "format": fmt.ravel(),
            "chose_target": chose.ravel(),
            "wtp_premium_pct": wtp.ravel(),
            "quiz_passed": quiz[rep],
            "attention_passed": attention[rep],
            "duration_s": duration[rep],
            "answered_at": np.asarray(answered, dtype=object)[rep],
            "finished_at": np.asarray(finished, dtype=object)[rep],
        }
    )


def pilot_components(data: pd.DataFrame, plan: AnalysisPlan) -> dict[str, float]:
    """Baseline, variance components and exclusion share estimated from a pilot export.

    The effect is not estimated: a pilot's effect estimate is too noisy to plan with, so the
    effect to detect is always stated.

    Parameters
    ----------
    data : pandas.DataFrame
        The pilot's long export (``analysis.io.load_choice``).
    plan : AnalysisPlan
        The test (which outcome), levels and exclusion rules.

    Returns
    -------
    dict
        ``baseline`` (choice: the GLMM's reference-format probability for the average
        participant and pair; WTP: the LMM's reference-format mean premium, percent),
        ``sd_participant``, ``sd_pair`` (logit scale or percent), ``sd_residual`` (WTP only),
        ``exclusion_share`` (completed participants the rules exclude), ``n_participants``
        (analysed).

    Raises
    ------
    analysis.stats.crossed.ConvergenceError
        The pilot's model did not converge.
    """
    from scipy.special import expit

    from analysis.exclusions import exclude_choice

    kept, _ = exclude_choice(data, plan.exclusions)
    completed = data.loc[data["status"] == "completed", "participant_id"].nunique()
    n_kept = kept["participant_id"].nunique()
    out: dict[str, float] = {
        "exclusion_share": 1 - n_kept / completed if completed else 0.0,
        "n_participants": float(n_kept),
    }
    if plan.test == "choice_glmm":
        from analysis.stats.choice import choice_glmm

        row = choice_glmm(kept, levels=plan.levels).iloc[0]
        out.update(
            baseline=float(expit(row["intercept_log_odds"])),
            sd_participant=float(row["sd_subject"]),
            sd_pair=float(row["sd_item"]),
        )
    else:
        from analysis.stats.wtp import wtp_mixed

        # On the percent scale the simulation draws in, whatever the test's transform.
        row = wtp_mixed(kept, levels=plan.levels, model="crossed_sparse").iloc[0]
        out.update(
            baseline=float(row["intercept"]),
            sd_participant=float(row["sd_subject"]),
            sd_pair=float(row["sd_item"]),
            sd_residual=float(row["sd_residual"]),
        )
    return out
