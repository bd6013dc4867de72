"""Simulated studies with known built-in effects, written in the platform's export format.

Pure functions of their arguments and a seed: used to check that the analysis recovers what was
put in (coverage tests), to exercise the exclusion rules and to benchmark the report at scale.
The choice study mirrors the platform's design (``docs/export.md``): each participant sees every
pair once, in a seeded order, alternating original and summary reviews starting with original
(sequence ``A``) or summary (``B``), assigned in alternation so the formats are counterbalanced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["simulate_choice_study"]


def simulate_choice_study(
    n_participants: int = 70,
    n_pairs: int = 10,
    *,
    seed: int = 0,
    rate_original: float = 0.523,
    rate_summary: float = 0.837,
    participant_sd_logit: float = 0.0,
    pair_sd_logit: float = 0.0,
    wtp_base_pct: float = 30.0,
    wtp_effect_pct: float = 4.5,
    wtp_participant_sd: float = 6.0,
    wtp_pair_sd: float = 3.0,
    wtp_residual_sd: float = 6.0,
    share_incomplete: float = 0.0,
    share_failed_quiz: float = 0.0,
    share_failed_attention: float = 0.0,
    share_fast: float = 0.0,
    study_slug: str = "sim-choice",
) -> pd.DataFrame:
    """Simulate a product-choice study as the platform's ``long`` export.

    Parameters
    ----------
    n_participants, n_pairs : int
        Participants; pairs (each participant sees every pair once).
    seed : int
        Seed of the whole simulation.
    rate_original, rate_summary : float
        Probability of choosing the target with original reviews / summaries, for a participant
        and pair at the average (exactly the marginal rates when both SDs below are 0).
    participant_sd_logit, pair_sd_logit : float
        SDs of participant and pair random intercepts on the logit scale.
    wtp_base_pct, wtp_effect_pct : float
        Mean premium (percent of the other price) with original reviews; the built-in
        summary-minus-original effect.
    wtp_participant_sd, wtp_pair_sd, wtp_residual_sd : float
        SDs of the crossed random intercepts and the residual of the premium. Premiums below 0
        are set to 0 (the platform only accepts non-negative premiums); keep the base well above
        the SDs so this stays rare and the effect stays exact.
    share_incomplete, share_failed_quiz, share_failed_attention, share_fast : float
        Shares of participants who did not complete, failed the quiz, failed an attention check
        or finished implausibly fast (for exclusion tests). Disjoint, drawn in that order.
    study_slug : str
        Value of the ``study_slug`` column.

    Returns
    -------
    pandas.DataFrame
        One row per trial with every column of the choice ``long`` export (``docs/export.md``).
    """
    import numpy as np
    import pandas as pd
    from scipy.special import expit, logit

    rng = np.random.default_rng(seed)
    raw_ids = rng.integers(0, 2**63, size=n_participants, dtype="int64")
    pids = [f"p_{int(v):016x}" for v in raw_ids]
    pairs = [f"pair{j + 1:02d}" for j in range(n_pairs)]
    product_types = ["headphones", "blender", "backpack", "kettle", "router"]
    u_choice = rng.normal(0, participant_sd_logit, n_participants)
    v_choice = rng.normal(0, pair_sd_logit, n_pairs)
    u_wtp = rng.normal(0, wtp_participant_sd, n_participants)
    v_wtp = rng.normal(0, wtp_pair_sd, n_pairs)

    # Participant-level flags, disjoint.
    flags = rng.permutation(n_participants)
    cuts = np.cumsum(
        [
            round(share_incomplete * n_participants),
            round(share_failed_quiz * n_participants),
            round(share_failed_attention * n_participants),
            round(share_fast * n_participants),
        ]
    )
    incomplete, failed_quiz, failed_attn, fast = np.split(flags[: cuts[-1]], cuts[:-1])
    status = np.array(["completed"] * n_participants, dtype=object)
    status[incomplete] = rng.choice(["returned", "timed_out"], size=len(incomplete))
    quiz = np.ones(n_participants, dtype=int)
    quiz[failed_quiz] = 0
    attention = np.ones(n_participants, dtype=int)
    attention[failed_attn] = 0
    duration = rng.normal(900, 150, n_participants).clip(400)
    duration[fast] = rng.uniform(60, 150, len(fast))

    n = n_participants * n_pairs
    p_idx = np.repeat(np.arange(n_participants), n_pairs)
    trial = np.tile(np.arange(n_pairs), n_participants)
    order = np.argsort(rng.random((n_participants, n_pairs)), axis=1).ravel()
    sequence = np.where(np.arange(n_participants) % 2 == 0, "A", "B")[p_idx]
    is_summary = (trial % 2 == 1) ^ (sequence == "B")
    base = np.where(is_summary, logit(rate_summary), logit(rate_original))
    prob = expit(base + u_choice[p_idx] + v_choice[order])
    chose = (rng.random(n) < prob).astype(int)
    target_side = rng.choice(["left", "right"], size=n)
    other = np.where(target_side == "left", "right", "left")
    chosen_side = np.where(chose == 1, target_side, other)
    price = rng.choice([19.99, 24.99, 29.99, 39.99, 49.99, 79.99], size=n)
    pct = (
        wtp_base_pct
        + wtp_effect_pct * is_summary
        + u_wtp[p_idx]
        + v_wtp[order]
        + rng.normal(0, wtp_residual_sd, n)
    ).clip(0)
    premium = pct * price / 100
    seeds = rng.integers(0, 2**31 - 1, n_participants)
    start = pd.Timestamp("2026-01-01T09:00:00Z") + pd.to_timedelta(
        rng.uniform(0, 86400 * 7, n_participants), unit="s"
    )
    answered = start[p_idx] + pd.to_timedelta(60 + 70 * trial, unit="s")
    completed = status[p_idx] == "completed"
    return pd.DataFrame(
        {
            "study_slug": study_slug,
            "participant_id": np.array(pids, dtype=object)[p_idx],
            "platform": "prolific",
            "status": status[p_idx],
            "sequence": sequence,
            "seed": seeds[p_idx],
            "trial_index": trial,
            "pair_id": np.array(pairs, dtype=object)[order],
            "product_type": np.array(product_types, dtype=object)[order % len(product_types)],
            "format": np.where(is_summary, "summary", "original"),
            "target_side": target_side,
            "chosen_side": chosen_side,
            "chose_target": chose,
            "currency": "USD",
            "other_price": price,
            "wtp_premium": premium,
            "wtp_premium_pct": 100 * premium / price,
            "rt_ms": rng.gamma(4, 4000, n).round().astype(int),
            "wtp_rt_ms": rng.gamma(3, 3000, n).round().astype(int),
            "server_rt_ms": rng.gamma(4, 4100, n).round().astype(int),
            "answered_at": answered.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "quiz_passed": quiz[p_idx],
            "quiz_attempts": np.where(quiz[p_idx] == 1, 1, 3),
            "attention_passed": attention[p_idx],
            "duration_s": np.where(completed, duration[p_idx], np.nan),
        }
    )
