"""Hallucination: actual, falsified and strict accuracy around the knowledge cutoff, and δH."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.metrics.hallucination import (
    confidence_breakdown,
    hallucination_gap,
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
