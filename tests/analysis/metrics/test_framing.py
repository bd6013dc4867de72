"""Framing change: the join of judgments, φframe, the six transitions and the mean of means."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis.metrics.framing import (
    framing_change,
    framing_mean_of_means,
    join_framing,
    transition_matrix,
)
from analysis.metrics.records import read_records


def _source_judgment(item, label, judge="judge", dataset="news"):
    return {
        "item_id": item,
        "dataset": dataset,
        "model": judge,
        "task": "judge-framing",
        "method": "baseline",
        "input": {"id": item, "text": f"source {item}"},
        "output": label,
        "label": label,
    }


def _summary_judgment(item, summarizer, label, judge="judge", dataset="news"):
    summarize = {
        "item_id": item,
        "dataset": dataset,
        "model": summarizer,
        "task": "summarize",
        "method": "baseline",
        "input": {"id": item, "text": f"source {item}"},
        "output": f"summary of {item}",
    }
    return {
        "item_id": item,
        "dataset": dataset,
        "model": judge,
        "task": "judge-framing",
        "method": "baseline",
        "input": summarize,
        "output": label,
        "label": label,
    }


def test_join_from_generation_records(tmp_path):
    records = [
        _source_judgment("1", "neutral"),
        _source_judgment("2", "positive"),
        _source_judgment("3", "negative", judge="other-judge"),
        _summary_judgment("1", "m1", "positive"),
        _summary_judgment("2", "m1", "positive"),
        _summary_judgment("1", "m2", "negative"),
        _summary_judgment("3", "m1", "neutral"),  # no source judgment by this judge
        {"item_id": "9", "model": "m1", "task": "summarize", "input": {}, "output": "x"},
    ]
    path = tmp_path / "framing.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    pairs = join_framing(read_records(path))
    assert pairs[["item_id", "model", "source_label", "summary_label"]].values.tolist() == [
        ["1", "m1", "neutral", "positive"],
        ["2", "m1", "positive", "positive"],
        ["1", "m2", "neutral", "negative"],
    ]
    # Without matching judges, item 3's summary pairs with the other judge's source label.
    loose = join_framing(read_records(path), match_judge=False)
    assert loose.loc[loose["item_id"] == "3", "source_label"].tolist() == ["negative"]


def test_phi_and_transitions_hand_computed():
    # Ten pairs: 3 unchanged, 7 changed (one of each off-diagonal kind, two Neu->Pos), 1 "other".
    src = ["positive", "negative", "neutral", "neutral", "neutral", "neutral", "positive",
           "negative", "positive", "negative", "neutral"]  # fmt: skip
    dst = ["positive", "negative", "neutral", "positive", "positive", "negative", "negative",
           "positive", "neutral", "neutral", "other"]  # fmt: skip
    pairs = pd.DataFrame({"model": "m", "dataset": "d", "source_label": src, "summary_label": dst})
    row = framing_change(pairs).iloc[0]
    assert (row["n"], row["n_other"], row["n_changed"]) == (10, 1, 7)
    assert row["phi_frame"] == pytest.approx(0.7)
    assert row["neu_to_pos_pct"] == pytest.approx(20.0)
    for col in ("neu_to_neg_pct", "pos_to_neg_pct", "neg_to_pos_pct", "pos_to_neu_pct"):
        assert row[col] == pytest.approx(10.0)
    assert row["neg_to_neu_pct"] == pytest.approx(10.0)
    transitions = [c for c in row.index if c.endswith("_pct")]
    assert len(transitions) == 6
    assert sum(row[c] for c in transitions) == pytest.approx(100 * row["phi_frame"])


def test_labels_are_case_insensitive():
    pairs = pd.DataFrame({"source_label": ["Positive"], "summary_label": ["NEGATIVE"]})
    assert framing_change(pairs).iloc[0]["pos_to_neg_pct"] == 100.0


def test_mean_of_means_is_unweighted_over_model_dataset_pairs():
    pairs = pd.DataFrame(
        {
            "model": ["a"] * 4 + ["b"] * 1,
            "dataset": ["d"] * 5,
            "source_label": ["positive"] * 5,
            "summary_label": ["negative", "positive", "positive", "positive", "negative"],
        }
    )
    table = framing_change(pairs)
    assert table["phi_frame"].tolist() == [0.25, 1.0]
    mom = framing_mean_of_means(table).iloc[0]
    # (0.25 + 1.0) / 2, not the pooled 2/5.
    assert mom["phi_frame"] == pytest.approx(0.625)
    assert mom["pos_to_neg_pct"] == pytest.approx(62.5)
    assert mom["n_pairs"] == 2


def test_mean_of_means_keeps_method_groups():
    pairs = pd.DataFrame(
        {
            "model": ["a", "b", "a", "b"],
            "dataset": "d",
            "method": ["baseline", "baseline", "fix", "fix"],
            "source_label": "positive",
            "summary_label": ["negative", "negative", "positive", "negative"],
        }
    )
    mom = framing_mean_of_means(framing_change(pairs)).set_index("method")
    assert mom.loc["baseline", "phi_frame"] == 1.0 and mom.loc["fix", "phi_frame"] == 0.5


def test_transition_matrix_counts():
    pairs = pd.DataFrame(
        {
            "source_label": ["positive", "positive", "neutral", "negative"],
            "summary_label": ["negative", "positive", "positive", "other"],
        }
    )
    matrix = transition_matrix(pairs)
    assert matrix.loc["positive", "negative"] == 1 and matrix.loc["neutral", "positive"] == 1
    assert int(matrix.to_numpy().sum()) == 3
