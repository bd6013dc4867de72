"""Write the simulated k-format choice datasets that ``kformat_reference.R`` fits (seeded; data we
created).

Run from the repository root: ``python tests/analysis/r/make_kformat_datasets.py``. Each CSV has
``participant_id, pair_id, format, chose_target, wtp_premium_pct``. The design is the k-format
product-choice block: every participant sees every pair once, the format of a trial follows a
Latin square over (participant + pair) mod k, so each participant sees each format equally often
and each pair is shown in every format across participants. Outcomes:

    logit P(chose_target) = base + effect[format] + u_participant + v_pair
    wtp_premium_pct       = 10 + shift[format] + a_participant + b_pair + e
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent / "data"


def design(formats: list[str], n_part: int, n_pair: int) -> pd.DataFrame:
    part = np.repeat(np.arange(n_part), n_pair)
    pair = np.tile(np.arange(n_pair), n_part)
    level = (part + pair) % len(formats)  # a Latin square across participants
    return pd.DataFrame(
        {
            "participant_id": [f"p{i:04d}" for i in part],
            "pair_id": [f"q{j:02d}" for j in pair],
            "format": np.asarray(formats, dtype=object)[level],
            "level": level,
        }
    )


def outcomes(rng, df, *, base, effects, sd_part, sd_pair, shifts) -> pd.DataFrame:
    pi = pd.factorize(df["participant_id"])[0]
    qi = pd.factorize(df["pair_id"])[0]
    u = rng.normal(0, sd_part, pi.max() + 1)
    v = rng.normal(0, sd_pair, qi.max() + 1)
    eta = base + np.asarray(effects)[df["level"]] + u[pi] + v[qi]
    out = df.copy()
    out["chose_target"] = (rng.random(len(df)) < 1 / (1 + np.exp(-eta))).astype(int)
    a = rng.normal(0, 6.0, pi.max() + 1)
    b = rng.normal(0, 3.0, qi.max() + 1)
    wtp = 10 + np.asarray(shifts)[df["level"]] + a[pi] + b[qi] + rng.normal(0, 8.0, len(df))
    out["wtp_premium_pct"] = np.round(wtp, 2)
    return out.drop(columns="level")


def main() -> None:
    HERE.mkdir(exist_ok=True)
    rng = np.random.default_rng(20261126)
    # Four formats, 80 participants x 12 pairs (each format 3 times per participant).
    four = ["original", "summary", "mitigated:self-debias", "mitigated:rerank"]
    d = outcomes(
        rng,
        design(four, 80, 12),
        base=-0.2,
        effects=[0.0, 0.7, 0.3, 0.5],
        sd_part=0.8,
        sd_pair=0.4,
        shifts=[0.0, 4.0, 1.5, 3.0],
    )
    d.to_csv(HERE / "kformat_4x80x12.csv", index=False)
    # Three formats, 60 x 9 with 15 % of trials missing at random (unbalanced cells).
    three = ["original", "summary", "mitigated:self-debias"]
    d = outcomes(
        rng,
        design(three, 60, 9),
        base=0.1,
        effects=[0.0, 0.6, 0.2],
        sd_part=1.0,
        sd_pair=0.3,
        shifts=[0.0, 5.0, 2.0],
    )
    d = d[rng.random(len(d)) > 0.15].reset_index(drop=True)
    d.to_csv(HERE / "kformat_3x60x9_missing.csv", index=False)


if __name__ == "__main__":
    main()
