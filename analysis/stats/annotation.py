"""Framing shifts in human and model sentiment labels.

A label *shifts* when it is the sentiment opposite to the item's base sentiment: WildFrame's
human score counts the annotators who vote for the sentiment of the opposite framing (002 §2.3),
so a ``neutral`` vote on a positive item is not a shift. Per item, the shift count is the number
of its K labels that shift (0..K); an item has a *majority shift* when at least ``ceil(K/2)`` of
them do (3 of 5). For humans and models alike ``shift_labels`` widens what counts: ``"neutral"``
(any departure from the base sentiment, for humans) and, for models, ``"other"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "annotator_stats",
    "majority_shift_rates",
    "model_shift_rates",
    "model_shifts",
    "shift_counts",
    "shift_distribution",
]

OPPOSITE = {"positive": "negative", "negative": "positive"}


def _shifted(labels: pd.Series, bases: pd.Series, shift_labels: Iterable[str]) -> pd.Series:
    """Whether each label is a shift: the opposite sentiment, plus the kinds asked for."""
    allowed = {"opposite", "neutral", "other"}
    kinds = set(shift_labels)
    if not kinds <= allowed:
        raise ValueError(f"shift_labels must be among {sorted(allowed)}, got {sorted(kinds)}")
    opposite = labels == bases.map(OPPOSITE)
    shift = opposite if "opposite" in kinds else opposite & False
    for extra in kinds - {"opposite"}:
        shift = shift | (labels == extra)
    return shift


def shift_counts(
    data: pd.DataFrame,
    *,
    item: str = "item_id",
    label: str = "label",
    base: str = "base_sentiment",
    shift_labels: Iterable[str] = ("opposite",),
) -> pd.DataFrame:
    """Per-item human shift count.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per (kept) label.
    item, label, base : str
        Column names.
    shift_labels : iterable of str, default ("opposite",)
        What counts as a shift: votes for the opposite sentiment (002 §2.3, the paper's count);
        add ``"neutral"`` to count every departure from the base sentiment.

    Returns
    -------
    pandas.DataFrame
        One row per item: ``item_id``, ``base_sentiment``, ``n_labels`` (K), ``shift_count``
        (labels that shift), ``n_opposite`` (labels of the opposite sentiment), ``n_neutral``,
        ``shift_share``, ``majority_shift`` (``shift_count >= ceil(K/2)``).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"item_id": ["a"] * 5, "base_sentiment": ["positive"] * 5,
    ...                    "label": ["negative", "neutral", "neutral", "positive", "positive"]})
    >>> shift_counts(df)[["shift_count", "majority_shift"]].values.tolist()
    [[1, False]]
    >>> wider = shift_counts(df, shift_labels=("opposite", "neutral"))
    >>> wider[["shift_count", "majority_shift"]].values.tolist()
    [[3, True]]
    """
    import numpy as np

    bases = data.groupby(item)[base].nunique()
    if (bases > 1).any():
        raise ValueError(f"items with more than one base sentiment: {list(bases[bases > 1].index)}")
    df = data[[item, label, base]].dropna().copy()
    df["_shift"] = _shifted(df[label], df[base], shift_labels)
    df["_opposite"] = df[label] == df[base].map(OPPOSITE)
    df["_neutral"] = df[label] == "neutral"
    out = df.groupby(item, sort=True).agg(
        base_sentiment=(base, "first"),
        n_labels=(label, "size"),
        shift_count=("_shift", "sum"),
        n_opposite=("_opposite", "sum"),
        n_neutral=("_neutral", "sum"),
    )
    out = out.reset_index().rename(columns={item: "item_id"})
    for col in ("n_labels", "shift_count", "n_opposite", "n_neutral"):
        out[col] = out[col].astype(int)
    out["shift_share"] = out["shift_count"] / out["n_labels"]
    out["majority_shift"] = out["shift_count"] >= np.ceil(out["n_labels"] / 2)
    return out


def shift_distribution(
    counts: pd.DataFrame, *, k: int | None = None, confidence: float = 0.95
) -> pd.DataFrame:
    """Share of items with 0..K shifts.

    Parameters
    ----------
    counts : pandas.DataFrame
        Output of :func:`shift_counts`.
    k : int, optional
        Labels per item; default the most common ``n_labels``. Only items with exactly ``k``
        labels are counted, so shares are comparable.
    confidence : float
        Coverage of the Wilson intervals.

    Returns
    -------
    pandas.DataFrame
        One row per shift count 0..k: ``shift_count``, ``n_items``, ``estimate`` (share),
        ``ci_low``, ``ci_high``, ``p_val`` (NaN).
    """
    import numpy as np
    import pandas as pd

    from analysis.stats.choice import wilson_ci

    if k is None:
        k = int(counts["n_labels"].mode().iloc[0]) if len(counts) else 0
    sel = counts[counts["n_labels"] == k]
    n = np.array([(sel["shift_count"] == s).sum() for s in range(k + 1)])
    total = len(sel)
    low, high = wilson_ci(n, np.full_like(n, total), confidence)
    return pd.DataFrame(
        {
            "shift_count": np.arange(k + 1),
            "n_items": n,
            "estimate": n / total if total else np.nan,
            "ci_low": low,
            "ci_high": high,
            "p_val": np.nan,
        }
    )


def _rates(flags: pd.DataFrame, by: list[str], flag: str, confidence: float) -> pd.DataFrame:
    from analysis.stats.choice import wilson_ci

    out = flags.groupby(by, sort=True)[flag].agg(n_items="size", n_shift="sum").reset_index()
    out["n_shift"] = out["n_shift"].astype(int)
    out["estimate"] = out["n_shift"] / out["n_items"]
    out["ci_low"], out["ci_high"] = wilson_ci(out["n_shift"], out["n_items"], confidence)
    out["p_val"] = float("nan")
    return out


def majority_shift_rates(
    counts: pd.DataFrame, *, by: str = "base_sentiment", confidence: float = 0.95
) -> pd.DataFrame:
    """Share of items with a human majority shift, by base sentiment, with Wilson intervals.

    Parameters
    ----------
    counts : pandas.DataFrame
        Output of :func:`shift_counts`.
    by : str
        Grouping column.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per group plus ``all``: ``base_sentiment``, ``n_items``, ``n_shift``,
        ``estimate``, ``ci_low``, ``ci_high``, ``p_val`` (NaN), ``source`` (``humans``).
    """
    import pandas as pd

    df = counts.assign(_flag=counts["majority_shift"].astype(int))
    per = _rates(df, [by], "_flag", confidence)
    total = _rates(df.assign(**{by: "all"}), [by], "_flag", confidence)
    out = pd.concat([per, total], ignore_index=True)
    out["source"] = "humans"
    return out


def model_shifts(
    predictions: pd.DataFrame,
    items: pd.DataFrame,
    *,
    shift_labels: Iterable[str] = ("opposite",),
) -> pd.DataFrame:
    """Each model's 0/1 shift per item, joined to the human shift count.

    Parameters
    ----------
    predictions : pandas.DataFrame
        ``item_id, model, label`` (``analysis.external.load_predictions``).
    items : pandas.DataFrame
        Output of :func:`shift_counts` (gives ``base_sentiment`` and ``shift_count``).
    shift_labels : iterable of str
        What counts as a model shift: ``"opposite"`` (the opposite sentiment; default), plus
        optionally ``"neutral"`` and/or ``"other"``.

    Returns
    -------
    pandas.DataFrame
        One row per (model, item) present in both inputs: ``item_id``, ``model``, ``label``,
        ``base_sentiment``, ``shift`` (0/1), ``shift_count`` (human).
    """
    df = predictions.merge(
        items[["item_id", "base_sentiment", "shift_count"]], on="item_id", how="inner"
    )
    df["shift"] = _shifted(df["label"], df["base_sentiment"], shift_labels).astype(int)
    return df[["item_id", "model", "label", "base_sentiment", "shift", "shift_count"]]


def model_shift_rates(
    shifts: pd.DataFrame, *, by: str = "base_sentiment", confidence: float = 0.95
) -> pd.DataFrame:
    """Share of items each model shifts, by base sentiment, with Wilson intervals.

    Parameters
    ----------
    shifts : pandas.DataFrame
        Output of :func:`model_shifts`.
    by : str
        Grouping column.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per (model, group) plus each model's ``all`` row: ``source`` (the model),
        ``base_sentiment``, ``n_items``, ``n_shift``, ``estimate``, ``ci_low``, ``ci_high``,
        ``p_val`` (NaN).
    """
    import pandas as pd

    per = _rates(shifts, ["model", by], "shift", confidence)
    total = _rates(shifts.assign(**{by: "all"}), ["model", by], "shift", confidence)
    out = pd.concat([per, total], ignore_index=True).rename(columns={"model": "source"})
    return out.sort_values(["source", by], kind="stable").reset_index(drop=True)


def annotator_stats(
    data: pd.DataFrame,
    *,
    rater: str = "participant_id",
    item: str = "item_id",
    label: str = "label",
    base: str = "base_sentiment",
) -> pd.DataFrame:
    """Per-annotator flip rate and agreement with the other annotators' majority.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per (kept) label.
    rater, item, label, base : str
        Column names.

    Returns
    -------
    pandas.DataFrame
        One row per annotator: ``participant_id``, ``n_labels``, ``flip_rate`` (share of labels
        != base sentiment), ``n_compared`` (labels on items where the *other* annotators have a
        strict majority label), ``agreement_with_majority`` (share of those equal to it; leaving
        the annotator out keeps their own label from inflating the figure).
    """
    import numpy as np
    import pandas as pd

    df = data[[rater, item, label, base]].dropna().reset_index(drop=True)
    counts = df.groupby([item, label]).size().rename("n").reset_index()
    wide = counts.pivot_table(index=item, columns=label, values="n", fill_value=0)
    labels = list(wide.columns)
    mat = np.array(wide.loc[df[item]].to_numpy(dtype=float))  # writable copy
    own = np.array([labels.index(v) for v in df[label]])
    mat[np.arange(len(df)), own] -= 1  # leave this annotator out
    top = mat.max(axis=1)
    strict = (mat == top[:, None]).sum(axis=1) == 1
    strict &= top > 0
    majority = np.array(labels, dtype=object)[mat.argmax(axis=1)]
    df["_flip"] = (df[label] != df[base]).astype(float)
    df["_cmp"] = strict
    df["_agree"] = np.where(strict, (majority == df[label].to_numpy()).astype(float), np.nan)
    out = df.groupby(rater, sort=True).agg(
        n_labels=(label, "size"),
        flip_rate=("_flip", "mean"),
        n_compared=("_cmp", "sum"),
        agreement_with_majority=("_agree", "mean"),
    )
    out["n_compared"] = out["n_compared"].astype(int)
    return pd.DataFrame(out).reset_index().rename(columns={rater: "participant_id"})
