"""Target-selection rates and their comparison between formats (original vs summary).

The outcome is binary (``chose_target``), the factor has two levels. The primary test is the
chi-square test of the 2x2 table with Yates' continuity correction, as R's ``chisq.test`` and
``scipy.stats.chi2_contingency`` compute it by default; the uncorrected statistic is reported beside
it. Because every participant makes several choices, :func:`choice_clustered` adds a GEE logistic
model with an exchangeable working correlation by participant as the robustness check.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "chi2_choice",
    "choice_by_pair",
    "choice_clustered",
    "choice_effects",
    "choice_glmm",
    "selection_rates",
    "wilson_ci",
]

DEFAULT_LEVELS = ("original", "summary")


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
    low = np.where(nobs > 0, low, np.nan)
    high = np.where(nobs > 0, high, np.nan)
    return low, high


# Which test each effect's p comes from, said in the table ("score test" alone would be ambiguous
# beside the chi-square p of the same 2x2 table).
P_METHODS = ["Miettinen-Nurminen score test", "Wald test of log odds ratio"]


def _levels(data: pd.DataFrame, between: str, levels: Sequence[str] | None) -> tuple[str, str]:
    present = list(dict.fromkeys(data[between].dropna()))
    if levels is None:
        if not set(DEFAULT_LEVELS) >= set(present):
            # Taking the alphabetical first level as the reference would silently set the sign
            # of every effect; the analyst has to say which level is the reference.
            raise ValueError(
                f"{between!r} holds {sorted(map(str, present))}, not {list(DEFAULT_LEVELS)}: "
                "name the reference and treatment levels explicitly (levels=(reference, "
                "treatment); on the command line --levels REFERENCE,TREATMENT)"
            )
        levels = DEFAULT_LEVELS
    if len(levels) != 2:
        raise ValueError(f"{between!r} must have exactly two levels, got {list(levels)}")
    unknown = set(present) - set(levels)
    if unknown:
        raise ValueError(f"{between!r} has values outside {list(levels)}: {sorted(unknown)}")
    return levels[0], levels[1]


def _counts(data: pd.DataFrame, dv: str, between: str, levels: tuple[str, str]):
    """Return ``[[k_ref, n_ref - k_ref], [k_trt, n_trt - k_trt]]`` as an int array."""
    import numpy as np

    y = data[dv].astype(float)
    if not y.dropna().isin([0.0, 1.0]).all():
        raise ValueError(f"{dv!r} must be 0/1")
    table = np.zeros((2, 2), dtype=np.int64)
    for i, level in enumerate(levels):
        sel = y[(data[between] == level).to_numpy() & y.notna().to_numpy()]
        k = int(sel.sum())
        table[i] = (k, len(sel) - k)
    return table


def selection_rates(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    levels: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Share of trials in which the target was chosen, per level, with Wilson intervals.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv : str
        0/1 outcome column.
    between : str
        Factor column (``format``).
    levels : sequence of str, optional
        Order of the levels; ``("original", "summary")`` when those are the values present.
    confidence : float
        Coverage of the Wilson score intervals.

    Returns
    -------
    pandas.DataFrame
        One row per level: ``<between>``, ``n`` (trials), ``n_chose``, ``estimate`` (rate),
        ``ci_low``, ``ci_high``, ``p_val`` (NaN: a rate is not a test), ``method`` (``wilson``).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"format": ["original"] * 4 + ["summary"] * 4,
    ...                    "chose_target": [1, 0, 0, 1, 1, 1, 1, 0]})
    >>> selection_rates(df)["estimate"].tolist()
    [0.5, 0.75]
    """
    import numpy as np
    import pandas as pd

    ref, trt = _levels(data, between, levels)
    table = _counts(data, dv, between, (ref, trt))
    k = table[:, 0]
    n = table.sum(axis=1)
    low, high = wilson_ci(k, n, confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(n > 0, k / np.where(n > 0, n, 1), np.nan)
    return pd.DataFrame(
        {
            between: [ref, trt],
            "n": n,
            "n_chose": k,
            "estimate": rate,
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
    """Chi-square test of independence of the 2x2 table (format x chose target).

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between : str
        0/1 outcome and two-level factor columns.
    levels : sequence of str, optional
        Order of the factor levels (reference first).
    correction : bool
        Whether the first row is the Yates-corrected test (as R ``chisq.test`` and
        ``scipy.stats.chi2_contingency`` by default). Both statistics are always returned.

    Returns
    -------
    pandas.DataFrame
        Two rows, the primary test first: ``test`` (``pearson_yates`` / ``pearson``), ``chi2``,
        ``dof``, ``p_val``, ``cramer_v`` (from the uncorrected statistic, as usual), ``n``,
        ``min_expected`` (the smallest expected count; below 5 the approximation is doubtful),
        ``primary`` (bool). ``estimate`` is the risk difference (treatment minus reference) and
        ``ci_low``/``ci_high`` its Newcombe interval, so the row is self-contained.

    Notes
    -----
    Checked against R: ``chisq.test(matrix(c(189, 104, 10845, 10933), 2))`` on the Physicians'
    Health Study table gives X-squared = 24.429 (Yates) and 25.014 without correction.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import chi2_contingency
    from scipy.stats.contingency import association

    ref, trt = _levels(data, between, levels)
    table = _counts(data, dv, between, (ref, trt))
    effects = _effects_from_table(table)
    rd = effects.iloc[0]
    rows = []
    for yates in (True, False):
        res = chi2_contingency(table, correction=yates)
        rows.append(
            {
                "test": "pearson_yates" if yates else "pearson",
                "chi2": float(res.statistic),
                "dof": int(res.dof),
                "p_val": float(res.pvalue),
                "cramer_v": float(association(table, method="cramer", correction=False))
                if (table.sum(axis=0) > 0).all() and (table.sum(axis=1) > 0).all()
                else np.nan,
                "n": int(table.sum()),
                "min_expected": float(np.min(res.expected_freq)),
                "primary": yates == correction,
                "estimate": rd["estimate"],
                "ci_low": rd["ci_low"],
                "ci_high": rd["ci_high"],
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
    if n_ref == 0 or n_trt == 0:
        nan = float("nan")
        return pd.DataFrame(
            {
                "effect": ["risk_difference", "odds_ratio"],
                "estimate": nan,
                "ci_low": nan,
                "ci_high": nan,
                "p_val": nan,
                "method": ["newcombe", "woolf"],
                "p_method": P_METHODS,
            }
        )
    rd = k_trt / n_trt - k_ref / n_ref
    # statsmodels also computes an odds ratio on the side, which divides by zero when a rate is
    # 0 or 1; the difference and its interval are still defined, so that warning is silenced.
    with np.errstate(divide="ignore", invalid="ignore"):
        # Newcombe's hybrid score interval (built from the two Wilson intervals): unlike Wald it
        # stays inside [-1, 1] and keeps its coverage near 0 or 1.
        rd_low, rd_high = confint_proportions_2indep(
            k_trt, n_trt, k_ref, n_ref, method="newcomb", compare="diff", alpha=alpha
        )
        rd_p = test_proportions_2indep(
            k_trt, n_trt, k_ref, n_ref, method="score", compare="diff"
        ).pvalue
    # Table2x2 puts the "exposed" row first; ours is the treatment level.
    t22 = Table2x2(np.array([[k_trt, f_trt], [k_ref, f_ref]], dtype=float))
    if min(k_trt, f_trt, k_ref, f_ref) == 0:
        odds, or_low, or_high, or_p = float("nan"), float("nan"), float("nan"), float("nan")
    else:
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
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Risk difference and odds ratio of choosing the target, second level vs first.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between : str
        0/1 outcome and two-level factor columns.
    levels : sequence of str, optional
        ``(reference, treatment)``; default ``("original", "summary")``.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        Rows ``risk_difference`` (Newcombe hybrid score interval; p of the Miettinen-Nurminen
        score test, statsmodels ``test_proportions_2indep(method="score")``) and
        ``odds_ratio`` (Woolf logit interval, Wald p; NaN with an empty cell), columns
        ``effect, estimate, ci_low, ci_high, p_val, method, p_method`` (which test gave the
        p: these are not the chi-square p of the same table), ``reference, treatment``.

    Notes
    -----
    Odds ratio checked against the Physicians' Health Study (Agresti, *Categorical Data Analysis*,
    table 2.3): 1.832 (1.440, 2.331).
    """
    ref, trt = _levels(data, between, levels)
    out = _effects_from_table(_counts(data, dv, between, (ref, trt)), confidence)
    out["reference"] = ref
    out["treatment"] = trt
    return out


def choice_by_pair(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    pair: str = "pair_id",
    levels: Sequence[str] | None = None,
    padjust: str = "holm",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Per-pair selection rates in both formats, their difference and a corrected test.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between, pair : str
        Outcome, format and pair columns.
    levels : sequence of str, optional
        ``(reference, treatment)``.
    padjust : str
        ``statsmodels.stats.multitest.multipletests`` method across pairs (``holm`` default,
        ``fdr_bh``, ``bonferroni``, ...).
    confidence : float
        Coverage of the Wilson and Newcombe intervals.

    Returns
    -------
    pandas.DataFrame
        One row per pair: ``pair_id``, ``n_<ref>``, ``rate_<ref>``, ``ci_low_<ref>``,
        ``ci_high_<ref>`` and the same for the treatment level; ``estimate`` (risk difference),
        ``ci_low``, ``ci_high``; ``test`` (``pearson_yates``, or ``fisher_exact`` when an expected
        count is below 5), ``statistic`` (chi-square; NaN for Fisher), ``p_val``, ``p_adj``,
        ``padjust``.
    """
    import gc

    import numpy as np
    import pandas as pd
    from scipy.stats import chi2_contingency, fisher_exact
    from statsmodels.stats.multitest import multipletests

    ref, trt = _levels(data, between, levels)
    rows = []
    # Only the three columns used: the per-pair split otherwise copies every column of the export.
    for pair_id, group in data[[dv, between, pair]].groupby(pair, sort=True):
        table = _counts(group, dv, between, (ref, trt))
        k = table[:, 0]
        n = table.sum(axis=1)
        low, high = wilson_ci(k, n, confidence)
        row: dict[str, object] = {pair: pair_id}
        for i, level in enumerate((ref, trt)):
            row[f"n_{level}"] = int(n[i])
            row[f"rate_{level}"] = k[i] / n[i] if n[i] else np.nan
            row[f"ci_low_{level}"] = float(low[i])
            row[f"ci_high_{level}"] = float(high[i])
        eff = _effects_from_table(table, confidence).iloc[0]
        row.update(estimate=eff["estimate"], ci_low=eff["ci_low"], ci_high=eff["ci_high"])
        if (n == 0).any() or (table.sum(axis=0) == 0).any():
            row.update(test="none", statistic=np.nan, p_val=np.nan)
        else:
            res = chi2_contingency(table, correction=True)
            if np.min(res.expected_freq) < 5:
                # The chi-square approximation is poor with small expected counts.
                row.update(
                    test="fisher_exact", statistic=np.nan, p_val=float(fisher_exact(table).pvalue)
                )
            else:
                row.update(
                    test="pearson_yates", statistic=float(res.statistic), p_val=float(res.pvalue)
                )
        rows.append(row)
    out = pd.DataFrame(rows)
    out["p_adj"] = np.nan
    tested = out["p_val"].notna()
    if tested.any():
        # statsmodels' Holm branch calls gc.collect(), a full collection over every object the
        # imports made (0.1 s after scipy and matplotlib are loaded); frozen objects are
        # skipped, and freeze/unfreeze only move the generation lists. Same p-values.
        gc.freeze()
        try:
            p_adj = multipletests(out.loc[tested, "p_val"], method=padjust)[1]
        finally:
            gc.unfreeze()
        out.loc[tested, "p_adj"] = p_adj
    out["padjust"] = padjust
    return out


def choice_clustered(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    subject: str = "participant_id",
    levels: Sequence[str] | None = None,
    confidence: float = 0.95,
    maxiter: int = 100,
) -> pd.DataFrame:
    """Odds ratio of choosing the target from a GEE logistic model clustered by participant.

    The chi-square test treats trials as independent; each participant contributes several. GEE
    (Liang & Zeger 1986) with an exchangeable working correlation and the robust sandwich
    covariance gives a population-averaged odds ratio whose standard error respects the clustering.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between, subject : str
        0/1 outcome, two-level factor and cluster (participant) columns.
    levels : sequence of str, optional
        ``(reference, treatment)``.
    confidence : float
        Coverage of the Wald interval.
    maxiter : int
        Iteration limit of the GEE fit.

    Returns
    -------
    pandas.DataFrame
        One row: ``effect`` (``odds_ratio``), ``estimate`` (exp(beta)), ``ci_low``, ``ci_high``,
        ``p_val``, ``log_odds``, ``se`` (of the log odds, robust), ``z``, ``n_obs``,
        ``n_clusters``, ``working_correlation`` (estimated exchangeable correlation), ``model``
        (the specification), ``converged`` (always True: see Raises).

    Raises
    ------
    analysis.stats.wtp.ConvergenceError
        The GEE iterations did not converge, or the outcome is separated by format (an empty
        cell of the 2 x 2 table: no finite odds ratio); no estimate is reported.
    ValueError
        Fewer than 2 clusters.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import norm

    # The GEE's own modules, not statsmodels.api: that imports the formula, time-series and
    # regression stacks too (~0.5 s of the 70 x 10 report's start-up).
    from statsmodels.genmod import cov_struct, families
    from statsmodels.genmod.generalized_estimating_equations import GEE

    from analysis.stats.wtp import ConvergenceError

    ref, trt = _levels(data, between, levels)
    df = data[[dv, between, subject]].dropna()
    y = df[dv].astype(float).to_numpy()
    x = (df[between] == trt).to_numpy(dtype=float)
    n_clusters = df[subject].nunique()
    if n_clusters < 2:
        raise ValueError(
            f"the GEE needs at least 2 participants (clusters) for its robust SE; got {n_clusters}"
        )
    # With only the format in the model the estimate is finite iff every cell of the 2 x 2
    # table is non-empty; otherwise statsmodels still "converges", to a huge log odds ratio with
    # a small robust SE. Refused like the GLMM refuses it.
    cells = [int(((x == f) & (y == v)).sum()) for f in (0.0, 1.0) for v in (0.0, 1.0)]
    if min(cells) == 0:
        raise ConvergenceError(
            "the outcome is (quasi-)separated by format (a format's trials all chose or all "
            "rejected the target); the GEE odds ratio is infinite and is not reported"
        )
    exog = np.column_stack([np.ones_like(x), x])
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
        # statsmodels warns on non-convergence; the flag below is checked instead.
        warnings.simplefilter("always")
        res = model.fit(maxiter=maxiter)
    if not bool(getattr(res, "converged", True)):
        raise ConvergenceError(
            f"GEE did not converge in {maxiter} iterations; no estimate is reported"
        )
    beta = float(res.params[1])
    se = float(res.bse[1])
    z = beta / se
    crit = norm.ppf(0.5 + confidence / 2)
    return pd.DataFrame(
        {
            "effect": ["odds_ratio"],
            "estimate": [np.exp(beta)],
            "ci_low": [np.exp(beta - crit * se)],
            "ci_high": [np.exp(beta + crit * se)],
            "p_val": [float(2 * norm.sf(abs(z)))],
            "log_odds": [beta],
            "se": [se],
            "z": [z],
            "n_obs": [len(df)],
            "n_clusters": [int(codes.max()) + 1 if len(codes) else 0],
            "working_correlation": [float(res.cov_struct.dep_params)],
            "model": [
                f"GEE logit: {dv} ~ {between}[{trt} vs {ref}], groups={subject}, "
                "exchangeable working correlation, robust (sandwich) SE"
            ],
            "converged": [True],
            "reference": [ref],
            "treatment": [trt],
        }
    )


def choice_glmm(
    data: pd.DataFrame,
    *,
    dv: str = "chose_target",
    between: str = "format",
    subject: str = "participant_id",
    item: str = "pair_id",
    levels: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Conditional odds ratio of choosing the target from a logistic GLMM (as ``glmer``).

    ``chose_target ~ format + (1 | participant) + (1 | pair)``, binomial logit, fitted by the
    Laplace approximation (:func:`analysis.stats.glmm.crossed_glmm`; ``lme4::glmer`` with
    ``nAGQ = 1``, Bates et al. 2015). Each participant and each pair makes its own baseline
    propensity; the odds ratio is conditional on them (subject- and item-specific), so it is
    larger in magnitude than GEE's population-averaged one when the random effects vary.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between, subject, item : str
        0/1 outcome, two-level factor, and the crossed grouping columns.
    levels : sequence of str, optional
        ``(reference, treatment)``.
    confidence : float
        Coverage of the Wald interval.

    Returns
    -------
    pandas.DataFrame
        One row: ``effect`` (``odds_ratio``), ``estimate`` (exp(beta)), ``ci_low``, ``ci_high``
        (Wald, exponentiated), ``p_val`` (z test), ``log_odds``, ``se`` (of the log odds, lme4's
        Hessian-based default), ``z``, ``intercept_log_odds``, ``sd_subject``, ``sd_item``
        (random-intercept SDs, logit scale), ``singular`` (as ``lme4::isSingular``),
        ``converged`` (always True: see Raises), ``loglik``, ``deviance`` (-2 log L of the
        Laplace approximation, what ``summary(glmer)`` prints as "deviance"; not R's
        ``deviance()``, which is the sum of the conditional deviance residuals), ``aic``,
        ``bic``, ``n_obs``, ``n_subjects``, ``n_items``, ``model`` (the formula),
        ``optimizer``, ``max_grad`` (glmer's convergence statistic, warned on above 0.002),
        ``notes``, ``reference``, ``treatment``.

    Raises
    ------
    analysis.stats.crossed.ConvergenceError
        Separation, or no converged fit; nothing is reported.
    ValueError
        A format without trials, or a grouping factor with one level (glmer refuses it).

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
    import pandas as pd

    from analysis.stats.glmm import crossed_glmm

    ref, trt = _levels(data, between, levels)
    df = data[[dv, between, subject, item]].dropna()
    missing = [lvl for lvl in (ref, trt) if not (df[between] == lvl).any()]
    if missing:
        raise ValueError(
            f"{between!r} has no trial with level {missing[0]!r}: the odds ratio needs both "
            f"{ref!r} and {trt!r}"
        )
    # The grouping columns keep their names (they appear in the notes); the model's own
    # outcome and predictor get names that cannot collide with them.
    df = pd.DataFrame(
        {
            "_y": df[dv].astype(float).to_numpy(),
            "_x": (df[between] == trt).to_numpy(dtype=float),
            subject: df[subject].to_numpy(),
            item: df[item].to_numpy(),
        }
    )
    n_subjects, n_items = df[subject].nunique(), df[item].nunique()
    for group, n in ((subject, n_subjects), (item, n_items)):
        if n < 2:
            # glmer: "grouping factors must have > 1 sampled level".
            raise ValueError(f"{group!r} has {n} level; a random intercept needs at least 2")
    # lme4 orders the random terms by their number of levels, more first.
    large, small = (subject, item) if n_subjects >= n_items else (item, subject)
    table = crossed_glmm(df, dv="_y", fixed=["_x"], large=large, small=small, confidence=confidence)
    eff = table[table["kind"] == "fixed"].set_index("term")
    sd = table[table["kind"] == "sd"].set_index("term")["estimate"]
    beta, se = float(eff.loc["_x", "estimate"]), float(eff.loc["_x", "se"])
    first = table.iloc[0]
    return pd.DataFrame(
        {
            "effect": ["odds_ratio"],
            "estimate": [np.exp(beta)],
            "ci_low": [np.exp(float(eff.loc["_x", "ci_low"]))],
            "ci_high": [np.exp(float(eff.loc["_x", "ci_high"]))],
            "p_val": [float(eff.loc["_x", "p_val"])],
            "log_odds": [beta],
            "se": [se],
            "z": [beta / se],
            "intercept_log_odds": [float(eff.loc["Intercept", "estimate"])],
            "sd_subject": [float(sd[subject])],
            "sd_item": [float(sd[item])],
            "singular": [bool(first["singular"])],
            "converged": [bool(first["converged"])],
            "loglik": [float(first["loglik"])],
            "deviance": [float(first["deviance"])],
            "aic": [float(first["aic"])],
            "bic": [float(first["bic"])],
            "n_obs": [int(first["n_obs"])],
            "n_subjects": [n_subjects],
            "n_items": [n_items],
            "model": [
                f"logistic GLMM (Laplace, as glmer nAGQ=1): {dv} ~ {between}[{trt} vs {ref}] "
                f"+ (1 | {subject}) + (1 | {item})"
            ],
            "optimizer": [first["optimizer"]],
            "max_grad": [float(first["max_grad"])],
            "notes": [first["notes"]],
            "reference": [ref],
            "treatment": [trt],
        }
    )
