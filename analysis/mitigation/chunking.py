"""Text transforms of the chunk and re-rank families (no model involved).

- Partial Summaries Ensemble cuts a document into three chunks of ``floor(|D| / 3)`` whitespace
  tokens (the last chunk also takes the remainder, so nothing is lost).
- Weighted Summaries gives the beginning, middle and end 33 %, 34 % and 33 % of the target length,
  rounded so the budgets sum exactly to the target.
- Position-Invariant Shuffle splits a document into sentences and shuffles them with a seed
  (42, 000 A.6) combined with the item's id, so texts of equal sentence count get different
  permutations (``seed_scope="fixed"`` gives every text the permutation of seed 42 alone).
  Sentences come from the shared splitter (:func:`analysis.metrics.text.split_sentences`, so
  "The U.S." is not cut into "The U." and "S."); ``split="periods"`` reproduces the seed
  description's literal "split on periods".
- Attention-Sort works on passages (:func:`analysis.metrics.text.passages`: lines or blank-line
  paragraphs; sentences when there is only one).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence

__all__ = [
    "WEIGHTS",
    "chunk_document",
    "paragraphs",
    "shuffle_sentences",
    "SEED_SCOPES",
    "SPLITS",
    "split_on_periods",
    "text_seed",
    "weighted_budgets",
]

WEIGHTS = (0.33, 0.34, 0.33)


def chunk_document(text: str, n_chunks: int = 3) -> list[str]:
    """Cut ``text`` into ``n_chunks`` chunks of ``floor(|D| / n_chunks)`` whitespace tokens.

    ``|D|`` is the number of whitespace tokens; the last chunk also holds the ``|D| mod n_chunks``
    remaining tokens.

    Parameters
    ----------
    text : str
        The document.
    n_chunks : int, default 3
        Number of chunks.

    Returns
    -------
    list of str
        The chunks in order, tokens re-joined by single spaces.

    Raises
    ------
    ValueError
        When the document has fewer tokens than chunks.

    Examples
    --------
    >>> chunk_document("a b c d e f g h")
    ['a b', 'c d', 'e f g h']
    """
    tokens = text.split()
    size = len(tokens) // n_chunks
    if size == 0:
        raise ValueError(f"document has {len(tokens)} tokens, fewer than {n_chunks} chunks")
    bounds = [i * size for i in range(n_chunks)] + [len(tokens)]
    return [" ".join(tokens[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def weighted_budgets(target: int, weights: Sequence[float] = WEIGHTS) -> list[int]:
    """Split a target length into integer budgets proportional to ``weights``.

    Largest-remainder rounding (Hamilton's method): each part gets the floor of its share and
    the leftover units go to the largest fractional parts (earlier parts first on ties), so the
    budgets always sum to ``target``.

    Parameters
    ----------
    target : int
        The desired summary length (words or tokens).
    weights : sequence of float, default (0.33, 0.34, 0.33)
        Relative shares; they are normalised.

    Returns
    -------
    list of int
        One budget per weight, summing to ``target``.

    Examples
    --------
    >>> weighted_budgets(100)
    [33, 34, 33]
    >>> weighted_budgets(10)
    [3, 4, 3]
    """
    if target < 0:
        raise ValueError(f"target must be non-negative, got {target}")
    total = float(sum(weights))
    shares = [target * w / total for w in weights]
    budgets = [math.floor(s) for s in shares]
    order = sorted(range(len(shares)), key=lambda i: (-(shares[i] - budgets[i]), i))
    for i in order[: target - sum(budgets)]:
        budgets[i] += 1
    return budgets


def split_on_periods(text: str) -> list[str]:
    """Split text into sentences at periods, keeping each period with its sentence.

    This is the seed definition of Position-Invariant Shuffle (sentences "split on periods"),
    deliberately simpler than the metrics' splitter so the method is reproducible from its
    description.

    Examples
    --------
    >>> split_on_periods("One. Two two.Three")
    ['One.', 'Two two.', 'Three']
    """
    pieces = re.findall(r"[^.]*(?:\.|$)", text)
    return [p.strip() for p in pieces if p.strip()]


SPLITS = ("sentences", "periods")


SEED_SCOPES = ("text", "fixed")


def text_seed(seed: int, item_id: str, scope: str = "text") -> int | str:
    """The seed one text is shuffled with.

    With ``scope="text"`` it is ``"SEED:ITEM_ID"`` (``random.Random`` hashes a string seed with
    SHA-512, so it is the same in every process), giving each text its own permutation that
    anyone can re-derive; with ``scope="fixed"`` every text is shuffled with ``seed`` itself, so
    all texts with the same number of sentences get the same permutation.

    >>> text_seed(42, "r01"), text_seed(42, "r01", "fixed")
    ('42:r01', 42)
    """
    if scope == "text":
        return f"{seed}:{item_id}"
    if scope == "fixed":
        return seed
    raise ValueError(f"seed_scope must be one of {SEED_SCOPES}, got {scope!r}")


def shuffle_sentences(text: str, seed: int | str = 42, *, split: str = "sentences") -> str:
    """Shuffle the sentences of ``text`` with ``random.Random(seed)``.

    Parameters
    ----------
    text : str
        The document.
    seed : int or str, default 42
        The shuffle seed (:func:`text_seed` gives a text its own); the same text and seed always
        give the same order.
    split : {"sentences", "periods"}, default "sentences"
        ``sentences`` uses the shared library splitter; ``periods`` cuts at every period
        (:func:`split_on_periods`), the seed description taken literally.

    Returns
    -------
    str
        The shuffled sentences joined by single spaces.
    """
    if split == "sentences":
        from analysis.metrics.text import split_sentences

        sentences = split_sentences(text)
    elif split == "periods":
        sentences = split_on_periods(text)
    else:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    random.Random(seed).shuffle(sentences)
    return " ".join(sentences)


def paragraphs(text: str) -> list[str]:
    """Split a document into the units Attention-Sort reorders.

    These are :func:`analysis.metrics.text.passages`: the document's lines (paragraphs separated
    by one newline or by blank lines); a single-line document is split into its sentences, so
    there is something to reorder.
    """
    from analysis.metrics.text import passages

    return passages(text)
