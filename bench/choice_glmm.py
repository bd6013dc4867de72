"""Time the choice GLMM (Laplace, as glmer) against statsmodels' baselines.

Usage::

    .venv/bin/python bench/choice_glmm.py [--designs 70x10 3000x20] [--repeats 3]
        [--bayes-max-rows 20000]

For each design (participants x pairs, simulated with ``analysis.simulate`` with random
intercepts on the logit scale, SDs 0.8 by participant and 0.4 by pair), in one process and the
same run, each timed as the best of ``--repeats`` after one warm-up call (wall and CPU):

1. ``analysis.stats.choice.choice_glmm``: ``chose_target ~ format + (1 | participant) +
   (1 | pair)`` by Laplace with PIRLS in the crossed sparse formulation;
2. ``analysis.stats.choice.choice_clustered``: statsmodels GEE, exchangeable by participant (the
   robustness model the report already runs; a different, population-averaged estimand);
3. statsmodels ``BinomialBayesMixedGLM.fit_vb`` with the same crossed random intercepts (a
   variational-Bayes approximation, not glmer's likelihood), skipped above ``--bayes-max-rows``
   (its random-effects design is held dense: ``n_obs x (participants + pairs)``).

The ratios are baseline time / GLMM time from the same run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import best_of, machine_line  # noqa: E402


def bayes_glmm(data):
    import warnings

    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM

    df = data.assign(x=(data["format"] == "summary").astype(float))
    model = BinomialBayesMixedGLM.from_formula(
        "chose_target ~ x",
        {"participant": "0 + C(participant_id)", "pair": "0 + C(pair_id)"},
        df,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit_vb()


def main() -> None:
    import numpy as np

    from analysis.simulate import simulate_choice_study
    from analysis.stats.choice import choice_clustered, choice_glmm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", nargs="+", default=["70x10", "3000x20"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bayes-max-rows", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(machine_line())
    for design in args.designs:
        n_part, n_pair = (int(v) for v in design.split("x"))
        data = simulate_choice_study(
            n_participants=n_part,
            n_pairs=n_pair,
            seed=args.seed,
            participant_sd_logit=0.8,
            pair_sd_logit=0.4,
        )
        data = data[["participant_id", "pair_id", "format", "chose_target"]].dropna()
        wall, cpu, glmm = best_of(lambda d=data: choice_glmm(d), args.repeats)
        g = glmm.iloc[0]
        print(
            f"{design} ({len(data)} rows): GLMM (Laplace) {wall:.3f} s wall, {cpu:.3f} s CPU; "
            f"log OR {g['log_odds']:.5f} (SE {g['se']:.5f}), SDs {g['sd_subject']:.3f} / "
            f"{g['sd_item']:.3f}; load average {os.getloadavg()[0]:.1f}"
        )
        gwall, gcpu, gee = best_of(lambda d=data: choice_clustered(d), args.repeats)
        print(
            f"  GEE {gwall:.3f} s wall, {gcpu:.3f} s CPU (ratio GEE / GLMM {gwall / wall:.2f}x "
            f"wall, {gcpu / cpu:.2f}x CPU); log OR {gee['log_odds'].iloc[0]:.5f} "
            "(population-averaged)"
        )
        if len(data) <= args.bayes_max_rows:
            bwall, bcpu, res = best_of(lambda d=data: bayes_glmm(d), args.repeats)
            print(
                f"  statsmodels BinomialBayesMixedGLM.fit_vb {bwall:.3f} s wall, {bcpu:.3f} s "
                f"CPU (ratio {bwall / wall:.2f}x wall, {bcpu / cpu:.2f}x CPU); log OR "
                f"{np.asarray(res.fe_mean)[1]:.5f}"
            )
        else:
            print(f"  BinomialBayesMixedGLM skipped: {len(data)} rows > --bayes-max-rows")


if __name__ == "__main__":
    main()
