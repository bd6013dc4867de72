"""Pearson and Spearman correlations with intervals, and the human-model / model-model tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["human_model_correlation", "model_correlation_matrix", "pearson", "spearman"]


def pearson(data: pd.DataFrame, *, x: str, y: str, confidence: float = 0.95) -> pd.DataFrame:
    """Pearson's r with a Fisher-z interval and a t-test p-value (as R ``cor.test``).

    Parameters
    ----------
    data : pandas.DataFrame
        Rows with missing ``x`` or ``y`` are dropped.
    x, y : str
        Numeric columns.
    confidence : float
        Coverage of the interval.

    Returns
    -------
    pandas.DataFrame
        One row: ``n``, ``estimate`` (r), ``ci_low``, ``ci_high``, ``p_val`` (two-sided),
        ``method`` (``pearson``). NaN when n < 3 or a column is constant.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"a": [1, 2, 3, 4], "b": [1, 3, 2, 4]})
    >>> round(float(pearson(df, x="a", y="b")["estimate"].iloc[0]), 1)
    0.8
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import pearsonr

    df = data[[x, y]].dropna().astype(float)
    n = len(df)
    est = low = high = p = np.nan
    if n >= 3 and df[x].nunique() > 1 and df[y].nunique() > 1:
        res = pearsonr(df[x], df[y])
        est, p = float(res.statistic), float(res.pvalue)
        if n > 3:
            ci = res.confidence_interval(confidence_level=confidence)
            low, high = float(ci.low), float(ci.high)
    return pd.DataFrame(
        {
            "n": [n],
            "estimate": [est],
            "ci_low": [low],
            "ci_high": [high],
            "p_val": [p],
            "method": ["pearson"],
        }
    )


def spearman(data: pd.DataFrame, *, x: str, y: str, confidence: float = 0.95) -> pd.DataFrame:
    """Spearman's rho with a Fisher-z interval (SE 1/sqrt(n-3), as pingouin) and its p-value.

    Parameters
    ----------
    data : pandas.DataFrame
        Rows with missing ``x`` or ``y`` are dropped.
    x, y : str
        Columns.
    confidence : float
        Coverage of the interval.

    Returns
    -------
    pandas.DataFrame
        One row: ``n``, ``estimate`` (rho), ``ci_low``, ``ci_high``, ``p_val`` (the t
        approximation of ``scipy.stats.spearmanr``, as R ``cor.test(method = "spearman",
        exact = FALSE)``; R's default is exact for n < 1290 without ties), ``method``,
        ``p_method``.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import norm, spearmanr

    df = data[[x, y]].dropna().astype(float)
    n = len(df)
    est = low = high = p = np.nan
    if n >= 3 and df[x].nunique() > 1 and df[y].nunique() > 1:
        res = spearmanr(df[x], df[y])
        est, p = float(res.statistic), float(res.pvalue)
        if n > 3 and abs(est) < 1:
            z = np.arctanh(est)
            half = norm.ppf(0.5 + confidence / 2) / np.sqrt(n - 3)
            low, high = float(np.tanh(z - half)), float(np.tanh(z + half))
    return pd.DataFrame(
        {
            "n": [n],
            "estimate": [est],
            "ci_low": [low],
            "ci_high": [high],
            "p_val": [p],
            "method": ["spearman"],
            "p_method": ["t approximation"],
        }
    )


def human_model_correlation(
    data: pd.DataFrame,
    *,
    human: str = "shift_count",
    model_shift: str = "shift",
    model: str = "model",
    item: str = "item_id",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Correlate the human shift count of each item with each model's shift indicator.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per (item, model) with the item's human shift count and the model's 0/1 shift
        (see :func:`analysis.stats.annotation.model_shifts`).
    human, model_shift, model, item : str
        Column names.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per model: ``model``, ``n`` (items), ``estimate`` (Pearson r), ``ci_low``,
        ``ci_high``, ``p_val``, ``spearman_rho``, ``spearman_p_val``, ``model_shift_rate``.
    """
    import pandas as pd

    rows = []
    for name, group in data.groupby(model, sort=True):
        r = pearson(group, x=human, y=model_shift, confidence=confidence).iloc[0]
        rho = spearman(group, x=human, y=model_shift, confidence=confidence).iloc[0]
        rows.append(
            {
                model: name,
                "n": int(r["n"]),
                "estimate": r["estimate"],
                "ci_low": r["ci_low"],
                "ci_high": r["ci_high"],
                "p_val": r["p_val"],
                "spearman_rho": rho["estimate"],
                "spearman_p_val": rho["p_val"],
                "model_shift_rate": float(group[model_shift].astype(float).mean()),
            }
        )
    return pd.DataFrame(rows)


def model_correlation_matrix(
    data: pd.DataFrame,
    *,
    model_shift: str = "shift",
    model: str = "model",
    item: str = "item_id",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Pearson correlation of every pair of models' shift indicators over their common items.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per (item, model) with a 0/1 shift column.
    model_shift, model, item : str
        Column names.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        Long form, one row per ordered pair (the diagonal included, r = 1): ``model_a``,
        ``model_b``, ``n``, ``estimate``, ``ci_low``, ``ci_high``, ``p_val``. Pivot on
        ``model_a``/``model_b`` for the matrix.
    """
    import pandas as pd

    wide = data.pivot_table(index=item, columns=model, values=model_shift, aggfunc="first")
    names = sorted(wide.columns)
    rows = []
    for a in names:
        for b in names:
            if a == b:
                n = int(wide[a].notna().sum())
                rows.append(
                    {
                        "model_a": a,
                        "model_b": b,
                        "n": n,
                        "estimate": 1.0,
                        "ci_low": 1.0,
                        "ci_high": 1.0,
                        "p_val": 0.0,
                    }
                )
                continue
            pair = pd.DataFrame({"a": wide[a], "b": wide[b]})
            r = pearson(pair, x="a", y="b", confidence=confidence).iloc[0]
            rows.append(
                {
                    "model_a": a,
                    "model_b": b,
                    "n": int(r["n"]),
                    "estimate": r["estimate"],
                    "ci_low": r["ci_low"],
                    "ci_high": r["ci_high"],
                    "p_val": r["p_val"],
                }
            )
    return pd.DataFrame(rows)
