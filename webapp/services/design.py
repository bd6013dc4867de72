"""The product-choice design: Latin-square format sequences and per-participant order.

A block names k ≥ 2 formats (``original`` and ``summary`` unless it says otherwise). Sequence
number r (the letters ``A``, ``B``, …, one per format) shows the pair at 0-based position j of
the stimulus file in format ``formats[(j + r) % k]``: the rows of a cyclic Latin square. Each
pair thus has a different format in every sequence, and a participant sees each format
⌊n/k⌋ or ⌈n/k⌉ times over n pairs. With equal numbers of participants per sequence every
pair appears equally often in each format; sequences are handed out by
:func:`choose_sequence`, so these counts stay within one of each other. For two formats this
is the original A/B counterbalancing: A shows pairs 1, 3, 5, … as ``original``, B the reverse.

Each participant's pairs are shown in a random order that cycles through the formats
(sequence r starts with format r), and the target manufacturer's side is balanced left/right
within the participant. Both come from one recorded seed, so :func:`derive_sequence`
re-derives exactly what a participant saw.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from webapp.definition import TaskBlock

# The formats of a block that names none, and the sequences of such a study.
FORMATS = ("original", "summary")
SEQUENCES = ("A", "B")
# One sequence letter per format (``Participant.sequence`` holds one character).
MAX_FORMATS = 8
SEQUENCE_LETTERS = "ABCDEFGH"


@dataclass(frozen=True)
class Trial:
    """One product-choice trial as shown to a participant."""

    trial_index: int
    pair_id: str
    format: str
    target_side: str


def sequences_for(n_formats: int) -> tuple[str, ...]:
    """The sequence letters of a design with ``n_formats`` formats.

    Examples
    --------
    >>> sequences_for(3)
    ('A', 'B', 'C')
    """
    if not 2 <= n_formats <= MAX_FORMATS:
        raise ValueError(f"a design has 2 to {MAX_FORMATS} formats, got {n_formats}")
    return tuple(SEQUENCE_LETTERS[:n_formats])


def _balanced_blocks(blocks: Sequence[TaskBlock]) -> list[tuple[TaskBlock, tuple[str, ...]]]:
    """(block, formats) of each block whose task type balances formats (``TaskType.formats``:
    the product-choice blocks)."""
    from webapp.tasks.registry import get_task_type

    found = ((b, get_task_type(b.type).formats(b)) for b in blocks)
    return [(b, formats) for b, formats in found if formats]


def study_sequences(blocks: Sequence[TaskBlock]) -> tuple[str, ...]:
    """The sequences participants of a study (its task ``blocks``) are balanced over.

    One per format of its product-choice blocks (validation makes every block name the same
    number of formats); ``A`` and ``B`` for a study without one.
    """
    found = _balanced_blocks(blocks)
    return sequences_for(len(found[0][1])) if found else SEQUENCES


def study_formats(blocks: Sequence[TaskBlock]) -> tuple[str, ...]:
    """Every format of a study's product-choice blocks, in block order (none: no such block).

    Examples
    --------
    >>> study_formats([TaskBlock.of("c", "product_choice", {"pairs": []})])
    ('original', 'summary')
    """
    return tuple(dict.fromkeys(f for _, formats in _balanced_blocks(blocks) for f in formats))


def pair_format(pair_position: int, sequence: str, formats: Sequence[str] = FORMATS) -> str:
    """Return the format of the pair at 0-based ``pair_position`` in the stimulus file.

    Examples
    --------
    >>> [pair_format(k, "A") for k in range(4)]
    ['original', 'summary', 'original', 'summary']
    >>> [pair_format(k, "B") for k in range(4)]
    ['summary', 'original', 'summary', 'original']
    >>> [pair_format(k, "C", ["o", "s", "m"]) for k in range(4)]
    ['m', 'o', 's', 'm']
    """
    sequences = sequences_for(len(formats))
    if sequence not in sequences:
        raise ValueError(f"sequence must be one of {sequences}, got {sequence!r}")
    return formats[(pair_position + sequences.index(sequence)) % len(formats)]


def derive_sequence(
    blocks: Sequence[TaskBlock], seed: int, sequence: str, block_id: str | None = None
) -> list[Trial]:
    """Re-derive a participant's product-choice trials from the seed and sequence.

    Pure: the same arguments always give the same trials.

    Parameters
    ----------
    blocks : sequence of TaskBlock
        The study's task blocks.
    seed : int
        The participant's recorded seed.
    sequence : str
        The participant's format sequence (``"A"``, ``"B"``, … one per format).
    block_id : str, optional
        Which ``product_choice`` block; the first one when omitted.

    Returns
    -------
    list of Trial
        In display order, ``trial_index`` 0, 1, …

    Examples
    --------
    >>> pairs = [{"id": f"p{i}"} for i in range(4)]
    >>> blocks = [TaskBlock.of("c", "product_choice", {"pairs": pairs})]
    >>> [t.format for t in derive_sequence(blocks, 7, "A")]
    ['original', 'summary', 'original', 'summary']
    """
    found = [
        (b, formats)
        for b, formats in _balanced_blocks(blocks)
        if block_id is None or b.id == block_id
    ]
    if not found:
        raise ValueError(f"no product_choice block {block_id or ''} in the study")
    from webapp.tasks.registry import get_task_type

    block, formats = found[0]
    pairs = get_task_type(block.type).pair_ids(block)
    k, sequences = len(formats), sequences_for(len(formats))
    if sequence not in sequences:
        raise ValueError(f"sequence must be one of {sequences}, got {sequence!r}")
    row = sequences.index(sequence)
    rng = random.Random(seed)
    by_format: dict[str, list[str]] = {f: [] for f in formats}
    for j, pair_id in enumerate(pairs):
        by_format[formats[(j + row) % k]].append(pair_id)
    for ids in by_format.values():  # in the block's format order: the seed's draws are fixed
        rng.shuffle(ids)
    # Position i shows format (row + i) mod k: format row first, then the next, cyclically.
    # Format (row + c) holds the pairs at file positions ≡ c (mod k), exactly as many as the
    # display positions ≡ c (mod k), so every list is used up.
    order: list[tuple[str, str]] = []
    for i in range(len(pairs)):
        fmt = formats[(row + i) % k]
        order.append((by_format[fmt][i // k], fmt))
    sides = ["left", "right"] * (len(pairs) // 2)
    if len(pairs) % 2:
        sides.append(rng.choice(("left", "right")))
    rng.shuffle(sides)
    return [
        Trial(trial_index=i, pair_id=pid, format=fmt, target_side=side)
        for i, ((pid, fmt), side) in enumerate(zip(order, sides, strict=True))
    ]


def choose_sequence(
    counts: Mapping[str, int], rng: random.Random, sequences: Sequence[str] = SEQUENCES
) -> str:
    """Pick the sequence with the fewest (completed + active) participants; ties at random.

    Parameters
    ----------
    counts : Mapping
        Participants per sequence that count towards balance (missing keys count 0).
    rng : random.Random
        Breaks ties.
    sequences : sequence of str
        The study's sequences (:func:`study_sequences`); ``A`` and ``B`` by default.

    Returns
    -------
    str
        One of ``sequences``.

    Examples
    --------
    >>> choose_sequence({"A": 3, "B": 2}, random.Random(0))
    'B'
    >>> choose_sequence({"A": 3, "B": 2, "C": 1}, random.Random(0), ("A", "B", "C"))
    'C'
    """
    low = min(counts.get(s, 0) for s in sequences)
    return rng.choice([s for s in sequences if counts.get(s, 0) == low])
