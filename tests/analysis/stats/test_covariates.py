"""Covariate-adjusted format effects checked against lme4/lmerTest and geepack."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.stats.covariates import adjusted_models, code_covariates

R_DIR = Path(__file__).parents[1] / "r"


@pytest.fixture(scope="module")
def data():
    return pd.read_csv(
        R_DIR / "data" / "covariates_60x10.csv", dtype={"participant_id": str, "pair_id": str}
    )


def test_adjusted_models_match_lmer_and_geeglm(data):
    # tests/analysis/r/covariates_reference.R: lmerTest::lmer(wtp ~ format + age_c + sex2 +
    # (1 | participant) + (1 | pair)) and geepack::geeglm(exchangeable) on the same coding.
    ref = pd.read_csv(R_DIR / "covariates_reference.csv")
    ours = adjusted_models(data, ["age", "sex"])
    terms = {
        "formatsummary": "summary vs original",
        "age_c": "cov_age",
        "sex2Female": "cov_sex[Female]",
        "sex2other": "cov_sex[other]",
    }
    # GEE: both fits converged to 1e-10, but geepack and statsmodels estimate the exchangeable
    # correlation with slightly different moment estimators, which moves the covariate
    # coefficients by up to 1e-3 (relative); the format effect agrees to 2e-6 (checked below).
    for r_model, model, rel in (
        ("lmer", "WTP LMM", 1e-6),
        ("geeglm", "choice GEE (log odds)", 2e-3),
    ):
        theirs = ref[(ref["model"] == r_model) & ref["term"].isin(terms)].copy()
        theirs["term"] = theirs["term"].map(terms)
        mine = ours[ours["model"] == model].set_index("term").loc[theirs["term"]]
        assert mine["estimate"].to_numpy() == pytest.approx(theirs["estimate"].to_numpy(), rel=rel)
        assert mine["se"].to_numpy() == pytest.approx(theirs["se"].to_numpy(), rel=rel)
        assert mine["p_val"].to_numpy() == pytest.approx(theirs["p"].to_numpy(), rel=10 * rel)
        assert mine["estimate"].iloc[0] == pytest.approx(theirs["estimate"].iloc[0], rel=1e-5)
        if r_model == "lmer":  # Satterthwaite df as lmerTest
            assert mine["df"].to_numpy() == pytest.approx(theirs["df"].to_numpy(), rel=1e-4)


def test_coding_is_explicit_and_missing_rows_are_counted(data):
    rows = data.copy()
    rows.loc[rows["participant_id"] == rows["participant_id"].iloc[0], "age"] = None
    coded, cols, notes = code_covariates(rows, ["age", "sex"])
    assert len(coded) == len(rows) - 10  # one participant's ten trials without age
    assert cols == ["cov_age", "cov_sex[Female]", "cov_sex[other]"]
    assert notes[1].startswith("sex: categorical, reference 'Male'; 1 level(s) with < 5")
    assert coded.drop_duplicates("participant_id")["cov_age"].mean() == pytest.approx(0.0)
    with pytest.raises(ValueError, match="one level only"):
        code_covariates(rows.assign(sex="Female"), ["sex"])


def test_separated_choices_drop_the_gee_rows_not_the_wtp_model(data):
    # Every summary trial chose the target, no original one did: the adjusted GEE has no finite
    # log odds ratio (statsmodels still returns one, about 50, with a small SE). Its rows are
    # left out with the reason; the adjusted WTP model is unaffected.
    separated = data.copy()
    separated["chose_target"] = (separated["format"] == "summary").astype(int)
    out = adjusted_models(separated, ["age", "sex"])
    assert set(out["model"]) == {"WTP LMM"}
    assert out["notes"].str.contains("choice GEE not reported: the outcome is").all()
    clean = adjusted_models(data, ["age", "sex"])
    assert (clean["notes"] == "").all()
    wtp = clean[clean["model"] == "WTP LMM"].reset_index(drop=True)
    pd.testing.assert_frame_equal(
        out.drop(columns="notes").reset_index(drop=True), wtp.drop(columns="notes")
    )


def test_wtp_under_one_format_drops_the_wtp_rows_not_the_gee(data):
    # As the unadjusted model (analysis.stats.wtp.prepare_wtp): the format effect on WTP is
    # not identified without answers under both formats; the adjusted GEE is unaffected.
    one = data.copy()
    one.loc[one["format"] == "original", "wtp_premium_pct"] = float("nan")
    out = adjusted_models(one, ["age", "sex"])
    assert set(out["model"]) == {"choice GEE (log odds)"}
    assert out["notes"].str.startswith("WTP LMM not reported: WTP answers only under").all()
