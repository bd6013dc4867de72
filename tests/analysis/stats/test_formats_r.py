"""The k-format GLMM and WTP LMM against lme4::glmer / lme4::lmer + lmerTest at their optimum.

Reference numbers: ``tests/analysis/r/kformat_reference.csv``, written by
``Rscript tests/analysis/r/kformat_reference.R`` (R 4.2.2, lme4 1.1-31, lmerTest 3.1-3) from the
seeded datasets of ``tests/analysis/r/make_kformat_datasets.py`` (4 and 3 formats). The R calls
per dataset, ``format`` a factor with levels original, summary, mitigated... and ``L`` the
(2k - 3) x k matrix of the treatment contrasts and each mitigated level minus summary::

    g <- glmer(chose_target ~ format + (1 | participant_id) + (1 | pair_id), data = d,
               family = binomial, nAGQ = 1,
               control = glmerControl(optimizer = "bobyqa", tolPwrss = 1e-12,
                                      optCtrl = list(rhoend = 1e-12, maxfun = 1e6)))
    L %*% fixef(g); sqrt(diag(L %*% vcov(g) %*% t(L))); VarCorr(g); logLik(g)
    m <- lmer(wtp_premium_pct ~ format + (1 | participant_id) + (1 | pair_id), data = d,
              control = lmerControl(optimizer = "bobyqa",
                                    optCtrl = list(rhoend = 1e-12, maxfun = 1e6)))
    contest(m, L, joint = FALSE); VarCorr(m); logLik(m)
    p.adjust(p, "holm")
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.stats.choice import choice_glmm
from analysis.stats.wtp import wtp_mixed

R_DIR = Path(__file__).resolve().parents[1] / "r"
LEVELS = {
    "kformat_4x80x12": ("original", "summary", "mitigated:self-debias", "mitigated:rerank"),
    "kformat_3x60x9_missing": ("original", "summary", "mitigated:self-debias"),
}
TIGHT = {"rel": 1e-4, "abs": 1e-8}


def reference(dataset: str) -> pd.Series:
    ref = pd.read_csv(R_DIR / "kformat_reference.csv")
    return ref[ref["dataset"] == dataset].set_index("quantity")["value"].astype(float)


def load(dataset: str) -> pd.DataFrame:
    return pd.read_csv(R_DIR / "data" / f"{dataset}.csv")


@pytest.fixture(scope="module", params=sorted(LEVELS))
def glmm(request):
    name = request.param
    return choice_glmm(load(name), levels=LEVELS[name]), reference(name), len(LEVELS[name])


@pytest.fixture(scope="module", params=sorted(LEVELS))
def lmm(request):
    name = request.param
    return wtp_mixed(load(name), levels=LEVELS[name]), reference(name), len(LEVELS[name])


def test_glmm_contrasts_match_glmer(glmm):
    out, r, k = glmm
    assert len(out) == 2 * k - 3
    assert list(out["family"]) == ["vs reference"] * (k - 1) + ["vs baseline"] * (k - 2)
    for i, row in enumerate(out.itertuples(), start=1):
        assert row.log_odds == pytest.approx(r[f"glmm_contrast{i}_estimate"], **TIGHT)
        assert row.se == pytest.approx(r[f"glmm_contrast{i}_se"], **TIGHT)
        assert row.p_val == pytest.approx(r[f"glmm_contrast{i}_p"], rel=1e-3)
        assert row.p_adj == pytest.approx(r[f"glmm_contrast{i}_p_holm"], rel=1e-3)


def test_glmm_intercept_sds_and_loglik_match_glmer(glmm):
    out, r, _ = glmm
    row = out.iloc[0]
    assert row["intercept_log_odds"] == pytest.approx(r["glmm_beta0_estimate"], **TIGHT)
    assert row["sd_subject"] == pytest.approx(r["glmm_sd_participant_id"], **TIGHT)
    assert row["sd_item"] == pytest.approx(r["glmm_sd_pair_id"], **TIGHT)
    assert row["loglik"] == pytest.approx(r["glmm_loglik"], rel=1e-8)
    assert row["n_obs"] == r["glmm_nobs"]


def test_lmm_contrasts_match_lmertest(lmm):
    out, r, k = lmm
    assert len(out) == 2 * k - 3
    for i, row in enumerate(out.itertuples(), start=1):
        assert row.estimate == pytest.approx(r[f"lmm_contrast{i}_estimate"], **TIGHT)
        assert row.se == pytest.approx(r[f"lmm_contrast{i}_se"], **TIGHT)
        assert row.df == pytest.approx(r[f"lmm_contrast{i}_df"], rel=1e-4)
        assert row.p_val == pytest.approx(r[f"lmm_contrast{i}_p"], rel=1e-3)
        assert row.p_adj == pytest.approx(r[f"lmm_contrast{i}_p_holm"], rel=1e-3)


def test_lmm_intercept_sds_and_loglik_match_lmer(lmm):
    out, r, _ = lmm
    row = out.iloc[0]
    assert row["intercept"] == pytest.approx(r["lmm_beta0_estimate"], **TIGHT)
    assert row["sd_subject"] == pytest.approx(r["lmm_sd_participant_id"], **TIGHT)
    assert row["sd_item"] == pytest.approx(r["lmm_sd_pair_id"], **TIGHT)
    assert row["sd_residual"] == pytest.approx(r["lmm_sd_Residual"], **TIGHT)
    assert row["loglik_reml"] == pytest.approx(r["lmm_loglik_reml"], rel=1e-8)
