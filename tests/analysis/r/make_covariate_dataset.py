"""Write tests/analysis/r/data/covariates_60x10.csv: a simulated choice study (60 participants x
10 pairs) with participant covariates age (numeric) and sex (three levels, one rare), for
covariates_reference.R and tests/analysis/stats/test_covariates.py.

Run from the repository root: python tests/analysis/r/make_covariate_dataset.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.simulate import simulate_choice_study


def main() -> None:
    data = simulate_choice_study(n_participants=60, n_pairs=10, seed=21)
    people = sorted(data["participant_id"].unique())
    rng = np.random.default_rng(21)
    age = dict(zip(people, rng.integers(18, 75, len(people)).tolist(), strict=True))
    sexes = rng.choice(["Female", "Male", "Prefer not to say"], len(people), p=[0.5, 0.44, 0.06])
    sex = dict(zip(people, sexes.tolist(), strict=True))
    data = data[data["status"] == "completed"]
    out = data[["participant_id", "pair_id", "format", "chose_target", "wtp_premium_pct"]].copy()
    out["age"] = out["participant_id"].map(age)
    out["sex"] = out["participant_id"].map(sex)
    # Older participants pay a little more: a covariate effect to recover.
    out["wtp_premium_pct"] = (out["wtp_premium_pct"] + 0.1 * (out["age"] - 40)).round(4)
    path = Path(__file__).parent / "data" / "covariates_60x10.csv"
    out.to_csv(path, index=False)
    print(f"wrote {path} ({len(out)} rows)")


if __name__ == "__main__":
    main()
