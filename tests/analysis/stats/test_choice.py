"""Choice statistics of two formats checked against R and a published 2x2 table (the k-format
case: test_formats.py and test_formats_r.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2 as chi2_dist

from analysis.simulate import simulate_choice_study
from analysis.stats.choice import (
    chi2_choice,
    choice_by_pair,
    choice_clustered,
    choice_effects,
    selection_rates,
)
from tests.analysis.stats.helpers import make_gee_never_converge


def table_to_long(table, levels, dv="mi", between="group") -> pd.DataFrame:
    rows = []
    for level, (yes, no) in zip(levels, table, strict=True):
        rows += [(level, 1)] * yes + [(level, 0)] * no
    return pd.DataFrame(rows, columns=[between, dv])


# Physicians' Health Study (Agresti, Categorical Data Analysis, 3rd ed., table 2.3):
# myocardial infarction yes/no, placebo [189, 10845], aspirin [104, 10933].
PHS = table_to_long([[104, 10933], [189, 10845]], ["aspirin", "placebo"])


def test_physicians_health_study_chi2_matches_r():
    # R> chisq.test(matrix(c(189, 104, 10845, 10933), 2))                  # X-squared = 24.429
    # R> chisq.test(matrix(c(189, 104, 10845, 10933), 2), correct = FALSE)  # X-squared = 25.014
    # df = 1; the p-values below are the chi-square(1) tail areas of those statistics.
    res = chi2_choice(PHS, dv="mi", between="group", levels=("aspirin", "placebo"))
    yates, plain = res.iloc[0], res.iloc[1]
    assert yates["test"] == "pearson_yates" and bool(yates["primary"])
    assert yates["chi2"] == pytest.approx(24.429, abs=5e-4)
    assert yates["p_val"] == pytest.approx(chi2_dist.sf(24.429, 1), rel=1e-3)
    assert yates["dof"] == 1
    assert plain["chi2"] == pytest.approx(25.014, abs=5e-4)
    assert plain["p_val"] == pytest.approx(chi2_dist.sf(25.014, 1), rel=1e-3)
    # Cramer's V = sqrt(X2 / n) for a 2x2 table, from the uncorrected statistic.
    assert yates["cramer_v"] == pytest.approx(np.sqrt(25.014 / 22071), abs=1e-5)
    uncorrected_first = chi2_choice(
        PHS, dv="mi", between="group", levels=("aspirin", "placebo"), correction=False
    )
    assert uncorrected_first.iloc[0]["test"] == "pearson"


def test_physicians_health_study_odds_ratio_matches_agresti():
    # Agresti (2013), section 2.3.3: odds ratio 1.832, 95% CI (1.440, 2.331);
    # difference of proportions 0.0171 - 0.0094 = 0.0077.
    res = choice_effects(PHS, dv="mi", between="group", levels=("aspirin", "placebo"))
    assert set(res["contrast"]) == {"placebo vs aspirin"}
    odds = res.set_index("effect").loc["odds_ratio"]
    assert odds["estimate"] == pytest.approx(1.832, abs=5e-4)
    assert odds["ci_low"] == pytest.approx(1.440, abs=5e-4)
    assert odds["ci_high"] == pytest.approx(2.331, abs=5e-4)
    rd = res.set_index("effect").loc["risk_difference"]
    assert rd["estimate"] == pytest.approx(189 / 11034 - 104 / 11037)
    assert rd["ci_low"] < rd["estimate"] < rd["ci_high"]


def wilson_closed_form(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    # Wilson (1927), JASA 22:209, the score interval in closed form (what R's
    # prop.test(k, n, correct = FALSE) reports as conf.int).
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return centre - half, centre + half


def test_selection_rates_wilson_interval():
    df = pd.DataFrame(
        {
            "format": ["original"] * 100 + ["summary"] * 100,
            "chose_target": [1] * 52 + [0] * 48 + [1] * 83 + [0] * 17,
        }
    )
    res = selection_rates(df).set_index("format")
    assert res.loc["summary", "estimate"] == pytest.approx(0.83)
    low, high = wilson_closed_form(83, 100)
    assert res.loc["summary", "ci_low"] == pytest.approx(low, abs=1e-12)
    assert res.loc["summary", "ci_high"] == pytest.approx(high, abs=1e-12)
    assert res.loc["original", "n"] == 100 and res.loc["original", "n_chose"] == 52


def test_by_pair_uses_fisher_for_small_counts_and_adjusts():
    data = simulate_choice_study(n_participants=20, n_pairs=4, seed=2)
    res = choice_by_pair(data)
    assert len(res) == 4
    assert set(res["test"]) <= {"fisher_exact", "pearson_yates"}
    assert (res["p_adj"] >= res["p_val"] - 1e-12).all()
    assert {"rate_original", "rate_summary", "ci_low_summary", "n_original"} <= set(res.columns)
    first = res.iloc[0]
    sel = data[(data["pair_id"] == first["pair_id"]) & (data["format"] == "summary")]
    assert first["rate_summary"] == pytest.approx(sel["chose_target"].mean())


def test_levels_are_validated():
    df = pd.DataFrame({"format": ["plain", "ai", "other"], "chose_target": [1, 0, 1]})
    with pytest.raises(ValueError, match="name the levels explicitly, reference first"):
        chi2_choice(df)
    with pytest.raises(ValueError, match="no trial with level"):
        chi2_choice(df, levels=("plain", "ai", "other", "more"))
    with pytest.raises(ValueError, match="outside"):
        chi2_choice(df, levels=("plain", "ai"))


def test_other_format_coding_needs_an_explicit_reference():
    # A coding other than original/summary must not take the alphabetical first level as the
    # reference, which would silently set the sign of the effect.
    data = table_to_long([[30, 70], [60, 40]], ["plain", "ai"], between="format", dv="chose_target")
    with pytest.raises(ValueError, match="name the levels explicitly, reference first"):
        choice_effects(data)
    rd = choice_effects(data, levels=("plain", "ai")).set_index("effect").loc["risk_difference"]
    assert rd["estimate"] == pytest.approx(0.6 - 0.3)
    assert (rd["versus"], rd["level"]) == ("plain", "ai")
    flipped = choice_effects(data, levels=("ai", "plain")).set_index("effect")
    assert flipped.loc["risk_difference", "estimate"] == pytest.approx(-0.3)


def test_each_effect_says_which_test_gave_its_p():
    # The risk-difference p is the Miettinen-Nurminen score test, named as such so that it
    # cannot be taken for the chi-square p of the same table.
    res = choice_effects(PHS, dv="mi", between="group", levels=("aspirin", "placebo"))
    methods = res.set_index("effect")["p_method"]
    assert methods["risk_difference"] == "Miettinen-Nurminen score test"
    assert methods["odds_ratio"] == "Wald test of log odds ratio"


def test_gee_agrees_with_marginal_odds_ratio_when_no_clustering():
    data = simulate_choice_study(n_participants=400, n_pairs=10, seed=4)
    gee = choice_clustered(data).iloc[0]
    marginal = choice_effects(data).set_index("effect").loc["odds_ratio"]
    # With independent trials the population-averaged odds ratio is the marginal one.
    assert gee["estimate"] == pytest.approx(marginal["estimate"], rel=0.02)
    assert gee["ci_low"] < gee["estimate"] < gee["ci_high"]
    assert gee["n_clusters"] == 400 and gee["contrast"] == "summary vs original"


def test_gee_widens_interval_under_clustering():
    data = simulate_choice_study(n_participants=300, n_pairs=10, seed=6, participant_sd_logit=1.5)
    gee = choice_clustered(data).iloc[0]
    marginal = choice_effects(data).set_index("effect").loc["odds_ratio"]
    # Within-person correlation: the robust SE of the log odds differs from the naive one.
    naive_se = (np.log(marginal["ci_high"]) - np.log(marginal["ci_low"])) / (2 * 1.959964)
    assert gee["working_correlation"] > 0.05
    assert gee["se"] != pytest.approx(naive_se, rel=0.01)


def test_rates_of_zero_and_one_are_handled():
    df = pd.DataFrame(
        {"format": ["original"] * 6 + ["summary"] * 6, "chose_target": [0] * 6 + [1] * 6}
    )
    rd = choice_effects(df).set_index("effect").loc["risk_difference"]
    assert rd["estimate"] == 1.0 and rd["ci_low"] < 1.0 and rd["ci_high"] == pytest.approx(1.0)
    assert np.isnan(choice_effects(df).set_index("effect").loc["odds_ratio", "estimate"])
    df["pair_id"] = "p1"
    row = choice_by_pair(df).iloc[0]
    assert row["test"] == "fisher_exact" and row["p_val"] < 0.01


def test_gee_that_does_not_converge_is_refused(monkeypatch):
    from analysis.stats.crossed import ConvergenceError

    make_gee_never_converge(monkeypatch)
    data = simulate_choice_study(n_participants=50, n_pairs=10, seed=6)
    with pytest.raises(ConvergenceError, match="GEE did not converge"):
        choice_clustered(data)


def test_seed_study_chi_square_is_reproduced():
    # The seed study: 70 participants x 5 choices per format = 350 trials per format, target
    # chosen in 83.7 % (summary) vs 52.3 % (original), "chi-square = 78, df = 1". The only
    # counts out of 350 that round to those rates are 293 and 183. With Yates' correction the
    # statistic is 78.0003; without it, 79.44 - so the paper used the corrected test.
    df = table_to_long([[183, 167], [293, 57]], ["original", "summary"], "chose_target", "format")
    rates = selection_rates(df).set_index("format")["estimate"]
    assert round(rates["summary"] * 100, 1) == 83.7 and round(rates["original"] * 100, 1) == 52.3
    res = chi2_choice(df)
    assert round(res.iloc[0]["chi2"]) == 78 and res.iloc[0]["dof"] == 1
    assert res.iloc[0]["test"] == "pearson_yates" and bool(res.iloc[0]["primary"])
    assert round(res.iloc[1]["chi2"]) == 79


def _separated(n_participants=30):
    data = simulate_choice_study(n_participants=n_participants, n_pairs=6, seed=1)
    data["chose_target"] = (data["format"] == "summary").astype(int)
    return data


def test_gee_refuses_a_separated_outcome():
    # Every summary trial chose the target and no original one did: the odds ratio is infinite
    # (the marginal one is NaN, the GLMM refuses). statsmodels' GEE still "converges", to
    # log OR = 55 with a robust SE of 0.37 and p = 0: a number no test supports.
    from analysis.stats.crossed import ConvergenceError

    with pytest.raises(ConvergenceError, match="separated"):
        choice_clustered(_separated())


def test_gee_needs_two_clusters():
    # One participant: the sandwich covariance has one cluster and no meaning (statsmodels
    # returns a p of 1e-197 or NaN SEs).
    data = simulate_choice_study(n_participants=1, n_pairs=10, seed=2)
    with pytest.raises(ValueError, match="at least 2 participants"):
        choice_clustered(data)


def test_failed_gee_is_reported_and_the_rest_written():
    from analysis.report.pipeline import analyze_choice

    results = analyze_choice(_separated())
    assert "clustered" not in results.tables
    assert results.meta["clustered_model"].startswith("not reported: ConvergenceError")
    assert results.meta["clustered_failed"].startswith("ConvergenceError: the outcome is")
    assert {"chi2", "effects", "wtp_model"} <= set(results.tables)
