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
from analysis.plan.spec import AnalysisPlan, ChoiceBlock
from framelab_schema.analysis_block import LookPlan


def plan(**changes) -> AnalysisPlan:
    base = AnalysisPlan(
        hypothesis="h", test="choice_glmm", direction="greater", alpha=0.025, planned_n=20
    )
    return replace(base, **changes)


def pairs(m: int, formats: tuple[str, ...] = ("original", "summary")) -> tuple[ChoiceBlock]:
    """A one-block design of ``m`` pairs."""
    return (ChoiceBlock("choices", formats=formats, pairs=tuple(f"pair{j}" for j in range(m))),)


CHOICE = Scenario(effect=2.0, baseline=0.4, sd_participant=0.5, sd_pair=0.3)


def test_simulated_design_is_balanced_like_the_platform():
    data = simulate_arrivals(pairs(4), 8, CHOICE, plan(), np.random.default_rng(0))
    table = data.groupby(["sequence", "pair_id"])["format"].agg(set)
    assert table[("A", "pair0")] == {"original"} and table[("A", "pair1")] == {"summary"}
    assert table[("B", "pair0")] == {"summary"} and table[("B", "pair1")] == {"original"}
    assert (data.groupby("participant_id")["format"].value_counts() == 2).all()
    assert data.groupby("participant_id")["sequence"].first().tolist() == ["A", "B"] * 4


THREE = ("original", "summary", "mitigated:self-debias")


def test_a_three_format_block_is_the_platforms_latin_square():
    # As webapp/services/design.py: sequence r shows the pair at position j in format
    # formats[(j + r) % k]; arrivals cycle through the sequences.
    data = simulate_arrivals(pairs(6, THREE), 9, CHOICE, plan(), np.random.default_rng(0))
    table = data.groupby(["sequence", "pair_id"])["format"].agg(set)
    for r, seq in enumerate("ABC"):
        for j in range(6):
            assert table[(seq, f"pair{j}")] == {THREE[(j + r) % 3]}
    assert (data.groupby("participant_id")["format"].value_counts() == 2).all()
    assert data.groupby("participant_id")["sequence"].first().tolist() == list("ABC") * 3
    two_blocks = (*pairs(2, THREE), ChoiceBlock("more", formats=THREE, pairs=("q0", "q1", "q2")))
    both = simulate_arrivals(two_blocks, 3, CHOICE, plan(), np.random.default_rng(0))
    assert both.groupby(["participant_id", "block"]).size().tolist() == [2, 3] * 3


def test_the_power_of_a_three_format_study_compares_its_preregistered_levels(tmp_path):
    # The demo of three formats pre-registers summary vs mitigated: the simulation shows those
    # formats, so every fit has both levels (it once simulated original/summary and every
    # fit failed, reported as a power of 0).
    levels = plan(levels=("summary", "mitigated:self-debias"), direction="less", planned_n=30)
    effect = replace(CHOICE, effect=0.3, baseline=0.7)
    job = SimulationJob(pairs(6, THREE), levels, effect, seed=2)
    rows = run_simulations(job, [30], 5, tmp_path / "k.jsonl", progress=False)
    table = power_table(rows).iloc[0]
    assert table["n_failed"] == 0 and table["estimate"] > 0


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
    assert got["at_zero"] == []


def test_a_three_format_pilot_is_read_and_zero_components_are_named():
    from analysis.plan.simulate import pilot_components

    levels = plan(levels=("summary", "mitigated:self-debias"))
    truth = Scenario(effect=1.5, baseline=0.4, sd_participant=0.8, sd_pair=0.4)
    pilot = simulate_arrivals(pairs(9, THREE), 300, truth, levels, np.random.default_rng(3))
    got = pilot_components(pilot, levels)
    assert got["baseline"] == pytest.approx(0.4, abs=0.06)  # the summary's, the reference
    assert got["sd_participant"] == pytest.approx(0.8, abs=0.2) and got["at_zero"] == []
    # Bots taking turns: every participant and every pair chooses the target half the time, so
    # there is no variance between participants or pairs to plan with.
    flat = simulate_arrivals(pairs(6, THREE), 30, truth, levels, np.random.default_rng(4))
    arrival = flat["participant_id"].str[2:].astype(int)
    flat["chose_target"] = (flat["trial_index"] + arrival) % 2
    got = pilot_components(flat, levels)
    assert got["at_zero"] == ["sd_participant", "sd_pair"] and got["baseline"] == 0.5


def test_excluded_arrivals_are_replaced_so_each_look_analyses_its_count(tmp_path):
    looks = plan(planned_n=20, looks=LookPlan(at=(0.5, 1.0)))
    job = SimulationJob(pairs(4), looks, replace(CHOICE, effect=1.0, exclusion_share=0.5), seed=4)
    rows = run_simulations(job, [20], 3, tmp_path / "x.jsonl", progress=False)
    assert all(r["n_at_stop"] in (10, 20) for r in rows)
    assert any(r["n_at_stop"] == 20 for r in rows)
