"""The study as defined, simulated under stated effects and variance components.

One simulated study is the platform's design as the study file defines it (``docs/export.md``,
``sequence``; :class:`analysis.plan.spec.ChoiceBlock`): participants arrive one after another
and cycle through the sequences ``A``, ``B``, ... (one per format, k of them); in every
product-choice block, sequence ``r`` shows the pair at 0-based position ``j`` of the stimulus
file in format ``formats[(j + r) % k]``, the rows of a cyclic Latin square, so every participant
sees each pair of each block once and every format. With two formats this is the A/B design:
``A`` shows the pairs at odd positions as ``original``, ``B`` the complement. Each arriving
participant fails the exclusion rules with probability ``exclusion_share`` (an attention or
quiz failure, whichever rule the plan applies); the looks then take the completed,
non-excluded participants in arrival order exactly as on real data
(:func:`analysis.plan.looks.look_sample`), and the pre-registered test compares its two levels
on every block's trials of those formats.

Outcomes, for participant ``i`` and pair ``j`` (``x = 1`` with the pre-registered treatment
format; every other format, the reference and any format the test leaves out, at the
baseline):

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
    from collections.abc import Sequence

    import numpy as np
    import pandas as pd

    from analysis.plan.spec import AnalysisPlan, ChoiceBlock

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
    blocks: Sequence[ChoiceBlock],
    n_participants: int,
    scenario: Scenario,
    plan: AnalysisPlan,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Simulate ``n_participants`` arrivals of the study (all of them completing).

    Parameters
    ----------
    blocks : sequence of ChoiceBlock
        The study's product-choice blocks (:attr:`analysis.plan.spec.StudyPlan.blocks`): their
        pairs in stimulus-file order and formats set each trial's format per sequence.
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
        ``participant_id, status, sequence, block, pair_id, format, chose_target,
        wtp_premium_pct, quiz_passed, attention_passed, duration_s, auth_score, auth_canary,
        trial_index, answered_at, finished_at`` (arrival ``i`` finishes at minute ``i``).
    """
    import numpy as np
    import pandas as pd
    from scipy.special import expit, logit

    n = n_participants
    trt = plan.levels[1]
    k = len(blocks[0].formats)
    sequence = np.arange(n) % k  # arrivals cycle A, B, C, ... as the server balances them
    u = rng.normal(0, scenario.sd_participant, n)
    parts = []
    for block in blocks:
        m = len(block.pairs)
        position = np.arange(m)
        fmt = np.asarray(block.formats, dtype=object)[(position[None, :] + sequence[:, None]) % k]
        x = (fmt == trt).astype(float)
        v = rng.normal(0, scenario.sd_pair, m)
        if plan.test == "choice_glmm":
            eta = logit(scenario.baseline) + math.log(scenario.effect) * x + u[:, None] + v
            chose = (rng.random((n, m)) < expit(eta)).astype(int)
            wtp = np.full((n, m), 10.0)
        else:
            noise = rng.normal(0, scenario.sd_residual, (n, m))
            wtp = (scenario.baseline + scenario.effect * x + u[:, None] + v + noise).clip(0)
            chose = (rng.random((n, m)) < 0.5).astype(int)
        parts.append(
            pd.DataFrame(
                {
                    "arrival": np.repeat(np.arange(n), m),
                    "block": block.id,
                    "trial_index": np.tile(position, n),
                    "pair_id": np.tile(np.asarray(block.pairs, dtype=object), n),
                    "format": fmt.ravel(),
                    "chose_target": chose.ravel(),
                    "wtp_premium_pct": wtp.ravel(),
                }
            )
        )
    trials = pd.concat(parts, ignore_index=True).sort_values("arrival", kind="stable")
    rep = trials.pop("arrival").to_numpy()
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
    letters = np.array(list("ABCDEFGH"[:k]), dtype=object)
    people = pd.DataFrame(
        {
            "participant_id": ids[rep],
            "status": "completed",
            "sequence": letters[sequence][rep],
        }
    )
    after = pd.DataFrame(
        {
            "quiz_passed": quiz[rep],
            "attention_passed": attention[rep],
            "duration_s": duration[rep],
            # Nobody flagged: the exclusion share is drawn through the attention or quiz rule.
            "auth_score": 0,
            "auth_canary": 0,
            "answered_at": np.asarray(answered, dtype=object)[rep],
            "finished_at": np.asarray(finished, dtype=object)[rep],
        }
    )
    return pd.concat([people, trials.reset_index(drop=True), after], axis=1)


def pilot_components(data: pd.DataFrame, plan: AnalysisPlan) -> dict[str, object]:
    """Baseline, variance components and exclusion share estimated from a pilot export.

    The effect is not estimated: a pilot's effect estimate is too noisy to plan with, so the
    effect to detect is always stated. The model is the pre-registered test's with every
    format of the export (the pre-registered reference first), so the study's own pilot of k
    formats gives its components.

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
        (analysed), ``at_zero`` (the SDs the fit puts at 0: no planning value, see Notes).

    Raises
    ------
    analysis.stats.crossed.ConvergenceError
        The pilot's model did not converge.

    Notes
    -----
    An SD estimated at 0 (a singular fit: bots choosing at random, or too few participants to
    tell) says nothing about the study's variance; planning with it overstates the power. It is
    named in ``at_zero`` and left for the researcher to state.
    """
    from scipy.special import expit

    from analysis.exclusions import exclude_choice
    from analysis.stats.crossed import SINGULAR_TOL

    kept, _ = exclude_choice(data, plan.exclusions)
    completed = data.loc[data["status"] == "completed", "participant_id"].nunique()
    n_kept = kept["participant_id"].nunique()
    out: dict[str, object] = {
        "exclusion_share": 1 - n_kept / completed if completed else 0.0,
        "n_participants": float(n_kept),
    }
    present = [str(f) for f in dict.fromkeys(kept["format"].dropna())]
    levels = [*plan.levels, *sorted(set(present) - set(plan.levels))]
    if plan.test == "choice_glmm":
        from analysis.stats.choice import choice_glmm

        row = choice_glmm(kept, levels=levels).iloc[0]
        out["baseline"] = float(expit(row["intercept_log_odds"]))
    else:
        from analysis.stats.wtp import wtp_mixed

        # On the percent scale the simulation draws in, whatever the test's transform.
        row = wtp_mixed(kept, levels=levels, model="crossed_sparse").iloc[0]
        out.update(baseline=float(row["intercept"]), sd_residual=float(row["sd_residual"]))
    out.update(sd_participant=float(row["sd_subject"]), sd_pair=float(row["sd_item"]))
    scale = 1.0 if plan.test == "choice_glmm" else float(row["sd_residual"])
    out["at_zero"] = [
        name for name in ("sd_participant", "sd_pair") if out[name] < SINGULAR_TOL * scale
    ]
    return out
