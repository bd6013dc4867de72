"""Pearson and Spearman correlations with intervals, and the human-model / model-model tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "human_model_correlation",
    "kendall_tau",
    "model_correlation_matrix",
    "pearson",
    "spearman",
    "spearman_exact_p",
]

# R's cor.test uses AS 89 (exact below 10, Edgeworth series up to 1290) when there are no ties.
SPEARMAN_EXACT_MAX_N = 1290
_ENUMERATE_MAX_N = 9
# Edgeworth series coefficients of Best & Roberts (1975), Algorithm AS 89.
_AS89_C = (
    0.2274,
    0.2531,
    0.1745,
    0.0758,
    0.1033,
    0.3932,
    0.0879,
    0.0151,
    0.0072,
    0.0831,
    0.0131,
    4.6e-4,
)


_ESTIMATE = ("estimate", "ci_low", "ci_high", "p_val")


def _paired(data: pd.DataFrame, x: str, y: str) -> tuple[pd.DataFrame, bool]:
    """The complete ``(x, y)`` pairs as floats, and whether a correlation is defined on them."""
    df = data[[x, y]].dropna().astype(float)
    return df, len(df) >= 3 and df[x].nunique() > 1 and df[y].nunique() > 1


def _fisher_interval(est: float, half: float) -> tuple[float, float]:
    """``tanh(atanh(est) -/+ half)``: an interval of half-width ``half`` on Fisher's z scale."""
    import numpy as np

    z = np.arctanh(est)
    return float(np.tanh(z - half)), float(np.tanh(z + half))


def _one_row(n: int, est, low, high, p, method: str, **extra: object) -> pd.DataFrame:
    """The one-row result of a correlation: ``n``, the estimate columns, ``method``, extras."""
    import pandas as pd

    values = {"n": n, **dict(zip(_ESTIMATE, (est, low, high, p), strict=True)), "method": method}
    return pd.DataFrame({k: [v] for k, v in {**values, **extra}.items()})


def _s_distribution(n: int):
    """Counts of S = sum (i - pi(i))^2 over all n! permutations (n <= 9), as ``{S: count}``."""
    import itertools

    import numpy as np

    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int16)
    s = ((perms - np.arange(n, dtype=np.int16)) ** 2).sum(axis=1)
    values, counts = np.unique(s, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist(), strict=True))


_S_CACHE: dict[int, dict[int, int]] = {}


def _prob_s_at_least(n: int, s: float) -> float:
    """P(S >= s) under independence (AS 89): enumeration for n <= 9, Edgeworth series above.

    Written by hand because scipy has no exact Spearman null distribution (``spearmanr`` offers
    the t approximation or a Monte Carlo permutation test) and R's default p comes from AS 89.
    """
    import math

    from scipy.stats import norm

    if s <= 0:
        return 1.0
    n3 = n * (n * n - 1) / 3.0  # the largest S
    if s > n3:
        return 0.0
    js = math.ceil(s)
    if js % 2:  # S is always even
        js += 1
    if n <= _ENUMERATE_MAX_N:
        if n not in _S_CACHE:
            _S_CACHE[n] = _s_distribution(n)
        dist = _S_CACHE[n]
        return sum(c for v, c in dist.items() if v >= js) / math.factorial(n)
    c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12 = _AS89_C
    b = 1.0 / n
    x = (6.0 * (js - 1) * b / (n * n - 1) - 1.0) * math.sqrt(1.0 / b - 1.0)
    y = x * x
    u = (
        x
        * b
        * (
            c1
            + b * (c2 + c3 * b)
            + y
            * (
                -c4
                + b * (c5 + c6 * b)
                - y * b * (c7 + c8 * b - y * (c9 - c10 * b + y * b * (c11 - c12 * y)))
            )
        )
    )
    p = u / math.exp(y / 2) + norm.sf(x)
    return min(max(p, 0.0), 1.0)


