"""Summary ratings on Likert scales: means per system and dimension, rater agreement, and the
rank correlation of automatic metrics with human ratings (:func:`kendall_tau`, from
:mod:`analysis.stats.correlation`).

Input is long: one row per (rater, summary, dimension) with an integer rating, as the platform's
``summary_rating`` export (``docs/export.md``) writes it. A *summary* (``summary_id``) is one
system's summary of one source; it is the target raters agree or disagree on.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from analysis.stats.correlation import kendall_tau

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "kendall_tau",
    "metric_rating_tau",
    "rating_alpha",
    "rating_icc",
    "rating_means",
    "summary_means",
]


def _t_interval(values, confidence: float) -> tuple[float, float, float, float]:
    """Mean, standard deviation and t interval of a sample (NaN interval for n < 2)."""
    import numpy as np
    from scipy.stats import t

    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if len(x) == 0:
        return np.nan, np.nan, np.nan, np.nan
    mean = float(x.mean())
    if len(x) < 2:
        return mean, np.nan, np.nan, np.nan
    sd = float(x.std(ddof=1))
    half = float(t.ppf(0.5 + confidence / 2, len(x) - 1)) * sd / np.sqrt(len(x))
    return mean, sd, mean - half, mean + half


def rating_means(
    data: pd.DataFrame,
    *,
    dv: str = "rating",
    system: str = "system",
    dimension: str = "dimension",
    unit: str | None = "summary_id",
    by: Sequence[str] = (),
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Mean rating per system and dimension with a t confidence interval.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per rating.
    dv, system, dimension : str
        Columns of the rating, the system that wrote the summary and the rated dimension.
    unit : str or None, default "summary_id"
        Average the ratings of each unit first and build the interval over units. Several raters
        rate the same summary, so their ratings are not independent; the interval over summaries
        is the honest one. ``None`` treats every rating as independent.
    by : sequence of str
        Extra grouping columns (e.g. ``("perspective",)`` for the per-perspective split).
    confidence : float
        Coverage of the interval.

    Returns
    -------
    pandas.DataFrame
        One row per (``by``..., system, dimension): the grouping columns, ``n`` (units, or ratings
        when ``unit`` is None), ``n_ratings``, ``estimate`` (mean), ``sd`` (over units),
        ``ci_low``, ``ci_high``, ``p_val`` (NaN: a mean is not a test).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"system": "a", "dimension": "stance", "rating": [1, 2, 3, 4]})
    >>> rating_means(df, unit=None)[["estimate", "ci_low"]].round(4).values.tolist()
    [[2.5, 0.4457]]
    """
    import numpy as np
    import pandas as pd

    keys = [*by, system, dimension]
    rows = []
    for key, group in data.groupby(keys, sort=True, dropna=False):
        values = group[dv].astype(float)
        if unit is not None:
            values = values.groupby(group[unit]).mean()
        mean, sd, low, high = _t_interval(values, confidence)
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n": int(values.notna().sum()),
                "n_ratings": int(group[dv].notna().sum()),
                "estimate": mean,
                "sd": sd,
                "ci_low": low,
                "ci_high": high,
                "p_val": np.nan,
            }
        )
    return pd.DataFrame(
        rows, columns=[*keys, "n", "n_ratings", "estimate", "sd", "ci_low", "ci_high", "p_val"]
    )


def _one_way_ci(f_value: float, df1: float, df2: float, k: float, confidence: float):
    """Shrout & Fleiss (1979) interval of ICC(1,1) and ICC(1,k) from the one-way F ratio.

    pingouin rounds its interval to two decimals; this keeps full precision for the two
    one-way coefficients, the only ones valid when each target has its own raters.
    """
    from scipy.stats import f

    q = 0.5 + confidence / 2
    f_low = f_value / f.ppf(q, df1, df2)
    f_high = f_value * f.ppf(q, df2, df1)
    single = ((f_low - 1) / (f_low + k - 1), (f_high - 1) / (f_high + k - 1))
    average = (1 - 1 / f_low, 1 - 1 / f_high)
    return single, average


