"""Shared text splitting: sentences, tokens and near-equal segments.

The sentence splitter is rule-based on purpose: NLTK's punkt model needs a download that is not
available offline, and a documented rule set keeps the metrics reproducible anywhere.
"""

from __future__ import annotations

import re

__all__ = [
    "segment_bounds",
    "segment_of",
    "split_parts",
    "split_sentences",
    "whitespace_tokens",
    "word_tokens",
]

# Words that end with a period without ending a sentence (compared lower-case, without the final
# period). Single capital letters (initials such as "J. Smith") are handled separately.
_ABBREVIATIONS = frozenset(
    {
        *("mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "vs", "etc", "cf", "al"),
        *("e.g", "i.e", "inc", "ltd", "co", "corp", "dept", "approx", "fig", "figs", "vol", "pp"),
        *("gov", "lt", "sgt", "capt", "cmdr", "adm", "jan", "feb", "apr", "jun", "jul", "aug"),
        *("sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "u.n", "e.u", "a.m", "p.m"),
    }
)
# A candidate boundary: terminal punctuation, optional closing quotes/brackets, then whitespace.
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*\s+")
# The next sentence must start like a sentence: a capital, a digit or an opening quote/bracket.
_STARTS_SENTENCE = re.compile(r"[\"'“‘(\[]*[A-Z0-9]")
_WORD = re.compile(r"\w+(?:['’]\w+)*")


def _is_abbreviation(text_before: str) -> bool:
    words = text_before.split()
    if not words:
        return False
    last = words[-1].rstrip(".!?").lstrip("\"'“‘([")
    if len(last) == 1 and last.isalpha() and last.isupper():
        return True  # an initial
    return last.lower() in _ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with a documented rule set.

    Rules, in order: every line break ends a sentence (datasets put one sentence or paragraph per
    line); inside a line, a run of ``.``, ``!`` or ``?`` (with any closing quotes or brackets) that
    is followed by whitespace and then a capital letter, a digit or an opening quote ends a
    sentence, unless the word before it is a known abbreviation (``Mr.``, ``e.g.``, ``U.S.``, …)
    or a single capital initial. Empty sentences are dropped; whitespace is trimmed.

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
    >>> split_sentences("Dr. Smith arrived. He sat down! Did he stay?\\nYes.")
    ['Dr. Smith arrived.', 'He sat down!', 'Did he stay?', 'Yes.']
    """
    sentences: list[str] = []
    for line in text.splitlines():
        start = 0
        for match in _BOUNDARY.finditer(line):
            end = match.end()
            if not _STARTS_SENTENCE.match(line, end):
                continue
            if line[match.start()] == "." and _is_abbreviation(line[start : match.start() + 1]):
                continue
            sentences.append(line[start:end].strip())
            start = end
        sentences.append(line[start:].strip())
    return [s for s in sentences if s]


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
