"""The k-format design: Latin-square sequences, balance for any number of participants."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webapp.definition import TaskBlock
from webapp.services.design import (
    choose_sequence,
    derive_sequence,
    pair_format,
    sequences_for,
    study_sequences,
)

FORMATS3 = ["original", "summary", "mitigated:self-debias"]


def _definition(n_pairs: int, formats: list[str] | None = None) -> list[TaskBlock]:
    """The task blocks of a study: consent and a product-choice block of ``n_pairs`` pairs."""
    body: dict = {"pairs": [{"id": f"p{i}"} for i in range(n_pairs)]}
    if formats is not None:
        body["formats"] = formats
    return [TaskBlock.of("c", "consent", {}), TaskBlock.of("pc", "product_choice", body)]


def _formats(k: int) -> list[str]:
    return ["original", "summary"] + [f"mitigated:m{i}" for i in range(k - 2)]


def test_sequences_are_the_rows_of_a_latin_square():
    for k in range(2, 7):
        formats = _formats(k)
        for j in range(3 * k):
            # Every pair has every format in exactly one sequence.
            assert sorted(pair_format(j, s, formats) for s in sequences_for(k)) == sorted(formats)
        for s in sequences_for(k):
            # Within a sequence, k consecutive pairs carry k different formats.
            assert len({pair_format(j, s, formats) for j in range(k)}) == k
    with pytest.raises(ValueError, match="sequence"):
        pair_format(0, "D", FORMATS3)
    with pytest.raises(ValueError, match="formats"):
        sequences_for(1)


def test_a_study_is_balanced_over_one_sequence_per_format():
    assert study_sequences(_definition(4)) == ("A", "B")
    assert study_sequences(_definition(4, FORMATS3)) == ("A", "B", "C")
    assert study_sequences([TaskBlock.of("c", "consent", {})]) == ("A", "B")


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    k=st.integers(2, 6),
    n=st.integers(2, 20),
    data=st.data(),
)
def test_each_participant_sees_every_pair_once_and_formats_as_evenly_as_possible(seed, k, n, data):
    formats = _formats(k)
    sequence = data.draw(st.sampled_from(sequences_for(k)))
    trials = derive_sequence(_definition(n, formats), seed, sequence)
    assert sorted(t.pair_id for t in trials) == sorted(f"p{i}" for i in range(n))
    assert [t.trial_index for t in trials] == list(range(n))
    per_format = Counter(t.format for t in trials)
    assert set(per_format) <= set(formats)
    assert {per_format[f] for f in formats} <= {n // k, -(-n // k)}
    row = sequences_for(k).index(sequence)
    for t in trials:
        # A pair's format depends only on the sequence (never the seed) ...
        assert t.format == pair_format(int(t.pair_id[1:]), sequence, formats)
        # ... and the display order cycles through the formats from the sequence's own.
        assert t.format == formats[(row + t.trial_index) % k]
    sides = Counter(t.target_side for t in trials)
    assert abs(sides["left"] - sides["right"]) <= 1
    assert derive_sequence(_definition(n, formats), seed, sequence) == trials  # re-derivable


@pytest.mark.parametrize("k", [2, 3, 4, 5])
@pytest.mark.parametrize("n_pairs", [3, 6, 10, 11])
def test_balance_per_pair_and_format_within_one_for_any_number_of_participants(k, n_pairs):
    # Participants arrive one by one and each gets the least-used sequence (the enrolment
    # service's rule); after every arrival, every pair has been shown in every format equally
    # often, give or take one.
    formats = _formats(k)
    definition = _definition(n_pairs, formats)
    rng = random.Random(k * 100 + n_pairs)
    per_sequence: Counter = Counter()
    cells: Counter = Counter()
    for participant in range(1, 8 * k + 2):
        sequence = choose_sequence(per_sequence, rng, sequences_for(k))
        per_sequence[sequence] += 1
        for t in derive_sequence(definition, rng.randrange(2**31), sequence):
            cells[(t.pair_id, t.format)] += 1
        counts = [cells[(f"p{j}", f)] for j in range(n_pairs) for f in formats]
        assert max(counts) - min(counts) <= 1, participant
        assert sum(counts) == participant * n_pairs
        if participant % k == 0:
            assert set(counts) == {participant // k}


def test_choose_sequence_takes_the_least_used_of_k():
    seqs = sequences_for(3)
    assert choose_sequence({"A": 2, "B": 1, "C": 2}, random.Random(0), seqs) == "B"
    assert choose_sequence({"A": 1, "B": 1}, random.Random(0), seqs) == "C"  # missing is 0
    picks = {choose_sequence({"A": 1, "B": 1, "C": 1}, random.Random(s), seqs) for s in range(30)}
    assert picks == set(seqs)


def test_two_blocks_of_a_study_use_the_same_row():
    d = _definition(6, FORMATS3)
    pairs = [{"id": f"q{i}"} for i in range(3)]
    body = {"formats": ["original", "summary", "x"], "pairs": pairs}
    d.append(TaskBlock.of("pc2", "product_choice", body))
    first = derive_sequence(d, 11, "B", "pc")
    other = derive_sequence(d, 11, "B", "pc2")
    assert first[0].format == "summary" and other[0].format == "summary"
    assert {t.pair_id for t in other} == {"q0", "q1", "q2"}
