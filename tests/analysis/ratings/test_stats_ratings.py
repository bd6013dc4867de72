"""Rating statistics checked against Shrout & Fleiss (1979), Krippendorff (2011) and R."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.stats.ratings import (
    kendall_tau,
    metric_rating_tau,
    rating_alpha,
    rating_icc,
    rating_means,
    summary_means,
)

# Shrout & Fleiss (1979), Table 2: 6 targets rated by 4 judges.
SHROUT_FLEISS = [
    [9, 2, 5, 8],
    [6, 1, 3, 2],
    [8, 4, 6, 8],
    [7, 1, 2, 6],
    [10, 5, 6, 9],
    [6, 2, 4, 7],
]


def shrout_fleiss_long() -> pd.DataFrame:
    rows = [
        (f"s{t}", f"judge{j}", value, "stance")
        for t, values in enumerate(SHROUT_FLEISS)
        for j, value in enumerate(values)
    ]
    return pd.DataFrame(rows, columns=["summary_id", "participant_id", "rating", "dimension"])


def test_icc_crossed_matches_shrout_fleiss():
    # Shrout & Fleiss (1979), Table 4: ICC(1,1) = .17, ICC(2,1) = .29, ICC(3,1) = .71,
    # ICC(1,4) = .44, ICC(2,4) = .62, ICC(3,4) = .91.
    # R> psych::ICC(sf): ICC1 0.17 [-0.13, 0.72]; ICC1k 0.44 [-0.88, 0.91]; F = 1.79, df 5, 18.
    res = rating_icc(shrout_fleiss_long()).set_index("type")
    assert set(res["design"]) == {"crossed"}
    expected = {
        "ICC(1,1)": 0.17,
        "ICC(A,1)": 0.29,
        "ICC(C,1)": 0.71,
        "ICC(1,k)": 0.44,
        "ICC(A,k)": 0.62,
        "ICC(C,k)": 0.91,
    }
    for name, value in expected.items():
        assert res.loc[name, "estimate"] == pytest.approx(value, abs=0.005), name
    assert res.loc["ICC(1,1)", "f"] == pytest.approx(1.79, abs=0.005)
    assert (res.loc["ICC(1,1)", "df1"], res.loc["ICC(1,1)", "df2"]) == (5, 18)
    assert res.loc["ICC(1,1)", "ci_low"] == pytest.approx(-0.13, abs=0.005)
    assert res.loc["ICC(1,1)", "ci_high"] == pytest.approx(0.72, abs=0.005)
    assert res.loc["ICC(1,k)", "ci_low"] == pytest.approx(-0.88, abs=0.005)
    assert res.loc["ICC(1,k)", "ci_high"] == pytest.approx(0.91, abs=0.005)


# R 4.2.2, psych 2.2.9> ICC(sf, alpha = alpha, lmer = FALSE)$results   (lower, upper bound)
# tests/analysis/r/psych_icc_reference.R prints these at 17 digits.
PSYCH_ICC = {
    0.95: {
        "ICC(1,1)": (-0.13293232487475087, 0.72256006232812109),
        "ICC(A,1)": (0.018786513374712047, 0.7610843696489531),
        "ICC(C,1)": (0.34246476503392537, 0.94585825995535955),
        "ICC(1,k)": (-0.88444215523811898, 0.91241542034077561),
        "ICC(A,k)": (0.071136815302503487, 0.92723204016772198),
        "ICC(C,k)": (0.67567471381630473, 0.98589167816906231),
    },
    0.90: {
        "ICC(1,1)": (-0.096722203657742117, 0.64339831070442322),
        "ICC(A,1)": (0.042901191540539951, 0.69107060661835673),
        "ICC(C,1)": (0.41183413091904414, 0.92583280768027942),
        "ICC(1,k)": (-0.54504172473686729, 0.87830103540640758),
        "ICC(A,k)": (0.15203705385595825, 0.89947670011362502),
        "ICC(C,k)": (0.73689767857705224, 0.98036605604721416),
    },
}


@pytest.mark.parametrize("confidence", [0.95, 0.90])
def test_icc_intervals_full_precision_and_coverage_match_psych(confidence):
    # The two-way intervals are computed here, not taken from pingouin, which rounds them to two
    # decimals and always gives 95% whatever `confidence` says.
    res = rating_icc(shrout_fleiss_long(), confidence=confidence).set_index("type")
    for name, (low, high) in PSYCH_ICC[confidence].items():
        assert res.loc[name, "ci_low"] == pytest.approx(low, rel=1e-9, abs=1e-12), name
        assert res.loc[name, "ci_high"] == pytest.approx(high, rel=1e-9), name


def test_icc_one_way_when_raters_differ_per_target():
    # Give every target its own 4 judges: only the one-way coefficients remain, and they do not
    # depend on who the raters are (ICC(1,1) of Shrout & Fleiss is still .17).
    data = shrout_fleiss_long()
    data["participant_id"] = data["summary_id"] + "-" + data["participant_id"]
    res = rating_icc(data).set_index("type")
    assert list(res.index) == ["ICC(1,1)", "ICC(1,k)"]
    assert set(res["design"]) == {"one_way"} and set(res["n_raters"]) == {4}
    assert res.loc["ICC(1,1)", "estimate"] == pytest.approx(0.1657418, abs=1e-6)
    # A target with a missing rating is left out rather than breaking the complete table.
    res5 = rating_icc(data.drop(index=0)).set_index("type")
    assert res5.loc["ICC(1,1)", "n_targets"] == 5


def test_icc_per_dimension():
    a = shrout_fleiss_long()
    b = a.assign(dimension="object", rating=a["rating"] * 2)
    res = rating_icc(pd.concat([a, b]))
    assert sorted(res["dimension"].unique()) == ["object", "stance"]
    # A linear rescaling changes no ICC.
    est = res.pivot(index="type", columns="dimension", values="estimate")
    assert np.allclose(est["object"], est["stance"])


KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def test_alpha_ordinal_matches_krippendorff_2011():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": ordinal alpha = 0.815.
    rows = [
        (f"u{u}", f"c{c}", v, "intensity")
        for c, values in enumerate(KRIPPENDORFF_2011)
        for u, v in enumerate(values)
        if v is not None
    ]
    data = pd.DataFrame(rows, columns=["summary_id", "participant_id", "rating", "dimension"])
    res = rating_alpha(data, scale=(1, 2, 3, 4, 5), n_boot=100).iloc[0]
    assert res["dimension"] == "intensity" and res["level"] == "ordinal"
    assert res["estimate"] == pytest.approx(0.815, abs=5e-4)
    assert res["ci_low"] <= res["estimate"] <= res["ci_high"]


def test_kendall_tau_matches_r_cor_test():
    # R ?cor.test, Hollander & Wolfe (1973) p. 187f.:
    # R> cor.test(x, y, method = "kendall", alternative = "greater")  -> T = 26, p = 0.05972,
    #    tau = 0.4444444; two-sided p = 0.1194.
    x = [44.4, 45.9, 41.9, 53.3, 44.7, 44.1, 50.7, 45.2, 60.1]
    y = [2.6, 3.1, 2.5, 5.0, 3.6, 4.0, 5.2, 2.8, 3.8]
    res = kendall_tau(pd.DataFrame({"x": x, "y": y}), x="x", y="y").iloc[0]
    assert res["n"] == 9
    assert res["estimate"] == pytest.approx(0.4444444, abs=1e-7)
    assert res["p_val"] == pytest.approx(2 * 0.05972, abs=1e-4)
    # Fisher-z interval with SE sqrt(0.437 / (n - 4)) (Fieller, Hartley & Pearson 1957).
    half = 1.959964 * np.sqrt(0.437 / 5)
    assert res["ci_low"] == pytest.approx(np.tanh(np.arctanh(4 / 9) - half), abs=1e-6)
    assert res["ci_high"] == pytest.approx(np.tanh(np.arctanh(4 / 9) + half), abs=1e-6)


def test_kendall_tau_exact_p_for_34_to_49_like_r():
    # scipy's default uses the normal approximation from n = 34 while R
    # uses the exact distribution below 50 without ties.
    # R 4.2.2> x <- 1:40; y <- (7 * x) %% 41; cor.test(x, y, method = "kendall")
    # tau = 0.1923077, p-value = 0.08254121 (exact = FALSE would give 0.08052375)
    x = np.arange(1, 41)
    res = kendall_tau(pd.DataFrame({"x": x, "y": (7 * x) % 41}), x="x", y="y").iloc[0]
    assert res["estimate"] == pytest.approx(0.19230769230769235, rel=1e-12)
    assert res["p_val"] == pytest.approx(0.082541210230990147, rel=1e-9)


def test_kendall_tau_degenerate_is_nan():
    res = kendall_tau(pd.DataFrame({"x": [1, 1, 1, 1], "y": [1, 2, 3, 4]}), x="x", y="y")
    assert np.isnan(res["estimate"].iloc[0]) and res["n"].iloc[0] == 4


def test_rating_means_t_interval_matches_r():
    # R> t.test(1:4)$conf.int  -> 0.4457397 4.5542603
    df = pd.DataFrame({"system": "a", "dimension": "stance", "rating": [1, 2, 3, 4]})
    res = rating_means(df, unit=None).iloc[0]
    assert res["estimate"] == 2.5
    assert res["ci_low"] == pytest.approx(0.4457397, abs=1e-7)
    assert res["ci_high"] == pytest.approx(4.5542603, abs=1e-7)


def test_rating_means_average_per_summary_first():
    # Two summaries: ratings (1, 1, 1) and (4); the mean over summaries is 2.5, not 1.75.
    df = pd.DataFrame(
        {
            "summary_id": ["a", "a", "a", "b"],
            "system": "gpt",
            "dimension": "stance",
            "perspective": ["left", "left", "left", "right"],
            "rating": [1, 1, 1, 4],
        }
    )
    res = rating_means(df).iloc[0]
    assert (res["n"], res["n_ratings"], res["estimate"]) == (2, 4, 2.5)
    split = rating_means(df, by=("perspective",)).set_index("perspective")
    assert split.loc["left", "estimate"] == 1 and np.isnan(split.loc["left", "ci_low"])
    assert split.loc["right", "estimate"] == 4


def test_metric_rating_tau_at_summary_level():
    ratings = pd.DataFrame(
        {
            "summary_id": np.repeat([f"s{i}" for i in range(6)], 2),
            "system": "m",
            "dimension": "stance",
            "rating": [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4],
        }
    )
    means = summary_means(ratings)
    assert means["mean_rating"].tolist() == [1, 1.5, 2, 3, 3.5, 4]
    metrics = pd.DataFrame(
        {
            "summary_id": [f"s{i}" for i in range(6)],
            "rouge1": np.arange(6.0),
            "anti": -np.arange(6.0),
        }
    )
    res = metric_rating_tau(means, metrics).set_index("metric")
    assert res.loc["rouge1", "estimate"] == pytest.approx(1.0)
    assert res.loc["anti", "estimate"] == pytest.approx(-1.0)
    # 6 concordant pairs out of 15 without ties: exact p = 2 / 6! = 0.002778 (R cor.test).
    assert res.loc["rouge1", "p_val"] == pytest.approx(2 / 720, rel=1e-6)
    with pytest.raises(ValueError, match="lacks"):
        metric_rating_tau(means, metrics, metric_columns=["bleu"])
