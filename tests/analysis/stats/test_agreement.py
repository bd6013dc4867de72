"""Agreement statistics checked against R irr and Krippendorff (2011)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.stats.agreement import count_table, fleiss_kappa, krippendorff_alpha

# R irr::diagnoses (Fleiss 1971): 30 patients, 6 psychiatrists, 5 diagnoses (1 = depression,
# 2 = personality disorder, 3 = schizophrenia, 4 = neurosis, 5 = other); as recorded in
# statsmodels' test_inter_rater.py (ratings sorted within patient: Fleiss' kappa uses counts only).
DIAGNOSES = """
4 4 4 4 4 4 / 2 2 2 5 5 5 / 2 3 3 3 3 5 / 5 5 5 5 5 5 / 2 2 2 4 4 4 / 1 1 3 3 3 3
3 3 3 3 5 5 / 1 1 3 3 3 4 / 1 1 4 4 4 4 / 5 5 5 5 5 5 / 1 4 4 4 4 4 / 1 2 4 4 4 4
2 2 2 3 3 3 / 1 4 4 4 4 4 / 2 2 4 4 4 5 / 3 3 3 3 3 5 / 1 1 1 4 5 5 / 1 1 1 1 1 2
2 2 4 4 4 4 / 1 3 3 5 5 5 / 5 5 5 5 5 5 / 2 4 4 4 4 4 / 2 2 4 5 5 5 / 1 1 4 4 4 4
1 4 4 4 4 5 / 2 2 2 2 2 4 / 1 1 1 1 5 5 / 2 2 4 4 4 4 / 1 3 3 3 3 3 / 5 5 5 5 5 5
"""


def diagnoses_long() -> pd.DataFrame:
    rows = []
    for patient, block in enumerate(DIAGNOSES.replace("\n", " / ").split("/")):
        values = block.split()
        if not values:
            continue
        rows += [(f"pt{patient}", f"r{j}", int(v)) for j, v in enumerate(values)]
    return pd.DataFrame(rows, columns=["item_id", "participant_id", "label"])


def test_fleiss_kappa_matches_irr():
    # R> irr::kappam.fleiss(diagnoses)
    #    Subjects = 30, Raters = 6, Kappa = 0.43, z = 17.7, p-value = 0
    #    (unrounded: value 0.4302445, statistic 17.65183, as recorded in statsmodels' tests)
    data = diagnoses_long()
    assert data["item_id"].nunique() == 30 and len(data) == 180
    res = fleiss_kappa(data).iloc[0]
    assert res["estimate"] == pytest.approx(0.4302445, abs=1e-7)
    assert res["z"] == pytest.approx(17.65183, abs=1e-5)
    assert res["p_val"] < 1e-60
    assert res["n_items"] == 30 and res["n_raters"] == 6
    assert res["ci_low"] < res["estimate"] < res["ci_high"]


def test_fleiss_kappa_agrees_with_statsmodels():
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    rng = np.random.default_rng(0)
    data = pd.DataFrame(
        {
            "item_id": np.repeat(np.arange(50), 5),
            "label": rng.choice(["positive", "negative", "neutral"], size=250, p=[0.5, 0.3, 0.2]),
        }
    )
    ours = fleiss_kappa(data, n_boot=0).iloc[0]["estimate"]
    assert ours == pytest.approx(sm_fleiss(count_table(data).to_numpy()), abs=1e-12)


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers x
# 12 units with missing data (None).
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def krippendorff_long() -> pd.DataFrame:
    rows = [
        (f"u{unit}", f"coder{coder}", value)
        for coder, values in enumerate(KRIPPENDORFF_2011)
        for unit, value in enumerate(values)
        if value is not None
    ]
    return pd.DataFrame(rows, columns=["item_id", "participant_id", "label"])


@pytest.mark.parametrize(
    ("level", "expected"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)]
)
def test_krippendorff_alpha_matches_paper(level, expected):
    # Krippendorff (2011), p. 4-7: alpha_nominal = 0.743, alpha_ordinal = 0.815,
    # alpha_interval = 0.849.
    res = krippendorff_alpha(krippendorff_long(), level=level, n_boot=200).iloc[0]
    assert res["estimate"] == pytest.approx(expected, abs=5e-4)
    assert res["n_items"] == 12 and res["n_raters"] == 4


def test_krippendorff_string_labels_nominal():
    data = krippendorff_long()
    names = {1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}
    data["label"] = data["label"].map(names)
    res = krippendorff_alpha(data, n_boot=0).iloc[0]
    assert res["estimate"] == pytest.approx(0.743, abs=5e-4)
    assert np.isnan(res["ci_low"])
