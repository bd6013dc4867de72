"""Group-sequential boundaries and stage-wise inference against rpact 3.3.4.

Reference numbers: ``tests/analysis/r/rpact_reference.csv``, written by
``Rscript tests/analysis/r/rpact_reference.R`` (R 4.2.2, rpact 3.3.4). The R calls::

    d <- getDesignGroupSequential(kMax = K, alpha = 0.025, sided = 1,     # or 0.05, sided = 2
                                  typeOfDesign = "asOF",                   # or "asP"
                                  informationRates = RATES)
    d$criticalValues; d$alphaSpent
    # beta-spending futility (non-binding):
    getDesignGroupSequential(..., beta = 0.2, typeBetaSpending = "bsOF")$futilityBounds
    # fixed futility bounds:
    getDesignGroupSequential(..., futilityBounds = c(0, 0.5), bindingFutility = TRUE)
    # after stopping (one-sample means, normal approximation):
    ar <- getAnalysisResults(d, getDataset(n = N, means = M, stDevs = SD),
                             normalApproximation = TRUE)
    ar$finalPValues; ar$medianUnbiasedEstimates
    ar$finalConfidenceIntervalLowerBounds; ar$finalConfidenceIntervalUpperBounds
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.plan.sequential import (
    SequentialDesign,
    boundaries,
    spent,
    stagewise_inference,
    stopping_look,
)

REFERENCE = Path(__file__).resolve().parents[1] / "r" / "rpact_reference.csv"


def _cases() -> dict[str, dict[str, list[float]]]:
    ref = pd.read_csv(REFERENCE)
    cases: dict[str, dict[str, list[float]]] = {}
    for case, group in ref.groupby("case", sort=False):
        values: dict[str, list[float]] = {}
        for quantity, value in zip(group["quantity"], group["value"], strict=True):
            name, _, _ = quantity.rpartition("_")
            values.setdefault(name, []).append(float(value))
        cases[case] = values
    return cases


CASES = _cases()


def _parse(case: str) -> dict[str, str]:
    head, *parts = case.split("|")
    fields = dict(p.split("=", 1) for p in parts if "=" in p)
    fields["head"] = head
    return fields


def _rates(fields: dict[str, str]) -> tuple[float, ...]:
    return tuple(float(v) for v in fields["rates"].split(","))


BOUNDARY_CASES = [c for c in CASES if not c.startswith("inference")]
INFERENCE_CASES = [c for c in CASES if c.startswith("inference")]


def test_reference_covers_both_spending_functions_two_to_five_looks_both_sides():
    plain = [_parse(c) for c in BOUNDARY_CASES if "sided" in _parse(c)]
    seen = {(f["head"], len(_rates(f)), f["sided"]) for f in plain}
    assert seen == {
        (s, k, side) for s in ("obrien-fleming", "pocock") for k in (2, 3, 4, 5) for side in "12"
    }


@pytest.mark.parametrize("case", BOUNDARY_CASES)
def test_boundaries_equal_rpact_to_1e6(case):
    fields = _parse(case)
    ref = CASES[case]
    rates = _rates(fields)
    if "sided" in fields:
        design = SequentialDesign(
            rates, alpha=float(fields["alpha"]), sided=int(fields["sided"]), spending=fields["head"]
        )
    elif "beta_spending" in fields:
        design = SequentialDesign(
            rates,
            alpha=0.025,
            spending=fields["head"],
            beta=float(fields["beta"]),
            beta_spending=fields["beta_spending"],
        )
    else:
        design = SequentialDesign(
            rates,
            alpha=0.025,
            spending=fields["head"],
            futility_z=tuple(float(v) for v in fields["futility_z"].split(",")),
            binding_futility=fields["binding"] == "TRUE",
        )
    table = boundaries(design)
    np.testing.assert_allclose(table["efficacy_z"], ref["efficacy"], rtol=0, atol=1e-6)
    if "futility" in ref:
        np.testing.assert_allclose(table["futility_z"][:-1], ref["futility"], rtol=0, atol=1e-6)
    if "alpha_spent" in ref:
        # rpact stops its search once the spent alpha is within 1e-8 of the target.
        np.testing.assert_allclose(table["alpha_spent"], ref["alpha_spent"], rtol=0, atol=2e-8)


def test_binding_futility_lowers_the_efficacy_bounds_and_non_binding_leaves_them():
    rates = (0.5, 0.75, 1.0)
    plain = boundaries(SequentialDesign(rates))["efficacy_z"]
    loose = boundaries(SequentialDesign(rates, futility_z=(0.0, 0.5)))["efficacy_z"]
    bound = boundaries(SequentialDesign(rates, futility_z=(0.0, 0.5), binding_futility=True))
    np.testing.assert_allclose(loose, plain, atol=1e-12)
    # Paths below a binding futility bound stop, so later looks may reject a little earlier.
    assert (bound["efficacy_z"].iloc[1:] < plain.iloc[1:] - 1e-5).all()
    assert bound["efficacy_z"].iloc[2] < plain.iloc[2] - 1e-3
    assert bound["efficacy_z"].iloc[0] == pytest.approx(plain.iloc[0], abs=1e-12)


@pytest.mark.parametrize("case", INFERENCE_CASES)
def test_stagewise_p_value_estimate_and_interval_equal_rpact(case):
    name, spending, _ = case.split("|")
    ref = CASES[case]
    design = SequentialDesign(_rates(_parse(case)), alpha=0.025, spending=spending)
    stage = int(ref["final_stage"][0])
    se = ref["overall_sd"][stage - 1] / math.sqrt(ref["overall_n"][stage - 1])
    table = boundaries(design)
    row = stagewise_inference(ref["z"][:stage], table.iloc[:stage], se=se, look=stage).iloc[0]
    # rpact's own tolerance for these searches is 1e-6.
    assert row["p_val"] == pytest.approx(ref["p_final"][0], abs=1e-6)
    assert row["estimate"] == pytest.approx(ref["median_unbiased"][0], abs=1e-6)
    assert row["ci_low"] == pytest.approx(ref["ci_low"][0], abs=1e-6)
    assert row["ci_high"] == pytest.approx(ref["ci_high"][0], abs=1e-6)
    assert row["confidence"] == pytest.approx(0.95)


def test_one_look_is_the_fixed_design_z_test():
    design = SequentialDesign((1.0,), alpha=0.025)
    table = boundaries(design)
    assert table["efficacy_z"].iloc[0] == pytest.approx(1.959963984540054, abs=1e-10)
    row = stagewise_inference([2.5], table, se=0.4).iloc[0]
    assert row["p_val"] == pytest.approx(0.0062096653257761, abs=1e-10)
    assert row["estimate"] == pytest.approx(1.0, abs=1e-9)
    assert row["ci_low"] == pytest.approx(1.0 - 1.959963984540054 * 0.4, abs=1e-8)


def test_two_sided_design_doubles_the_tail_on_the_observed_side():
    design = SequentialDesign((0.5, 1.0), alpha=0.05, sided=2)
    table = boundaries(design)
    up = stagewise_inference([1.0, 2.3], table, se=0.1).iloc[0]
    down = stagewise_inference([-1.0, -2.3], table, se=0.1).iloc[0]
    assert up["p_val"] == pytest.approx(down["p_val"], abs=1e-12)
    assert up["estimate"] == pytest.approx(-down["estimate"], abs=1e-9)
    assert up["ci_low"] == pytest.approx(-down["ci_high"], abs=1e-9)
    # The adjusted p is above the naive one: the interim look could also have stopped the study.
    assert up["p_val"] > up["p_naive"]


def test_stopping_look_names_the_first_crossing():
    design = SequentialDesign((0.5, 0.75, 1.0), futility_z=(0.0, 0.5))
    table = boundaries(design)
    assert stopping_look([3.1], table) == (1, "efficacy")
    assert stopping_look([1.0, -0.2], table) == (2, "futility")
    assert stopping_look([1.0, 1.0], table) == (2, "continue")
    assert stopping_look([1.0, 1.0, 1.5], table) == (3, "not rejected")
    assert stopping_look([1.0, 1.0, 2.1], table) == (3, "efficacy")


def test_spending_functions_and_refusals():
    assert spent([1.0], 0.05, "obrien-fleming")[0] == pytest.approx(0.05, abs=1e-15)
    with pytest.raises(ValueError, match="last look must be at fraction 1"):
        SequentialDesign((0.5, 0.9))
    with pytest.raises(ValueError, match="must increase"):
        SequentialDesign((0.5, 0.5, 1.0))
    with pytest.raises(ValueError, match="one-sided"):
        SequentialDesign((0.5, 1.0), sided=2, futility_z=(0.0,))
    with pytest.raises(ValueError, match="unknown spending"):
        SequentialDesign((0.5, 1.0), spending="haybittle")
