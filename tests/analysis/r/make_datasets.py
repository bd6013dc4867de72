"""Write the simulated WTP datasets that ``lme4_reference.R`` fits (seeded; data we created).

Run from the repository root: ``python tests/analysis/r/make_datasets.py``. Each CSV has
``participant_id, pair_id, format, wtp_premium_pct``; the designs mirror the seed study
(every participant sees every pair once, formats alternate within participant and are
counterbalanced across participants) with the departures named below.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent / "data"


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
    for name, frame in sets.items():
        frame.drop(columns="x").to_csv(HERE / f"{name}.csv", index=False)


if __name__ == "__main__":
    main()
