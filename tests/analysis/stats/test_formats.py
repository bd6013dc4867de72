"""k-format choice statistics: levels, contrasts, rates, chi-square, GEE, WTP contrasts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.stats.choice import (
    adjust_p,
    chi2_choice,
    choice_clustered,
    choice_effects,
    choice_glmm,
    format_contrasts,
    format_levels,
    selection_rates,
)
from analysis.stats.crossed import ConvergenceError
from analysis.stats.wtp import wtp_mixed

R_DATA = Path(__file__).resolve().parents[1] / "r" / "data"


@pytest.fixture(scope="module")
def four():
    return pd.read_csv(R_DATA / "kformat_4x80x12.csv")


def test_default_levels_put_original_then_summary_first(four):
    assert format_levels(four) == (
        "original",
        "summary",
        "mitigated:rerank",
        "mitigated:self-debias",
    )


def test_levels_refuse_unknown_missing_and_no_reference(four):
    with pytest.raises(ValueError, match="outside"):
        format_levels(four, levels=("original", "summary"))
    with pytest.raises(ValueError, match="no trial with level"):
        format_levels(four, levels=(*format_levels(four), "mitigated:cot"))
    with pytest.raises(ValueError, match="--levels"):
        format_levels(four[four["format"] != "original"])
    with pytest.raises(ValueError, match="at least two"):
        format_levels(four[four["format"] == "original"])


def test_contrasts_against_reference_then_baseline():
    got = format_contrasts(("original", "summary", "mitigated:a", "mitigated:b"))
    assert [c.name for c in got] == [
        "summary vs original",
        "mitigated:a vs original",
        "mitigated:b vs original",
        "mitigated:a vs summary",
        "mitigated:b vs summary",
    ]
    assert got[3].weights == (0.0, -1.0, 1.0, 0.0)
    # No baseline among the levels: the treatment contrasts alone.
    assert len(format_contrasts(("original", "mitigated:a", "mitigated:b"))) == 2


def test_rates_count_each_format(four):
    rates = selection_rates(four).set_index("format")
    assert rates.loc["summary", "n"] == 240
    assert rates.loc["summary", "n_chose"] == 144
    assert rates.loc["summary", "estimate"] == pytest.approx(0.6)
    assert (rates["ci_low"] < rates["estimate"]).all()


def test_chi2_matches_r_chisq_test(four):
    # R: chisq.test(table(d$format, d$chose_target)) on kformat_4x80x12.csv:
    # X-squared = 11.3539438662827, df = 3, p-value = 0.009958134746551
    row = chi2_choice(four).iloc[0]
    assert row["test"] == "pearson"
    assert row["dof"] == 3
    assert row["chi2"] == pytest.approx(11.3539438662827, rel=1e-12)
    assert row["p_val"] == pytest.approx(0.009958134746551, rel=1e-10)


def test_differences_are_rate_differences(four):
    effects = choice_effects(four)
    diff = effects[effects["effect"] == "risk_difference"].set_index("contrast")
    row = diff.loc["mitigated:rerank vs summary"]
    assert row["estimate"] == pytest.approx(125 / 240 - 144 / 240)
    assert row["ci_low"] < row["estimate"] < row["ci_high"]
    assert list(diff["family"]).count("vs baseline") == 2


def test_two_formats_are_one_contrast_with_nothing_to_adjust(four):
    two = four[four["format"].isin(["original", "summary"])]
    for fit in (choice_glmm(two), choice_clustered(two), wtp_mixed(two)):
        assert list(fit["contrast"]) == ["summary vs original"]
        assert fit["p_adj"].iloc[0] == fit["p_val"].iloc[0]
    assert list(chi2_choice(two)["test"]) == ["pearson_yates", "pearson"]


def test_baseline_contrast_equals_the_refit_with_summary_as_reference(four):
    levels = ("original", "summary", "mitigated:rerank", "mitigated:self-debias")
    out = wtp_mixed(four, levels=levels).set_index("contrast")
    refit = wtp_mixed(four, levels=("summary", "original", *levels[2:])).set_index("contrast")
    for name in ("mitigated:rerank vs summary", "mitigated:self-debias vs summary"):
        assert out.loc[name, "estimate"] == pytest.approx(refit.loc[name, "estimate"], rel=1e-6)
        assert out.loc[name, "se"] == pytest.approx(refit.loc[name, "se"], rel=1e-6)


def test_holm_runs_across_all_contrasts(four):
    out = choice_clustered(four)
    p = np.sort(out["p_val"].to_numpy())
    m = len(p)
    holm = np.minimum(1, np.maximum.accumulate(p * (m - np.arange(m))))
    assert np.sort(out["p_adj"].to_numpy()) == pytest.approx(holm)


def test_holm_is_statsmodels_holm_bit_for_bit():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(7)
    for m in (1, 2, 5, 40):
        p = rng.uniform(0, 0.2, m)
        p[: m // 3] = p[0]  # ties
        expected = multipletests(p, method="holm")[1]
        assert adjust_p(p).tolist() == expected.tolist()
        assert adjust_p(p, "h").tolist() == expected.tolist()
    with_nan = adjust_p([0.01, np.nan, 0.04, 0.5])
    assert np.isnan(with_nan[1])
    assert (
        with_nan[[0, 2, 3]].tolist() == multipletests([0.01, 0.04, 0.5], method="holm")[1].tolist()
    )


def test_separated_format_is_refused(four):
    d = four.copy()
    d.loc[d["format"] == "mitigated:rerank", "chose_target"] = 1
    with pytest.raises(ConvergenceError, match="mitigated:rerank"):
        choice_clustered(d)
    with pytest.raises(ConvergenceError, match="separated"):
        choice_glmm(d)
