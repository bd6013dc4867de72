"""Residuals and random effects of the crossed model (checked against lme4), and the
within-participant differences the WTP figure shows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.stats.diagnostics import crossed_conditional_modes, within_differences

R_DIR = Path(__file__).parents[1] / "r"
REF = pd.read_csv(R_DIR / "ranef_reference.csv", dtype={"level": str}, keep_default_na=False)


@pytest.mark.parametrize("dataset", ["balanced_70x10", "messy_unbalanced", "singular_pair"])
def test_conditional_modes_match_lme4_ranef_condvar(dataset):
    # tests/analysis/r/ranef_reference.R: lme4 1.1-31 ranef(m, condVar = TRUE), fitted, resid,
    # evaluated at lme4's own estimates (the fit itself is checked in test_wtp_lme4.py).
    ref = REF[REF["dataset"] == dataset]
    params = ref[ref["kind"] == "param"].set_index("group")["a"].astype(float)
    data = pd.read_csv(R_DIR / "data" / f"{dataset}.csv", dtype=str)
    data["wtp_premium_pct"] = data["wtp_premium_pct"].astype(float)
    data["x"] = (data["format"] == "summary").astype(float)
    sds = {k: v for k, v in params.items() if k.startswith("sd_")}
    residuals, effects = crossed_conditional_modes(
        data,
        y="wtp_premium_pct",
        x=["x"],
        subject="participant_id",
        item="pair_id",
        beta=[params["intercept"], params["slope"]],
        **sds,
    )
    r_effects = ref[ref["kind"] == "ranef"].astype({"a": float})
    r_effects["b"] = r_effects["b"].astype(float)
    ours = effects.set_index(["group", "level"])
    theirs = r_effects.set_index(["group", "level"])
    assert len(ours) == len(theirs)
    joined = theirs.join(ours, how="inner")
    assert len(joined) == len(theirs)
    np.testing.assert_allclose(joined["estimate"], joined["a"], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(joined["cond_sd"], joined["b"], rtol=1e-6, atol=1e-8)
    rows = ref[ref["kind"] == "resid"]
    idx = rows["level"].astype(int).to_numpy()
    np.testing.assert_allclose(
        residuals["fitted"].to_numpy()[idx], rows["a"].astype(float), rtol=1e-9
    )
    np.testing.assert_allclose(
        residuals["residual"].to_numpy()[idx], rows["b"].astype(float), rtol=1e-6, atol=1e-8
    )


def test_within_differences_by_hand():
    data = pd.DataFrame(
        {
            "participant_id": ["a", "a", "a", "b", "b", "c"],
            "format": ["original", "summary", "summary", "original", "summary", "original"],
            "wtp_premium_pct": [10.0, 14.0, 16.0, 5.0, 4.0, 7.0],
        }
    )
    per, summary = within_differences(data)
    assert per.set_index("participant_id")["difference"].to_dict() == {"a": 5.0, "b": -1.0}
    row = summary.iloc[0]
    assert row["n_subjects"] == 2 and row["n_without_both"] == 1  # c saw one format only
    assert row["estimate"] == pytest.approx(2.0)
    # t interval over the two differences: 2 +- t(0.975, 1) * sd / sqrt(2)
    half = 12.706204736174698 * np.std([5.0, -1.0], ddof=1) / np.sqrt(2)
    assert row["ci_low"] == pytest.approx(2.0 - half) and row["ci_high"] == pytest.approx(
        2.0 + half
    )
