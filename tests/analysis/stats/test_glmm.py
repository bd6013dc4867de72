"""The choice GLMM against lme4::glmer (Laplace, nAGQ = 1) at its optimum.

Reference numbers: ``tests/analysis/r/glmer_reference.csv``, written by
``Rscript tests/analysis/r/glmer_reference.R`` (R 4.2.2, lme4 1.1-31) from the seeded datasets of
``tests/analysis/r/make_glmm_datasets.py``. The R call per dataset::

    m <- glmer(chose_target ~ format + (1 | participant_id) + (1 | pair_id), data = d,
               family = binomial, nAGQ = 1,
               control = glmerControl(optimizer = "bobyqa", tolPwrss = 1e-12,
                                      optCtrl = list(rhoend = 1e-12, maxfun = 1e6)))
    summary(m)$coefficients; VarCorr(m); logLik(m); AIC(m); BIC(m); isSingular(m)
    vcov(m, use.hessian = FALSE)
    g <- m@optinfo$derivs
    max(pmin(abs(solve(chol(g$Hessian), g$gradient)), abs(g$gradient)))   # max_grad

The ``glmm_*`` datasets have a small but non-zero pair (or participant) variance; on each, a
fit that stopped where an SD first reached 0 reported a singular fit with a deviance 0.002-1.3
above glmer's optimum.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.simulate import simulate_choice_study
from analysis.stats.choice import choice_glmm
from analysis.stats.crossed import ConvergenceError
from analysis.stats.glmm import crossed_glmm

R_DIR = Path(__file__).resolve().parents[1] / "r"
DATASETS = ["choice_70x10", "choice_messy", "choice_singular"]
BOUNDARY = [
    "glmm_missing_70x10",
    "glmm_small_pair_70x10",
    "glmm_small_pair_40x12",
    "glmm_small_participant_70x10",
]


def reference(dataset: str) -> pd.Series:
    ref = pd.read_csv(R_DIR / "glmer_reference.csv")
    return ref[ref["dataset"] == dataset].set_index("quantity")["value"].astype(float)


def load(dataset: str) -> pd.DataFrame:
    return pd.read_csv(R_DIR / "data" / f"{dataset}.csv")


@pytest.fixture(scope="module", params=DATASETS + BOUNDARY)
def fitted(request):
    return request.param, choice_glmm(load(request.param)).iloc[0], reference(request.param)


def test_log_odds_ratio_and_se_match_glmer_to_1e4(fitted):
    name, row, r = fitted
    tight = {"rel": 1e-4, "abs": 1e-8}
    assert row["log_odds"] == pytest.approx(r["format_estimate"], **tight)
    assert row["se"] == pytest.approx(r["format_se"], **tight)
    if name in DATASETS:
        # The same SE with less finite-difference noise in R's Hessian: closer still. (On
        # glmm_small_pair_40x12 R's devFunOnly is rough at steps of 1e-3: that Hessian gives an
        # SE of 0.1870, steps of 1e-2 and 1e-4 give 0.18897 as summary(m) and this fit.)
        assert row["se"] == pytest.approx(r["format_se_hess"], rel=2e-5)
    assert row["z"] == pytest.approx(r["format_z"], **tight)
    assert row["p_val"] == pytest.approx(r["format_p"], rel=1e-3)
    assert row["intercept_log_odds"] == pytest.approx(r["intercept_estimate"], rel=1e-4, abs=1e-6)
    assert row["estimate"] == pytest.approx(np.exp(r["format_estimate"]), rel=1e-4)
    assert row["ci_low"] == pytest.approx(
        np.exp(r["format_estimate"] - 1.959963984540054 * r["format_se"]), rel=1e-4
    )


def test_deviance_variances_and_singular_flag_match_glmer(fitted):
    name, row, r = fitted
    assert row["loglik"] == pytest.approx(r["loglik"], rel=1e-8)
    assert row["deviance"] == pytest.approx(r["deviance_at_optimum"], rel=1e-8)
    assert row["aic"] == pytest.approx(r["aic"], rel=1e-8)
    assert row["bic"] == pytest.approx(r["bic"], rel=1e-8)
    assert row["sd_subject"] == pytest.approx(r["sd_participant_id"], rel=1e-4, abs=1e-5)
    assert row["sd_item"] == pytest.approx(r["sd_pair_id"], rel=1e-4, abs=1e-5)
    assert row["singular"] == bool(r["singular"])
    assert row["n_obs"] == r["nobs"]
    assert row["converged"]
    if name == "choice_singular":
        assert "SD of participant_id, pair_id is at the boundary" in row["notes"]


@pytest.mark.parametrize("dataset", BOUNDARY)
def test_a_small_variance_is_not_left_at_zero(dataset):
    # glmer's optimum has every SD above 0 here; the fit reaches the same deviance, not one
    # stopped at an SD of 0 where the deviance's gradient also vanishes.
    row, r = choice_glmm(load(dataset)).iloc[0], reference(dataset)
    assert not r["singular"] and not row["singular"]
    assert row["deviance"] <= r["deviance_at_optimum"] + 1e-7
    assert row["sd_item"] == pytest.approx(r["sd_pair_id"], rel=1e-4, abs=1e-6)
    assert row["sd_subject"] == pytest.approx(r["sd_participant_id"], rel=1e-4, abs=1e-6)
    assert row["log_odds"] == pytest.approx(r["format_estimate"], rel=1e-4)
    assert row["se"] == pytest.approx(r["format_se"], rel=1e-4)
    assert row["loglik"] == pytest.approx(r["loglik"], rel=1e-4)


def test_convergence_statistic_is_glmers_and_small_at_the_optimum(fitted):
    # lme4's checkConv statistic at either program's optimum is far below its 0.002 warning.
    _, row, r = fitted
    assert r["max_grad"] < 1e-4
    assert 0 <= row["max_grad"] < 1e-4
    assert "convergence check failed" not in row["notes"]


def test_a_large_gradient_is_reported_as_glmers_convergence_warning():
    import analysis.stats.glmm as glmm

    hess = np.array([[4.0, 1.0], [1.0, 2.0]])
    grad = np.array([0.01, -0.5])
    # By hand: R = chol(H) = [[2, 0.5], [0, sqrt(1.75)]]; solve(R, g) = (0.0764.., -0.378);
    # the smaller of scaled and raw per component: (0.01, 0.378).
    assert glmm._max_grad(grad, hess) == pytest.approx(0.5 / np.sqrt(1.75))
    # A Hessian that is not positive definite leaves the raw gradient (as a singular fit).
    assert glmm._max_grad(grad, -hess) == pytest.approx(0.5)


def test_se_given_theta_matches_glmer_use_hessian_false():
    data = load("choice_messy")
    data["x"] = (data["format"] == "summary").astype(float)
    table = crossed_glmm(
        data, dv="chose_target", fixed=["x"], large="participant_id", small="pair_id"
    )
    fixed = table[table["kind"] == "fixed"].set_index("term")
    r = reference("choice_messy")
    assert fixed.loc["x", "se_rx"] == pytest.approx(r["format_se_rx"], rel=1e-4)
    assert fixed.loc["Intercept", "se_rx"] == pytest.approx(r["intercept_se_rx"], rel=1e-4)
    # theta is lme4's getME(m, "theta"): participants (more levels) first.
    theta = [float(v) for v in table["theta"].iloc[0].split()]
    assert theta == pytest.approx([r["theta_1"], r["theta_2"]], rel=1e-4)


def test_row_order_ids_and_reversed_levels_do_not_change_the_fit():
    data = load("choice_70x10")
    base = choice_glmm(data).iloc[0]
    hostile = data.sample(frac=1.0, random_state=3).reset_index(drop=True)
    # Integer ids and a few missing outcomes (dropped, as glmer's na.omit).
    hostile["participant_id"] = pd.factorize(hostile["participant_id"])[0] + 1000
    hostile["chose_target"] = hostile["chose_target"].astype(float)
    shuffled = choice_glmm(hostile).iloc[0]
    assert shuffled["log_odds"] == pytest.approx(base["log_odds"], rel=1e-6)
    assert shuffled["se"] == pytest.approx(base["se"], rel=1e-5)
    flipped = choice_glmm(data, levels=("summary", "original")).iloc[0]
    assert flipped["log_odds"] == pytest.approx(-base["log_odds"], rel=1e-5)
    assert flipped["contrast"] == "original vs summary"
    hostile.loc[:4, "chose_target"] = np.nan
    assert choice_glmm(hostile).iloc[0]["n_obs"] == len(data) - 5


def test_separated_or_non_binary_outcome_is_refused_with_a_reason():
    data = load("choice_singular")
    separated = data.assign(chose_target=(data["format"] == "summary").astype(int))
    with pytest.raises(ConvergenceError, match="separated"):
        choice_glmm(separated)
    with pytest.raises(ValueError, match="no trial with level\\(s\\) \\['original'\\]"):
        choice_glmm(data[data["format"] == "summary"], levels=("original", "summary"))
    with pytest.raises(ValueError, match="must be 0/1"):
        choice_glmm(data.assign(chose_target=data["chose_target"] * 2))


def test_glmm_beside_chi2_and_gee_and_its_failure_is_isolated(monkeypatch):
    from analysis.report.pipeline import analyze_choice
    from analysis.simulate import simulate_choice_study
    from analysis.stats import choice

    data = simulate_choice_study(n_participants=30, seed=2)
    results = analyze_choice(data)
    assert results.meta["choice_glmm"] == "reported"
    glmm = results.tables["choice_glmm"].iloc[0]
    assert glmm["ci_low"] < glmm["estimate"] < glmm["ci_high"]
    assert {"chi2", "clustered", "choice_glmm"} <= set(results.tables)

    def never_converges(*args, **kwargs):
        raise ConvergenceError("logistic GLMM (Laplace) did not converge (test)")

    monkeypatch.setattr(choice, "choice_glmm", never_converges)
    results = analyze_choice(data)
    assert "choice_glmm" not in results.tables
    assert results.meta["choice_glmm"].startswith("not reported: ConvergenceError")
    assert "chi2" in results.tables and "wtp_model" in results.tables


@pytest.mark.parametrize("dataset", ["choice_messy", "glmm_small_pair_40x12"])
def test_sparse_weight_table_gives_the_dense_fit(monkeypatch, dataset):
    # Above DENSE_CELLS participants x pairs the weighted table is held as CSR (designs where
    # each participant sees a few of thousands of items); same numbers as the dense path.
    import analysis.stats.glmm as glmm

    data = load(dataset)
    dense = choice_glmm(data).iloc[0]
    monkeypatch.setattr(glmm, "DENSE_CELLS", 0)
    sparse = choice_glmm(data).iloc[0]
    assert sparse["log_odds"] == pytest.approx(dense["log_odds"], rel=1e-6)
    assert sparse["se"] == pytest.approx(dense["se"], rel=1e-5)
    assert sparse["deviance"] == pytest.approx(dense["deviance"], rel=1e-10)


def test_a_failed_fit_from_glmers_start_falls_back_to_the_first_stage(monkeypatch):
    import analysis.stats.glmm as glmm

    data = load("choice_70x10")
    direct = choice_glmm(data).iloc[0]
    second_stage = glmm._LogitCrossedProblem._second_stage
    calls = []

    def fails_once(self, x0):
        calls.append(x0)
        if len(calls) == 1:
            raise ConvergenceError("test: no convergence from theta = 1")
        return second_stage(self, x0)

    monkeypatch.setattr(glmm._LogitCrossedProblem, "_second_stage", fails_once)
    fallback = choice_glmm(data).iloc[0]
    assert len(calls) == 2 and list(calls[0][:2]) == [1.0, 1.0] and calls[1][0] != 1.0
    assert fallback["log_odds"] == pytest.approx(direct["log_odds"], rel=1e-6)
    assert fallback["se"] == pytest.approx(direct["se"], rel=1e-5)


@pytest.mark.parametrize(
    ("participants", "pairs", "group"), [(40, 1, "pair_id"), (1, 30, "participant_id")]
)
def test_a_grouping_factor_with_one_level_is_refused(participants, pairs, group):
    # glmer refuses it ("grouping factors must have > 1 sampled level"); the fit used to report
    # an odds ratio with a "singular" SD of a factor that has no variance to estimate.
    data = simulate_choice_study(n_participants=participants, n_pairs=pairs, seed=5)
    with pytest.raises(ValueError, match=f"'{group}' has 1 level"):
        choice_glmm(data)
