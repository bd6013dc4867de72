"""Hallucination on news: fact-check accuracy before and after a model's knowledge cutoff.

Fact-check items come in (true, negated) pairs sharing a ``pair_id``; the model answers
``true``/``false`` (anything else counts as wrong). Actual-news accuracy is the share of true items
answered ``true``; falsified-news accuracy the share of negated items answered ``false``; strict
accuracy s_TH the share of complete pairs with both answered correctly. Items dated on or before the
model's cutoff are ``pre``, later ones ``post``; δH = |s_TH(pre) − s_TH(post)|.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

import numpy as np
import pandas as pd

__all__ = ["confidence_breakdown", "hallucination_gap", "hallucination_scores", "parse_truth"]

_TRUE = {"true", "1", "yes", "t", "actual", "real"}
_FALSE = {"false", "0", "no", "f", "negated", "falsified", "fake"}


def parse_truth(value: object) -> bool:
    """Read a truth value: a bool, 0/1, or one of true/false/actual/falsified/… (any case).

    Examples
    --------
    >>> [parse_truth(v) for v in (True, "False", 1, "negated")]
    [True, False, True, False]
    """
    if isinstance(value, bool | np.bool_):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"not a truth value: {value!r}")


def _answers(data: pd.DataFrame, *, model: str, truth: str, label: str) -> pd.DataFrame:
    """Model, truth value, normalised label and correctness of each answer."""
    df = pd.DataFrame(
        {
            "model": data[model].astype(str).to_numpy(),
            "truth": [parse_truth(v) for v in data[truth]],
            "label": data[label].astype(str).str.strip().str.lower().to_numpy(),
        }
    )
    df["correct"] = np.where(df["truth"], df["label"] == "true", df["label"] == "false")
    return df


def _prepare(
    data: pd.DataFrame,
    *,
    cutoffs: Mapping[str, str | date] | None,
    model: str,
    pair: str,
    truth: str,
    date_col: str,
    label: str,
) -> pd.DataFrame:
    df = _answers(data, model=model, truth=truth, label=label)
    df["pair_id"] = data[pair].astype(str).to_numpy()
    df["period"] = "all"
    if cutoffs:
        when = pd.to_datetime(data[date_col], utc=True).dt.tz_localize(None).to_numpy()
        cut = pd.to_datetime(df["model"].map({str(k): v for k, v in cutoffs.items()}), utc=True)
        cut = cut.dt.tz_localize(None).to_numpy()
        has_cut = ~pd.isna(cut)
        df.loc[has_cut, "period"] = np.where(when[has_cut] <= cut[has_cut], "pre", "post")
    return df


def hallucination_scores(
    data: pd.DataFrame,
    *,
    cutoffs: Mapping[str, str | date] | None = None,
    model: str = "model",
    pair: str = "pair_id",
    truth: str = "truth",
    date: str = "date",
    label: str = "label",
) -> pd.DataFrame:
    """Actual, falsified and strict accuracy per model and period.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per fact-check answer.
    cutoffs : mapping, optional
        Model -> knowledge cutoff date. Models without a cutoff get period ``all`` only.
    model, pair, truth, date, label : str
        Columns: the model, the pair ID shared by a true item and its negation, the item's truth
        value, its news date (ISO) and the parsed answer (``true``/``false``/``other``).

    Returns
    -------
    pandas.DataFrame
        One row per (model, period) with period ``pre``/``post`` (when the model has a cutoff) and
        ``all``: ``model``, ``period``, ``n_true``, ``n_false`` (items), ``actual_acc``,
        ``falsified_acc``, ``n_pairs`` (complete pairs), ``strict_acc`` (s_TH). A pair's period is
        that of its items; a pair whose items straddle the cutoff is left out of strict accuracy.
    """
    df = _prepare(
        data, cutoffs=cutoffs, model=model, pair=pair, truth=truth, date_col=date, label=label
    )
    frames = [df.assign(period="all")]
    if (df["period"] != "all").any():
        frames.insert(0, df.loc[df["period"] != "all"])
    rows = []
    for (mdl, period), g in pd.concat(frames).groupby(["model", "period"], sort=True):
        pairs = g.groupby("pair_id").agg(
            has_true=("truth", "any"),
            has_false=("truth", lambda s: (~s).any()),
            all_correct=("correct", "all"),
        )
        complete = pairs.loc[pairs["has_true"] & pairs["has_false"]]
        t, f = g.loc[g["truth"]], g.loc[~g["truth"]]
        rows.append(
            {
                "model": mdl,
                "period": period,
                "n_true": len(t),
                "n_false": len(f),
                "actual_acc": t["correct"].mean() if len(t) else np.nan,
                "falsified_acc": f["correct"].mean() if len(f) else np.nan,
                "n_pairs": len(complete),
                "strict_acc": complete["all_correct"].mean() if len(complete) else np.nan,
            }
        )
    order = {"pre": 0, "post": 1, "all": 2}
    out = pd.DataFrame(rows)
    out = out.sort_values(
        ["model", "period"], key=lambda s: s.map(order) if s.name == "period" else s
    )
    return out.reset_index(drop=True)


def hallucination_gap(scores: pd.DataFrame) -> pd.DataFrame:
    """δH = |s_pre − s_post| per model from :func:`hallucination_scores`.

    Returns
    -------
    pandas.DataFrame
        ``model``, ``s_pre``, ``s_post`` (strict accuracy before/after the cutoff) and
        ``delta_h`` (NaN when a period is missing).
    """
    wide = scores.pivot_table(index="model", columns="period", values="strict_acc", aggfunc="first")
    wide = wide.reindex(columns=["pre", "post"])
    out = pd.DataFrame(
        {"model": wide.index, "s_pre": wide["pre"].to_numpy(), "s_post": wide["post"].to_numpy()}
    )
    out["delta_h"] = (out["s_pre"] - out["s_post"]).abs()
    return out


def confidence_breakdown(
    data: pd.DataFrame,
    *,
    model: str = "model",
    truth: str = "truth",
    label: str = "label",
    confidence: str = "confidence",
) -> pd.DataFrame:
    """Accuracy by confidence tag (high/low) per model and truth value.

    Returns
    -------
    pandas.DataFrame
        One row per (model, truth, confidence): ``model``, ``truth`` (bool), ``confidence``
        (``high``, ``low`` or ``none`` when untagged), ``n``, ``share`` (of the model's items
        with that truth value) and ``accuracy``.
    """
    df = _answers(data, model=model, truth=truth, label=label)
    tags = data[confidence] if confidence in data.columns else pd.Series("none", index=data.index)
    df["confidence"] = tags.fillna("none").astype(str).str.lower().to_numpy()
    out = (
        df.groupby(["model", "truth", "confidence"], sort=True)
        .agg(n=("correct", "size"), accuracy=("correct", "mean"))
        .reset_index()
    )
    totals = out.groupby(["model", "truth"])["n"].transform("sum")
    out.insert(4, "share", out["n"] / totals)
    return out
