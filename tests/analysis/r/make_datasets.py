"""Write the simulated WTP datasets that ``lme4_reference.R`` fits (seeded; data we created).

Run from the repository root: ``python tests/analysis/r/make_datasets.py`` (``--agreement DIR``
writes the sixty designs of :func:`agreement_sets` to ``DIR`` instead). Each CSV has
``participant_id, pair_id, format, wtp_premium_pct``; the designs mirror the seed study
(every participant sees every pair once, formats alternate within participant and are
counterbalanced across participants) with the departures named below.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent / "data"
# The published design's WTP: base premium, format effect, participant and pair SDs.
BALANCED = {"base": 30, "effect": 4.5, "sd_part": 6, "sd_pair": 3}


def design(rng, n_part: int, n_pair: int) -> pd.DataFrame:
    part = np.repeat(np.arange(n_part), n_pair)
    pair = np.tile(np.arange(n_pair), n_part)
    # Counterbalanced: half the participants start with the summary.
    x = ((part + pair) % 2).astype(float)
    return pd.DataFrame(
        {
            "participant_id": [f"p{i:04d}" for i in part],
            "pair_id": [f"q{j:02d}" for j in pair],
            "format": np.where(x == 1, "summary", "original"),
            "x": x,
        }
    )


def wtp(rng, df, *, base, effect, sd_part, sd_pair, sd_res, slope_pair=0.0, slope_part=0.0):
    pi = pd.factorize(df["participant_id"])[0]
    qi = pd.factorize(df["pair_id"])[0]
    u = rng.normal(0, sd_part, pi.max() + 1)
    v = rng.normal(0, sd_pair, qi.max() + 1)
    su = rng.normal(0, slope_part, pi.max() + 1) if slope_part else np.zeros(pi.max() + 1)
    sv = rng.normal(0, slope_pair, qi.max() + 1) if slope_pair else np.zeros(qi.max() + 1)
    x = df["x"].to_numpy()
    y = base + effect * x + u[pi] + v[qi] + (su[pi] + sv[qi]) * x
    return np.round(y + rng.normal(0, sd_res, len(df)), 2)


def main() -> None:
    HERE.mkdir(exist_ok=True)
    sets = {}
    rng = np.random.default_rng(20261123)
    # The published design: 70 x 10, balanced.
    d = design(rng, 70, 10)
    d["wtp_premium_pct"] = wtp(rng, d, base=30, effect=4.5, sd_part=6, sd_pair=3, sd_res=6)
    sets["balanced_70x10"] = d
    # Messy: 55 x 12 with 18 % of trials missing at random and a few participants with 2-3 rows.
    d = design(rng, 55, 12)
    d["wtp_premium_pct"] = wtp(rng, d, base=25, effect=3.0, sd_part=8, sd_pair=2, sd_res=7)
    keep = rng.random(len(d)) > 0.18
    few = d["participant_id"].isin(["p0003", "p0017", "p0041"])
    keep &= ~few | (rng.random(len(d)) < 0.25)
    sets["messy_unbalanced"] = d[keep].reset_index(drop=True)
    # Singular: no pair variance at all (lme4 puts its SD at 0).
    d = design(rng, 40, 8)
    d["wtp_premium_pct"] = wtp(rng, d, base=20, effect=2.0, sd_part=5, sd_pair=0, sd_res=8)
    sets["singular_pair"] = d
    # Random slopes: the format effect varies by pair and by participant.
    d = design(rng, 70, 10)
    d["wtp_premium_pct"] = wtp(
        rng,
        d,
        base=30,
        effect=4.5,
        sd_part=6,
        sd_pair=3,
        sd_res=5,
        slope_pair=3.0,
        slope_part=2.0,
    )
    sets["slopes_70x10"] = d
    # Larger: 300 x 10.
    d = design(rng, 300, 10)
    d["wtp_premium_pct"] = wtp(rng, d, base=30, effect=4.5, sd_part=6, sd_pair=3, sd_res=6)
    sets["balanced_300x10"] = d
    sets.update(boundary_sets())
    for name, frame in sets.items():
        frame.drop(columns="x").to_csv(HERE / f"{name}.csv", index=False)


def boundary_sets() -> dict[str, pd.DataFrame]:
    """Balanced 70 x 10 designs whose maximal slope model has an SD near 0 (seeded).

    A small slope variance by pair or by participant: the REML criterion is nearly flat between
    0 and lme4's singularity tolerance 1e-4, so where an optimizer stops decides the singular
    flag. ``slopes_flat_70x10``: the criterion at 1e-4 is within 1e-8 of the optimum (lmer with
    its defaults stops at 2e-4, not singular); ``slopes_edge_70x10`` and ``slopes_edge2_70x10``:
    it rises by 3e-7 (lmer stops below 1e-4, singular).
    """
    sets = {}
    for name, seed, slope_pair, slope_part in (
        ("slopes_flat_70x10", 1021, 0.3, 0.0),
        ("slopes_edge_70x10", 1007, 1.0, 0.5),
        ("slopes_edge2_70x10", 1027, 1.0, 0.0),
    ):
        rng = np.random.default_rng(seed)
        d = design(rng, 70, 10)
        slopes = {"slope_pair": slope_pair, "slope_part": slope_part}
        d["wtp_premium_pct"] = wtp(rng, d, **BALANCED, sd_res=6, **slopes)
        sets[name] = d
    return sets


# Sixty more designs of the same kind for the agreement of the singular decision with lmer's
# default isSingular (tests/analysis/r/lme4_singular_agreement.R): seeds 3000-3059, the slope SDs
# (by pair, by participant) cycling through small values, where the REML criterion is flat near 0
# and where lmer's optimizer stops decides the flag.
AGREEMENT_SEEDS = range(3000, 3060)
AGREEMENT_SLOPES = ((0.3, 0.0), (1.0, 0.0), (1.0, 0.5), (0.0, 0.5))


def agreement_sets() -> dict[str, pd.DataFrame]:
    """The sixty seeded 70 x 10 designs of the agreement check, by name ``agree_<seed>``."""
    sets = {}
    for k, seed in enumerate(AGREEMENT_SEEDS):
        slope_pair, slope_part = AGREEMENT_SLOPES[k % len(AGREEMENT_SLOPES)]
        rng = np.random.default_rng(seed)
        d = design(rng, 70, 10)
        slopes = {"slope_pair": slope_pair, "slope_part": slope_part}
        d["wtp_premium_pct"] = wtp(rng, d, **BALANCED, sd_res=6, **slopes)
        sets[f"agree_{seed}"] = d.drop(columns="x")
    return sets


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--agreement":
        # Not committed: regenerated from the seeds wherever they are needed.
        out = Path(sys.argv[2])
        out.mkdir(parents=True, exist_ok=True)
        for name, frame in agreement_sets().items():
            frame.to_csv(out / f"{name}.csv", index=False)
    else:
        main()