def spearman_exact_p(rho: float, n: int) -> float:
    """Two-sided p of Spearman's rho without ties, as R ``cor.test(method = "spearman")``.

    The statistic is ``S = (n^3 - n)(1 - rho) / 6``; the p is twice the smaller tail of its
    permutation distribution (Best & Roberts 1975, Algorithm AS 89: all n! permutations for
    n <= 9, an Edgeworth series for 9 < n <= 1290), capped at 1.

    Parameters
    ----------
    rho : float
        Spearman's rho of data without ties.
    n : int
        Number of pairs, 2 <= n <= 1290.

    Returns
    -------
    float
        The two-sided p-value.

    Examples
    --------
    >>> round(spearman_exact_p(0.6, 9), 4)  # R: cor.test(x, y, method = "spearman"), S = 48
    0.0968
    """
    if not 2 <= n <= SPEARMAN_EXACT_MAX_N:
        raise ValueError(f"the exact Spearman p needs 2 <= n <= {SPEARMAN_EXACT_MAX_N}, got {n}")
    q = (n**3 - n) * (1 - rho) / 6
    if q > (n**3 - n) / 6:
        # upper tail of S (negative rho): P(S >= q), as R's pspearman(lower.tail = FALSE)
        p = _prob_s_at_least(n, round(q))
    else:
        # lower tail P(S <= q) = 1 - P(S >= q + 2) (S is even), as R passes round(q) + 2
        p = 1.0 - _prob_s_at_least(n, round(q) + 2)
    return min(2 * p, 1.0)


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
    from scipy.stats import pearsonr

    df, defined = _paired(data, x, y)
    est = low = high = p = np.nan
    if defined:
        res = pearsonr(df[x], df[y])
        est, p = float(res.statistic), float(res.pvalue)
        if len(df) > 3:
            ci = res.confidence_interval(confidence_level=confidence)
            low, high = float(ci.low), float(ci.high)
    return _one_row(len(df), est, low, high, p, "pearson")


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
        One row: ``n``, ``estimate`` (rho), ``ci_low``, ``ci_high``, ``p_val``, ``method``,
        ``p_method``. The p is R's default (``cor.test(method = "spearman")``): without ties
        and n <= 1290 the permutation distribution of S (:func:`spearman_exact_p`: exact for
        n <= 9, AS 89's Edgeworth series above; ``p_method`` ``"exact permutation"`` or
        ``"AS 89 Edgeworth series"``); with ties,
        or larger n, the t approximation of ``scipy.stats.spearmanr`` (as R, which then
        warns "Cannot compute exact p-value with ties"; ``p_method`` says which).
    """
    import numpy as np
    from scipy.stats import norm, spearmanr

    df, defined = _paired(data, x, y)
    n = len(df)
    est = low = high = p = np.nan
    p_method = "not computed (n < 3 or a constant column)"
    if defined:
        res = spearmanr(df[x], df[y])
        est, p = float(res.statistic), float(res.pvalue)
        ties = df[x].nunique() < n or df[y].nunique() < n
        if ties:
            p_method = "t approximation (ties: no exact p)"
        elif n > SPEARMAN_EXACT_MAX_N:
            p_method = f"t approximation (n > {SPEARMAN_EXACT_MAX_N})"
        else:
            p = spearman_exact_p(est, n)
            p_method = "exact permutation" if n <= _ENUMERATE_MAX_N else "AS 89 Edgeworth series"
        if n > 3 and abs(est) < 1:
            low, high = _fisher_interval(est, norm.ppf(0.5 + confidence / 2) / np.sqrt(n - 3))
    return _one_row(n, est, low, high, p, "spearman", p_method=p_method)


def kendall_tau(data: pd.DataFrame, *, x: str, y: str, confidence: float = 0.95) -> pd.DataFrame:
    """Kendall's tau-b with a Fisher-z interval (SE sqrt(0.437 / (n - 4))) and its p-value.

    Parameters
    ----------
    data : pandas.DataFrame
        Rows with a missing ``x`` or ``y`` are dropped.
    x, y : str
        Numeric columns.
    confidence : float
        Coverage of the interval.

    Returns
    -------
    pandas.DataFrame
        One row: ``n``, ``estimate`` (tau-b, ``scipy.stats.kendalltau``; exact p without ties and
        n < 50, else the normal approximation, as R ``cor.test(method="kendall")``),
        ``ci_low``, ``ci_high`` (Fieller, Hartley & Pearson 1957), ``p_val``, ``method``.
        NaN when n < 3 or a column is constant; no interval when n < 5.

    Notes
    -----
    Checked against R ``cor.test(x, y, method = "kendall")`` on Hollander & Wolfe's example (R's
    ``?cor.test``): tau = 0.4444444, two-sided p = 0.1194 (R prints 0.05972 for "greater").
    """
    import numpy as np
    from scipy.stats import kendalltau, norm

    df, defined = _paired(data, x, y)
    n = len(df)
    est = low = high = p = np.nan
    if defined:
        # R's cor.test uses the exact null distribution when n < 50 and there are no ties;
        # scipy's "auto" switches to the normal approximation from n = 34, so ask explicitly.
        no_ties = df[x].is_unique and df[y].is_unique
        method = "exact" if n < 50 and no_ties else "asymptotic"
        res = kendalltau(df[x], df[y], method=method)
        est, p = float(res.statistic), float(res.pvalue)
        if n > 4 and abs(est) < 1:
            low, high = _fisher_interval(
                est, norm.ppf(0.5 + confidence / 2) * np.sqrt(0.437 / (n - 4))
            )
    return _one_row(n, est, low, high, p, "kendall_tau_b")


def human_model_correlation(
    data: pd.DataFrame,
    *,
    human: str = "shift_count",
    model_shift: str = "shift",
    model: str = "model",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Correlate the human shift count of each item with each model's shift indicator.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per (item, model) with the item's human shift count and the model's 0/1 shift
        (see :func:`analysis.stats.annotation.model_shifts`).
    human, model_shift, model : str
        Column names.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per model: ``model``, ``n`` (items), ``estimate`` (Pearson r), ``ci_low``,
        ``ci_high``, ``p_val``, ``spearman_rho``, ``spearman_p_val``, ``spearman_p_method``,
        ``model_shift_rate``.
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
                **{k: r[k] for k in _ESTIMATE},
                "spearman_rho": rho["estimate"],
                "spearman_p_val": rho["p_val"],
                "spearman_p_method": rho["p_method"],
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
                n, values = int(wide[a].notna().sum()), (1.0, 1.0, 1.0, 0.0)
            else:
                pair = pd.DataFrame({"a": wide[a], "b": wide[b]})
                r = pearson(pair, x="a", y="b", confidence=confidence).iloc[0]
                n, values = int(r["n"]), tuple(r[k] for k in _ESTIMATE)
            rows.append(
                {"model_a": a, "model_b": b, "n": n, **dict(zip(_ESTIMATE, values, strict=True))}
            )
    return pd.DataFrame(rows)
