"""The product-choice design: counterbalanced format sequences and per-participant order.

Two complementary sequences assign formats to pairs by their position in the stimulus file:
sequence ``A`` shows pairs 1, 3, 5, … as ``original`` and 2, 4, … as ``summary``; sequence
``B`` the reverse. With equal numbers of A and B participants every pair appears equally often
in each format. Each participant's pairs are shown in a random order that keeps the formats
alternating (A starts with an original, B with a summary), and the target manufacturer's side
is balanced left/right within the participant. Both come from one recorded seed, so
:func:`derive_sequence` re-derives exactly what a participant saw.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SEQUENCES = ("A", "B")
FORMATS = ("original", "summary")


@dataclass(frozen=True)
class Trial:
    """One product-choice trial as shown to a participant."""

    trial_index: int
    pair_id: str
    format: str
    target_side: str


def pair_format(pair_position: int, sequence: str) -> str:
    """Return the format of the pair at 0-based ``pair_position`` in the stimulus file.

    Examples
    --------
    >>> [pair_format(k, "A") for k in range(4)]
    ['original', 'summary', 'original', 'summary']
    >>> [pair_format(k, "B") for k in range(4)]
    ['summary', 'original', 'summary', 'original']
    """
    if sequence not in SEQUENCES:
        raise ValueError(f"sequence must be one of {SEQUENCES}, got {sequence!r}")
    first = 0 if sequence == "A" else 1
    return FORMATS[(pair_position + first) % 2]


def derive_sequence(
    study_def: Mapping[str, Any], seed: int, sequence: str, block_id: str | None = None
) -> list[Trial]:
    """Re-derive a participant's product-choice trials from the seed and sequence.

    Pure: the same arguments always give the same trials.

    Parameters
    ----------
    study_def : Mapping
        The study's normalised definition (``Study.definition``).
    seed : int
        The participant's recorded seed.
    sequence : {"A", "B"}
        The participant's format sequence.
    block_id : str, optional
        Which ``product_choice`` block; the first one when omitted.

    Returns
    -------
    list of Trial
        In display order, ``trial_index`` 0, 1, …

    Examples
    --------
    >>> d = {"tasks": [{"type": "product_choice", "id": "c",
    ...      "pairs": [{"id": f"p{i}"} for i in range(4)]}]}
    >>> [t.format for t in derive_sequence(d, 7, "A")]
    ['original', 'summary', 'original', 'summary']
    """
    blocks = [
        b
        for b in study_def["tasks"]
        if b["type"] == "product_choice" and (block_id is None or b["id"] == block_id)
    ]
    if not blocks:
        raise ValueError(f"no product_choice block {block_id or ''} in the study")
    pairs = blocks[0]["pairs"]
    rng = random.Random(seed)
    by_format: dict[str, list[str]] = {f: [] for f in FORMATS}
    for k, pair in enumerate(pairs):
        by_format[pair_format(k, sequence)].append(pair["id"])
    for ids in by_format.values():
        rng.shuffle(ids)
    first, second = (by_format["original"], by_format["summary"])
    if sequence == "B":
        first, second = second, first
    order: list[tuple[str, str]] = []
    fmt_first, fmt_second = ("original", "summary") if sequence == "A" else ("summary", "original")
    for i in range(len(pairs)):
        source, fmt = (first, fmt_first) if i % 2 == 0 else (second, fmt_second)
        order.append((source[i // 2], fmt))
    sides = ["left", "right"] * (len(pairs) // 2)
    if len(pairs) % 2:
        sides.append(rng.choice(("left", "right")))
    rng.shuffle(sides)
    return [
        Trial(trial_index=i, pair_id=pid, format=fmt, target_side=side)
        for i, ((pid, fmt), side) in enumerate(zip(order, sides, strict=True))
    ]


def choose_sequence(counts: Mapping[str, int], rng: random.Random) -> str:
    """Pick the sequence with the fewest (completed + active) participants; ties at random.

    Parameters
    ----------
    counts : Mapping
        Participants per sequence that count towards balance (missing keys count 0).
    rng : random.Random
        Breaks ties.

    Returns
    -------
    str
        ``"A"`` or ``"B"``.

    Examples
    --------
    >>> choose_sequence({"A": 3, "B": 2}, random.Random(0))
    'B'
    """
    low = min(counts.get(s, 0) for s in SEQUENCES)
    return rng.choice([s for s in SEQUENCES if counts.get(s, 0) == low])
