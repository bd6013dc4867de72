"""Hallucination on news: fact-check accuracy before and after a model's knowledge cutoff.

Fact-check items come in (true, negated) pairs sharing a ``pair_id``; the model answers
``true``/``false`` (anything else counts as wrong). Actual-news accuracy is the share of true items
answered ``true``; falsified-news accuracy the share of negated items answered ``false``; strict
accuracy s_TH the share of complete pairs with both answered correctly. Items dated on or before the
model's cutoff are ``pre``, later ones ``post``; δH = |s_TH(pre) − s_TH(post)|.

The seed study's headline, "hallucinates on 60.33 % of post-cutoff questions" (000 abstract), is
1 − actual-news accuracy after the cutoff, averaged over its three models (Table 4: 75 %, 35 %
and 9 % give 1 − 39.67 % = 60.33 %), not 1 − s_TH (that would be 85.33 %).
:func:`add_error_rates` names both: ``actual_news_error_rate`` and ``strict_error_rate``.

Every score is per model × method × template × period (:data:`HALLUCINATION_GROUPS`, the columns a
file has): pooling two prompt templates or two mitigation methods into one group would pair the
answers of one with those of the other. An item without a date is never guessed into a period:
it is reported as ``undated`` (or refused, ``undated="refuse"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date

import numpy as np
import pandas as pd

__all__ = [
    "HALLUCINATION_GROUPS",
    "PERIODS",
    "add_error_rates",
    "confidence_breakdown",
    "hallucination_gap",
    "hallucination_mean_of_means",
    "hallucination_scores",
    "parse_truth",
]

# Answers are compared only within one model, mitigation method and prompt template.
HALLUCINATION_GROUPS = ("model", "method", "template")
PERIODS = ("pre", "post", "undated", "all")

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


def _group_columns(data: pd.DataFrame, model: str, by: Sequence[str]) -> list[str]:
    """The grouping columns present in ``data`` (``model`` is required)."""
    if model not in data.columns:
        raise KeyError(f"no column {model!r} with the model")
    return [c for c in by if c == "model" or c in data.columns]


def _truths(data: pd.DataFrame, truth: str, item: str = "item_id") -> list[bool]:
    """Parse the truth column; a bad value is reported with its file, item and field."""
    values = []
    for row, value in enumerate(data[truth]):
        try:
            values.append(parse_truth(value))
        except ValueError:
            where = ""
            if "source_file" in data.columns and isinstance(data["source_file"].iloc[row], str):
                where = f"{data['source_file'].iloc[row]}: "
            label = data[item].iloc[row] if item in data.columns else f"row {row}"
            missing = value is None or (isinstance(value, float) and value != value)
            what = "has no value" if missing else f"is {value!r}, not a truth value"
            hint = (
                " (a record written before the input had it? re-run into a fresh output)"
                if missing
                else " (use true/false, 1/0, actual/falsified)"
            )
            raise ValueError(f"{where}item {label!r}: field {truth!r} {what}{hint}") from None
    return values


def _answers(
    data: pd.DataFrame, *, model: str, truth: str, label: str, by: Sequence[str] = ("model",)
) -> pd.DataFrame:
    """Group columns, truth value, normalised label and correctness of each answer."""
    df = pd.DataFrame(index=range(len(data)))
    for col in _group_columns(data, model, by):
        source = data[model if col == "model" else col]
        df[col] = source.fillna("").astype(str).to_numpy()
    df["truth"] = _truths(data, truth)
    df["label"] = data[label].astype(str).str.strip().str.lower().to_numpy()
    df["correct"] = np.where(df["truth"], df["label"] == "true", df["label"] == "false")
    return df


def _periods(
    data: pd.DataFrame,
    models: pd.Series,
    *,
    cutoffs: Mapping[str, str | date] | None,
    date_col: str,
    undated: str,
    item: str = "item_id",
) -> np.ndarray:
    """``pre``/``post``/``undated`` for models with a cutoff, ``all`` for the others."""
    if undated not in ("report", "refuse"):
        raise ValueError(f"undated must be 'report' or 'refuse', got {undated!r}")
    period = np.full(len(data), "all", dtype=object)
    if not cutoffs:
        return period
    raw = data[date_col] if date_col in data.columns else pd.Series(None, index=data.index)
    when = pd.to_datetime(raw, utc=True).dt.tz_localize(None).to_numpy()
    cut = pd.to_datetime(models.map({str(k): v for k, v in cutoffs.items()}), utc=True)
    cut = cut.dt.tz_localize(None).to_numpy()
    has_cut, no_date = ~pd.isna(cut), pd.isna(when)
    missing = has_cut & no_date
    if missing.any() and undated == "refuse":
        row = int(np.flatnonzero(missing)[0])
        label = data[item].iloc[row] if item in data.columns else row
        raise ValueError(
            f"{int(missing.sum())} fact-check item(s) have no {date_col!r} (first: item "
            f"{label!r}), so they are neither before nor after the cutoff; add dates, or "
            "report them as 'undated'"
        )
    dated = has_cut & ~no_date
    period[dated] = np.where(when[dated] <= cut[dated], "pre", "post")
    period[missing] = "undated"
    return period


def _prepare(
    data: pd.DataFrame,
    *,
    cutoffs: Mapping[str, str | date] | None,
    model: str,
    pair: str,
    truth: str,
    date_col: str,
    label: str,
    by: Sequence[str] = HALLUCINATION_GROUPS,
    undated: str = "report",
) -> pd.DataFrame:
    df = _answers(data, model=model, truth=truth, label=label, by=by)
    df["pair_id"] = data[pair].astype(str).to_numpy()
    df["period"] = _periods(data, df["model"], cutoffs=cutoffs, date_col=date_col, undated=undated)
    return df


def _sort_periods(out: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    order = {p: i for i, p in enumerate(PERIODS)}
    return out.sort_values(
        [*keys, "period"], key=lambda s: s.map(order) if s.name == "period" else s
    ).reset_index(drop=True)


def hallucination_scores(
    data: pd.DataFrame,
    *,
    cutoffs: Mapping[str, str | date] | None = None,
    model: str = "model",
    pair: str = "pair_id",
    truth: str = "truth",
    date: str = "date",
    label: str = "label",
    by: Sequence[str] = HALLUCINATION_GROUPS,
    undated: str = "report",
) -> pd.DataFrame:
    """Actual, falsified and strict accuracy per model × method × template and period.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per fact-check answer.
    cutoffs : mapping, optional
        Model -> knowledge cutoff date. Models without a cutoff get period ``all`` only.
    model, pair, truth, date, label : str
        Columns: the model, the pair ID shared by a true item and its negation, the item's truth
        value, its news date (ISO) and the parsed answer (``true``/``false``/``other``).
    by : sequence of str, default ("model", "method", "template")
        Grouping columns; those missing from ``data`` (other than ``model``) are skipped.
    undated : {"report", "refuse"}, default "report"
        Items without a date, for a model with a cutoff: period ``undated``, or a ValueError
        naming the first one. They were counted as post-cutoff before.

    Returns
    -------
    pandas.DataFrame
        One row per group and period, period ``pre``/``post``/``undated`` (when the model has a
        cutoff) and ``all``: the ``by`` columns, ``period``, ``n_true``, ``n_false`` (items),
        ``actual_acc``, ``falsified_acc``, ``n_pairs`` (complete pairs), ``strict_acc`` (s_TH).
        A pair's period is that of its items; a pair whose items straddle the cutoff (or have
        one dated and one undated item) is left out of strict accuracy.

    Examples
    --------
    >>> data = pd.DataFrame({"model": "m", "template": ["a", "a", "b", "b"],
    ...                      "pair_id": ["1", "1", "1", "1"], "truth": [True, False] * 2,
    ...                      "label": ["true", "false", "true", "true"]})
    >>> hallucination_scores(data)[["template", "strict_acc"]].to_dict("records")
    [{'template': 'a', 'strict_acc': 1.0}, {'template': 'b', 'strict_acc': 0.0}]
    """
    df = _prepare(
        data, cutoffs=cutoffs, model=model, pair=pair, truth=truth, date_col=date, label=label,
        by=by, undated=undated,
    )  # fmt: skip
    keys = [c for c in by if c in df.columns]
    frames = [df.assign(period="all")]
    if (df["period"] != "all").any():
        frames.insert(0, df.loc[df["period"] != "all"])
    rows = []
    for key, g in pd.concat(frames).groupby([*keys, "period"], sort=True):
        group = dict(zip([*keys, "period"], key, strict=True))
        pairs = g.groupby("pair_id").agg(
            has_true=("truth", "any"),
            has_false=("truth", lambda s: (~s).any()),
            all_correct=("correct", "all"),
        )
        complete = pairs.loc[pairs["has_true"] & pairs["has_false"]]
        t, f = g.loc[g["truth"]], g.loc[~g["truth"]]
        rows.append(
            {
                **group,
                "n_true": len(t),
                "n_false": len(f),
                "actual_acc": t["correct"].mean() if len(t) else np.nan,
                "falsified_acc": f["correct"].mean() if len(f) else np.nan,
                "n_pairs": len(complete),
                "strict_acc": complete["all_correct"].mean() if len(complete) else np.nan,
            }
        )
    return _sort_periods(pd.DataFrame(rows), keys)


def add_error_rates(scores: pd.DataFrame) -> pd.DataFrame:
    """Add the two error rates to a table with ``actual_acc`` and ``strict_acc``.

    Returns
    -------
    pandas.DataFrame
        A copy with ``actual_news_error_rate`` (1 − ``actual_acc``: the share of real news the
        model calls false; in the ``post`` rows, averaged over models, the seed study's headline
        hallucination figure) and ``strict_error_rate`` (1 − ``strict_acc``, 1 − s_TH).

    Examples
    --------
    >>> add_error_rates(pd.DataFrame({"actual_acc": [0.75], "strict_acc": [0.21]})).round(2)
       actual_acc  strict_acc  actual_news_error_rate  strict_error_rate
    0        0.75        0.21                    0.25               0.79
    """
    return scores.assign(
        actual_news_error_rate=1.0 - scores["actual_acc"],
        strict_error_rate=1.0 - scores["strict_acc"],
    )


def hallucination_gap(scores: pd.DataFrame) -> pd.DataFrame:
    """δH = |s_pre − s_post| per group from :func:`hallucination_scores`.

    Returns
    -------
    pandas.DataFrame
        The group columns of ``scores`` (model, method, template as present), ``s_pre``,
        ``s_post`` (strict accuracy before/after the cutoff) and ``delta_h`` (NaN when a period
        is missing).
    """
    keys = [c for c in HALLUCINATION_GROUPS if c in scores.columns]
    out = scores.loc[scores["period"].isin(["pre", "post"])]
    wide = out.pivot_table(index=keys, columns="period", values="strict_acc", aggfunc="first")
    wide = wide.reindex(columns=["pre", "post"])
    index = scores[keys].drop_duplicates().set_index(keys).index
    wide = wide.reindex(index).reset_index()
    wide.columns.name = None
    wide = wide.rename(columns={"pre": "s_pre", "post": "s_post"})
    wide["delta_h"] = (wide["s_pre"] - wide["s_post"]).abs()
    return wide.sort_values(keys).reset_index(drop=True)


def hallucination_mean_of_means(
    scores: pd.DataFrame, *, over: Sequence[str] = ("model",)
) -> pd.DataFrame:
    """Unweighted mean of the per-model accuracies and δH, as φframe's mean of means.

    The paper's headline hallucination figures average over models, each model counting once
    whatever its number of items (like φframe's mean over model–dataset pairs).

    Parameters
    ----------
    scores : pandas.DataFrame
        Output of :func:`hallucination_scores`.
    over : sequence of str, default ("model",)
        Columns averaged over; the other group columns (method, template) are kept.

    Returns
    -------
    pandas.DataFrame
        One row per remaining group and period: those columns, ``period``, ``n_means`` (groups
        averaged, those with a value of ``strict_acc``), ``actual_acc``, ``falsified_acc``,
        ``strict_acc``, ``actual_news_error_rate`` and ``strict_error_rate`` (one minus the
        means: the ``post`` row's ``actual_news_error_rate`` is the seed study's headline); and
        in the ``pre``/``post`` rows ``delta_h``, the mean over models of each model's δH (NaN
        in the other rows).
    """
    keys = [c for c in HALLUCINATION_GROUPS if c in scores.columns and c not in over]
    values = ["actual_acc", "falsified_acc", "strict_acc"]
    grouped = scores.groupby([*keys, "period"], sort=True, dropna=False)
    out = grouped[values].mean().reset_index()
    out.insert(len(keys) + 1, "n_means", grouped["strict_acc"].count().to_numpy())
    gap = hallucination_gap(scores)
    delta = gap.groupby(keys, sort=True)["delta_h"].mean() if keys else gap["delta_h"].mean()
    if keys:
        mapped = out.set_index(keys).index.map(delta.to_dict().get)
        out["delta_h"] = np.asarray(mapped, dtype=float)
    else:
        out["delta_h"] = delta
    out.loc[~out["period"].isin(["pre", "post"]), "delta_h"] = np.nan
    return _sort_periods(add_error_rates(out), keys)


def confidence_breakdown(
    data: pd.DataFrame,
    *,
    cutoffs: Mapping[str, str | date] | None = None,
    model: str = "model",
    truth: str = "truth",
    label: str = "label",
    confidence: str = "confidence",
    date: str = "date",
    by: Sequence[str] = HALLUCINATION_GROUPS,
    undated: str = "report",
) -> pd.DataFrame:
    """Accuracy by confidence tag (high/low) per group, period and truth value.

    The paper breaks the confidence of answers down before and after the knowledge cutoff;
    periods follow :func:`hallucination_scores` (``pre``/``post``/``undated`` for models with a
    cutoff, and ``all``).

    Returns
    -------
    pandas.DataFrame
        One row per (group, period, truth, confidence): the ``by`` columns present, ``period``,
        ``truth`` (bool), ``confidence`` (``high``, ``low`` or ``none`` when untagged), ``n``,
        ``share`` (of the group's items in that period with that truth value) and ``accuracy``.
    """
    df = _answers(data, model=model, truth=truth, label=label, by=by)
    df["period"] = _periods(data, df["model"], cutoffs=cutoffs, date_col=date, undated=undated)
    tags = data[confidence] if confidence in data.columns else pd.Series("none", index=data.index)
    df["confidence"] = tags.fillna("none").astype(str).str.lower().to_numpy()
    frames = [df.assign(period="all")]
    if (df["period"] != "all").any():
        frames.insert(0, df.loc[df["period"] != "all"])
    keys = [c for c in by if c in df.columns]
    out = (
        pd.concat(frames)
        .groupby([*keys, "period", "truth", "confidence"], sort=True)
        .agg(n=("correct", "size"), accuracy=("correct", "mean"))
        .reset_index()
    )
    totals = out.groupby([*keys, "period", "truth"])["n"].transform("sum")
    out.insert(len(keys) + 4, "share", out["n"] / totals)
    order = {p: i for i, p in enumerate(PERIODS)}
    return out.sort_values(
        [*keys, "period", "truth", "confidence"],
        key=lambda s: s.map(order) if s.name == "period" else s,
    ).reset_index(drop=True)
