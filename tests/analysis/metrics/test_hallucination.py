"""Hallucination: actual, falsified and strict accuracy around the knowledge cutoff, and δH."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.metrics.hallucination import (
    confidence_breakdown,
    hallucination_gap,
    hallucination_mean_of_means,
    hallucination_scores,
    parse_truth,
)


def _answers():
    # Pairs p1, p2 before the 2024-06-01 cutoff, p3, p4 after.
    rows = [
        ("p1", True, "2024-01-10", "true", "high"),
        ("p1", False, "2024-01-10", "false", "high"),  # pair correct
        ("p2", True, "2024-03-02", "true", "low"),
        ("p2", False, "2024-03-02", "true", "low"),  # negation accepted: pair wrong
        ("p3", True, "2024-07-01", "false", "high"),
        ("p3", False, "2024-07-01", "false", "low"),  # true item rejected: pair wrong
        ("p4", True, "2024-08-15", "other", None),
        ("p4", False, "2024-08-15", "other", None),  # no valid answer: wrong
    ]
    df = pd.DataFrame(rows, columns=["pair_id", "truth", "date", "label", "confidence"])
    df["model"] = "m"
    return df


def test_scores_pre_post_all():
    scores = hallucination_scores(_answers(), cutoffs={"m": "2024-06-01"}).set_index("period")
    assert scores.index.tolist() == ["pre", "post", "all"]
    assert scores.loc["pre", "actual_acc"] == 1.0
    assert scores.loc["pre", "falsified_acc"] == 0.5
    assert scores.loc["pre", "strict_acc"] == 0.5
    assert scores.loc["post", "actual_acc"] == 0.0
    assert scores.loc["post", "falsified_acc"] == 0.5
    assert scores.loc["post", "strict_acc"] == 0.0
    assert scores.loc["all", "strict_acc"] == 0.25
    assert scores.loc["all", "n_pairs"] == 4 and scores.loc["all", "n_true"] == 4


def test_delta_h():
    gap = hallucination_gap(hallucination_scores(_answers(), cutoffs={"m": "2024-06-01"}))
    row = gap.iloc[0]
    assert (row["s_pre"], row["s_post"], row["delta_h"]) == (0.5, 0.0, 0.5)


def test_no_cutoff_gives_all_only_and_nan_gap():
    scores = hallucination_scores(_answers())
    assert scores["period"].tolist() == ["all"]
    assert hallucination_gap(scores)["delta_h"].isna().all()


def test_item_on_cutoff_day_is_pre():
    df = _answers().iloc[:2].assign(date="2024-06-01")
    assert hallucination_scores(df, cutoffs={"m": "2024-06-01"})["period"].tolist() == [
        "pre",
        "all",
    ]


def test_incomplete_pair_is_left_out_of_strict_accuracy():
    df = _answers().iloc[:3]  # p2 has only its true item
    row = hallucination_scores(df).iloc[0]
    assert row["n_pairs"] == 1 and row["strict_acc"] == 1.0 and row["actual_acc"] == 1.0


def test_confidence_breakdown():
    table = confidence_breakdown(_answers()).set_index(["truth", "confidence"])
    assert table.loc[(True, "high"), "n"] == 2
    assert table.loc[(True, "high"), "accuracy"] == 0.5  # p1 right, p3 wrong
    assert table.loc[(True, "high"), "share"] == 0.5
    assert table.loc[(False, "low"), "accuracy"] == 0.5  # p2 wrong, p3 right
    assert table.loc[(False, "none"), "n"] == 1


def test_parse_truth_refuses_garbage():
    assert parse_truth("Actual") is True and parse_truth(0) is False
    with pytest.raises(ValueError, match="not a truth value"):
        parse_truth("maybe")


# Two templates (or methods) in one file must not be pooled into one group, or a pair's true
# item answered under one template would meet its negation answered under the other.
def _two_templates():
    rows = []
    # Template "a": every true item rejected, every negation accepted: strict 0.
    for p in ("p1", "p2", "p3", "p4"):
        rows += [(p, "a", True, "false"), (p, "a", False, "true")]
    # Template "b": one pair of four fully right: strict 0.25.
    for i, p in enumerate(("p1", "p2", "p3", "p4")):
        rows += [(p, "b", True, "true"), (p, "b", False, "false" if i == 0 else "true")]
    df = pd.DataFrame(rows, columns=["pair_id", "template", "truth", "label"])
    return df.assign(model="m", method="baseline", date="2024-01-01")


def test_templates_are_scored_apart():
    """Seed study: strict accuracy s_TH = share of (true, negated) pairs with both answered
    correctly, per model; here per model x method x template."""
    scores = hallucination_scores(_two_templates()).set_index("template")
    assert scores.loc["a", "strict_acc"] == 0.0
    assert scores.loc["b", "strict_acc"] == 0.25
    assert scores["n_pairs"].tolist() == [4, 4]


def test_methods_are_scored_apart_and_gap_is_per_group():
    df = _two_templates().drop(columns="template")
    df["method"] = np.where(np.arange(len(df)) < 8, "baseline", "self-help")
    df.loc[df["pair_id"].isin(["p3", "p4"]), "date"] = "2025-01-01"
    scores = hallucination_scores(df, cutoffs={"m": "2024-06-01"})
    assert set(scores["method"]) == {"baseline", "self-help"}
    gap = hallucination_gap(scores).set_index("method")
    # self-help: p1 right (pre), p2 wrong (pre), p3/p4 wrong (post): s_pre 0.5, s_post 0.
    assert gap.loc["self-help", "s_pre"] == 0.5 and gap.loc["self-help", "delta_h"] == 0.5
    assert gap.loc["baseline", "delta_h"] == 0.0


# An item without a date must not be compared NaT <= cutoff -> False -> "post".
@pytest.mark.parametrize("missing", [None, "", float("nan")])
def test_undated_items_are_reported_as_undated_not_post(missing):
    df = _answers()
    df["date"] = df["date"].astype(object)
    df.loc[df["pair_id"] == "p4", "date"] = missing
    scores = hallucination_scores(df, cutoffs={"m": "2024-06-01"}).set_index("period")
    assert scores.index.tolist() == ["pre", "post", "undated", "all"]
    assert scores.loc["post", "n_pairs"] == 1  # p3 only
    assert scores.loc["undated", "n_pairs"] == 1 and scores.loc["undated", "n_true"] == 1
    assert scores.loc["all", "n_pairs"] == 4
    conf = confidence_breakdown(df, cutoffs={"m": "2024-06-01"})
    assert conf.loc[conf["period"] == "undated", "n"].sum() == 2


def test_undated_items_can_be_refused_naming_one():
    df = _answers().assign(item_id=[f"i{k}" for k in range(8)])
    df.loc[6, "date"] = None
    with pytest.raises(ValueError, match=r"1 fact-check item\(s\) have no 'date' .*'i6'"):
        hallucination_scores(df, cutoffs={"m": "2024-06-01"}, undated="refuse")
    # Without a cutoff the date plays no part, so nothing is refused.
    assert hallucination_scores(df, undated="refuse")["period"].tolist() == ["all"]


# The confidence breakdown before and after the cutoff.
def test_confidence_breakdown_before_and_after_the_cutoff():
    table = confidence_breakdown(_answers(), cutoffs={"m": "2024-06-01"})
    table = table.set_index(["period", "truth", "confidence"])
    assert table.loc[("pre", True, "high"), "accuracy"] == 1.0  # p1
    assert table.loc[("post", True, "high"), "accuracy"] == 0.0  # p3
    assert table.loc[("pre", True, "low"), "share"] == 0.5  # p2 of p1, p2
    assert table.loc[("all", True, "high"), "n"] == 2


# Mean of means, each model counting once (as φframe's mean over model-dataset pairs).
def test_mean_of_means_weights_models_equally():
    """Seed study: delta_H = |s_pre - s_post|; headline numbers are means over models."""
    big = _answers().assign(model="big")
    big = pd.concat([big.assign(pair_id=big["pair_id"] + f"-{k}") for k in range(5)])
    small = _answers().assign(model="small", label="other")  # all wrong
    data = pd.concat([big, small], ignore_index=True)
    scores = hallucination_scores(data, cutoffs={"big": "2024-06-01", "small": "2024-06-01"})
    means = hallucination_mean_of_means(scores).set_index("period")
    # s_TH(pre): big 0.5, small 0.0 -> 0.25 (pooled over pairs it would be 5/12).
    assert means.loc["pre", "strict_acc"] == pytest.approx(0.25)
    assert means.loc["pre", "n_means"] == 2
    # δH: big |0.5 - 0| = 0.5, small 0 -> mean 0.25.
    assert means.loc["pre", "delta_h"] == pytest.approx(0.25)
    assert np.isnan(means.loc["all", "delta_h"])


def test_unreadable_truth_names_the_file_the_item_and_the_field():
    """Regression: a record without a truth value failed with only "not a truth value: nan"."""
    df = _answers()
    df["item_id"] = [f"i{n}" for n in range(len(df))]
    df["source_file"] = "runs/fact_checks.jsonl"
    df["truth"] = df["truth"].astype(object)
    df.loc[3, "truth"] = np.nan
    with pytest.raises(ValueError) as info:
        hallucination_scores(df)
    text = str(info.value)
    assert "runs/fact_checks.jsonl" in text and "'i3'" in text and "'truth'" in text
    assert "has no value" in text
    df.loc[3, "truth"] = "maybe"
    with pytest.raises(ValueError, match=r"item 'i3': field 'truth' is 'maybe', not a truth"):
        hallucination_scores(df.drop(columns="source_file"))
