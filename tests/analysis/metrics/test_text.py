"""Sentence splitting, tokens and the near-equal segment formula."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.metrics.text import (
    segment_bounds,
    segment_of,
    split_parts,
    split_sentences,
    word_tokens,
)


def test_segment_bounds_worked_example_n10_k3():
    # The worked example: N = 10, K = 3 gives sizes 4, 3, 3.
    bounds = segment_bounds(10, 3)
    assert bounds == [(0, 3), (4, 6), (7, 9)]
    assert [b - a + 1 for a, b in bounds] == [4, 3, 3]


def test_segment_bounds_worked_example_n7_k7():
    assert segment_bounds(7, 7) == [(i, i) for i in range(7)]


def test_segment_bounds_refuses_more_segments_than_units():
    with pytest.raises(ValueError, match="cannot split 2 units into 3"):
        segment_bounds(2, 3)


@given(st.integers(1, 300), st.integers(1, 300))
def test_segments_partition_and_closed_form_agree(n, k):
    if k > n:
        return
    bounds = segment_bounds(n, k)
    sizes = [b - a + 1 for a, b in bounds]
    assert sum(sizes) == n and max(sizes) - min(sizes) <= 1
    assert bounds[0][0] == 0 and bounds[-1][1] == n - 1
    for j, (a, b) in enumerate(bounds, start=1):
        assert segment_of(a, n, k) == j and segment_of(b, n, k) == j


def test_split_sentences_rules():
    text = (
        'Dr. Smith met J. Doe in the U.S. capital. "Great!" he said. Prices rose 3.5% '
        "in Jan. 2020? Yes.\nA new line starts here"
    )
    assert split_sentences(text) == [
        "Dr. Smith met J. Doe in the U.S. capital.",
        '"Great!" he said.',
        "Prices rose 3.5% in Jan. 2020?",
        "Yes.",
        "A new line starts here",
    ]


def test_split_sentences_lowercase_continuation_does_not_split():
    assert split_sentences("It was e.g. fine. ok then.") == ["It was e.g. fine. ok then."]
    assert split_sentences("  \n\n ") == []


def test_word_tokens_lowercase_without_punctuation():
    assert word_tokens("Don't STOP, now!") == ["don't", "stop", "now"]


def test_split_parts_by_tokens_and_sentences():
    assert split_parts("1 2 3 4 5 6 7 8 9 10") == ["1 2 3 4", "5 6 7", "8 9 10"]
    text = "One. Two. Three. Four."
    assert split_parts(text, unit="sentences") == ["One. Two.", "Three.", "Four."]
    with pytest.raises(ValueError, match="fewer than the 3 parts"):
        split_parts("a b")
    with pytest.raises(ValueError, match="unit must be"):
        split_parts("a b c", unit="words")
