"""Choice and WTP across k named formats (original, summary, mitigated summaries).

A k-format product-choice block shows each pair under one of k formats: the ``original``
reviews, the plain LLM ``summary`` and summaries produced by mitigation methods
(``mitigated:<method>``). Format is a k-level factor with treatment contrasts against the
reference (``original`` by default): its k - 1 coefficients are the shifts each format causes.
The question a mitigation answers is different: does it undo the summary's shift? So each
mitigated format is also compared with the baseline (``summary``): the contrast
``beta_mitigated - beta_summary`` of the same fit. Holm's step-down correction runs across all
2k - 3 contrasts of a model (Holm 1979), the family the report speaks about.

The models are those of the two-format analysis with the factor widened: the logistic GLMM
with crossed random intercepts for participant and pair
(:func:`analysis.stats.glmm.crossed_glmm`, as ``glmer``), a GEE with an exchangeable working
correlation by participant as robustness, the k x 2 chi-square test of the seed study, and the
WTP LMM (:func:`analysis.stats.crossed.crossed_lmm`, as ``lmer`` with lmerTest's Satterthwaite
df). Checked against R in
``tests/analysis/stats/test_formats_r.py`` (``tests/analysis/r/kformat_reference.R``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_BASELINE",
    "DEFAULT_REFERENCE",
    "Contrast",
    "format_chi2",
    "format_contrasts",
    "format_differences",
    "format_gee",
    "format_glmm",
    "format_levels",
    "format_rates",
    "format_wtp",
]

DEFAULT_REFERENCE = "original"
DEFAULT_BASELINE = "summary"


class Contrast(NamedTuple):
    """One comparison of two formats: ``level`` minus ``versus``."""

    name: str
    family: str  # "vs reference" or "vs baseline"
    level: str
    versus: str
    weights: tuple[float, ...]  # over (intercept, one dummy per non-reference level)


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
        ``original`` to take as the reference when ``levels`` is not given.
    """
    present = [str(v) for v in dict.fromkeys(data[between].dropna())]
    if levels is None:
        if DEFAULT_REFERENCE not in present:
            raise ValueError(
                f"{between!r} holds {sorted(present)}, no {DEFAULT_REFERENCE!r}: name the levels "
                "explicitly, reference first (on the command line --levels REF,LEVEL,...)"
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
        raise ValueError(f"{between!r} has no trial with level(s) {absent}")
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


def _binary(data: pd.DataFrame, dv: str) -> pd.Series:
    y = data[dv].astype(float)
    if not y.dropna().isin([0.0, 1.0]).all():
        raise ValueError(f"{dv!r} must be 0/1 (chosen or not)")
    return y


def _adjust(p_vals, method: str):
    """Multiplicity-adjusted p-values across the finite ones (statsmodels ``multipletests``)."""
    import numpy as np
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_vals, float)
    out = np.full(len(p), np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method=method)[1]
    return out


