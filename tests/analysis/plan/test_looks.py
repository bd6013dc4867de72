"""The pre-registered test at each look: who is analysed, the statistic, the stopping look."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from scipy.stats import t as t_dist

from analysis.exclusions import ChoiceRules, exclude_choice
from analysis.plan.looks import (
    completion_order,
    evaluate_looks,
    look_sample,
    primary_result,
    primary_test,
)
from analysis.plan.simulate import Scenario, simulate_arrivals
from analysis.plan.spec import AnalysisPlan, ChoiceBlock, read_study
from framelab_schema.analysis_block import LookPlan

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"
PAIRS = (
    ChoiceBlock(
        "choices", formats=("original", "summary"), pairs=tuple(f"pair{j}" for j in range(6))
    ),
)


def plan(**changes) -> AnalysisPlan:
    base = AnalysisPlan(
        hypothesis="h",
        test="choice_glmm",
        direction="greater",
        alpha=0.025,
        planned_n=40,
        looks=LookPlan(at=(0.5, 0.75, 1.0)),
    )
    return replace(base, **changes)


def arrivals(p: AnalysisPlan, n: int, seed: int = 0, **scenario) -> pd.DataFrame:
    values = {"effect": 1.0, "baseline": 0.5, "sd_participant": 0.3, "sd_pair": 0.2}
    values.update(scenario)
    return simulate_arrivals(PAIRS, n, Scenario(**values), p, np.random.default_rng(seed))


def test_completion_order_reads_finished_at_then_the_last_answer():
    data = pd.DataFrame(
        {
            "participant_id": ["a", "a", "b", "b", "c"],
            "answered_at": ["2026-01-01T10:00:00Z", "2026-01-01T10:05:00Z"]
            + ["2026-01-01T09:00:00Z", "2026-01-01T09:01:00Z", "2026-01-01T09:30:00Z"],
            "finished_at": ["2026-01-01T10:06:00Z"] * 2 + ["2026-01-01T11:00:00Z"] * 2 + [None],
        }
    )
    assert completion_order(data) == ["c", "a", "b"]
    assert completion_order(data.drop(columns="finished_at")) == ["b", "c", "a"]


def test_a_look_takes_the_first_n_kept_participants_and_later_data_do_not_change_it():
    p = plan()
    data = arrivals(p, 60, exclusion_share=0.3)
    excluded = set(data.loc[data["attention_passed"] == 0, "participant_id"])
    assert excluded
    sample = look_sample(data, 20, p)
    ids = sample["participant_id"].unique()
    assert len(ids) == 20 and not excluded & set(ids)
    order = completion_order(data)
    last = max(order.index(i) for i in ids)
    # Everyone kept before the 20th kept participant is in; nobody after.
    kept_before = [i for i in order[: last + 1] if i not in excluded]
    assert sorted(kept_before) == sorted(ids)
    first_half = data[data["participant_id"].isin(order[: last + 1])]
    pd.testing.assert_frame_equal(look_sample(first_half, 20, p), sample)
    assert look_sample(first_half, 21, p) is None


def test_strong_effect_crosses_at_the_first_look_and_the_result_is_adjusted():
    p = plan()
    data = arrivals(p, 40, effect=8.0, baseline=0.4)
    looks = evaluate_looks(data, p)
    assert looks["reached"].tolist() == [True, True, True]
    assert looks["n_analysed"].tolist() == [20, 30, 40]
    first = looks.iloc[0]
    assert first["decision"] == "efficacy" and first["crossed"]
    assert first["z"] >= first["efficacy_z"] > 2.9
    assert first["fraction"] == pytest.approx(0.5)
    result = primary_result(looks, p).iloc[0]
    assert result["look"] == 1 and result["stopped"] == "efficacy" and result["reject"]
    assert result["later_looks"] == 2
    # The adjusted p of a first-look stop at O'Brien-Fleming bounds is the naive one.
    assert result["p_val"] == pytest.approx(result["p_naive"], rel=1e-6)
    assert result["ci_low"] < result["estimate"] < result["ci_high"]
    assert result["odds_ratio"] == pytest.approx(math.exp(result["estimate"]))


def test_looks_not_reached_wait_and_null_data_continue():
    p = plan()
    data = arrivals(p, 25, seed=3)
    looks = evaluate_looks(data, p)
    assert looks["reached"].tolist() == [True, False, False]
    assert looks["decision"].tolist()[1:] == ["", ""]
    assert looks["decision"].iloc[0] in ("continue", "efficacy")
    assert looks["efficacy_z"].iloc[1] == pytest.approx(2.3590, abs=1e-3)  # planned fraction


def test_fixed_design_is_one_look_at_planned_n():
    p = plan(looks=None, planned_n=20)
    looks = evaluate_looks(arrivals(p, 24, effect=3.0), p)
    assert len(looks) == 1 and looks["n_analysed"].iloc[0] == 20
    assert looks["efficacy_z"].iloc[0] == pytest.approx(norm.isf(0.025))


def test_wtp_statistic_keeps_the_p_value_of_its_t_test():
    p = plan(test="wtp_lmm", looks=None)
    data = arrivals(p, 20, effect=2.0, baseline=30, sd_participant=5, sd_pair=2, sd_residual=8)
    kept, _ = exclude_choice(data, p.exclusions)
    stat = primary_test(kept, p)
    assert norm.sf(stat["z"]) == pytest.approx(t_dist.sf(stat["statistic"], stat["df"]), rel=1e-9)
    less = primary_test(kept, replace(p, direction="less"))
    assert less["z"] == pytest.approx(-stat["z"])
    assert less["p_val"] == pytest.approx(1 - stat["p_val"])
    assert stat["estimate"] / stat["se_z"] == pytest.approx(stat["z"])


def test_the_demo_plan_reads_its_looks():
    study = read_study(DEMO)
    assert study.plan.look_sizes() == [35, 53, 70]
    assert study.plan.exclusions == ChoiceRules()
