"""Target choice across k >= 2 formats (original, summary, mitigated summaries).

A product-choice block shows each pair under one of k formats: the ``original`` reviews, the
plain LLM ``summary`` and summaries produced by mitigation methods (``mitigated:<method>``).
Format is a k-level factor with treatment contrasts against the reference (``original`` by
default): its k - 1 coefficients are the shifts each format causes. The question a mitigation
answers is different: does it undo the summary's shift? So each mitigated format is also
compared with the baseline (``summary``), the contrast ``beta_mitigated - beta_summary`` of the
same fit. Multiplicity corrections (Holm by default, Holm 1979) run across the 2k - 3 contrasts
of a model. The seed design (original vs summary) is the case k = 2: one contrast.

The outcome is binary (``chose_target``). The seed study's test is the chi-square test of the
k x 2 table (with Yates' continuity correction when k = 2, as R's ``chisq.test``); every
participant makes several choices, so the clustering-aware models are the logistic GLMM with
crossed random intercepts for participant and pair (:func:`choice_glmm`, as ``glmer``) and a
GEE with an exchangeable working correlation by participant (:func:`choice_clustered`).
Checked against R in ``tests/analysis/stats/test_glmm.py`` (two formats) and
``tests/analysis/stats/test_formats_r.py`` (three and four).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from analysis.stats.crossed import ConvergenceError, crossed_order

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_BASELINE",
    "DEFAULT_REFERENCE",
    "Contrast",
    "add_format_dummies",
    "adjust_p",
    "chi2_choice",
    "choice_by_pair",
    "choice_clustered",
    "choice_effects",
    "choice_glmm",
    "contrast_rows",
    "format_contrasts",
    "format_levels",
    "selection_rates",
    "wilson_ci",
]

DEFAULT_REFERENCE = "original"
DEFAULT_BASELINE = "summary"
# Which test each effect's p comes from, said in the table ("score test" alone would be ambiguous
# beside the chi-square p of the same table).
P_METHODS = ["Miettinen-Nurminen score test", "Wald test of log odds ratio"]


class Contrast(NamedTuple):
    """One comparison of two formats: ``level`` minus ``versus``."""

    name: str
    family: str  # "vs reference" or "vs baseline"
    level: str
    versus: str
    weights: tuple[float, ...]  # over (intercept, one dummy per non-reference level)


def wilson_ci(count, nobs, confidence: float = 0.95):
    """Wilson score interval for a proportion (vectorised).

    Parameters
    ----------
    count, nobs : int or array-like
        Successes and trials.
    confidence : float
        Coverage of the interval.

    Returns
    -------
    tuple of arrays
        ``(low, high)``; NaN where ``nobs`` is 0.
    """
    import numpy as np
    from statsmodels.stats.proportion import proportion_confint

    count = np.asarray(count, dtype=float)
    nobs = np.asarray(nobs, dtype=float)
    safe = np.where(nobs > 0, nobs, 1.0)
    low, high = proportion_confint(count, safe, alpha=1 - confidence, method="wilson")
    return np.where(nobs > 0, low, np.nan), np.where(nobs > 0, high, np.nan)


def format_levels(
    data: pd.DataFrame, between: str = "format", levels: Sequence[str] | None = None
) -> tuple[str, ...]:
    """The factor's levels, reference first.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    between : str
        Format column.
    levels : sequence of str, optional
        The order, reference first. Default: ``original``, then ``summary``, then the other
        values in alphabetical order.

    Returns
    -------
    tuple of str
        At least two levels; every value of the column is one of them.

    Raises
    ------
    ValueError
        Fewer than two formats, a value outside ``levels``, a named level without trials, or no
        ``original`` to take as the reference when ``levels`` is not given (taking the
        alphabetical first would silently set the sign of every effect).

    Examples
    --------
    >>> import pandas as pd
    >>> format_levels(pd.DataFrame({"format": ["mitigated:cot", "summary", "original"]}))
    ('original', 'summary', 'mitigated:cot')
    """
    present = [str(v) for v in dict.fromkeys(data[between].dropna())]
    if levels is None:
        if DEFAULT_REFERENCE not in present:
            raise ValueError(
                f"{between!r} holds {sorted(present)}, no {DEFAULT_REFERENCE!r}: name the "
                "levels explicitly, reference first (levels=(reference, treatment, ...); on the "
                "command line --levels REFERENCE,TREATMENT[,LEVEL...])"
            )
        rest = sorted(v for v in present if v not in (DEFAULT_REFERENCE, DEFAULT_BASELINE))
        head = [DEFAULT_REFERENCE] + ([DEFAULT_BASELINE] if DEFAULT_BASELINE in present else [])
        levels = head + rest
    levels = tuple(str(v) for v in levels)
    if len(set(levels)) != len(levels):
        raise ValueError(f"{between!r} levels repeat a name: {list(levels)}")
    if len(levels) < 2:
        raise ValueError(f"{between!r} needs at least two formats to compare, got {list(levels)}")
    unknown = sorted(set(present) - set(levels))
    if unknown:
        raise ValueError(f"{between!r} has values outside {list(levels)}: {unknown}")
    absent = [v for v in levels if v not in present]
    if absent:
        raise ValueError(
            f"{between!r} has no trial with level(s) {absent} (trials only under {present}): "
            "the format effect is not identified"
        )
    return levels


def format_contrasts(
    levels: Sequence[str], baseline: str | None = DEFAULT_BASELINE
) -> list[Contrast]:
    """Treatment contrasts against ``levels[0]``, then each other level against ``baseline``.

    Parameters
    ----------
    levels : sequence of str
        Reference first (:func:`format_levels`).
    baseline : str, optional
        The level the mitigated formats are compared with; no such contrasts when it is
        ``None``, the reference or not among ``levels``.

    Returns
    -------
    list of Contrast
        ``k - 1`` contrasts ``"<level> vs <reference>"`` and, with a baseline, ``k - 2``
        contrasts ``"<level> vs <baseline>"``; weights over (intercept, dummies of
        ``levels[1:]``).

    Examples
    --------
    >>> [c.name for c in format_contrasts(["original", "summary", "mitigated:cot"])]
    ['summary vs original', 'mitigated:cot vs original', 'mitigated:cot vs summary']
    """
    ref, k = levels[0], len(levels)
    out = []
    for j, level in enumerate(levels[1:], start=1):
        w = [0.0] * k
        w[j] = 1.0
        out.append(Contrast(f"{level} vs {ref}", "vs reference", level, ref, tuple(w)))
    if baseline in levels[1:]:
        b = list(levels).index(baseline)
        for j, level in enumerate(levels[1:], start=1):
            if j == b:
                continue
            w = [0.0] * k
            w[j], w[b] = 1.0, -1.0
            out.append(Contrast(f"{level} vs {baseline}", "vs baseline", level, baseline, tuple(w)))
    return out


def add_format_dummies(df: pd.DataFrame, between: str, levels: Sequence[str]) -> list[str]:
    """Add one 0/1 column ``_x<j>`` per non-reference level (treatment coding); their names."""
    names = []
    for j, level in enumerate(levels[1:], start=1):
        df[f"_x{j}"] = (df[between] == level).to_numpy(dtype=float)
        names.append(f"_x{j}")
    return names


def adjust_p(p_vals, method: str = "holm"):
    """Multiplicity-adjusted p-values across the finite ones (statsmodels ``multipletests``).

    Parameters
    ----------
    p_vals : array-like
        p-values; NaN entries stay NaN and do not count.
    method : str
        ``holm``, ``bonferroni``, ``fdr_bh``, ... (``multipletests``' names).

    Returns
    -------
    numpy.ndarray
    """
    import numpy as np

    p = np.asarray(p_vals, float)
    out = np.full(len(p), np.nan)
    ok = np.isfinite(p)
    if not ok.any():
        return out
    if method.lower() in ("holm", "h"):
        out[ok] = _holm(p[ok])
    else:
        from statsmodels.stats.multitest import multipletests

        out[ok] = multipletests(p[ok], method=method)[1]
    return out


def _holm(p):
    """Holm's step-down adjustment, the arithmetic of ``multipletests(method="holm")``.

    Done here because statsmodels' Holm branch ends in ``gc.collect()``: a full collection
    over every object alive (0.1 s once scipy and matplotlib are loaded) for each table.
    """
    import numpy as np

    order = np.argsort(p)
    adjusted = np.maximum.accumulate(p[order] * np.arange(len(p), 0, -1))
    out = np.empty(len(p))
    out[order] = np.minimum(adjusted, 1.0)
    return out


def _binary(data: pd.DataFrame, dv: str) -> pd.Series:
    y = data[dv].astype(float)
    if not y.dropna().isin([0.0, 1.0]).all():
        raise ValueError(f"{dv!r} must be 0/1 (chosen or not)")
    return y


def _table(data: pd.DataFrame, dv: str, between: str, levels: Sequence[str]):
    """``[[chose, not chosen], ...]`` per level, as an int array (a level without trials: 0s)."""
    import numpy as np

    y = _binary(data, dv)
    counts = y.groupby(data[between].to_numpy()).agg(["sum", "count"]).reindex(levels, fill_value=0)
    return np.column_stack([counts["sum"], counts["count"] - counts["sum"]]).astype(np.int64)


def selection_rates(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    levels: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Target-choice rate per format with Wilson score intervals.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between : str
        0/1 outcome and format columns.
    levels : sequence of str, optional
        Order of the formats, reference first (:func:`format_levels`).
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per format: ``<between>``, ``n`` (trials), ``n_chose``, ``estimate`` (rate),
        ``ci_low``, ``ci_high``, ``p_val`` (NaN: a rate is not a test), ``method`` (``wilson``).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"format": ["original", "summary", "mitigated:rerank"] * 2,
    ...                    "chose_target": [1, 1, 0, 0, 1, 1]})
    >>> selection_rates(df)["estimate"].tolist()
    [0.5, 1.0, 0.5]
    """
    import numpy as np
    import pandas as pd

    levels = format_levels(data, between, levels)
    table = _table(data, dv, between, levels)
    k, n = table[:, 0], table.sum(axis=1)
    low, high = wilson_ci(k, n, confidence)
    return pd.DataFrame(
        {
            between: list(levels),
            "n": n,
            "n_chose": k,
            "estimate": k / n,
            "ci_low": low,
            "ci_high": high,
            "p_val": np.nan,
            "method": "wilson",
        }
    )


def chi2_choice(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    levels: Sequence[str] | None = None,
    correction: bool = True,
) -> pd.DataFrame:
    """Pearson chi-square test of the k x 2 table (format x chose target), the seed's test.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between : str
        0/1 outcome and format columns.
    levels : sequence of str, optional
        The formats (:func:`format_levels`).
    correction : bool
        With two formats: whether the primary row is the Yates-corrected test (as R
        ``chisq.test`` and ``scipy.stats.chi2_contingency`` by default); both are returned.
        With more no correction is defined (R and scipy apply none).

    Returns
    -------
    pandas.DataFrame
        The primary test first (two rows for two formats, one otherwise): ``test``
        (``pearson_yates`` / ``pearson``), ``chi2``, ``dof`` (k - 1), ``p_val``, ``cramer_v``
        (from the uncorrected statistic, as usual), ``n``, ``min_expected`` (below 5 the
        approximation is doubtful), ``primary`` (bool).

    Raises
    ------
    ValueError
        Every trial has the same outcome (nothing to compare).

    Notes
    -----
    Checked against R: ``chisq.test(matrix(c(189, 104, 10845, 10933), 2))`` on the Physicians'
    Health Study table gives X-squared = 24.429 (Yates) and 25.014 without correction.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import chi2_contingency
    from scipy.stats.contingency import association

    levels = format_levels(data, between, levels)
    table = _table(data, dv, between, levels)
    if (table.sum(axis=0) == 0).any():
        raise ValueError(f"every trial has {dv} = {int(table[0, 0] > 0)}: nothing to compare")
    rows = []
    for yates in (True, False) if len(levels) == 2 else (False,):
        res = chi2_contingency(table, correction=yates)
        rows.append(
            {
                "test": "pearson_yates" if yates else "pearson",
                "chi2": float(res.statistic),
                "dof": int(res.dof),
                "p_val": float(res.pvalue),
                "cramer_v": float(association(table, method="cramer", correction=False)),
                "n": int(table.sum()),
                "min_expected": float(np.min(res.expected_freq)),
                "primary": yates == correction or len(levels) > 2,
            }
        )
    out = pd.DataFrame(rows)
    return out.sort_values("primary", ascending=False, kind="stable").reset_index(drop=True)


def _effects_from_table(table, confidence: float = 0.95) -> pd.DataFrame:
    """Risk difference and odds ratio of a ``[[k1, n1-k1], [k2, n2-k2]]`` table (row 2 vs row 1)."""
    import numpy as np
    import pandas as pd
    from statsmodels.stats.contingency_tables import Table2x2
    from statsmodels.stats.proportion import (
        confint_proportions_2indep,
        test_proportions_2indep,
    )

    (k_ref, f_ref), (k_trt, f_trt) = table
    n_ref, n_trt = k_ref + f_ref, k_trt + f_trt
    alpha = 1 - confidence
    nan = float("nan")
    if n_ref == 0 or n_trt == 0:
        rd = rd_low = rd_high = rd_p = nan
    else:
        rd = k_trt / n_trt - k_ref / n_ref
        # statsmodels also computes an odds ratio on the side, which divides by zero when a
        # rate is 0 or 1; the difference and its interval are still defined.
        with np.errstate(divide="ignore", invalid="ignore"):
            # Newcombe's hybrid score interval (from the two Wilson intervals): unlike Wald it
            # stays inside [-1, 1] and keeps its coverage near 0 or 1.
            rd_low, rd_high = confint_proportions_2indep(
                k_trt, n_trt, k_ref, n_ref, method="newcomb", compare="diff", alpha=alpha
            )
            rd_p = test_proportions_2indep(
                k_trt, n_trt, k_ref, n_ref, method="score", compare="diff"
            ).pvalue
    if min(k_trt, f_trt, k_ref, f_ref) == 0:
        odds = or_low = or_high = or_p = nan
    else:
        # Table2x2 puts the "exposed" row first; ours is the compared level.
        t22 = Table2x2(np.array([[k_trt, f_trt], [k_ref, f_ref]], dtype=float))
        odds = float(t22.oddsratio)
        or_low, or_high = (float(v) for v in t22.oddsratio_confint(alpha=alpha))
        or_p = float(t22.oddsratio_pvalue())
    return pd.DataFrame(
        {
            "effect": ["risk_difference", "odds_ratio"],
            "estimate": [float(rd), odds],
            "ci_low": [float(rd_low), or_low],
            "ci_high": [float(rd_high), or_high],
            "p_val": [float(rd_p), or_p],
            "method": ["newcombe", "woolf"],
            "p_method": P_METHODS,
        }
    )


def choice_effects(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    levels: Sequence[str] | None = None,
    baseline: str | None = DEFAULT_BASELINE,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Risk difference and odds ratio of choosing the target, per contrast, trials independent.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between : str
        0/1 outcome and format columns.
    levels : sequence of str, optional
        The formats, reference first (:func:`format_levels`).
    baseline : str, optional
        The level mitigated formats are compared with (:func:`format_contrasts`).
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        Two rows per contrast: ``contrast``, ``family``, ``level``, ``versus``, ``effect``
        (``risk_difference``: rate of ``level`` minus rate of ``versus``, Newcombe hybrid score
        interval, Miettinen-Nurminen score test p; ``odds_ratio``: Woolf logit interval, Wald
        p, NaN with an empty cell), ``rate_level``, ``rate_versus``, ``estimate``,
        ``ci_low``, ``ci_high``, ``p_val``, ``method``, ``p_method`` (which test gave the p:
        not the chi-square's). The GLMM is the clustered test.

    Notes
    -----
    Odds ratio checked against the Physicians' Health Study (Agresti, *Categorical Data Analysis*,
    table 2.3): 1.832 (1.440, 2.331).
    """
    import pandas as pd

    levels = format_levels(data, between, levels)
    table = _table(data, dv, between, levels)
    index = {lv: i for i, lv in enumerate(levels)}
    parts = []
    for c in format_contrasts(levels, baseline):
        sub = table[[index[c.versus], index[c.level]]]
        rates = sub[:, 0] / sub.sum(axis=1)
        eff = _effects_from_table(sub, confidence)
        head = {"contrast": c.name, "family": c.family, "level": c.level, "versus": c.versus}
        eff = eff.assign(**head, rate_level=float(rates[1]), rate_versus=float(rates[0]))
        parts.append(eff)
    cols = ["contrast", "family", "level", "versus", "effect", "rate_level", "rate_versus"]
    out = pd.concat(parts, ignore_index=True)
    return out[cols + [c for c in out.columns if c not in cols]]


def choice_by_pair(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    pair: str = "pair_id",
    levels: Sequence[str] | None = None,
    baseline: str | None = DEFAULT_BASELINE,
    padjust: str = "holm",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Per-pair selection rates in every format, and each contrast's difference and test.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between, pair : str
        Outcome, format and pair columns.
    levels : sequence of str, optional
        The formats, reference first (:func:`format_levels`).
    baseline : str, optional
        The level mitigated formats are compared with (:func:`format_contrasts`).
    padjust : str
        ``statsmodels.stats.multitest.multipletests`` method across every pair and contrast
        (``holm`` default, ``fdr_bh``, ``bonferroni``, ...).
    confidence : float
        Coverage of the Wilson and Newcombe intervals.

    Returns
    -------
    pandas.DataFrame
        One row per pair and contrast: ``pair_id``, ``contrast``, ``n_<level>``,
        ``rate_<level>``, ``ci_low_<level>``, ``ci_high_<level>`` for every format;
        ``estimate`` (risk difference of the contrast), ``ci_low``, ``ci_high``; ``test``
        (``pearson_yates``, or ``fisher_exact`` when an expected count is below 5), ``statistic``
        (chi-square; NaN for Fisher), ``p_val``, ``p_adj``, ``padjust``.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import chi2_contingency, fisher_exact

    levels = format_levels(data, between, levels)
    contrasts = format_contrasts(levels, baseline)
    index = {lv: i for i, lv in enumerate(levels)}
    rows = []
    # Only the three columns used: the per-pair split otherwise copies every column of the export.
    for pair_id, group in data[[dv, between, pair]].groupby(pair, sort=True):
        table = _table(group, dv, between, levels)
        k, n = table[:, 0], table.sum(axis=1)
        low, high = wilson_ci(k, n, confidence)
        base: dict[str, object] = {pair: pair_id}
        for i, level in enumerate(levels):
            base[f"n_{level}"] = int(n[i])
            base[f"rate_{level}"] = k[i] / n[i] if n[i] else np.nan
            base[f"ci_low_{level}"] = float(low[i])
            base[f"ci_high_{level}"] = float(high[i])
        for c in contrasts:
            sub = table[[index[c.versus], index[c.level]]]
            eff = _effects_from_table(sub, confidence).iloc[0]
            row = {pair: pair_id, "contrast": c.name, **base}
            row.update(estimate=eff["estimate"], ci_low=eff["ci_low"], ci_high=eff["ci_high"])
            if (sub.sum(axis=1) == 0).any() or (sub.sum(axis=0) == 0).any():
                row.update(test="none", statistic=np.nan, p_val=np.nan)
            else:
                res = chi2_contingency(sub, correction=True)
                if np.min(res.expected_freq) < 5:
                    # The chi-square approximation is poor with small expected counts.
                    p = float(fisher_exact(sub).pvalue)
                    row.update(test="fisher_exact", statistic=np.nan, p_val=p)
                else:
                    row.update(
                        test="pearson_yates", statistic=float(res.statistic), p_val=res.pvalue
                    )
            rows.append(row)
    out = pd.DataFrame(rows)
    out["p_val"] = out["p_val"].astype(float)
    out["p_adj"] = adjust_p(out["p_val"], padjust)
    out["padjust"] = padjust
    return out


def contrast_rows(table, contrasts: list[Contrast], padjust: str) -> pd.DataFrame:
    """The ``kind == "contrast"`` rows of a fitted table (:func:`analysis.stats.glmm.crossed_glmm`,
    :func:`analysis.stats.crossed.crossed_lmm`), named, in the order of ``contrasts``, with
    ``p_adj`` by ``padjust`` across them."""
    rows = table[table["kind"] == "contrast"].set_index("term").loc[[c.name for c in contrasts]]
    rows = rows.reset_index().rename(columns={"term": "contrast"})
    rows.insert(1, "family", [c.family for c in contrasts])
    rows.insert(2, "level", [c.level for c in contrasts])
    rows.insert(3, "versus", [c.versus for c in contrasts])
    rows.insert(rows.columns.get_loc("p_val") + 1, "p_adj", adjust_p(rows["p_val"], padjust))
    rows.insert(rows.columns.get_loc("p_adj") + 1, "padjust", padjust)
    return rows.drop(columns="kind")


def choice_glmm(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    subject: str = "participant_id",
    item: str = "pair_id",
    levels: Sequence[str] | None = None,
    baseline: str | None = DEFAULT_BASELINE,
    padjust: str = "holm",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Format contrasts of the logistic GLMM with crossed random intercepts (as ``glmer``).

    ``chose_target ~ format + (1 | participant) + (1 | pair)``, binomial logit, Laplace
    (``nAGQ = 1``; :func:`analysis.stats.glmm.crossed_glmm`, Bates et al. 2015), format a
    k-level factor with treatment contrasts against the reference; the baseline contrasts are
    linear combinations of the same fit, their SEs from lme4's default (Hessian-based)
    covariance of the fixed effects. Each participant and each pair has its own baseline
    propensity; the odds ratios are conditional on them, so larger in magnitude than GEE's
    population-averaged ones when the random effects vary.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between, subject, item : str
        0/1 outcome, format, and the crossed grouping columns.
    levels : sequence of str, optional
        The formats, reference first (:func:`format_levels`).
    baseline : str, optional
        The level the mitigated formats are compared with (default ``summary``).
    padjust : str
        ``statsmodels`` ``multipletests`` method across all contrasts (Holm by default).
    confidence : float
        Coverage of the Wald intervals.

    Returns
    -------
    pandas.DataFrame
        One row per contrast (:func:`format_contrasts`): ``contrast``, ``family``, ``level``,
        ``versus``, ``log_odds``, ``se``, ``se_rx`` (given theta), ``z``, ``p_val``, ``p_adj``,
        ``padjust``, ``ci_low``, ``ci_high``, ``estimate`` (odds ratio; the interval is Wald,
        exponentiated, not adjusted), and on every row ``intercept_log_odds``, ``sd_subject``,
        ``sd_item`` (logit scale), ``loglik``, ``deviance`` (-2 log L of the Laplace
        approximation, what ``summary(glmer)`` prints as "deviance"; not R's ``deviance()``),
        ``aic``, ``bic``, ``singular`` (as ``lme4::isSingular``), ``converged``, ``max_grad``
        (glmer's convergence statistic, warned on above 0.002), ``optimizer``, ``n_obs``,
        ``n_subjects``, ``n_items``, ``model``, ``notes``.

    Raises
    ------
    analysis.stats.crossed.ConvergenceError
        Separation (a format always or never chosen), or no converged fit.
    ValueError
        Bad levels, a non-0/1 outcome or a grouping factor with one level (glmer refuses it).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> d = pd.DataFrame({"participant_id": np.repeat(np.arange(30), 6),
    ...                   "pair_id": np.tile(np.arange(6), 30)})
    >>> d["format"] = np.where((d.participant_id + d.pair_id) % 2, "summary", "original")
    >>> d["chose_target"] = (rng.random(len(d)) < np.where(d.format == "summary", .7, .4))
    >>> round(float(choice_glmm(d.astype({"chose_target": int}))["estimate"].iloc[0]), 2)
    4.17
    """
    import numpy as np

    from analysis.stats.glmm import crossed_glmm

    levels = format_levels(data, between, levels)
    df = data[[dv, between, subject, item]].dropna().copy()
    df["_y"] = _binary(df, dv)
    fixed = add_format_dummies(df, between, levels)
    large, small, n_subjects, n_items = crossed_order(df, subject, item)
    contrasts = format_contrasts(levels, baseline)
    table = crossed_glmm(
        df[["_y", *fixed, subject, item]],
        dv="_y",
        fixed=fixed,
        large=large,
        small=small,
        confidence=confidence,
        contrasts={c.name: c.weights for c in contrasts},
    )
    out = contrast_rows(table, contrasts, padjust)
    out = out.rename(columns={"estimate": "log_odds", "statistic": "z"})
    out["ci_low"] = np.exp(out["ci_low"])
    out["ci_high"] = np.exp(out["ci_high"])
    out.insert(out.columns.get_loc("ci_low"), "estimate", np.exp(out["log_odds"]))
    sd = table[table["kind"] == "sd"].set_index("term")["estimate"]
    first = table.iloc[0]
    out["intercept_log_odds"] = float(first["estimate"])
    out["sd_subject"] = float(sd[subject])
    out["sd_item"] = float(sd[item])
    out["n_subjects"] = n_subjects
    out["n_items"] = n_items
    out["model"] = (
        f"logistic GLMM (Laplace, as glmer nAGQ=1): {dv} ~ {between} + (1 | {subject}) + "
        f"(1 | {item}); {between} levels {', '.join(levels)} (treatment contrasts against "
        f"{levels[0]!r})"
    )
    return out.drop(columns=["theta"]).assign(notes=out.pop("notes"))


def choice_clustered(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    subject: str = "participant_id",
    levels: Sequence[str] | None = None,
    baseline: str | None = DEFAULT_BASELINE,
    padjust: str = "holm",
    confidence: float = 0.95,
    maxiter: int = 100,
) -> pd.DataFrame:
    """Format contrasts of a GEE logistic model clustered by participant (robustness check).

    The chi-square test treats trials as independent; each participant contributes several. GEE
    (Liang & Zeger 1986) with an exchangeable working correlation and the robust sandwich
    covariance gives population-averaged odds ratios whose SEs respect the clustering.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between, subject : str
        0/1 outcome, format and cluster columns.
    levels : sequence of str, optional
        The formats, reference first.
    baseline : str, optional
        The level the mitigated formats are compared with.
    padjust : str
        Correction across all contrasts.
    confidence : float
        Coverage of the Wald intervals.
    maxiter : int
        Iteration limit of the GEE fit.

    Returns
    -------
    pandas.DataFrame
        One row per contrast: ``contrast``, ``family``, ``level``, ``versus``, ``log_odds``,
        ``se`` (robust), ``z``, ``p_val``, ``p_adj``, ``padjust``, ``estimate`` (odds ratio),
        ``ci_low``, ``ci_high``, ``working_correlation``, ``n_obs``, ``n_clusters``, ``model``.

    Raises
    ------
    analysis.stats.crossed.ConvergenceError
        The outcome is separated by format (a format's trials all chose or all rejected the
        target: statsmodels still "converges", to a huge log odds ratio with a small robust SE),
        or no convergence.
    ValueError
        Fewer than 2 clusters, or bad levels.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import norm

    # The GEE's own modules, not statsmodels.api: that imports the formula, time-series and
    # regression stacks too (~0.5 s of the 70 x 10 report's start-up).
    from statsmodels.genmod import cov_struct, families
    from statsmodels.genmod.generalized_estimating_equations import GEE

    levels = format_levels(data, between, levels)
    df = data[[dv, between, subject]].dropna().copy()
    y = _binary(df, dv).to_numpy()
    n_clusters = df[subject].nunique()
    if n_clusters < 2:
        raise ValueError(
            f"the GEE needs at least 2 participants (clusters) for its robust SE; got {n_clusters}"
        )
    for level in levels:
        rate = y[(df[between] == level).to_numpy()].mean()
        if rate in (0.0, 1.0):
            raise ConvergenceError(
                f"the outcome is (quasi-)separated by format: every {level!r} trial "
                f"{'chose' if rate else 'rejected'} the target; the odds ratios are infinite and "
                "are not reported"
            )
    fixed = add_format_dummies(df, between, levels)
    exog = np.column_stack([np.ones(len(df)), df[fixed].to_numpy()])
    # GEE needs the rows of one cluster together; codes keep the order of first appearance.
    codes, _ = pd.factorize(df[subject])
    order = np.argsort(codes, kind="stable")
    model = GEE(
        y[order],
        exog[order],
        groups=codes[order],
        family=families.Binomial(),
        cov_struct=cov_struct.Exchangeable(),
    )
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")  # non-convergence is read from the flag below
        res = model.fit(maxiter=maxiter)
    if not bool(getattr(res, "converged", True)):
        raise ConvergenceError(f"GEE did not converge in {maxiter} iterations; no estimate")
    beta, cov = np.asarray(res.params), np.asarray(res.cov_params())
    crit = norm.ppf(0.5 + confidence / 2)
    rows = []
    for c in format_contrasts(levels, baseline):
        w = np.asarray(c.weights)
        est, se = float(w @ beta), float(np.sqrt(w @ cov @ w))
        rows.append(
            {
                "contrast": c.name,
                "family": c.family,
                "level": c.level,
                "versus": c.versus,
                "log_odds": est,
                "se": se,
                "z": est / se,
                "p_val": float(2 * norm.sf(abs(est / se))),
                "estimate": float(np.exp(est)),
                "ci_low": float(np.exp(est - crit * se)),
                "ci_high": float(np.exp(est + crit * se)),
            }
        )
    out = pd.DataFrame(rows)
    out.insert(out.columns.get_loc("p_val") + 1, "p_adj", adjust_p(out["p_val"], padjust))
    out.insert(out.columns.get_loc("p_adj") + 1, "padjust", padjust)
    out["working_correlation"] = float(np.asarray(res.cov_struct.dep_params))
    out["n_obs"] = len(df)
    out["n_clusters"] = n_clusters
    out["model"] = (
        f"GEE logit: {dv} ~ {between} ({len(levels)} levels, against {levels[0]!r}), "
        f"groups={subject}, exchangeable working correlation, robust (sandwich) SE"
    )
    return out
