"""Mixed models checked against lme4 / MixedModels.jl, and the WTP model-selection logic.

Data: lme4's ``sleepstudy`` (Belenky et al. 2003) and ``Penicillin`` (Davies & Goldsmith 1972), as
distributed with lme4 and copied verbatim from Douglas Bates' MixedModelExamples repository
(data/sleepstudy.csv, data/penicillin.csv).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.simulate import simulate_choice_study
from analysis.stats.wtp import ConvergenceError, crossed_lmm, lmm, wtp_by_format, wtp_mixed

# Reaction time (ms) on days 0..9 of sleep deprivation, one line per subject.
SLEEPSTUDY = """
308 249.56 258.7047 250.8006 321.4398 356.8519 414.6901 382.2038 290.1486 430.5853 466.3535
309 222.7339 205.2658 202.9778 204.707 207.7161 215.9618 213.6303 217.7272 224.2957 237.3142
310 199.0539 194.3322 234.32 232.8416 229.3074 220.4579 235.4208 255.7511 261.0125 247.5153
330 321.5426 300.4002 283.8565 285.133 285.7973 297.5855 280.2396 318.2613 305.3495 354.0487
331 287.6079 285.0 301.8206 320.1153 316.2773 293.3187 290.075 334.8177 293.7469 371.5811
332 234.8606 242.8118 272.9613 309.7688 317.4629 309.9976 454.1619 346.8311 330.3003 253.8644
333 283.8424 289.555 276.7693 299.8097 297.171 338.1665 332.0265 348.8399 333.36 362.0428
334 265.4731 276.2012 243.3647 254.6723 279.0244 284.1912 305.5248 331.5229 335.7469 377.299
335 241.6083 273.9472 254.4907 270.8021 251.4519 254.6362 245.4523 235.311 235.7541 237.2466
337 312.3666 313.8058 291.6112 346.1222 365.7324 391.8385 404.2601 416.6923 455.8643 458.9167
349 236.1032 230.3167 238.9256 254.922 250.7103 269.7744 281.5648 308.102 336.2806 351.6451
350 256.2968 243.4543 256.2046 255.5271 268.9165 329.7247 379.4445 362.9184 394.4872 389.0527
351 250.5265 300.0576 269.8939 280.5891 271.8274 304.6336 287.7466 266.5955 321.5418 347.5655
352 221.6771 298.1939 326.8785 346.8555 348.7402 352.8287 354.4266 360.4326 375.6406 388.5417
369 271.9235 268.4369 257.2424 277.6566 314.8222 317.2135 298.1353 348.1229 340.28 366.5131
370 225.264 234.5235 238.9008 240.473 267.5373 344.1937 281.1481 347.5855 365.163 372.2288
371 269.8804 272.4428 277.8989 281.7895 279.1705 284.512 259.2658 304.6306 350.7807 369.4692
372 269.4117 273.474 297.5968 310.6316 287.1726 329.6076 334.4818 343.2199 369.1417 364.1236
"""

# Penicillin diameter (mm): 24 plates a..x, each with samples A..F in that order.
PENICILLIN = """
27 23 26 23 23 21  27 23 26 23 23 21  25 21 25 24 24 20  26 23 25 23 23 20
25 22 26 22 23 20  24 22 25 23 22 19  24 20 23 21 22 19  26 22 26 24 24 21
24 21 24 22 22 20  24 21 24 23 22 19  26 23 26 24 24 21  25 22 26 24 24 20
26 24 26 24 25 22  26 23 26 23 23 20  26 23 25 24 24 22  25 22 25 23 23 20
25 21 24 23 23 20  25 22 24 23 23 19  24 21 23 21 21 19  26 23 26 24 24 21
25 21 24 22 22 18  25 22 25 22 22 20  24 21 24 22 24 19  24 21 24 22 21 18
"""


def sleepstudy() -> pd.DataFrame:
    rows = []
    for line in SLEEPSTUDY.strip().splitlines():
        subject, *values = line.split()
        rows += [(float(v), day, subject) for day, v in enumerate(values)]
    return pd.DataFrame(rows, columns=["Reaction", "Days", "Subject"])


def penicillin() -> pd.DataFrame:
    values = [float(v) for v in PENICILLIN.split()]
    plates = [chr(ord("a") + i) for i in range(24)]
    return pd.DataFrame(
        {
            "diameter": values,
            "plate": np.repeat(plates, 6),
            "sample": np.tile(list("ABCDEF"), 24),
        }
    )


def test_sleepstudy_matches_lme4():
    # R> fm1 <- lmer(Reaction ~ Days + (Days | Subject), sleepstudy)   # REML
    # Fixed effects: (Intercept) 251.405 (SE 6.825), Days 10.467 (SE 1.546)
    # Random effects: Subject (Intercept) SD 24.74, Days SD 5.92, Residual SD 25.59
    data = sleepstudy()
    assert len(data) == 180 and data["Subject"].nunique() == 18
    res = lmm(data, formula="Reaction ~ Days", groups="Subject", re_formula="~Days")
    fixed = res[res["kind"] == "fixed"].set_index("term")
    sd = res[res["kind"] == "sd"].set_index("term")["estimate"]
    assert fixed.loc["Intercept", "estimate"] == pytest.approx(251.405, abs=5e-4)
    assert fixed.loc["Days", "estimate"] == pytest.approx(10.467, abs=5e-4)
    assert fixed.loc["Intercept", "se"] == pytest.approx(6.825, abs=2e-3)
    assert fixed.loc["Days", "se"] == pytest.approx(1.546, abs=2e-3)
    assert sd["Subject: Group"] == pytest.approx(24.74, abs=0.01)
    assert sd["Subject: Days"] == pytest.approx(5.92, abs=0.01)
    assert sd["Residual"] == pytest.approx(25.59, abs=0.01)
    assert res["converged"].all() and res["optimizer"].iloc[0] in {"lbfgs", "bfgs", "powell"}


def test_penicillin_crossed_matches_lme4():
    # R> lmer(diameter ~ 1 + (1 | plate) + (1 | sample), Penicillin)   # REML
    # MixedModels.jl / lme4: (Intercept) 22.9722 (SE 0.80857); plate SD 0.84671,
    # sample SD 1.93156, residual SD 0.54992.
    data = penicillin()
    assert data["diameter"].mean() == pytest.approx(22.972222, abs=1e-6)
    res = lmm(
        data,
        formula="diameter ~ 1",
        vc_formula={"plate": "0 + C(plate)", "sample": "0 + C(sample)"},
    )
    fixed = res[res["kind"] == "fixed"].set_index("term")
    sd = res[res["kind"] == "sd"].set_index("term")["estimate"]
    assert fixed.loc["Intercept", "estimate"] == pytest.approx(22.97222, abs=1e-4)
    assert fixed.loc["Intercept", "se"] == pytest.approx(0.80857, abs=1e-4)
    assert sd["plate"] == pytest.approx(0.84671, abs=1e-4)
    assert sd["sample"] == pytest.approx(1.93156, abs=1e-4)
    assert sd["Residual"] == pytest.approx(0.54992, abs=1e-4)


def test_wtp_auto_uses_the_sparse_lme4_fit_at_every_size():
    # The sparse profiled-REML fit is the default at every size: statsmodels' dense fit is
    # slower, stops near the boundary and gives no df.
    small = simulate_choice_study(n_participants=40, n_pairs=10, seed=3)
    res = wtp_mixed(small)
    assert res.loc[0, "model"] == "crossed_sparse"
    assert "profiled REML" in res.loc[0, "reason"]
    assert res.loc[0, "n_obs"] == len(small)
    assert res.loc[0, "p_method"] == "t, Satterthwaite df"
    assert 300 < res.loc[0, "df"] < 400  # 400 rows, 40 participants: within-participant df

    dense = wtp_mixed(small, model="crossed")
    assert dense.loc[0, "reason"] == "requested"
    assert dense.loc[0, "estimate"] == pytest.approx(res.loc[0, "estimate"], abs=1e-5)
    assert np.isnan(dense.loc[0, "df"]) and dense.loc[0, "p_method"] == "normal (Wald z)"

    pair_fixed = wtp_mixed(small, model="pair_fixed")
    assert pair_fixed.loc[0, "reason"] == "requested"
    assert (
        pair_fixed.loc[0, "formula"]
        == "wtp_premium_pct ~ format + C(pair_id) + (1 | participant_id)"
    )
    # Balanced, counterbalanced design: both models estimate nearly the same format effect.
    assert pair_fixed.loc[0, "estimate"] == pytest.approx(res.loc[0, "estimate"], abs=0.3)
    # Participant SD well away from 0: not singular, and no stale "covariance is singular" note.
    assert pair_fixed.loc[0, "sd_subject"] > 1
    assert not pair_fixed.loc[0, "singular"]
    assert "singular" not in pair_fixed.loc[0, "notes"]


def test_wtp_log_transform_and_descriptives():
    data = simulate_choice_study(n_participants=30, n_pairs=10, seed=5)
    res = wtp_mixed(data, transform="log")
    assert res.loc[0, "formula"].startswith("log(1 + wtp_premium_pct/100)")
    desc = wtp_by_format(data)
    assert list(desc["format"]) == ["original", "summary"]
    manual = data[data["format"] == "summary"].groupby("participant_id")["wtp_premium_pct"].mean()
    assert desc.loc[1, "estimate"] == pytest.approx(manual.mean())
    assert desc.loc[1, "ci_low"] < desc.loc[1, "estimate"] < desc.loc[1, "ci_high"]


def test_nonconverged_fit_is_refused():
    data = simulate_choice_study(n_participants=20, n_pairs=10, seed=1)
    # One iteration cannot converge: the fit must raise, never return numbers.
    with pytest.raises(ConvergenceError, match="lbfgs: did not converge"):
        wtp_mixed(data, model="crossed", optimizers=["lbfgs"], maxiter=1)


def test_sparse_crossed_penicillin_matches_lme4():
    # Same reference as above: lmer(diameter ~ 1 + (1 | plate) + (1 | sample), Penicillin)
    # (Intercept) 22.97222, SE 0.80857; plate SD 0.84671, sample SD 1.93156, residual 0.54992.
    res = crossed_lmm(penicillin(), dv="diameter", large="plate", small="sample")
    fixed = res[res["kind"] == "fixed"].set_index("term")
    sd = res[res["kind"] == "sd"].set_index("term")["estimate"]
    assert fixed.loc["Intercept", "estimate"] == pytest.approx(22.97222, abs=1e-5)
    assert fixed.loc["Intercept", "se"] == pytest.approx(0.80857, abs=1e-5)
    assert sd["plate"] == pytest.approx(0.84671, abs=1e-5)
    assert sd["sample"] == pytest.approx(1.93156, abs=1e-5)
    assert sd["Residual"] == pytest.approx(0.54992, abs=1e-5)
    assert res["optimizer"].iloc[0] == "bobyqa" and res["converged"].all()


def test_sparse_crossed_matches_statsmodels_dense_fit():
    data = simulate_choice_study(n_participants=60, n_pairs=10, seed=8)
    dense = wtp_mixed(data, model="crossed").iloc[0]
    sparse = wtp_mixed(data, model="crossed_sparse").iloc[0]
    assert sparse["model"] == "crossed_sparse"
    assert sparse["estimate"] == pytest.approx(dense["estimate"], abs=1e-5)
    # statsmodels takes SEs from the observed Hessian, lme4/crossed_lmm from (X'V^-1X)^-1.
    assert sparse["se"] == pytest.approx(dense["se"], rel=1e-3)
    assert sparse["sd_subject"] == pytest.approx(dense["sd_subject"], rel=1e-4)
    # The pair SD (10 levels) sits on a flat likelihood: statsmodels' lbfgs stops 1.4e-4 away,
    # at a REML log-likelihood 2e-7 lower than the sparse fit's (checked with MixedLM.loglike).
    assert sparse["sd_item"] == pytest.approx(dense["sd_item"], rel=1e-3)
    assert sparse["sd_residual"] == pytest.approx(dense["sd_residual"], rel=1e-4)


def test_auto_uses_sparse_crossed_fit_for_large_data():
    data = simulate_choice_study(n_participants=2000, n_pairs=10, seed=9)
    res = wtp_mixed(data).iloc[0]
    assert res["model"] == "crossed_sparse" and "sparse formulation" in res["reason"]
    assert res["ci_low"] < 4.5 < res["ci_high"]
    fixed_pair = wtp_mixed(data, model="pair_fixed").iloc[0]
    assert res["estimate"] == pytest.approx(fixed_pair["estimate"], abs=0.02)


def test_wtp_under_one_format_is_refused_with_the_reason():
    # Such data must not fail with "LinAlgError: Singular matrix".
    from analysis.report.pipeline import analyze_choice

    data = simulate_choice_study(n_participants=20, n_pairs=6, seed=1)
    data.loc[data["format"] == "original", "wtp_premium_pct"] = float("nan")
    with pytest.raises(ValueError, match="none under \\['original'\\]"):
        wtp_mixed(data)
    results = analyze_choice(data)
    assert "wtp_model" not in results.tables
    assert results.meta["wtp_model_failed"].startswith("ValueError: WTP answers only under")
    assert {"chi2", "clustered", "choice_glmm"} <= set(results.tables)


def test_a_grouping_factor_with_one_level_is_refused():
    # lme4 refuses it ("grouping factors must have > 1 sampled level"); the sparse fit used to
    # report t(4.0) for one participant's six answers.
    data = simulate_choice_study(n_participants=1, n_pairs=6, seed=1)
    with pytest.raises(ValueError, match="'participant_id' has 1 level"):
        wtp_mixed(data)
