"""Correlations checked against R ``cor.test``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.stats.correlation import (
    human_model_correlation,
    model_correlation_matrix,
    pearson,
    spearman,
    spearman_exact_p,
)

# R documentation example of cor.test (Hollander & Wolfe 1973, p. 187).
X = [44.4, 45.9, 41.9, 53.3, 44.7, 44.1, 50.7, 45.2, 60.1]
Y = [2.6, 3.1, 2.5, 5.0, 3.6, 4.0, 5.2, 2.8, 3.8]


def test_pearson_matches_r_cor_test():
    # R> cor.test(x, y, method = "pearson")
    #    t = 1.8411, df = 7, p-value = 0.1082; 95 percent CI -0.1497426 0.8955795;
    #    cor 0.5711816
    res = pearson(pd.DataFrame({"x": X, "y": Y}), x="x", y="y").iloc[0]
    assert res["estimate"] == pytest.approx(0.5711816, abs=1e-7)
    assert res["ci_low"] == pytest.approx(-0.1497426, abs=1e-7)
    assert res["ci_high"] == pytest.approx(0.8955795, abs=1e-7)
    assert res["p_val"] == pytest.approx(0.1081731, abs=1e-7)
    assert res["n"] == 9


def test_spearman_matches_r_cor_test():
    # R> cor.test(x, y, method = "spearman")   # S = 48, p-value = 0.0968, rho 0.6
    res = spearman(pd.DataFrame({"x": X, "y": Y}), x="x", y="y").iloc[0]
    assert res["p_method"] == "exact permutation"  # said, not implied
    assert res["estimate"] == pytest.approx(0.6)
    # R's exact permutation p; the t approximation gave 0.0876.
    assert res["p_val"] == pytest.approx(0.09679783950617284, rel=1e-12)


R_SPEARMAN = Path(__file__).parents[1] / "r" / "spearman_reference.csv"


def _r_cases():
    ref = pd.read_csv(R_SPEARMAN)
    return [pytest.param(row, id=row["case"]) for _, row in ref.iterrows()]


@pytest.mark.parametrize("row", _r_cases())
def test_spearman_p_matches_r_as89(row):
    # tests/analysis/r/spearman_reference.R: R 4.2.2 cor.test(x, y, method = "spearman"),
    # n = 3..1200, both tails, S = 0 and S = max, and one tied sample (t approximation).
    data = pd.DataFrame(
        {"x": [float(v) for v in row["x"].split(";")], "y": [float(v) for v in row["y"].split(";")]}
    )
    res = spearman(data, x="x", y="y").iloc[0]
    assert res["estimate"] == pytest.approx(row["rho"], abs=1e-12)
    assert res["p_val"] == pytest.approx(row["p"], rel=1e-9, abs=1e-14)
    assert res["p_method"].startswith("t approximation") == bool(row["ties"])


def test_spearman_exact_p_rejects_out_of_range_n():
    with pytest.raises(ValueError, match="2 <= n <= 1290"):
        spearman_exact_p(0.5, 1291)


def test_degenerate_inputs_give_nan():
    res = pearson(pd.DataFrame({"x": [1, 1, 1, 1], "y": [1, 2, 3, 4]}), x="x", y="y").iloc[0]
    assert np.isnan(res["estimate"]) and res["n"] == 4


def test_human_model_and_matrix():
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 6, 60)
    rows = []
    for model, noise in (("m1", 0.5), ("m2", 2.0)):
        shift = (counts + rng.normal(0, noise, 60) > 2.5).astype(int)
        rows += [
            {"item_id": f"i{i}", "model": model, "shift": s, "shift_count": c}
            for i, (s, c) in enumerate(zip(shift, counts, strict=True))
        ]
    data = pd.DataFrame(rows)
    res = human_model_correlation(data).set_index("model")
    direct = np.corrcoef(counts, data[data["model"] == "m1"]["shift"])[0, 1]
    assert res.loc["m1", "estimate"] == pytest.approx(direct)
    assert res.loc["m1", "estimate"] > res.loc["m2", "estimate"]
    mat = model_correlation_matrix(data)
    assert len(mat) == 4
    off = mat[(mat["model_a"] == "m1") & (mat["model_b"] == "m2")].iloc[0]
    back = mat[(mat["model_a"] == "m2") & (mat["model_b"] == "m1")].iloc[0]
    assert off["estimate"] == pytest.approx(back["estimate"])
    assert -1 < off["estimate"] < 1
