"""Perspective extraction coverage: how much of a summary is copied from each source passage.

Extractive fragments follow Grusky, Naaman & Artzi (2018), "Newsroom": greedily match each summary
position to the longest shared token sequence of the passage. Coverage is the share of summary
tokens inside a fragment; density the mean squared fragment length per summary token. The greedy
matcher is written here because no maintained package ships it (the Newsroom tool is unmaintained
and not on PyPI).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.metrics.text import word_tokens

__all__ = [
    "arousal_density",
    "coverage_by",
    "coverage_by_perspective",
    "extraction_coverage",
    "fragments",
    "high_arousal_threshold",
    "passage_arousal",
    "perspective_inputs",
    "read_vad_lexicon",
]


def fragments(summary: Sequence[str], article: Sequence[str]) -> list[tuple[int, int]]:
    """Greedy extractive fragments of Grusky et al. (2018), Algorithm 1.

    Parameters
    ----------
    summary, article : sequence of str
        Token sequences.

    Returns
    -------
    list of (int, int)
        ``(start in summary, length)`` of each fragment, in summary order.

    Examples
    --------
    >>> fragments("the cat sat on a mat".split(), "a cat sat on the mat".split())
    [(0, 1), (1, 3), (4, 1), (5, 1)]
    """
    where: dict[str, list[int]] = defaultdict(list)
    for j, tok in enumerate(article):
        where[tok].append(j)
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(summary):
        best, next_j = 0, 0
        for j in where.get(summary[i], ()):
            # After a match the algorithm resumes the article scan past it.
            if j < next_j:
                continue
            length = 0
            while (
                i + length < len(summary)
                and j + length < len(article)
                and summary[i + length] == article[j + length]
            ):
                length += 1
            best = max(best, length)
            next_j = j + length
        if best:
            out.append((i, best))
        i += max(best, 1)
    return out


def read_vad_lexicon(path: str | Path) -> dict[str, float]:
    """Read the arousal column of an NRC VAD lexicon file (tab-separated word, V, A, D).

    A header row is recognised when its second field is not a number; with a header the
    ``arousal`` column is found by name, otherwise it is the third column. Multi-word entries are
    kept but only single words can match tokens.

    Returns
    -------
    dict
        Lower-case term -> arousal.
    """
    lexicon: dict[str, float] = {}
    column = 2
    with Path(path).open(encoding="utf-8") as fh:
        for number, line in enumerate(fh):
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 3:
                continue
            if number == 0:
                try:
                    float(fields[1])
                except ValueError:
                    names = [f.strip().lower() for f in fields]
                    column = names.index("arousal") if "arousal" in names else 2
                    continue
            lexicon[fields[0].strip().lower()] = float(fields[column])
    return lexicon


def passage_arousal(tokens: Sequence[str], lexicon: Mapping[str, float]) -> float:
    """Mean arousal of the tokens found in the lexicon (NaN when none is)."""
    values = [lexicon[t] for t in tokens if t in lexicon]
    return float(np.mean(values)) if values else math.nan


def high_arousal_threshold(lexicon: Mapping[str, float]) -> float:
    """The default "highly arousing" cut-off: the top quarter of the lexicon's arousal scale.

    NRC VAD v1 (2018) scores arousal in [0, 1] and v2 (2025) in [-1, 1]; a lexicon with any
    negative score is taken to be on the v2 scale. The top quarter of the scale is 0.75 on v1
    and 0.5 on v2. The PoliSum paper counts highly arousing terms without giving a number, so
    this is our choice, documented in docs/metrics.md and overridable (``--high-arousal``).

    Examples
    --------
    >>> high_arousal_threshold({"calm": 0.1, "riot": 0.9})
    0.75
    >>> high_arousal_threshold({"calm": -0.8, "riot": 0.9})
    0.5
    """
    low = -1.0 if any(v < 0 for v in lexicon.values()) else 0.0
    return low + 0.75 * (1.0 - low)


def arousal_density(
    tokens: Sequence[str], lexicon: Mapping[str, float], threshold: float | None = None
) -> float:
    """Share of a passage's word tokens that are highly arousing lexicon terms.

    Deas & McKeown (COLING 2025, PoliSum) measure a passage's arousal as the density of highly
    arousing terms in it: tokens whose lexicon arousal is at least ``threshold`` (default
    :func:`high_arousal_threshold`), divided by all the passage's word tokens, lexicon terms or
    not. NaN for a passage without tokens.

    Examples
    --------
    >>> arousal_density(["the", "riot", "spread", "fast"], {"riot": 0.9, "spread": 0.5})
    0.25
    """
    if not tokens:
        return math.nan
    cut = high_arousal_threshold(lexicon) if threshold is None else threshold
    return sum(1 for t in tokens if lexicon.get(t, -math.inf) >= cut) / len(tokens)


def _passage_text(passage: Any) -> tuple[str, Any]:
    if isinstance(passage, Mapping):
        return str(passage.get("text", "")), passage.get("side", passage.get("perspective"))
    return str(passage), None


def extraction_coverage(
    data: pd.DataFrame,
    *,
    passages: str = "passages",
    summary: str = "summary",
    lexicon: Mapping[str, float] | None = None,
    high_arousal: float | None = None,
) -> pd.DataFrame:
    """Fragment coverage and density of each summary against each of its source passages.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per summary; ``passages`` holds a list of passage texts or of objects with
        ``text`` (and optionally ``side``). Other columns are kept.
    passages, summary : str
        Column names.
    lexicon : mapping, optional
        Term -> arousal (:func:`read_vad_lexicon`); without it ``arousal`` and
        ``arousal_density`` are NaN.
    high_arousal : float, optional
        Arousal at or above which a term counts as highly arousing; default
        :func:`high_arousal_threshold` of the lexicon.

    Returns
    -------
    pandas.DataFrame
        One row per (summary, passage): the other input columns, ``passage`` (1-based position),
        ``n_passages``, ``relative_position`` (``(passage - 0.5) / n_passages``), ``side``,
        ``n_tokens`` (passage word tokens), ``coverage``, ``density`` (Grusky et al.) and
        ``coverage_unique`` (share of summary tokens inside a fragment whose term occurs in no
        other passage of the same input), ``arousal`` (mean lexicon arousal of the passage's
        lexicon terms) and ``arousal_density`` (share of its tokens that are highly arousing
        terms, :func:`arousal_density`, the PoliSum paper's measure).
        Tokens are :func:`analysis.metrics.text.word_tokens`.
    """
    keep = [c for c in data.columns if c not in (passages, summary)]
    cut = None
    if lexicon:
        cut = high_arousal_threshold(lexicon) if high_arousal is None else high_arousal
    rows: list[dict[str, Any]] = []
    for rec in data.to_dict(orient="records"):
        items = rec[passages]
        if isinstance(items, str):
            items = [items]
        texts, sides = zip(*(_passage_text(p) for p in items), strict=True) if items else ((), ())
        toks = [word_tokens(t) for t in texts]
        summ = word_tokens("" if rec[summary] is None else str(rec[summary]))
        vocab = [set(t) for t in toks]
        for k, tokens in enumerate(toks):
            others = set().union(*(v for m, v in enumerate(vocab) if m != k))
            frags = fragments(summ, tokens)
            n = len(summ)
            unique = sum(1 for s, ln in frags for t in summ[s : s + ln] if t not in others)
            rows.append(
                {
                    **{c: rec[c] for c in keep},
                    "passage": k + 1,
                    "n_passages": len(toks),
                    "relative_position": (k + 0.5) / len(toks),
                    "side": sides[k],
                    "n_tokens": len(tokens),
                    "coverage": sum(ln for _, ln in frags) / n if n else math.nan,
                    "density": sum(ln * ln for _, ln in frags) / n if n else math.nan,
                    "coverage_unique": unique / n if n else math.nan,
                    "arousal": passage_arousal(tokens, lexicon) if lexicon else math.nan,
                    "arousal_density": (
                        arousal_density(tokens, lexicon, cut) if lexicon else math.nan
                    ),
                }
            )
    columns = [*keep, "passage", "n_passages", "relative_position", "side", "n_tokens"]
    return pd.DataFrame(
        rows,
        columns=[*columns, "coverage", "density", "coverage_unique", "arousal", "arousal_density"],
    )


_BY = {
    "position": ("passage", "coverage"),
    "length": ("n_tokens", "coverage_unique"),
    "arousal": ("arousal", "coverage"),
    "arousal_density": ("arousal_density", "coverage"),
}


def coverage_by(
    table: pd.DataFrame,
    *,
    by: str = "position",
    n_bins: int = 5,
    group: Sequence[str] = ("model",),
    value: str | None = None,
) -> pd.DataFrame:
    """Mean extraction coverage by passage position, length percentile or arousal percentile.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`extraction_coverage`.
    by : {"position", "length", "arousal", "arousal_density"}
        ``position``: the passage's position (1-based). ``length``: percentile bin of the passage's
        token count, with coverage counted only on terms unique to that passage
        (``coverage_unique``). ``arousal``: percentile bin of the passage's mean arousal
        (passages without lexicon words are left out). ``arousal_density``: percentile bin of
        the passage's density of highly arousing terms (the PoliSum paper's measure).
    n_bins : int, default 5
        Percentile bins of equal width (5 gives 0–20, …, 80–100); ignored for ``position``.
    group : sequence of str, default ("model",)
        Grouping columns (absent ones are ignored).
    value : str, optional
        Override the coverage column.

    Returns
    -------
    pandas.DataFrame
        The ``group`` columns, ``by``, ``bin`` (position, or percentile bin 1..n_bins),
        ``pct_low``, ``pct_high`` (percentile range; NaN for position), ``n`` (passages),
        ``coverage`` (mean of the chosen coverage column) and ``value`` (that column's name).
        Percentiles are ranks over all passages in ``table`` (ties share their mean rank).
    """
    if by not in _BY:
        raise ValueError(f"by must be one of {sorted(_BY)}, got {by!r}")
    source, default_value = _BY[by]
    value = value or default_value
    df = table.dropna(subset=[source]).copy()
    if by == "position":
        df["bin"] = df[source].astype(int)
        df["pct_low"] = df["pct_high"] = math.nan
    else:
        pct = df[source].rank(method="average", pct=True)
        df["bin"] = np.clip(np.ceil(pct * n_bins).astype(int), 1, n_bins)
        df["pct_low"] = (df["bin"] - 1) * 100 / n_bins
        df["pct_high"] = df["bin"] * 100 / n_bins
    keys = [c for c in group if c in df.columns]
    out = (
        df.groupby([*keys, "bin", "pct_low", "pct_high"], dropna=False, sort=True)[value]
        .agg(n="size", coverage="mean")
        .reset_index()
    )
    out.insert(len(keys), "by", by)
    out["value"] = value
    return out


def coverage_by_perspective(
    table: pd.DataFrame,
    *,
    group: Sequence[str] = ("model",),
    value: str = "coverage",
) -> pd.DataFrame:
    """Mean coverage of each perspective's summary on passages of either side, by position.

    A left-perspective summary should extract from left passages; the PoliSum paper plots how
    much each perspective's summaries take from passages of the intended and of the opposite
    side, by where those passages stood in the input.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`extraction_coverage` with ``perspective`` and ``side`` columns.
    group : sequence of str, default ("model",)
        Grouping columns (absent ones are ignored).
    value : str, default "coverage"
        The coverage column averaged.

    Returns
    -------
    pandas.DataFrame
        The ``group`` columns, ``perspective`` (the summary's), ``side`` (the passage's),
        ``same_side`` (bool), ``passage`` (position in the prompt, 1-based), ``n`` and
        ``coverage`` (mean of ``value``).
    """
    for needed in ("perspective", "side"):
        if needed not in table.columns:
            raise ValueError(f"coverage by perspective needs a {needed!r} column")
    df = table.dropna(subset=["perspective", "side"])
    keys = [c for c in group if c in df.columns]
    out = (
        df.groupby([*keys, "perspective", "side", "passage"], sort=True)[value]
        .agg(n="size", coverage="mean")
        .reset_index()
    )
    out.insert(len(keys) + 2, "same_side", out["perspective"] == out["side"])
    return out


def perspective_inputs(
    records: pd.DataFrame,
    *,
    left: str = "left",
    right: str = "right",
    order: str = "order",
    summary: str = "output",
) -> pd.DataFrame:
    """Passages and summaries of ``perspective-summary`` generation records.

    The engine shows the left and right texts interleaved unit by unit (paragraphs, or sentences
    of a single paragraph), left first or right first as ``order`` says; the passages here are
    those units in the order shown, each tagged with its side, so passage position means position
    in the prompt. ``analysis.llm.tasks.mix_passages`` is reused, with the record's
    ``passage_seed`` (each side's passages are shuffled by it before they alternate; records
    without one were shown in source order), so the units are exactly the ones the model saw.

    Returns
    -------
    pandas.DataFrame
        ``item_id``, ``dataset``, ``model``, ``method``, ``perspective``, ``order``,
        ``passages`` (list of ``{"text", "side"}``) and ``summary``.
    """
    from analysis.llm.tasks import mix_passages
    from analysis.metrics.records import column, select_task

    rows = select_task(records, "perspective-summary")
    out = []
    for rec in rows.to_dict(orient="records"):
        texts = {"left": str(rec[column(rows, left)]), "right": str(rec[column(rows, right)])}
        shown = str(rec.get(order) or "left_first").removesuffix("_first")
        first, second = (shown, "right" if shown == "left" else "left")
        seed = _seed(rec.get("passage_seed"))
        # Unit counts per side, from the same splitter the prompt used.
        counts = [len(mix_passages(texts[s], "").split("\n\n")) for s in (first, second)]
        units = mix_passages(texts[first], texts[second], seed).split("\n\n")
        pairs = list(zip((first, second), counts, strict=True))
        sides = [s for i in range(max(counts)) for s, c in pairs if i < c]
        if len(sides) != len(units):
            raise ValueError(f"item {rec.get('item_id')!r}: could not recover passage sides")
        out.append(
            {
                "item_id": str(rec.get("item_id")),
                "dataset": rec.get("dataset"),
                "model": rec.get("model"),
                "method": rec.get("method"),
                "perspective": rec.get("perspective"),
                "order": rec.get(order),
                "passages": [{"text": u, "side": s} for u, s in zip(units, sides, strict=True)],
                "summary": rec[column(rows, summary)],
            }
        )
    return pd.DataFrame(out)


def _seed(value: Any) -> int | None:
    """A record's ``passage_seed`` (absent or NaN in records written before passages were
    shuffled)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    return int(value)
