"""Framing change: how often does a summary's framing differ from its source's?

Framing labels come from ``judge-framing`` records (``label`` positive/negative/neutral/other).
Source judgments judge the source item; summary judgments judge a summarize record (their
``input`` is that whole record, so ``input.model`` is the summarizer). φframe is the share of
items whose source label differs from the summary label, among items where both labels are
positive, negative or neutral.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.metrics.records import each_group, group_means

__all__ = [
    "FRAMING_GROUPS",
    "LABELS",
    "TRANSITIONS",
    "TRANSITION_COLUMNS",
    "framing_change",
    "framing_mean_of_means",
    "join_framing",
    "transition_matrix",
]

LABELS = ("positive", "negative", "neutral")
FRAMING_GROUPS = ("model", "dataset", "method")
# The six off-diagonal transitions in the order the literature tabulates them.
TRANSITIONS = (
    ("neutral", "positive"),
    ("neutral", "negative"),
    ("positive", "negative"),
    ("negative", "positive"),
    ("positive", "neutral"),
    ("negative", "neutral"),
)
_SHORT = {"positive": "pos", "negative": "neg", "neutral": "neu"}


def _transition_column(src: str, dst: str) -> str:
    return f"{_SHORT[src]}_to_{_SHORT[dst]}_pct"


TRANSITION_COLUMNS = tuple(_transition_column(*t) for t in TRANSITIONS)


def _get(data: pd.DataFrame, name: str) -> pd.Series:
    if name in data.columns:
        return data[name]
    return pd.Series([None] * len(data), index=data.index, dtype=object)


def join_framing(judgments: pd.DataFrame, *, match_judge: bool = True) -> pd.DataFrame:
    """Pair each summary's framing judgment with its source's.

    Parameters
    ----------
    judgments : pandas.DataFrame
        ``judge-framing`` records as read by :func:`analysis.metrics.records.read_records`
        (source and summary judgments together; other tasks are ignored). A record judges a
        summary when its ``input.task`` is ``summarize``.
    match_judge : bool, default True
        Join only judgments by the same judge model. Set False when sources were judged by a
        different model than summaries (then each item needs one source judgment).

    Returns
    -------
    pandas.DataFrame
        One row per summary judgment with a matching source judgment: ``item_id``, ``dataset``,
        ``model`` (the summarizer), ``method``, ``judge``, ``source_label``, ``summary_label``.
    """
    if "task" in judgments.columns:
        judgments = judgments.loc[judgments["task"] == "judge-framing"]
    is_summary = _get(judgments, "input.task").eq("summarize").to_numpy()
    src = pd.DataFrame(
        {
            "item_id": judgments["item_id"],
            "dataset": _get(judgments, "dataset"),
            "judge": judgments["model"],
            "source_label": judgments["label"],
        }
    ).loc[~is_summary]
    summ_rows = judgments.loc[is_summary]
    summ = pd.DataFrame(
        {
            "item_id": _get(summ_rows, "input.item_id"),
            "dataset": _get(summ_rows, "input.dataset"),
            "model": _get(summ_rows, "input.model"),
            "method": _get(summ_rows, "input.method"),
            "judge": summ_rows["model"],
            "summary_label": summ_rows["label"],
        }
    )
    keys = ["item_id", "dataset"] + (["judge"] if match_judge else [])
    # A re-judged source keeps its latest label.
    src = src.drop_duplicates(keys, keep="last")
    if not match_judge:
        src = src.drop(columns="judge")
    for frame in (src, summ):
        frame["item_id"] = frame["item_id"].astype(str)
        frame["dataset"] = frame["dataset"].astype(object).where(frame["dataset"].notna(), "")
    out = summ.merge(src, on=keys, how="inner", validate="many_to_one")
    cols = ["item_id", "dataset", "model", "method", "judge", "source_label", "summary_label"]
    return out[cols].reset_index(drop=True)


def framing_change(
    pairs: pd.DataFrame,
    *,
    by: Sequence[str] = FRAMING_GROUPS,
    source: str = "source_label",
    summary: str = "summary_label",
) -> pd.DataFrame:
    """φframe and the six off-diagonal framing transitions per group.

    Parameters
    ----------
    pairs : pandas.DataFrame
        One row per (source, summary) with both labels (e.g. from :func:`join_framing`).
    by : sequence of str
        Grouping columns; absent ones are ignored.
    source, summary : str
        Label columns. Labels are compared lower-case; pairs where either label is not
        positive/negative/neutral are left out and counted in ``n_other``.

    Returns
    -------
    pandas.DataFrame
        One row per group: the ``by`` columns, ``n`` (pairs with valid labels), ``n_other``,
        ``n_changed``, ``phi_frame`` (share changed, in [0, 1]) and the six transitions as
        percentages of ``n``: ``neu_to_pos_pct``, ``neu_to_neg_pct``, ``pos_to_neg_pct``,
        ``neg_to_pos_pct``, ``pos_to_neu_pct``, ``neg_to_neu_pct`` (they sum to
        ``100 * phi_frame``).

    Examples
    --------
    >>> pairs = pd.DataFrame({"model": "m", "source_label": ["positive", "neutral", "negative"],
    ...                       "summary_label": ["positive", "positive", "other"]})
    >>> framing_change(pairs)[["n", "n_other", "phi_frame", "neu_to_pos_pct"]].to_dict("records")
    [{'n': 2, 'n_other': 1, 'phi_frame': 0.5, 'neu_to_pos_pct': 50.0}]
    """
    df = pairs.copy()
    df["_src"] = df[source].astype(str).str.lower()
    df["_dst"] = df[summary].astype(str).str.lower()
    valid = df["_src"].isin(LABELS) & df["_dst"].isin(LABELS)
    df["_valid"] = valid
    keys = [c for c in by if c in df.columns]
    rows = []
    for key_vals, g in each_group(df, keys):
        ok = g.loc[g["_valid"]]
        n = len(ok)
        row = dict(key_vals)
        changed = int((ok["_src"] != ok["_dst"]).sum())
        row.update(
            n=n,
            n_other=int((~g["_valid"]).sum()),
            n_changed=changed,
            phi_frame=changed / n if n else np.nan,
        )
        for src, dst in TRANSITIONS:
            count = int(((ok["_src"] == src) & (ok["_dst"] == dst)).sum())
            row[_transition_column(src, dst)] = 100 * count / n if n else np.nan
        rows.append(row)
    columns = [*keys, "n", "n_other", "n_changed", "phi_frame"]
    return pd.DataFrame(rows, columns=columns + list(TRANSITION_COLUMNS))


def framing_mean_of_means(
    table: pd.DataFrame, *, over: Sequence[str] = ("model", "dataset")
) -> pd.DataFrame:
    """Unweighted mean of φframe and the transitions across model–dataset pairs.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`framing_change`.
    over : sequence of str
        The columns whose combinations are averaged over; the remaining grouping columns of
        ``table`` (e.g. ``method``) are kept.

    Returns
    -------
    pandas.DataFrame
        One row per remaining group: those columns, ``n_pairs`` (groups averaged), ``phi_frame``
        and the six ``*_pct`` transition columns (each the mean of the per-group values).
    """
    value_cols = ["phi_frame", *TRANSITION_COLUMNS]
    rest = [c for c in FRAMING_GROUPS if c in table.columns and c not in over]
    return group_means(table, rest, value_cols, "n_pairs")


def transition_matrix(
    pairs: pd.DataFrame, *, source: str = "source_label", summary: str = "summary_label"
) -> pd.DataFrame:
    """3 x 3 table of counts: rows are source labels, columns summary labels.

    Returns
    -------
    pandas.DataFrame
        Index ``source`` and columns ``positive``, ``negative``, ``neutral`` (counts).
    """
    src = pairs[source].astype(str).str.lower()
    dst = pairs[summary].astype(str).str.lower()
    keep = src.isin(LABELS) & dst.isin(LABELS)
    table = pd.crosstab(pd.Categorical(src[keep], LABELS), pd.Categorical(dst[keep], LABELS))
    table = table.reindex(index=list(LABELS), columns=list(LABELS), fill_value=0)
    table.index.name, table.columns.name = "source", "summary"
    return table
