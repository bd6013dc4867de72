"""The default WTP model against lme4 / lmerTest at their optimum.

Reference numbers: ``tests/analysis/r/lme4_reference.csv``, written by
``Rscript tests/analysis/r/lme4_reference.R`` (R 4.2.2, lme4 1.1-31, lmerTest 3.1-3) from the
seeded datasets of ``tests/analysis/r/make_datasets.py``. The R call per dataset::

    m <- lmerTest::lmer(wtp_premium_pct ~ format + (1 | participant_id) + (1 | pair_id),
                        data = d, REML = TRUE,
                        control = lmerControl(optimizer = "bobyqa",
                                              optCtrl = list(rhoend = 1e-12, maxfun = 1e6)))
    summary(m)$coefficients; VarCorr(m); REMLcrit(m); isSingular(m)
    AIC(refitML(m)); BIC(refitML(m)); logLik(refitML(m))
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.stats.wtp import wtp_mixed

R_DIR = Path(__file__).resolve().parents[1] / "r"
DATASETS = [
    "balanced_70x10",
    "messy_unbalanced",
    "singular_pair",
    "slopes_70x10",
    "balanced_300x10",
]


def reference(dataset: str, model: str = "intercepts") -> pd.Series:
    ref = pd.read_csv(R_DIR / "lme4_reference.csv")
    sel = ref[(ref["dataset"] == dataset) & (ref["model"] == model)]
    return sel.set_index("quantity")["value"].astype(float)


def load(dataset: str) -> pd.DataFrame:
    return pd.read_csv(R_DIR / "data" / f"{dataset}.csv")


@pytest.fixture(scope="module", params=DATASETS)
def fitted(request):
    data = load(request.param)
    return request.param, wtp_mixed(data).iloc[0], reference(request.param)


def test_estimates_ses_and_variances_match_lme4_to_1e6(fitted):
    _, row, r = fitted
    assert row["model"] == "crossed_sparse"
    tight = {"rel": 1e-6, "abs": 1e-9}
    assert row["estimate"] == pytest.approx(r["format_estimate"], **tight)
    assert row["se"] == pytest.approx(r["format_se"], **tight)
    assert row["intercept"] == pytest.approx(r["intercept_estimate"], **tight)
    assert row["intercept_se"] == pytest.approx(r["intercept_se"], **tight)
    assert row["sd_subject"] == pytest.approx(r["sd_participant_id_(Intercept)"], **tight)
    assert row["sd_item"] == pytest.approx(r["sd_pair_id_(Intercept)"], **tight)
    assert row["sd_residual"] == pytest.approx(r["sd_Residual"], **tight)
    assert row["statistic"] == pytest.approx(r["format_t"], rel=1e-6)
    # The REML criterion: -2 * REML log-likelihood.
    assert -2 * row["loglik_reml"] == pytest.approx(r["reml_criterion"], rel=1e-6)
    assert row["loglik_reml"] == pytest.approx(r["reml_loglik"], rel=1e-6)


def test_ml_refit_aic_bic_match_lme4(fitted):
    _, row, r = fitted
    assert row["aic_ml"] == pytest.approx(r["ml_aic"], rel=1e-6)
    assert row["bic_ml"] == pytest.approx(r["ml_bic"], rel=1e-6)


def test_satterthwaite_df_and_t_p_match_lmertest(fitted):
    # lmerTest differentiates numerically too (numDeriv); agreement to 1e-4 is both methods'.
    _, row, r = fitted
    assert row["df"] == pytest.approx(r["format_df"], rel=1e-4)
    assert row["p_val"] == pytest.approx(r["format_p"], rel=1e-3)
    assert row["p_method"] == "t, Satterthwaite df"
    # The normal p is reported beside it and is smaller (heavier t tails).
    assert row["p_val_z"] <= row["p_val"]


def test_singular_flag_matches_is_singular(fitted):
    name, row, r = fitted
    assert bool(row["singular"]) == bool(r["singular"])
    assert bool(row["singular"]) == (name == "singular_pair")
    if row["singular"]:
        assert "boundary" in row["notes"]


def test_iccs_and_standardised_effect_follow_from_lme4s_variances(fitted):
    _, row, r = fitted
    v = np.array(
        [r["sd_participant_id_(Intercept)"], r["sd_pair_id_(Intercept)"], r["sd_Residual"]]
    )
    total = float((v**2).sum())
    # Ratios of squared SDs double the SDs' 1e-7-level differences (both optimizers stop
    # within ~3e-7 of the optimum in theta, where the criterion is flat to 1e-11).
    assert row["icc_subject"] == pytest.approx(v[0] ** 2 / total, rel=1e-5)
    assert row["icc_item"] == pytest.approx(v[1] ** 2 / total, abs=1e-9, rel=1e-5)
    assert row["d_standardised"] == pytest.approx(r["format_estimate"] / np.sqrt(total), rel=1e-6)


@pytest.mark.parametrize("dataset", DATASETS)
def test_sparse_fit_is_at_least_as_optimal_as_lme4(dataset):
    # Where the two optima differ in the 7th digit, lme4's theta gives a REML criterion no
    # lower than ours: the sparse fit stops at the optimum, not short of it.
    from analysis.stats.crossed import _CrossedProblem

    data = load(dataset)
    x = (data["format"] == "summary").to_numpy(float)
    problem = _CrossedProblem(
        np.column_stack([np.ones(len(data)), x]),
        data["wtp_premium_pct"].to_numpy(float),
        pd.factorize(data["participant_id"])[0],
        pd.factorize(data["pair_id"])[0],
    )
    theta, criterion = problem.fit()
    r = reference(dataset)
    assert criterion == pytest.approx(r["reml_criterion"], rel=1e-12)
    assert problem.deviance([r["theta_1"], r["theta_2"]]) >= criterion - 1e-9


def test_t_interval_uses_satterthwaite_df(fitted):
    from scipy.stats import t

    _, row, r = fitted
    half = t.ppf(0.975, r["format_df"]) * r["format_se"]
    assert row["ci_low"] == pytest.approx(r["format_estimate"] - half, rel=1e-5)
    assert row["ci_high"] == pytest.approx(r["format_estimate"] + half, rel=1e-5)


def test_statsmodels_dense_fit_is_flagged_singular_where_lme4_is():
    # A fit at the boundary must say so, not report converged=True with the boundary in notes.
    data = load("singular_pair")
    dense = wtp_mixed(data, model="crossed").iloc[0]
    assert dense["model"] == "crossed"
    assert bool(dense["singular"])
    # ... and agrees with lme4 on the format effect (the balanced design makes it exact).
    assert dense["estimate"] == pytest.approx(reference("singular_pair")["format_estimate"])


# Random slopes. R call, same control as above:
#   lmerTest::lmer(wtp_premium_pct ~ format + (1 + format | participant_id)
#                  + (1 + format | pair_id), data = d, REML = TRUE, control = ctrl)
#   anova(m_intercepts, m_slopes)   # refits both by ML: Chisq, Df = 4, Pr(>Chisq)
@pytest.mark.parametrize("dataset", ["slopes_70x10", "messy_unbalanced"])
def test_random_slopes_match_lmer_with_the_same_formula(dataset):
    from analysis.stats.wtp import crossed_slopes_lmm, wtp_slopes

    r = reference(dataset, "slopes")
    close = {"rel": 1e-4}
    summary = wtp_slopes(load(dataset)).iloc[0]
    # The maximal model's effect is reported beside the (possibly simplified) final one.
    assert summary["maximal_estimate"] == pytest.approx(r["format_estimate"], **close)
    assert summary["maximal_se"] == pytest.approx(r["format_se"], **close)
    assert summary["maximal_singular"] == bool(r["singular"])
    if not summary["simplified"]:
        # The slopes' test belongs to the final model: here the maximal one (a simplified
        # model's test is checked against anova() in test_simplify.py).
        lrt = reference(dataset, "slopes_vs_intercepts")
        assert summary["lrt_chisq"] == pytest.approx(lrt["lrt_chisq"], rel=1e-4)
        assert summary["lrt_df"] == lrt["lrt_df"] == 4
        assert summary["lrt_p"] == pytest.approx(lrt["lrt_p"], rel=1e-3)
    else:
        assert summary["lrt_df"] < 4
    data = load(dataset)
    data["x"] = (data["format"] == "summary").astype(float)
    fit = crossed_slopes_lmm(
        data, dv="wtp_premium_pct", x="x", large="participant_id", small="pair_id"
    )
    est = fit.set_index("term")["estimate"]
    fixed = fit[fit["kind"] == "fixed"].set_index("term").loc["x"]
    first = fit.iloc[0]
    row = {
        "estimate": fixed["estimate"],
        "se": fixed["se"],
        "df": fixed["df"],
        "p_val": fixed["p_val"],
        "sd_subject": est["participant_id: Intercept"],
        "sd_subject_slope": est["participant_id: x"],
        "sd_item": est["pair_id: Intercept"],
        "sd_item_slope": est["pair_id: x"],
        "corr_item": est["pair_id: Intercept x x"],
        "sd_residual": est["Residual"],
        "loglik_reml": first["loglik"],
        "aic_ml": first["aic_ml"],
        "bic_ml": first["bic_ml"],
        "singular": first["singular"],
    }
    assert row["estimate"] == pytest.approx(r["format_estimate"], **close)
    assert row["se"] == pytest.approx(r["format_se"], **close)
    assert row["df"] == pytest.approx(r["format_df"], **close)
    assert row["p_val"] == pytest.approx(r["format_p"], **close)
    assert row["sd_subject"] == pytest.approx(r["sd_participant_id_(Intercept)"], **close)
    assert row["sd_subject_slope"] == pytest.approx(r["sd_participant_id_formatsummary"], **close)
    assert row["sd_item"] == pytest.approx(r["sd_pair_id_(Intercept)"], **close)
    assert row["sd_item_slope"] == pytest.approx(r["sd_pair_id_formatsummary"], **close)
    assert row["corr_item"] == pytest.approx(r["corr_pair_id"], **close)
    assert row["sd_residual"] == pytest.approx(r["sd_Residual"], **close)
    assert -2 * row["loglik_reml"] == pytest.approx(r["reml_criterion"], rel=1e-6)
    assert row["aic_ml"] == pytest.approx(r["ml_aic"], rel=1e-6)
    assert row["bic_ml"] == pytest.approx(r["ml_bic"], rel=1e-6)
    assert bool(row["singular"]) == bool(r["singular"])


def test_slopes_widen_the_interval_when_the_effect_varies_by_pair():
    # Why slopes matter: intercept-only SE 0.40 vs 1.05 with slopes on these data.
    from analysis.stats.wtp import wtp_slopes

    data = load("slopes_70x10")
    slopes, intercepts = wtp_slopes(data).iloc[0], wtp_mixed(data).iloc[0]
    assert slopes["se"] > 2 * intercepts["se"] and slopes["maximal_se"] > 2 * intercepts["se"]
    assert slopes["lrt_p"] < 1e-5
    # Participant correlation at +1 (lme4: theta_3 = 0): the maximal model is singular, and
    # the reported one is the zero-correlation model (analysis/stats/simplify.py).
    assert slopes["maximal_singular"] and slopes["simplified"] and not slopes["singular"]
    assert "dropped the correlations" in slopes["simplification"]


def test_slopes_fit_finds_a_lower_criterion_where_lme4_stopped_short():
    # singular_pair: lme4's BOBYQA (even at rhoend = 1e-12) stops at a REML criterion of
    # 2288.683; the sparse fit reaches 2288.198 from the same start. Both are singular.
    from analysis.stats.wtp import crossed_slopes_lmm

    data = load("singular_pair")
    data["x"] = (data["format"] == "summary").astype(float)
    res = crossed_slopes_lmm(
        data, dv="wtp_premium_pct", x="x", large="participant_id", small="pair_id"
    )
    r = reference("singular_pair", "slopes")
    assert res["criterion"].iloc[0] < r["reml_criterion"] - 0.4
    assert res["singular"].iloc[0] and r["singular"] == 1
