"""Write the simulated binary-choice datasets that ``glmer_reference.R`` fits (seeded; data we
created).

Run from the repository root: ``python tests/analysis/r/make_glmm_datasets.py``. Each CSV has
``participant_id, pair_id, format, chose_target``; the designs mirror the seed study (every
participant sees every pair once, formats alternate within participant and are counterbalanced
across participants) with the departures named below. The outcome is drawn from
``logit P(chose_target) = base + effect * summary + u_participant + v_pair``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent / "data"


def design(n_part: int, n_pair: int) -> pd.DataFrame:
    part = np.repeat(np.arange(n_part), n_pair)
    pair = np.tile(np.arange(n_pair), n_part)
    x = ((part + pair) % 2).astype(float)  # counterbalanced: half start with the summary
    return pd.DataFrame(
        {
            "participant_id": [f"p{i:04d}" for i in part],
            "pair_id": [f"q{j:02d}" for j in pair],
            "format": np.where(x == 1, "summary", "original"),
            "x": x,
        }
    )


def choices(rng, df, *, base, effect, sd_part, sd_pair) -> np.ndarray:
    pi = pd.factorize(df["participant_id"])[0]
    qi = pd.factorize(df["pair_id"])[0]
    u = rng.normal(0, sd_part, pi.max() + 1)
    v = rng.normal(0, sd_pair, qi.max() + 1)
    eta = base + effect * df["x"].to_numpy() + u[pi] + v[qi]
    return (rng.random(len(df)) < 1 / (1 + np.exp(-eta))).astype(int)


def main() -> None:
    HERE.mkdir(exist_ok=True)
    rng = np.random.default_rng(20261124)
    sets = {}
    # The published design: 70 x 10, balanced.
    d = design(70, 10)
    d["chose_target"] = choices(rng, d, base=-0.3, effect=0.6, sd_part=0.9, sd_pair=0.5)
    sets["choice_70x10"] = d
    # Messy: 55 x 12 with 20 % of trials missing at random and three participants with 2-3 rows.
    d = design(55, 12)
    d["chose_target"] = choices(rng, d, base=0.2, effect=0.4, sd_part=1.2, sd_pair=0.3)
    keep = rng.random(len(d)) > 0.20
    few = d["participant_id"].isin(["p0003", "p0017", "p0041"])
    keep &= ~few | (rng.random(len(d)) < 0.25)
    sets["choice_messy"] = d[keep].reset_index(drop=True)
    # Near-singular: no pair variance at all and little participant variance.
    d = design(40, 8)
    d["chose_target"] = choices(rng, d, base=0.0, effect=0.5, sd_part=0.4, sd_pair=0.0)
    sets["choice_singular"] = d
    sets.update(boundary_sets())
    for name, frame in sets.items():
        frame.drop(columns="x").to_csv(HERE / f"{name}.csv", index=False)


def boundary_sets() -> dict[str, pd.DataFrame]:
    """Designs whose pair (or participant) variance is small but not zero.

    On each, a gradient optimizer that lands on an SD of 0 stops there (the deviance is even in
    the SD, so its gradient at 0 vanishes) although glmer finds a positive SD and a lower
    deviance. Each has its own seed, picked among the first few so that a fit without the
    boundary check ends at 0: the data are a regression test of that check.
    """
    sets = {}
    # The published design with 15 % of the trials missing at random.
    rng = np.random.default_rng(1)
    d = design(70, 10)
    d["chose_target"] = choices(rng, d, base=-0.2, effect=0.5, sd_part=0.8, sd_pair=0.3)
    sets["glmm_missing_70x10"] = d[rng.random(len(d)) > 0.15].reset_index(drop=True)
    # Balanced 70 x 10, pair SD 0.2.
    rng = np.random.default_rng(4)
    d = design(70, 10)
    d["chose_target"] = choices(rng, d, base=0.1, effect=0.4, sd_part=0.6, sd_pair=0.2)
    sets["glmm_small_pair_70x10"] = d
    # Fewer participants, more pairs: 40 x 12, pair SD 0.35 (both SDs ended at 0).
    rng = np.random.default_rng(0)
    d = design(40, 12)
    d["chose_target"] = choices(rng, d, base=0.0, effect=0.5, sd_part=0.5, sd_pair=0.35)
    sets["glmm_small_pair_40x12"] = d
    # Small participant variance as well: the participants' SD ended at 0.
    rng = np.random.default_rng(5)
    d = design(70, 10)
    d["chose_target"] = choices(rng, d, base=0.1, effect=0.4, sd_part=0.4, sd_pair=0.2)
    sets["glmm_small_participant_70x10"] = d
    return sets


if __name__ == "__main__":
    main()
