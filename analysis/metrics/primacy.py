"""Primacy and coverage: how similar a summary is to the beginning, middle and end of its source.

Each source is cut into three near-equal parts (by whitespace tokens, or by sentences); the
summary and the parts are embedded and compared by cosine similarity: ``s_b``, ``s_m``, ``s_e``.
ψpri is the share of items with ``s_b > s_m + alpha``; the recency counterpart ψrec is the share
with ``s_e > s_m + alpha``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.metrics.embed import Embedder, PrimacyEmbedder
from analysis.metrics.records import each_group, group_means
from analysis.metrics.text import split_parts

__all__ = ["PRIMACY_GROUPS", "primacy_mean_of_means", "primacy_scores", "primacy_similarities"]

PRIMACY_GROUPS = ("model", "dataset", "method")


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    # A zero vector (e.g. an embedder's output for empty text) has similarity 0 with everything.
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def primacy_similarities(
    data: pd.DataFrame,
    *,
    embedder: Embedder | PrimacyEmbedder,
    source: str = "source",
    summary: str = "summary",
    unit: str = "tokens",
    batch_size: int = 256,
    progress: bool = False,
) -> pd.DataFrame:
    """Cosine similarity of each summary to the three thirds of its source.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per (source, summary); other columns (``item_id``, ``model``, …) are kept.
    embedder : callable or PrimacyEmbedder
        ``texts -> ndarray`` (see :mod:`analysis.metrics.embed`) for summaries and thirds alike,
        or a :class:`~analysis.metrics.embed.PrimacyEmbedder` whose ``query`` embeds the
        summaries and ``passage`` the thirds (E5-style prefixes).
    source, summary : str
        Columns holding the source text and the summary.
    unit : {"tokens", "sentences"}
        How the source is cut into thirds (see :func:`analysis.metrics.text.split_parts`).
    batch_size : int, default 256
        Items embedded per call of ``embedder`` (each item is four texts).
    progress : bool, default False
        Show a tqdm bar over batches.

    Returns
    -------
    pandas.DataFrame
        The input columns except ``source`` and ``summary``, plus ``s_b``, ``s_m``, ``s_e``
        (cosine similarity to the beginning, middle and end third) and ``coverage``
        (their mean).

    Raises
    ------
    ValueError
        When a source has fewer than three units; the message names its row.
    """
    sources = data[source].fillna("").astype(str).tolist()
    summaries = data[summary].fillna("").astype(str).tolist()
    parts: list[list[str]] = []
    for row, text in enumerate(sources):
        try:
            parts.append(split_parts(text, 3, unit=unit))
        except ValueError as exc:
            label = data["item_id"].iloc[row] if "item_id" in data.columns else row
            raise ValueError(f"source of item {label!r}: {exc}") from exc

    sims = np.empty((len(sources), 3))
    starts = range(0, len(sources), batch_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="primacy", unit="batch")
    if isinstance(embedder, PrimacyEmbedder):
        query, passage = embedder.query, embedder.passage
    else:
        query = passage = embedder
    for start in starts:
        stop = min(start + batch_size, len(sources))
        n = stop - start
        third_texts = [p for ps in parts[start:stop] for p in ps]
        if query is passage:  # one call per batch
            emb = _unit_rows(np.asarray(query(summaries[start:stop] + third_texts), dtype=float))
            summ, thirds = emb[:n], emb[n:].reshape(n, 3, -1)
        else:
            summ = _unit_rows(np.asarray(query(summaries[start:stop]), dtype=float))
            thirds = _unit_rows(np.asarray(passage(third_texts), dtype=float)).reshape(n, 3, -1)
        sims[start:stop] = np.einsum("id,ijd->ij", summ, thirds)

    out = data.drop(columns=[source, summary]).reset_index(drop=True)
    out["s_b"], out["s_m"], out["s_e"] = sims[:, 0], sims[:, 1], sims[:, 2]
    out["coverage"] = sims.mean(axis=1)
    return out


def _paired_t(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    from scipy import stats

    diff = a - b
    nan = float("nan")
    out = {"estimate": float(diff.mean()) if len(diff) else nan, "ci_low": nan, "ci_high": nan}
    out.update(t=nan, dof=float(len(diff) - 1), p_val=nan)
    # Undefined for fewer than two pairs or constant differences (scipy would warn, give nan/inf).
    if len(diff) < 2 or np.allclose(diff, diff[0]):
        return out
    res = stats.ttest_rel(a, b)
    ci = res.confidence_interval(0.95)
    out.update(ci_low=float(ci.low), ci_high=float(ci.high))
    out.update(t=float(res.statistic), p_val=float(res.pvalue))
    return out


def primacy_scores(
    sims: pd.DataFrame,
    *,
    alpha: float = 0.05,
    by: Sequence[str] = PRIMACY_GROUPS,
) -> pd.DataFrame:
    """Mean similarities, coverage, ψpri, ψrec and the paired t-test of s_b vs s_m per group.

    Parameters
    ----------
    sims : pandas.DataFrame
        Output of :func:`primacy_similarities`.
    alpha : float, default 0.05
        Margin: an item shows primacy when ``s_b > s_m + alpha`` (recency: ``s_e > s_m + alpha``).
    by : sequence of str
        Grouping columns; those absent from ``sims`` are ignored.

    Returns
    -------
    pandas.DataFrame
        One row per group: the ``by`` columns, ``n``, ``s_b``, ``s_m``, ``s_e`` (means),
        ``coverage`` (``(s_b + s_m + s_e) / 3``), ``psi_pri``, ``psi_rec`` (shares in [0, 1]),
        ``estimate`` (mean of ``s_b - s_m``), ``ci_low``, ``ci_high`` (its 95 % t interval),
        ``t``, ``dof``, ``p_val`` (``scipy.stats.ttest_rel(s_b, s_m)``, two-sided; NaN when
        undefined: fewer than two items or constant differences).

    Examples
    --------
    >>> sims = pd.DataFrame({"model": "m", "s_b": [0.9, 0.5], "s_m": [0.5, 0.5], "s_e": [0.1, 0.6]})
    >>> primacy_scores(sims)[["n", "psi_pri", "psi_rec"]].to_dict("records")
    [{'n': 2, 'psi_pri': 0.5, 'psi_rec': 0.5}]
    """
    keys = [c for c in by if c in sims.columns]
    rows = []
    for key_vals, g in each_group(sims, keys):
        s_b, s_m, s_e = (g[c].to_numpy(dtype=float) for c in ("s_b", "s_m", "s_e"))
        row = dict(key_vals)
        row.update(
            n=len(g),
            s_b=s_b.mean(),
            s_m=s_m.mean(),
            s_e=s_e.mean(),
            coverage=(s_b.mean() + s_m.mean() + s_e.mean()) / 3,
            psi_pri=float(np.mean(s_b > s_m + alpha)),
            psi_rec=float(np.mean(s_e > s_m + alpha)),
            **_paired_t(s_b, s_m),
        )
        rows.append(row)
    return pd.DataFrame(rows)


def primacy_mean_of_means(
    scores: pd.DataFrame, *, over: Sequence[str] = ("model", "dataset")
) -> pd.DataFrame:
    """Unweighted mean of ψpri, ψrec and the mean similarities across model–dataset pairs.

    The paper's headline ψpri (like φframe) is a mean of the per model–dataset values, each
    pair counting once whatever its number of items, not a share pooled over all items.

    Parameters
    ----------
    scores : pandas.DataFrame
        Output of :func:`primacy_scores`.
    over : sequence of str, default ("model", "dataset")
        Columns averaged over; the other grouping columns (e.g. ``method``) are kept.

    Returns
    -------
    pandas.DataFrame
        One row per remaining group: those columns, ``n_pairs`` (groups averaged), and the
        means of ``s_b``, ``s_m``, ``s_e``, ``coverage``, ``psi_pri`` and ``psi_rec``.

    Examples
    --------
    >>> scores = pd.DataFrame({"model": ["a", "b"], "n": [1, 3], "s_b": [0.9, 0.5],
    ...     "s_m": [0.5, 0.5], "s_e": [0.1, 0.5], "coverage": [0.5, 0.5],
    ...     "psi_pri": [1.0, 0.0], "psi_rec": [0.0, 0.0]})
    >>> primacy_mean_of_means(scores)[["n_pairs", "psi_pri"]].to_dict("records")
    [{'n_pairs': 2, 'psi_pri': 0.5}]
    """
    values = ["s_b", "s_m", "s_e", "coverage", "psi_pri", "psi_rec"]
    rest = [c for c in PRIMACY_GROUPS if c in scores.columns and c not in over]
    return group_means(scores, rest, values, "n_pairs")
