"""The counterbalanced design: sequences, per-participant order and sides, re-derivation."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webapp.definition import TaskBlock
from webapp.services.design import choose_sequence, derive_sequence, pair_format


def _definition(n_pairs: int) -> list[TaskBlock]:
    """The task blocks of a study: consent and a product-choice block of ``n_pairs`` pairs."""
    pairs = [{"id": f"p{i}"} for i in range(n_pairs)]
    return [
        TaskBlock.of("c", "consent", {}),
        TaskBlock.of("pc", "product_choice", {"pairs": pairs}),
    ]


def test_sequences_are_complementary_per_pair():
    for k in range(10):
        assert {pair_format(k, "A"), pair_format(k, "B")} == {"original", "summary"}
    with pytest.raises(ValueError, match="sequence"):
        pair_format(0, "C")


@given(seed=st.integers(0, 2**31 - 1), sequence=st.sampled_from(["A", "B"]), n=st.integers(2, 15))
def test_every_pair_once_formats_alternate_sides_balanced(seed, sequence, n):
    trials = derive_sequence(_definition(n), seed, sequence)
    assert sorted(t.pair_id for t in trials) == sorted(f"p{i}" for i in range(n))
    assert [t.trial_index for t in trials] == list(range(n))
    first = "original" if sequence == "A" else "summary"
    for t in trials:
        expected = first if t.trial_index % 2 == 0 else ({"original", "summary"} - {first}).pop()
        assert t.format == expected
        # A pair's format depends only on the sequence, never on the seed.
        assert t.format == pair_format(int(t.pair_id[1:]), sequence)
    sides = Counter(t.target_side for t in trials)
    assert abs(sides["left"] - sides["right"]) <= 1


def test_rederivation_is_deterministic_and_seed_dependent():
    d = _definition(10)
    assert derive_sequence(d, 42, "A") == derive_sequence(d, 42, "A")
    orders = {tuple(t.pair_id for t in derive_sequence(d, s, "A")) for s in range(20)}
    assert len(orders) > 15


def test_equal_a_and_b_give_each_pair_equally_often_in_each_format():
    d = _definition(10)
    counts = Counter()
    for i in range(20):
        for t in derive_sequence(d, i, "A" if i % 2 else "B"):
            counts[(t.pair_id, t.format)] += 1
    assert set(counts.values()) == {10}


def test_choose_sequence_takes_the_smaller_and_breaks_ties_at_random():
    assert choose_sequence({"A": 5, "B": 4}, random.Random(1)) == "B"
    assert choose_sequence({"A": 1}, random.Random(1)) == "B"  # missing counts as 0
    picks = {choose_sequence({"A": 3, "B": 3}, random.Random(s)) for s in range(20)}
    assert picks == {"A", "B"}


def test_missing_block_is_an_error():
    with pytest.raises(ValueError, match="product_choice"):
        derive_sequence([], 1, "A")