def _two_way_ci(table, confidence: float) -> dict[str, tuple[float, float]]:
    """Intervals of the two-way coefficients at full precision, at the requested coverage.

    ``table`` is the complete targets x raters matrix. ICC(C,1) and ICC(C,k): F intervals of
    Shrout & Fleiss (1979, eqs. 9-10 on ``MSR / MSE``); ICC(A,1): McGraw & Wong (1996, table 7,
    case 2A) with Satterthwaite's df ``v`` for the mixture of mean squares; ICC(A,k): that
    interval stepped up by Spearman-Brown (as R ``psych::ICC``). pingouin computes the same
    formulas but rounds to two decimals and fixes the coverage at 95%.
    """
    import numpy as np
    from scipy.stats import f

    y = np.asarray(table, float)
    n, k = y.shape
    grand = y.mean()
    ss_rows = k * ((y.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((y.mean(axis=0) - grand) ** 2).sum()
    ss_err = ((y - grand) ** 2).sum() - ss_rows - ss_cols
    msr, msc = ss_rows / (n - 1), ss_cols / (k - 1)
    mse = ss_err / ((n - 1) * (k - 1))
    q = 0.5 + confidence / 2
    df_err = (n - 1) * (k - 1)
    f_obs = msr / mse
    f_low = f_obs / f.ppf(q, n - 1, df_err)
    f_high = f_obs * f.ppf(q, df_err, n - 1)
    out = {
        "ICC(C,1)": ((f_low - 1) / (f_low + k - 1), (f_high - 1) / (f_high + k - 1)),
        "ICC(C,k)": (1 - 1 / f_low, 1 - 1 / f_high),
    }
    icc_a = (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)
    a = k * icc_a / (n * (1 - icc_a))
    b = 1 + k * icc_a * (n - 1) / (n * (1 - icc_a))
    v = (a * msc + b * mse) ** 2 / ((a * msc) ** 2 / (k - 1) + (b * mse) ** 2 / df_err)
    f_star_low = f.ppf(q, n - 1, v)
    f_star_high = f.ppf(q, v, n - 1)
    low = n * (msr - f_star_low * mse) / (f_star_low * (k * msc + (k * n - k - n) * mse) + n * msr)
    high = n * (f_star_high * msr - mse) / (k * msc + (k * n - k - n) * mse + n * f_star_high * msr)
    out["ICC(A,1)"] = (low, high)
    out["ICC(A,k)"] = (low * k / (1 + low * (k - 1)), high * k / (1 + high * (k - 1)))
    return {name: (float(lo), float(hi)) for name, (lo, hi) in out.items()}


def rating_icc(
    data: pd.DataFrame,
    *,
    target: str = "summary_id",
    rater: str = "participant_id",
    rating: str = "rating",
    dimension: str | None = "dimension",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Intraclass correlations (``pingouin.intraclass_corr``) per dimension.

    When every rater rated every target (a crossed design), all six Shrout & Fleiss (1979)
    coefficients are returned. When targets have different raters, as the platform allocates
    them, only the one-way coefficients ICC(1,1) and ICC(1,k) are meaningful: raters are then
    relabelled as the 1st, 2nd, … rating of a target, and targets with fewer than the most common
    number of ratings are left out (pingouin needs a complete table).

    Parameters
    ----------
    data : pandas.DataFrame
        One row per rating.
    target, rater, rating : str
        Column names.
    dimension : str or None
        Compute one set of coefficients per value of this column (``None``: all rows at once).
    confidence : float
        Coverage of the intervals (all computed here at full precision; pingouin's are rounded
        to two decimals and always 95%).

    Returns
    -------
    pandas.DataFrame
        One row per (dimension, coefficient): ``dimension``, ``type`` (pingouin's name, e.g.
        ``ICC(1,1)``), ``design`` (``crossed`` or ``one_way``), ``n_targets``, ``n_raters``
        (ratings per target), ``estimate``, ``ci_low``, ``ci_high``, ``f``, ``df1``, ``df2``,
        ``p_val``.

    Notes
    -----
    Checked against Shrout & Fleiss (1979), Table 4 (6 targets x 4 judges): ICC(1,1) = .17,
    ICC(2,1) = .29, ICC(3,1) = .71, ICC(1,4) = .44, ICC(2,4) = .62, ICC(3,4) = .91.
    """
    import pandas as pd
    import pingouin as pg

    groups = data.groupby(dimension, sort=True) if dimension else [(None, data)]
    rows = []
    for dim, group in groups:
        df = group[[target, rater, rating]].dropna()
        df = df.drop_duplicates([target, rater], keep="last")
        n_targets = df[target].nunique()
        crossed = len(df) == n_targets * df[rater].nunique()
        if not crossed:
            per_target = df.groupby(target)[rater].transform("size")
            k = int(per_target.mode().iloc[0]) if len(per_target) else 0
            df = df[per_target == k].copy()
            # Within a target, the order of its ratings is arbitrary: only one-way models hold.
            df[rater] = df.groupby(target).cumcount()
        if df[target].nunique() < 2 or df[rater].nunique() < 2:
            continue
        with warnings.catch_warnings():
            # pingouin 0.5-0.7 calls DataFrame.dropna(inplace=True), deprecated in pandas 3.1;
            # the result is unaffected and the fix is pingouin's to make.
            warnings.filterwarnings("ignore", message="The inplace keyword in DataFrame.dropna")
            table = pg.intraclass_corr(df, targets=target, raters=rater, ratings=rating)
        k = df[rater].nunique()
        two_way = (
            _two_way_ci(df.pivot(index=target, columns=rater, values=rating), confidence)
            if crossed
            else {}
        )
        for _, row in table.iterrows():
            one_way = str(row["Type"]).startswith("ICC(1")
            if not crossed and not one_way:
                continue
            if one_way:
                single, average = _one_way_ci(
                    float(row["F"]), float(row["df1"]), float(row["df2"]), k, confidence
                )
                low, high = single if row["Type"] == "ICC(1,1)" else average
            else:
                low, high = two_way[str(row["Type"])]
            rows.append(
                {
                    "dimension": dim,
                    "type": row["Type"],
                    "design": "crossed" if crossed else "one_way",
                    "n_targets": int(df[target].nunique()),
                    "n_raters": k,
                    "estimate": float(row["ICC"]),
                    "ci_low": float(low),
                    "ci_high": float(high),
                    "f": float(row["F"]),
                    "df1": float(row["df1"]),
                    "df2": float(row["df2"]),
                    "p_val": float(row["pval"]),
                }
            )
    columns = [
        "dimension",
        "type",
        "design",
        "n_targets",
        "n_raters",
        "estimate",
        "ci_low",
        "ci_high",
        "f",
        "df1",
        "df2",
        "p_val",
    ]
    return pd.DataFrame(rows, columns=columns)


def rating_alpha(
    data: pd.DataFrame,
    *,
    target: str = "summary_id",
    rater: str = "participant_id",
    rating: str = "rating",
    dimension: str | None = "dimension",
    scale: Sequence[int] = (1, 2, 3, 4),
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Krippendorff's alpha, ordinal, per dimension (missing ratings allowed).

    Parameters
    ----------
    data : pandas.DataFrame
        One row per rating.
    target, rater, rating : str
        Column names.
    dimension : str or None
        One alpha per value of this column (``None``: all rows at once).
    scale : sequence of int
        The scale's points in order (the ordinal metric needs the whole domain, used or not).
    n_boot : int
        Bootstrap replicates of the interval (0: none).
    seed : int
        Bootstrap seed.

    Returns
    -------
    pandas.DataFrame
        One row per dimension: ``dimension``, ``n_items`` (targets), ``n_raters``, ``estimate``,
        ``ci_low``, ``ci_high``, ``p_val`` (NaN), ``level`` (``ordinal``).

    Notes
    -----
    The computation is :func:`analysis.stats.agreement.krippendorff_alpha` (the ``krippendorff``
    package), checked there against Krippendorff (2011): ordinal alpha = 0.815.
    """
    import pandas as pd

    from analysis.stats.agreement import krippendorff_alpha

    groups = data.groupby(dimension, sort=True) if dimension else [(None, data)]
    frames = []
    for dim, group in groups:
        res = krippendorff_alpha(
            group.assign(_value=group[rating].astype(int)),
            item=target,
            rater=rater,
            label="_value",
            level="ordinal",
            categories=list(scale),
            n_boot=n_boot,
            seed=seed,
        )
        frames.append(res.assign(dimension=dim))
    columns = ["dimension", "n_items", "n_raters", "estimate", "ci_low", "ci_high", "p_val"]
    if not frames:
        return pd.DataFrame(columns=[*columns, "level"])
    return pd.concat(frames, ignore_index=True)[[*columns, "level"]]


def summary_means(
    data: pd.DataFrame,
    *,
    summary: str = "summary_id",
    dimension: str = "dimension",
    rating: str = "rating",
    keep: Sequence[str] = ("system",),
) -> pd.DataFrame:
    """Mean human rating of each summary on each dimension (the sample level of the metric test).

    Parameters
    ----------
    data : pandas.DataFrame
        One row per rating.
    summary, dimension, rating : str
        Column names.
    keep : sequence of str
        Columns constant within a summary that are carried along (e.g. its system).

    Returns
    -------
    pandas.DataFrame
        One row per (summary, dimension): ``summary``, ``keep`` columns, ``dimension``,
        ``n_ratings``, ``mean_rating``.
    """
    keep = [c for c in keep if c in data.columns and c not in (summary, dimension)]
    grouped = data.groupby([summary, *keep, dimension], sort=True, dropna=False)[rating]
    out = grouped.agg(n_ratings="count", mean_rating="mean").reset_index()
    out["mean_rating"] = out["mean_rating"].astype(float)
    return out


def metric_rating_tau(
    means: pd.DataFrame,
    metrics: pd.DataFrame,
    *,
    summary: str = "summary_id",
    metric_columns: Sequence[str] | None = None,
    dimension: str = "dimension",
    rating: str = "mean_rating",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Kendall's tau between each automatic metric and the human rating, per dimension.

    Sample level: every summary is one observation (its metric value vs its mean human rating).

    Parameters
    ----------
    means : pandas.DataFrame
        Output of :func:`summary_means`.
    metrics : pandas.DataFrame
        One row per summary: ``summary`` and numeric metric columns.
    summary, dimension, rating : str
        Column names.
    metric_columns : sequence of str, optional
        Metrics to correlate; default every numeric column of ``metrics`` except ``summary``.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per (metric, dimension): ``metric``, ``dimension`` and the columns of
        :func:`kendall_tau`.
    """
    import pandas as pd

    if metric_columns is None:
        numeric = metrics.drop(columns=[summary]).select_dtypes("number")
        metric_columns = list(numeric.columns)
    missing = [c for c in [summary, *metric_columns] if c not in metrics.columns]
    if missing:
        raise ValueError(f"metrics table lacks column(s) {missing}")
    joined = means.merge(metrics[[summary, *metric_columns]], on=summary, how="inner")
    frames = []
    for metric in metric_columns:
        for dim, group in joined.groupby(dimension, sort=True):
            res = kendall_tau(group, x=metric, y=rating, confidence=confidence)
            frames.append(res.assign(metric=metric, dimension=dim))
    columns = ["metric", "dimension", "n", "estimate", "ci_low", "ci_high", "p_val", "method"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]
