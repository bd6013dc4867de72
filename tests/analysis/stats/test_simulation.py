"""A simulated study with known built-in effects: the analysis must recover them.

Coverage criterion: the true effect lies inside the reported 95% interval in
at least 90% of 50 seeds.
"""

from __future__ import annotations

import pytest

from analysis.exclusions import exclude_choice
from analysis.io import CHOICE_LONG_COLUMNS
from analysis.simulate import simulate_choice_study
from analysis.stats.choice import choice_effects
from analysis.stats.wtp import wtp_mixed

SEEDS = range(50)
TRUE_WTP_EFFECT = 4.5
RATE_ORIGINAL, RATE_SUMMARY = 0.523, 0.837


def test_simulated_export_has_the_documented_columns_and_design():
    data = simulate_choice_study(n_participants=10, n_pairs=10, seed=0)
    assert list(data.columns) == list(CHOICE_LONG_COLUMNS)
    per_person = data.groupby("participant_id")
    assert (per_person["pair_id"].nunique() == 10).all()
    assert (per_person["format"].apply(lambda f: (f == "summary").sum()) == 5).all()
    assert set(data["sequence"]) == {"A", "B"}


@pytest.mark.slow
@pytest.mark.parametrize("model", ["crossed", "crossed_sparse"])
def test_wtp_effect_is_recovered_in_90_percent_of_seeds(model):
    covered = 0
    for seed in SEEDS:
        data = simulate_choice_study(
            n_participants=30, n_pairs=10, seed=seed, wtp_effect_pct=TRUE_WTP_EFFECT
        )
        res = wtp_mixed(data, model=model).iloc[0]
        assert res["model"] == model
        covered += res["ci_low"] <= TRUE_WTP_EFFECT <= res["ci_high"]
    assert covered >= 45, f"true WTP effect covered in only {covered} of 50 seeds"


def test_choice_risk_difference_is_recovered_in_90_percent_of_seeds():
    truth = RATE_SUMMARY - RATE_ORIGINAL
    covered = 0
    for seed in SEEDS:
        data = simulate_choice_study(n_participants=70, n_pairs=10, seed=seed)
        rd = choice_effects(data).set_index("effect").loc["risk_difference"]
        covered += rd["ci_low"] <= truth <= rd["ci_high"]
    assert covered >= 45, f"true risk difference covered in only {covered} of 50 seeds"


def test_simulated_exclusions_are_found():
    data = simulate_choice_study(
        n_participants=100,
        seed=1,
        share_incomplete=0.05,
        share_failed_quiz=0.05,
        share_failed_attention=0.05,
        share_fast=0.05,
    )
    kept, excluded = exclude_choice(data)
    per_reason = excluded.groupby("reason")["participant_id"].nunique().to_dict()
    assert per_reason == {
        "status not completed": 5,
        "failed comprehension quiz": 5,
        "failed attention check": 5,
        "implausibly fast": 5,
    }
    assert kept["participant_id"].nunique() == 80
