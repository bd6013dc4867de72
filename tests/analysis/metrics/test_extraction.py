"""Perspective extraction coverage: Grusky fragments, unique-term coverage, bins, VAD lexicon."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.metrics.extraction import (
    coverage_by,
    extraction_coverage,
    fragments,
    read_vad_lexicon,
)


def test_fragments_greedy_longest_match():
    summary = ["a", "b", "c", "x", "a", "b"]
    article = ["a", "b", "z", "a", "b", "c"]
    # At i=0 the longest match of "a b c ..." is the second occurrence (length 3).
    assert fragments(summary, article) == [(0, 3), (4, 2)]
    assert fragments([], article) == []
    assert fragments(["q"], article) == []


def test_coverage_and_density_hand_computed():
    data = pd.DataFrame(
        {
            "model": ["m"],
            "passages": [["the tax cut helps families", "the plan hurts schools badly"]],
            "summary": ["the tax cut hurts schools"],
        }
    )
    table = extraction_coverage(data)
    first, second = table.iloc[0], table.iloc[1]
    # Passage 1: fragment "the tax cut" (3 of 5 summary tokens); passage 2: "the", "hurts schools".
    assert first["coverage"] == pytest.approx(3 / 5)
    assert first["density"] == pytest.approx(9 / 5)
    assert second["coverage"] == pytest.approx(3 / 5)
    assert second["density"] == pytest.approx((1 + 4) / 5)
    # "the" occurs in both passages, so only tax, cut / hurts, schools count as unique.
    assert first["coverage_unique"] == pytest.approx(2 / 5)
    assert second["coverage_unique"] == pytest.approx(2 / 5)
    assert table["relative_position"].tolist() == [0.25, 0.75]
    assert table["n_tokens"].tolist() == [5, 5]
    assert math.isnan(first["arousal"])


def test_passage_objects_with_side_and_arousal(tmp_path):
    lexicon_path = tmp_path / "vad.txt"
    lexicon_path.write_text(
        "Word\tValence\tArousal\tDominance\nangry\t0.1\t0.9\t0.5\ncalm\t0.8\t0.1\t0.5\n"
    )
    lexicon = read_vad_lexicon(lexicon_path)
    assert lexicon == {"angry": 0.9, "calm": 0.1}
    data = pd.DataFrame(
        {
            "passages": [[{"text": "angry calm voters", "side": "left"}, {"text": "calm calm"}]],
            "summary": ["calm voters"],
        }
    )
    table = extraction_coverage(data, lexicon=lexicon)
    assert table["side"].iloc[0] == "left" and pd.isna(table["side"].iloc[1])
    assert table["arousal"].tolist() == pytest.approx([0.5, 0.1])


def test_headerless_lexicon(tmp_path):
    path = tmp_path / "vad.txt"
    path.write_text("happy\t1.0\t0.7\t0.6\n")
    assert read_vad_lexicon(path) == {"happy": 0.7}


def test_coverage_by_position_length_and_arousal():
    table = pd.DataFrame(
        {
            "model": "m",
            "passage": [1, 2, 1, 2],
            "n_tokens": [10, 20, 30, 40],
            "coverage": [0.8, 0.2, 0.6, 0.4],
            "coverage_unique": [0.1, 0.2, 0.3, 0.4],
            "arousal": [0.9, float("nan"), 0.1, 0.5],
        }
    )
    by_pos = coverage_by(table, by="position")
    assert by_pos["bin"].tolist() == [1, 2]
    assert by_pos["coverage"].tolist() == pytest.approx([0.7, 0.3])
    by_len = coverage_by(table, by="length", n_bins=2)
    # Lengths 10, 20 form the lower half; coverage there counts unique terms only.
    assert by_len["coverage"].tolist() == pytest.approx([0.15, 0.35])
    assert by_len[["pct_low", "pct_high"]].values.tolist() == [[0, 50], [50, 100]]
    assert set(by_len["value"]) == {"coverage_unique"}
    by_ar = coverage_by(table, by="arousal", n_bins=3)
    # Arousal 0.1, 0.5, 0.9 in thirds; the passage without lexicon words is left out.
    assert by_ar["coverage"].tolist() == pytest.approx([0.6, 0.4, 0.8])
    assert by_ar["n"].sum() == 3
    with pytest.raises(ValueError, match="by must be one of"):
        coverage_by(table, by="colour")
