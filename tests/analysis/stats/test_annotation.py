"""Shift counts, majority shifts, model shifts and annotator statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.stats.annotation import (
    annotator_stats,
    majority_shift_rates,
    model_shift_rates,
    model_shifts,
    shift_counts,
    shift_distribution,
)
from tests.analysis.annotation_data import simulate_annotation_study


def labels() -> pd.DataFrame:
    # Item a (positive): 2 of 5 vote negative (a shift), 1 neutral -> no majority shift by the
    # paper's count, 3 of 5 when neutral counts too.
    # Item b (negative): 1 of 5 shifts. Item c (negative): 5 of 5 shift.
    rows = [
        ("a", "positive", ["negative", "neutral", "positive", "negative", "positive"]),
        ("b", "negative", ["negative", "negative", "positive", "negative", "negative"]),
        ("c", "negative", ["positive"] * 5),
    ]
    out = []
    for item, base, labs in rows:
        out += [
            {"item_id": item, "base_sentiment": base, "label": lab, "participant_id": f"w{j}"}
            for j, lab in enumerate(labs)
        ]
    return pd.DataFrame(out)


def test_shift_counts_by_hand():
    res = shift_counts(labels()).set_index("item_id")
    assert res["shift_count"].to_dict() == {"a": 2, "b": 1, "c": 5}
    assert res["n_opposite"].to_dict() == {"a": 2, "b": 1, "c": 5}
    assert res["majority_shift"].to_dict() == {"a": False, "b": False, "c": True}
    dist = shift_distribution(res.reset_index())
    assert dist["n_items"].tolist() == [0, 1, 1, 0, 0, 1]
    assert dist["estimate"].sum() == pytest.approx(1.0)
    wider = shift_counts(labels(), shift_labels=("opposite", "neutral")).set_index("item_id")
    assert wider["shift_count"].to_dict() == {"a": 3, "b": 1, "c": 5}
    assert wider["majority_shift"].to_dict() == {"a": True, "b": False, "c": True}


def test_the_human_shift_count_is_the_papers_votes_for_the_opposite_sentiment():
    """002 §2.3: the score is the number of annotators voting for the sentiment of the opposite
    framing. An item voted neg/neu/neu/pos/pos on a positive base scores 1 (no majority shift);
    counting neutral votes as shifts would give 3 and a majority shift."""
    votes = ["negative", "neutral", "neutral", "positive", "positive"]
    data = pd.DataFrame({"item_id": "x", "base_sentiment": "positive", "label": votes})
    [row] = shift_counts(data).to_dict("records")
    assert (row["shift_count"], row["majority_shift"], row["n_neutral"]) == (1, False, 2)
    [wide] = shift_counts(data, shift_labels=("opposite", "neutral")).to_dict("records")
    assert (wide["shift_count"], wide["majority_shift"]) == (3, True)
    with pytest.raises(ValueError, match="shift_labels must be among"):
        shift_counts(data, shift_labels=("sideways",))


def test_majority_shift_rates_by_base():
    res = majority_shift_rates(shift_counts(labels())).set_index("base_sentiment")
    assert res.loc["negative", "estimate"] == pytest.approx(0.5)
    assert res.loc["positive", "estimate"] == pytest.approx(0.0)
    assert res.loc["all", "n_items"] == 3 and res.loc["all", "n_shift"] == 1
    assert (res["ci_low"] <= res["estimate"]).all()


def test_model_shift_excludes_neutral_and_other_by_default():
    items = shift_counts(labels())
    preds = pd.DataFrame(
        {"item_id": ["a", "b", "c"], "model": "m", "label": ["negative", "neutral", "other"]}
    )
    default = model_shifts(preds, items).set_index("item_id")["shift"].to_dict()
    assert default == {"a": 1, "b": 0, "c": 0}
    wider = model_shifts(preds, items, shift_labels=("opposite", "neutral"))
    assert wider.set_index("item_id")["shift"].to_dict() == {"a": 1, "b": 1, "c": 0}
    rates = model_shift_rates(model_shifts(preds, items))
    assert rates[rates["base_sentiment"] == "all"]["estimate"].iloc[0] == pytest.approx(1 / 3)


def test_annotator_stats_leave_one_out():
    res = annotator_stats(labels()).set_index("participant_id")
    # w2 labels a, b, c all positive. Others on a: negative x2, neutral, positive -> majority
    # negative (w2 disagrees); on b: all negative (disagrees); on c: all positive (agrees).
    assert res.loc["w2", "n_labels"] == 3
    assert res.loc["w2", "flip_rate"] == pytest.approx(2 / 3)
    assert res.loc["w2", "agreement_with_majority"] == pytest.approx(1 / 3)
    # w0: a negative vs the others' majority positive (positive x2, negative, neutral): no;
    # b and c: yes.
    assert res.loc["w0", "agreement_with_majority"] == pytest.approx(2 / 3)
    # w1 (neutral on a) faces a 2-2 tie among the others: item a is not compared for w1.
    assert res["n_compared"].to_dict() == {"w0": 3, "w1": 2, "w2": 3, "w3": 3, "w4": 3}


def test_simulated_study_has_positive_human_model_correlation():
    from analysis.stats.correlation import human_model_correlation

    data, preds = simulate_annotation_study(n_items=300, seed=2)
    items = shift_counts(data)
    assert (items["n_labels"] == 5).all()
    res = human_model_correlation(model_shifts(preds, items)).set_index("model")
    # The simulator's shifted humans vote neutral a third of the time, which the paper's count
    # (opposite votes only) leaves out, so the correlation is weaker than with every departure.
    assert res.loc["model-a", "estimate"] > 0.1
    assert res.loc["model-a", "p_val"] < 0.01
    wide = shift_counts(data, shift_labels=("opposite", "neutral"))
    res_wide = human_model_correlation(model_shifts(preds, wide)).set_index("model")
    assert res_wide.loc["model-a", "estimate"] > 0.2
    assert np.isfinite(res["spearman_rho"]).all()
