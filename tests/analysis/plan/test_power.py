"""Power by simulation: seeded, parallel over processes, resumable, summarised per N."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import analysis.plan.power as power_module
from analysis.plan.power import (
    ResultsFileError,
    SimulationJob,
    clopper_pearson,
    n_for_power,
    power_table,
    run_simulations,
)
from analysis.plan.simulate import Scenario, simulate_arrivals
from analysis.plan.spec import AnalysisPlan, LookPlan


def plan(**changes) -> AnalysisPlan:
    base = AnalysisPlan(
        hypothesis="h", test="choice_glmm", direction="greater", alpha=0.025, planned_n=20
    )
    return replace(base, **changes)


def pairs(m: int) -> tuple[str, ...]:
    return tuple(f"pair{j}" for j in range(m))


CHOICE = Scenario(effect=2.0, baseline=0.4, sd_participant=0.5, sd_pair=0.3)


def test_simulated_design_is_balanced_like_the_platform():
    data = simulate_arrivals(pairs(4), 8, CHOICE, plan(), np.random.default_rng(0))
    table = data.groupby(["sequence", "pair_id"])["format"].agg(set)
    assert table[("A", "pair0")] == {"original"} and table[("A", "pair1")] == {"summary"}
    assert table[("B", "pair0")] == {"summary"} and table[("B", "pair1")] == {"original"}
    assert (data.groupby("participant_id")["format"].value_counts() == 2).all()
    assert data.groupby("participant_id")["sequence"].first().tolist() == ["A", "B"] * 4


def test_runs_are_seeded_per_simulation_whatever_the_processes(tmp_path):
    job = SimulationJob(pairs(4), plan(), CHOICE, seed=7)
    one = run_simulations(job, [12], 6, tmp_path / "a.jsonl", jobs=1, progress=False)
    two = run_simulations(job, [12], 6, tmp_path / "b.jsonl", jobs=2, progress=False)

    def key(rows):
        return sorted((r["sim"], r["z"], r["reject"]) for r in rows)

    assert key(one) == key(two)
    other = run_simulations(
        replace(job, seed=8), [12], 6, tmp_path / "c.jsonl", jobs=1, progress=False
    )
    assert key(other) != key(one)


def test_an_interrupted_run_resumes_and_another_configuration_is_refused(tmp_path, monkeypatch):
    job = SimulationJob(pairs(4), plan(), CHOICE, seed=3)
    path = tmp_path / "sims.jsonl"
    first = run_simulations(job, [12], 4, path, progress=False)
    # A run killed while writing leaves half a line: that simulation runs again.
    with path.open("a") as f:
        f.write('{"n": 12, "sim": 4, "z"')
    calls = []
    real = power_module.simulate_one
    monkeypatch.setattr(
        power_module, "simulate_one", lambda j, n, i: calls.append(i) or real(j, n, i)
    )
    resumed = run_simulations(job, [12], 7, path, progress=False)
    assert sorted(calls) == [4, 5, 6]
    fresh = run_simulations(job, [12], 7, tmp_path / "fresh.jsonl", progress=False)
    assert sorted(map(json.dumps, resumed)) == sorted(map(json.dumps, fresh))
    assert [r["sim"] for r in first] == [0, 1, 2, 3]
    with pytest.raises(ResultsFileError, match="differs in: scenario"):
        run_simulations(
            replace(job, scenario=replace(CHOICE, effect=1.5)), [12], 7, path, progress=False
        )
    (tmp_path / "junk.jsonl").write_text("hello\n")
    with pytest.raises(ResultsFileError, match="not a FrameLab power results file"):
        run_simulations(job, [12], 1, tmp_path / "junk.jsonl", progress=False)


def test_looks_stop_early_and_the_table_counts_them(tmp_path):
    looks = plan(planned_n=24, looks=LookPlan(at=(0.5, 1.0)))
    strong = replace(CHOICE, effect=6.0)
    job = SimulationJob(pairs(6), looks, strong, seed=1)
    rows = run_simulations(job, [24], 6, tmp_path / "s.jsonl", progress=False)
    table = power_table(rows, target=0.8, n_looks=2).iloc[0]
    assert table["n_sims"] == 6 and table["stop_look_1"] + table["stop_look_2"] == 1
    assert table["stop_look_1"] > 0 and table["expected_n"] < 24
    assert all(len(r["z"]) == r["look"] for r in rows)


def test_clopper_pearson_and_the_n_for_a_target_power():
    # R: binom.test(50, 1000)$conf.int -> 0.0373353976047 0.0653904879155
    low, high = clopper_pearson(50, 1000)
    assert (float(low), float(high)) == pytest.approx((0.0373353976047, 0.0653904879155), abs=1e-12)
    table = pd.DataFrame(
        {"n": [40, 60, 80], "estimate": [0.5, 0.75, 0.9], "n_sims": [100, 100, 100]}
    )
    out = n_for_power(table, 0.8)
    assert out["n_simulated"] == 80
    assert 60 < out["n_interpolated"] < 80
    assert n_for_power(table, 0.95) == {"n_simulated": None, "n_interpolated": None}


def test_a_pilot_gives_the_baseline_variance_components_and_exclusion_share():
    from analysis.plan.simulate import pilot_components

    truth = Scenario(effect=1.5, baseline=0.4, sd_participant=0.8, sd_pair=0.4, exclusion_share=0.2)
    pilot = simulate_arrivals(pairs(10), 400, truth, plan(), np.random.default_rng(9))
    got = pilot_components(pilot, plan())
    assert got["exclusion_share"] == pytest.approx(0.2, abs=0.05)
    assert (
        got["n_participants"]
        == pilot.loc[pilot["attention_passed"] == 1, "participant_id"].nunique()
    )
    assert got["baseline"] == pytest.approx(0.4, abs=0.06)
    assert got["sd_participant"] == pytest.approx(0.8, abs=0.15)
    assert 0.1 < got["sd_pair"] < 0.9  # ten pairs: a rough estimate, but not zero
    wtp = simulate_arrivals(
        pairs(10),
        200,
        Scenario(effect=3, baseline=30, sd_participant=6, sd_pair=3, sd_residual=5),
        plan(test="wtp_lmm"),
        np.random.default_rng(10),
    )
    got = pilot_components(wtp, plan(test="wtp_lmm"))
    assert got["baseline"] == pytest.approx(30, abs=3)
    assert got["sd_residual"] == pytest.approx(5, abs=0.3)
    assert got["sd_participant"] == pytest.approx(6, abs=1.2)


def test_excluded_arrivals_are_replaced_so_each_look_analyses_its_count(tmp_path):
    looks = plan(planned_n=20, looks=LookPlan(at=(0.5, 1.0)))
    job = SimulationJob(pairs(4), looks, replace(CHOICE, effect=1.0, exclusion_share=0.5), seed=4)
    rows = run_simulations(job, [20], 3, tmp_path / "x.jsonl", progress=False)
    assert all(r["n_at_stop"] in (10, 20) for r in rows)
    assert any(r["n_at_stop"] == 20 for r in rows)
