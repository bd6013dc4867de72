"""Simulated power equals R's values within Monte-Carlo error on small cases.

Reference values: ``tests/analysis/r/power_reference.csv`` and, for a three-format design,
``tests/analysis/r/power_kformat_reference.csv``, written by ``Rscript
tests/analysis/r/power_reference.R`` and ``power_kformat_reference.R`` (R 4.2.2, lme4 1.1-31,
lmerTest 3.1-3). The R calls, on FrameLab's design (participant i has sequence B when i is odd;
the pair at position j is the summary when j + [B] is odd)::

    power.prop.test(n = N * m / 2, p1 = p0, p2 = p1, sig.level = 0.025,
                    alternative = "one.sided")            # no clustering, choice
    power.t.test(n = N * m / 2, delta, sd, sig.level = 0.025, type = "two.sample",
                 alternative = "one.sided")               # no clustering, WTP
    # crossed random intercepts, 2,000 simulations each:
    y <- simulate(~ x + (1 | participant) + (1 | pair), newdata = d, family = binomial,
                  newparams = list(beta = c(qlogis(p0), log(or)), theta = c(sd_p, sd_i)))
    glmer(y ~ x + (1 | participant) + (1 | pair), family = binomial)  # one-sided Wald z
    y <- simulate(~ x + (1 | participant) + (1 | pair), newdata = d,
                  newparams = list(beta = c(base, effect), theta = c(sd_p, sd_i) / sigma,
                                   sigma = sigma))
    lmerTest::lmer(y ~ x + (1 | participant) + (1 | pair))   # one-sided Satterthwaite t

and on three formats (participant i has sequence i %% 3; the pair at position j is shown in
format (j + sequence) %% 3 of original, summary, mitigated), the pre-registered test comparing
mitigated (x = 1) with summary, the outcome simulated for every trial as above (original and
summary at the baseline), the model refitted on the trials of the two compared formats::

    glmer(y ~ x + (1 | participant) + (1 | pair), family = binomial,
          data = d[d$format != "original", ])
    lmerTest::lmer(y ~ x + (1 | participant) + (1 | pair), data = d[d$format != "original", ])
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.plan.power import SimulationJob, power_table, run_simulations
from analysis.plan.simulate import Scenario
from tests.analysis.plan.test_power import pairs, plan

R_DIR = Path(__file__).resolve().parents[1] / "r"
THREE = ("original", "summary", "mitigated:self-debias")


def _reference() -> dict[str, dict[str, float]]:
    ref = pd.concat(
        [pd.read_csv(R_DIR / f) for f in ("power_reference.csv", "power_kformat_reference.csv")]
    )
    return {
        case: dict(zip(group["quantity"], group["value"].astype(float), strict=True))
        for case, group in ref.groupby("case", sort=False)
    }


def _fields(case: str) -> tuple[str, dict[str, float]]:
    head, *parts = case.split("|")
    return head, {k: float(v) for k, v in (p.split("=") for p in parts)}


CASES = _reference()


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_power_equals_r_within_monte_carlo_error(case, tmp_path):
    head, f = _fields(case)
    ref = CASES[case]
    test = "choice_glmm" if head in ("prop", "glmer", "glmer3") else "wtp_lmm"
    scenario = Scenario(
        effect=f["effect"],
        baseline=f.get("baseline", 30.0),
        sd_participant=f.get("sd_participant", 0.0),
        sd_pair=f.get("sd_pair", 0.0),
        sd_residual=f.get("sd_residual", 0.0),
    )
    n_sims = 300
    if head.endswith("3"):  # three formats, the pre-registered test of two of them
        design = pairs(int(f["m"]), THREE)
        analysis = plan(test=test, levels=("summary", "mitigated:self-debias"))
    else:
        design, analysis = pairs(int(f["m"])), plan(test=test)
    job = SimulationJob(design, analysis, scenario, seed=11)
    rows = run_simulations(job, [int(f["n"])], n_sims, tmp_path / "r.jsonl", progress=False)
    ours = power_table(rows).iloc[0]
    assert ours["n_failed"] == 0
    # Both are estimates (R's analytic values exactly, its lme4 values from 2,000 simulations):
    # compare with the Monte-Carlo SE of the difference.
    p_r = ref["power"]
    var = p_r * (1 - p_r) / n_sims + (p_r * (1 - p_r) / ref["n_sims"] if "n_sims" in ref else 0)
    assert abs(ours["estimate"] - p_r) <= 3 * math.sqrt(var), (ours["estimate"], p_r)
