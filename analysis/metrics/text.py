"""Shared text splitting: sentences, passages, tokens and near-equal segments.

Every sentence split in ``analysis`` (the metrics, the prompt builders, the perspective-summary
parser, the mitigations that reorder sentences) goes through :func:`split_sentences`, which is
pySBD (Sadvilkar & Neumann 2020), a maintained rule-based splitter that needs no model download:
NLTK's Punkt needs its ``punkt_tab`` data, which cannot be fetched offline. pySBD passes 47 of the
48 English Golden Rules (its published 97.92 %; ``tests/analysis/metrics/test_text.py`` checks
that number), so "The U.S. Senate", "Sen. Warren" and "Mr. Smith" do not end sentences.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = [
    "first_sentence",
    "passages",
    "segment_bounds",
    "segment_of",
    "split_parts",
    "split_sentences",
    "whitespace_tokens",
    "word_tokens",
]

_WORD = re.compile(r"\w+(?:['’]\w+)*")


@functools.cache
def _segmenter() -> Any:
    try:
        import pysbd
    except ImportError as exc:  # pragma: no cover - pysbd is in the analysis extra
        raise ImportError(
            "sentence splitting needs pysbd: pip install 'framelab[analysis]'"
        ) from exc
    # clean=False: pySBD's cleaning rewrites the text (joins lines, drops characters), and the
    # metrics must map sentences back to the text as written.
    return pysbd.Segmenter(language="en", clean=False)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with pySBD, one line at a time.

    Every line break ends a sentence (datasets put one sentence, paragraph or passage per line,
    and a passage must never run into the next one); inside a line pySBD decides, so
    abbreviations (``Mr.``, ``Sen.``, ``U.S.``), initials, decimals, quotes, ellipses, list
    markers and URLs are handled by its Golden-Rules rule set. Sentences are stripped; empty
    ones are dropped.

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    list of str
        The sentences in order.

    Examples
    --------
    >>> split_sentences("The U.S. Senate met. Sen. Warren spoke!\\nMr. Smith left.")
    ['The U.S. Senate met.', 'Sen. Warren spoke!', 'Mr. Smith left.']
    """
    return list(_split_cached(text))


# pySBD costs about 0.2 s for an 800-word line (its abbreviation rules rescan the line once per
# candidate), and the same source is split once per model and method that summarised it.
@functools.lru_cache(maxsize=4096)
def _split_cached(text: str) -> tuple[str, ...]:
    segmenter = _segmenter()
    sentences: list[str] = []
    for line in text.splitlines():
        if line.strip():
            sentences.extend(s.strip() for s in segmenter.segment(line) if s.strip())
    return tuple(sentences)


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` by :func:`split_sentences` (``""`` for blank text).

    Examples
    --------
    >>> first_sentence("The U.S. Senate voted. Mr. Smith left.")
    'The U.S. Senate voted.'
    """
    sentences = split_sentences(text)
    return sentences[0] if sentences else ""


def passages(text: str) -> list[str]:
    """The units a text is interleaved or reordered by: its lines, or its sentences.

    A text of several non-empty lines is split at line breaks (PoliSum and most corpora put one
    passage or paragraph per line, separated by one newline or by blank lines); a single line is
    split into sentences by :func:`split_sentences`, so there is something to interleave.

    Examples
    --------
    >>> passages("First passage. Two sentences.\\nSecond passage.")
    ['First passage. Two sentences.', 'Second passage.']
    >>> passages("Mr. Smith spoke. Then he left.")
    ['Mr. Smith spoke.', 'Then he left.']
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        return lines
    return split_sentences(text)


def whitespace_tokens(text: str) -> list[str]:
    """Whitespace-separated tokens (the unit of the primacy thirds; joining them keeps the text)."""
    return text.split()


def word_tokens(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, inner apostrophes); punctuation is dropped.

    Examples
    --------
    >>> word_tokens("It's the U.S. team, 2-1!")
    ["it's", 'the', 'u', 's', 'team', '2', '1']
    """
    return _WORD.findall(text.lower())


def segment_bounds(n: int, k: int) -> list[tuple[int, int]]:
    """Inclusive 0-based bounds of ``k`` near-equal segments of ``n`` units.

    Segment ``j`` (1-based) holds units ``[(j-1)c + min(j-1, d), jc + min(j, d) - 1]`` with
    ``c = n // k`` and ``d = n % k``: the first ``d`` segments get one unit more.

    Parameters
    ----------
    n : int
        Number of units (sentences, tokens).
    k : int
        Number of segments, ``1 <= k <= n``.

    Returns
    -------
    list of (int, int)
        ``(first, last)`` index of each segment.

    Examples
    --------
    >>> segment_bounds(10, 3)
    [(0, 3), (4, 6), (7, 9)]
    """
    if k < 1:
        raise ValueError(f"the number of segments must be at least 1, got {k}")
    if k > n:
        raise ValueError(f"cannot split {n} units into {k} non-empty segments")
    c, d = divmod(n, k)
    return [((j - 1) * c + min(j - 1, d), j * c + min(j, d) - 1) for j in range(1, k + 1)]


def segment_of(index: int, n: int, k: int) -> int:
    """1-based segment of the 0-based unit ``index`` under :func:`segment_bounds` (closed form).

    Examples
    --------
    >>> [segment_of(i, 10, 3) for i in range(10)]
    [1, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    """
    if not 0 <= index < n:
        raise ValueError(f"index {index} outside 0..{n - 1}")
    c, d = divmod(n, k)
    # The first d segments have c + 1 units and cover indices 0 .. d(c+1) - 1.
    if index < d * (c + 1):
        return index // (c + 1) + 1
    return d + (index - d * (c + 1)) // c + 1


def split_parts(text: str, n_parts: int = 3, *, unit: str = "tokens") -> list[str]:
    """Split a text into ``n_parts`` near-equal parts by whitespace tokens or by sentences.

    Parts follow :func:`segment_bounds`, so earlier parts get the remainder.

    Parameters
    ----------
    text : str
        The source text.
    n_parts : int, default 3
        Number of parts.
    unit : {"tokens", "sentences"}
        ``tokens`` splits whitespace tokens (joined back with single spaces); ``sentences`` uses
        :func:`split_sentences`.

    Returns
    -------
    list of str
        The parts in order.

    Examples
    --------
    >>> split_parts("a b c d e f g")
    ['a b c', 'd e', 'f g']
    """
    if unit == "tokens":
        units = whitespace_tokens(text)
    elif unit == "sentences":
        units = split_sentences(text)
    else:
        raise ValueError(f"unit must be 'tokens' or 'sentences', got {unit!r}")
    if len(units) < n_parts:
        raise ValueError(f"text has {len(units)} {unit}, fewer than the {n_parts} parts requested")
    return [" ".join(units[a : b + 1]) for a, b in segment_bounds(len(units), n_parts)]