def format_rates(
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
    >>> format_rates(df)["estimate"].tolist()
    [0.5, 1.0, 0.5]
    """
    import numpy as np
    import pandas as pd

    from analysis.stats.choice import wilson_ci

    levels = format_levels(data, between, levels)
    y = _binary(data, dv)
    ok = y.notna()
    n = np.array([int(((data[between] == lv) & ok).sum()) for lv in levels])
    k = np.array([int(y[(data[between] == lv) & ok].sum()) for lv in levels])
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


def format_chi2(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    levels: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Pearson chi-square test of the k x 2 table (format x chose target), the seed's comparison.

    With two formats Yates' continuity correction is applied, as R's ``chisq.test`` does for a
    2 x 2 table; with more none is defined (R and scipy apply none).

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between : str
        0/1 outcome and format columns.
    levels : sequence of str, optional
        The formats (:func:`format_levels`).

    Returns
    -------
    pandas.DataFrame
        One row: ``test`` (``pearson`` or ``pearson_yates``), ``chi2``, ``dof`` (k - 1),
        ``p_val``, ``cramer_v``, ``n``, ``min_expected`` (below 5 the approximation is doubtful),
        ``k`` (formats).

    Notes
    -----
    R: ``chisq.test(table(d$format, d$chose_target))`` gives the same statistic.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import chi2_contingency
    from scipy.stats.contingency import association

    levels = format_levels(data, between, levels)
    y = _binary(data, dv)
    table = np.array(
        [
            [int(y[data[between] == lv].sum()), int((y[data[between] == lv] == 0).sum())]
            for lv in levels
        ]
    )
    if (table.sum(axis=0) == 0).any():
        raise ValueError(f"every trial has {dv} = {int(table[0, 0] > 0)}: nothing to compare")
    res = chi2_contingency(table, correction=True)
    return pd.DataFrame(
        {
            "test": ["pearson_yates" if res.dof == 1 else "pearson"],
            "chi2": [float(res.statistic)],
            "dof": [int(res.dof)],
            "p_val": [float(res.pvalue)],
            "cramer_v": [float(association(table, method="cramer", correction=False))],
            "n": [int(table.sum())],
            "min_expected": [float(np.min(res.expected_freq))],
            "k": [len(levels)],
        }
    )


def format_differences(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    levels: Sequence[str] | None = None,
    baseline: str | None = DEFAULT_BASELINE,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Difference in target-choice rate for each contrast, in proportions, with its interval.

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
        One row per contrast: ``contrast``, ``family``, ``level``, ``versus``, ``rate_level``,
        ``rate_versus``, ``estimate`` (rate of ``level`` minus rate of ``versus``), ``ci_low``,
        ``ci_high`` (Newcombe's hybrid score interval), ``p_val`` (Miettinen-Nurminen score
        test); trials are taken as independent here (the GLMM is the clustered test).
    """
    import pandas as pd

    from analysis.stats.choice import choice_effects

    levels = format_levels(data, between, levels)
    _binary(data, dv)
    rows = []
    for c in format_contrasts(levels, baseline):
        pair = data[data[between].isin([c.versus, c.level])]
        eff = choice_effects(
            pair, dv=dv, between=between, levels=(c.versus, c.level), confidence=confidence
        ).iloc[0]
        rates = pair.groupby(between)[dv].mean()
        rows.append(
            {
                "contrast": c.name,
                "family": c.family,
                "level": c.level,
                "versus": c.versus,
                "rate_level": float(rates[c.level]),
                "rate_versus": float(rates[c.versus]),
                "estimate": float(eff["estimate"]),
                "ci_low": float(eff["ci_low"]),
                "ci_high": float(eff["ci_high"]),
                "p_val": float(eff["p_val"]),
            }
        )
    return pd.DataFrame(rows)


def _design(df: pd.DataFrame, between: str, levels: Sequence[str]) -> list[str]:
    """Add one 0/1 column per non-reference level (treatment coding); return their names."""
    names = []
    for j, level in enumerate(levels[1:], start=1):
        df[f"_x{j}"] = (df[between] == level).to_numpy(dtype=float)
        names.append(f"_x{j}")
    return names


def _groups(df: pd.DataFrame, subject: str, item: str) -> tuple[str, str, int, int]:
    """lme4's order of the crossed terms (more levels first), refusing a one-level factor."""
    n_subjects, n_items = df[subject].nunique(), df[item].nunique()
    for group, n in ((subject, n_subjects), (item, n_items)):
        if n < 2:
            # lme4: "grouping factors must have > 1 sampled level".
            raise ValueError(f"{group!r} has {n} level; a random intercept needs at least 2")
    large, small = (subject, item) if n_subjects >= n_items else (item, subject)
    return large, small, n_subjects, n_items


def _contrast_rows(table, contrasts: list[Contrast], padjust: str) -> pd.DataFrame:
    """The contrast rows of a fitted table, named, in the order of ``contrasts``, adjusted."""
    rows = table[table["kind"] == "contrast"].set_index("term").loc[[c.name for c in contrasts]]
    rows = rows.reset_index().rename(columns={"term": "contrast"})
    rows.insert(1, "family", [c.family for c in contrasts])
    rows.insert(2, "level", [c.level for c in contrasts])
    rows.insert(3, "versus", [c.versus for c in contrasts])
    rows["p_adj"] = _adjust(rows["p_val"], padjust)
    rows["padjust"] = padjust
    return rows.drop(columns="kind")


def format_glmm(
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
    (``nAGQ = 1``), format a k-level factor with treatment contrasts against the reference; the
    baseline contrasts are linear combinations of the same fit, their SEs from lme4's default
    (Hessian-based) covariance of the fixed effects.

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
        ``padjust``, ``estimate`` (odds ratio, conditional on participant and pair), ``ci_low``,
        ``ci_high`` (Wald, exponentiated; not adjusted), and on every row ``intercept_log_odds``,
        ``sd_subject``, ``sd_item`` (logit scale), ``loglik``, ``deviance``, ``aic``, ``bic``,
        ``singular``, ``converged``, ``max_grad``, ``n_obs``, ``n_subjects``, ``n_items``,
        ``model``, ``notes``.

    Raises
    ------
    analysis.stats.crossed.ConvergenceError
        Separation (a format always or never chosen), or no converged fit.
    ValueError
        Bad levels, a non-0/1 outcome or a grouping factor with one level.
    """
    import numpy as np
    import pandas as pd

    from analysis.stats.glmm import crossed_glmm

    levels = format_levels(data, between, levels)
    df = data[[dv, between, subject, item]].dropna().copy()
    df["_y"] = _binary(df, dv)
    fixed = _design(df, between, levels)
    large, small, n_subjects, n_items = _groups(df, subject, item)
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
    out = _contrast_rows(table, contrasts, padjust)
    out = out.rename(columns={"estimate": "log_odds", "statistic": "z"})
    out["estimate"] = np.exp(out["log_odds"])
    out["ci_low"] = np.exp(out["ci_low"])
    out["ci_high"] = np.exp(out["ci_high"])
    sd = table[table["kind"] == "sd"].set_index("term")["estimate"]
    first = table.iloc[0]
    out["intercept_log_odds"] = float(first["estimate"])
    out["sd_subject"] = float(sd[subject])
    out["sd_item"] = float(sd[item])
    for col in ("loglik", "deviance", "aic", "bic", "max_grad"):
        out[col] = float(first[col])
    out["singular"] = bool(first["singular"])
    out["converged"] = bool(first["converged"])
    out["n_obs"] = int(first["n_obs"])
    out["n_subjects"] = n_subjects
    out["n_items"] = n_items
    out["model"] = (
        f"logistic GLMM (Laplace, as glmer nAGQ=1): {dv} ~ {between} + (1 | {subject}) + "
        f"(1 | {item}); {between} levels {', '.join(levels)} (treatment contrasts against "
        f"{levels[0]!r})"
    )
    out["notes"] = first["notes"]
    return pd.DataFrame(out)


def format_gee(
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

    Exchangeable working correlation, robust (sandwich) covariance (Liang & Zeger 1986); the
    odds ratios are population-averaged.

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
        A format whose trials all chose (or all rejected) the target, or no convergence.
    ValueError
        Fewer than 2 clusters, or bad levels.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import norm
    from statsmodels.genmod import cov_struct, families
    from statsmodels.genmod.generalized_estimating_equations import GEE

    from analysis.stats.crossed import ConvergenceError

    levels = format_levels(data, between, levels)
    df = data[[dv, between, subject]].dropna().copy()
    y = _binary(df, dv).to_numpy()
    n_clusters = df[subject].nunique()
    if n_clusters < 2:
        raise ValueError(f"the GEE needs at least 2 participants (clusters); got {n_clusters}")
    for level in levels:
        rate = y[(df[between] == level).to_numpy()].mean()
        if rate in (0.0, 1.0):
            raise ConvergenceError(
                f"every {level!r} trial {'chose' if rate else 'rejected'} the target: the odds "
                "ratios are infinite and are not reported"
            )
    fixed = _design(df, between, levels)
    exog = np.column_stack([np.ones(len(df)), df[fixed].to_numpy()])
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
    out.insert(out.columns.get_loc("p_val") + 1, "p_adj", _adjust(out["p_val"], padjust))
    out.insert(out.columns.get_loc("p_adj") + 1, "padjust", padjust)
    out["working_correlation"] = float(np.asarray(res.cov_struct.dep_params))
    out["n_obs"] = len(df)
    out["n_clusters"] = n_clusters
    out["model"] = (
        f"GEE logit: {dv} ~ {between} ({len(levels)} levels, against {levels[0]!r}), "
        f"groups={subject}, exchangeable working correlation, robust (sandwich) SE"
    )
    return out


def format_wtp(
    data: pd.DataFrame,
    *,
    dv: str = "wtp_premium_pct",
    between: str = "format",
    subject: str = "participant_id",
    item: str = "pair_id",
    levels: Sequence[str] | None = None,
    baseline: str | None = DEFAULT_BASELINE,
    transform: str | None = None,
    padjust: str = "holm",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Format contrasts of the WTP linear mixed model (REML, as ``lmer`` + lmerTest).

    ``wtp ~ format + (1 | participant) + (1 | pair)`` with format a k-level factor; each
    contrast's t test on Satterthwaite's df, as ``lmerTest::contest(m, L, joint = FALSE)``.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial; rows with an empty ``dv`` are left out.
    dv : str
        WTP premium in percent of the other product's price.
    between, subject, item : str
        Format, participant and pair columns.
    levels : sequence of str, optional
        The formats, reference first.
    baseline : str, optional
        The level mitigated formats are compared with.
    transform : {None, "log"}
        ``"log"`` models ``log(1 + premium / 100)``.
    padjust : str
        Correction across all contrasts.
    confidence : float
        Coverage of the intervals (t with the contrast's df).

    Returns
    -------
    pandas.DataFrame
        One row per contrast: ``contrast``, ``family``, ``level``, ``versus``, ``estimate``
        (difference in mean WTP), ``se``, ``statistic`` (t), ``df``, ``p_val``, ``p_val_z``,
        ``ci_low``, ``ci_high``, ``p_adj``, ``padjust``, and on every row ``intercept`` (mean
        WTP under the reference), ``sd_subject``, ``sd_item``, ``sd_residual``,
        ``loglik_reml``, ``singular``, ``n_obs``, ``n_subjects``, ``n_items``, ``transform``,
        ``formula``, ``notes``.

    Raises
    ------
    analysis.stats.crossed.ConvergenceError
        No converged fit.
    ValueError
        Bad levels, a premium of -100 % or below with ``transform="log"``, or a one-level factor.
    """
    import numpy as np

    from analysis.stats.crossed import crossed_lmm

    df = data[[dv, between, subject, item]].dropna().copy()
    levels = format_levels(df, between, levels)
    y = df[dv].astype(float)
    if transform == "log":
        if (y <= -100).any():
            raise ValueError(f"{dv!r} has premiums <= -100 %: their log is undefined")
        df["_y"] = np.log1p(y / 100.0)
    elif transform is None:
        df["_y"] = y
    else:
        raise ValueError(f"unknown transform {transform!r}; use None or 'log'")
    fixed = _design(df, between, levels)
    large, small, n_subjects, n_items = _groups(df, subject, item)
    contrasts = format_contrasts(levels, baseline)
    table = crossed_lmm(
        df[["_y", *fixed, subject, item]],
        dv="_y",
        fixed=fixed,
        large=large,
        small=small,
        confidence=confidence,
        contrasts={c.name: c.weights for c in contrasts},
    )
    out = _contrast_rows(table, contrasts, padjust)
    sd = table[table["kind"] == "sd"].set_index("term")["estimate"]
    first = table.iloc[0]
    out["intercept"] = float(first["estimate"])
    out["sd_subject"] = float(sd[subject])
    out["sd_item"] = float(sd[item])
    out["sd_residual"] = float(sd["Residual"])
    out["loglik_reml"] = float(first["loglik"])
    out["singular"] = bool(first["singular"])
    out["n_obs"] = int(first["n_obs"])
    out["n_subjects"] = n_subjects
    out["n_items"] = n_items
    out["transform"] = transform or "none"
    response = f"log(1 + {dv}/100)" if transform == "log" else dv
    out["formula"] = (
        f"{response} ~ {between} + (1 | {subject}) + (1 | {item}); {between} levels "
        f"{', '.join(levels)} (treatment contrasts against {levels[0]!r})"
    )
    out["notes"] = first["notes"]
    fit_only = {"optimizer", "converged", "reml", "criterion", "loglik", "loglik_ml", "aic_ml",
                "bic_ml"}  # fmt: skip
    return out[[c for c in out.columns if c not in fit_only]]
