"""Willingness to pay across k >= 2 formats: linear mixed-effects models (REML).

Model choice (``wtp_mixed``)
----------------------------
The model is ``wtp ~ format + (1 | participant) + (1 | pair)``: crossed random intercepts, format
a k-level factor with the contrasts of :func:`analysis.stats.choice.format_contrasts`.

- ``crossed_sparse`` (the default at every size): profiled REML in a sparse formulation
  (:func:`crossed_lmm`), lme4's criterion and lmerTest's Satterthwaite df; checked against
  lme4 1.1-31 / lmerTest 3.1-3 to 1e-6 (``tests/analysis/r/``). 70 x 10 in ~0.03 s CPU (less
  than ``lmer`` on the same rows, docs/benchmarks.md), 60,000 rows in ~0.2 s. Used while the
  smaller factor has at most ``MAX_SPARSE_SMALL_LEVELS`` levels.
- ``crossed``: statsmodels ``MixedLM`` with one constant group and two variance components, on
  request only (a cross-check): it builds the design densely (time and memory grow with
  ``n_obs x (n_participants + n_pairs)``), its optimizers stop near rather than at a boundary
  and it gives no df.
- ``pair_fixed``: ``wtp ~ format + C(pair) + (1 | participant)``, statsmodels, block-diagonal by
  participant; used when both factors are too large for the sparse fit, or on request.

The result says which model ran and why, and whether the fit is singular (``singular``: a
variance or correlation at the boundary, as ``lme4::isSingular``).

Convergence
-----------
The sparse fit minimises lme4's criterion with lmer's own derivative-free optimizer (BOBYQA):
first with lmer's default settings from lmer's start (where lmer stops decides ``singular``),
then tightened, as the reference fits in ``tests/analysis/r/``, from there. statsmodels optimizers
are tried in the given order (``lbfgs`` first); the first fit that reports convergence with a
usable Hessian is kept and named in the ``optimizer`` column. If no fit converges,
:class:`ConvergenceError` is raised: a fit that did not converge is never reported.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from analysis.stats.choice import (
    DEFAULT_BASELINE,
    add_format_dummies,
    adjust_p,
    contrast_rows,
    format_contrasts,
    format_levels,
)
from analysis.stats.crossed import (
    SINGULAR_TOL,
    ConvergenceError,
    crossed_lmm,
    crossed_order,
    crossed_slopes_lmm,
    slopes_lrt,
)
from analysis.stats.simplify import model_formula, simplify_slopes

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_OPTIMIZERS",
    "ConvergenceError",
    "crossed_lmm",
    "crossed_slopes_lmm",
    "lmm",
    "prepare_wtp",
    "wtp_by_format",
    "wtp_mixed",
    "wtp_slopes",
]

DEFAULT_OPTIMIZERS = ("lbfgs", "bfgs", "powell")
# The sparse crossed fit factorises a dense matrix over the smaller factor's levels.
MAX_SPARSE_SMALL_LEVELS = 3_000
# The columns of wtp_slopes taken from its final model's fixed-effect row.
_SLOPE_EFFECT = ("estimate", "se", "statistic", "df", "p_val", "p_val_z", "ci_low", "ci_high")


def _fit_converged(model, *, reml: bool, optimizers: Sequence[str], maxiter: int | None = None):
    """Fit ``model`` with each optimizer in turn; return ``(result, optimizer, notes)``."""
    import numpy as np

    attempts: list[str] = []
    for optimizer in optimizers:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                kwargs = {} if maxiter is None else {"maxiter": maxiter}
                res = model.fit(reml=reml, method=[optimizer], **kwargs)
            except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
                attempts.append(f"{optimizer}: failed ({exc})")
                continue
        messages = [str(w.message) for w in caught if issubclass(w.category, Warning)]
        boundary = any("boundary of the parameter space" in m for m in messages)
        hessian_bad = any("Hessian matrix" in m for m in messages)
        grad_failed = any("optimization failed" in m for m in messages)
        if not res.converged or grad_failed:
            attempts.append(f"{optimizer}: did not converge")
            continue
        if hessian_bad and not boundary:
            # A non-positive-definite Hessian away from the boundary means the SEs are not usable.
            attempts.append(f"{optimizer}: Hessian not positive definite")
            continue
        # "Random effects covariance is singular" comes from intermediate iterates (it was seen
        # with a participant SD of 8.19); whether the *fit* is singular is decided from the
        # estimates instead (the ``singular`` column of :func:`lmm`).
        notes = attempts + [
            m for m in messages if "Retrying" not in m and "covariance is singular" not in m
        ]
        return res, optimizer, notes
    raise ConvergenceError(
        "mixed model did not converge with any optimizer ("
        + "; ".join(attempts)
        + "); try other optimizers or a simpler model. No estimate is reported."
    )


def lmm(
    data: pd.DataFrame,
    *,
    formula: str,
    groups: str | None = None,
    re_formula: str | None = None,
    vc_formula: dict[str, str] | None = None,
    reml: bool = True,
    optimizers: Sequence[str] = DEFAULT_OPTIMIZERS,
    maxiter: int | None = None,
    confidence: float = 0.95,
    contrasts: Mapping[str, Mapping[str, float]] | None = None,
) -> pd.DataFrame:
    """Fit a linear mixed model with statsmodels ``MixedLM`` and return a tidy table.

    Parameters
    ----------
    data : pandas.DataFrame
        Long data.
    formula : str
        Fixed-effects formula (patsy), e.g. ``"Reaction ~ Days"``.
    groups : str, optional
        Grouping column for ``re_formula``. Omit for purely crossed designs given by
        ``vc_formula``: all rows then form one group (the statsmodels idiom for crossed effects).
    re_formula : str, optional
        Random-effects formula within ``groups`` (``"~Days"``: intercept and slope, correlated).
        Default: a random intercept when ``groups`` is given, none otherwise.
    vc_formula : dict, optional
        Variance components, e.g. ``{"plate": "0 + C(plate)", "sample": "0 + C(sample)"}``.
    reml : bool
        REML (default, as ``lmer``) or ML.
    optimizers : sequence of str
        Optimizers tried in order until one converges.
    maxiter : int, optional
        Iteration limit passed to each optimizer (statsmodels' default when omitted).
    confidence : float
        Coverage of the Wald intervals of the fixed effects.
    contrasts : mapping, optional
        Linear combinations of the fixed effects by name, each ``{term: weight}`` (terms as
        statsmodels names them, ``Intercept`` first; absent terms weigh 0): ``kind ==
        "contrast"`` rows with the columns of the fixed rows, from the same covariance.

    Returns
    -------
    pandas.DataFrame
        One row per fixed effect (``kind == "fixed"``) with ``term, estimate, se, statistic``
        (z = estimate / se; lme4 prints the same ratio as "t value"), ``p_val`` (normal),
        ``ci_low, ci_high``; then one row per random-effect standard deviation and correlation
        (``kind == "sd"`` / ``"corr"``, ``estimate`` only) and the residual SD. Every row also has
        ``optimizer, converged, reml, n_obs``, ``singular`` (a relative SD or Cholesky diagonal
        below 1e-4, as ``lme4::isSingular``, or statsmodels' boundary warning), ``loglik``
        (REML or ML, statsmodels' ``llf``) and ``notes``.

    Raises
    ------
    ConvergenceError
        No optimizer converged.

    Notes
    -----
    Checked against lme4 (``tests/analysis/stats/test_wtp.py``): ``sleepstudy`` and ``Penicillin``.
    """
    import numpy as np
    import pandas as pd
    import statsmodels.formula.api as smf
    from scipy.stats import norm

    if groups is None:
        group_values = np.ones(len(data))
        re = re_formula or "0"
    else:
        group_values = data[groups].to_numpy()
        re = re_formula
    model = smf.mixedlm(formula, data, groups=group_values, re_formula=re, vc_formula=vc_formula)
    res, optimizer, notes = _fit_converged(model, reml=reml, optimizers=optimizers, maxiter=maxiter)
    crit = norm.ppf(0.5 + confidence / 2)
    fe = res.fe_params
    cov_fe = np.asarray(res.cov_params().loc[fe.index, fe.index])
    named = {term: {term: 1.0} for term in fe.index}
    named.update(contrasts or {})
    rows: list[dict[str, object]] = []
    for i, (term, weights) in enumerate(named.items()):
        w = np.array([weights.get(t, 0.0) for t in fe.index])
        est, s = float(w @ fe.to_numpy()), float(np.sqrt(w @ cov_fe @ w))
        rows.append(
            {
                "kind": "fixed" if i < len(fe) else "contrast",
                "term": term,
                "estimate": est,
                "se": s,
                "statistic": est / s,
                "p_val": float(2 * norm.sf(abs(est / s))),
                "ci_low": est - crit * s,
                "ci_high": est + crit * s,
            }
        )
    cov_re = np.atleast_2d(np.asarray(res.cov_re))
    re_names = [str(n) for n in getattr(res.cov_re, "index", [])] if model.k_re else []
    prefix = f"{groups}: " if groups else ""
    for i, name in enumerate(re_names):
        rows.append({"kind": "sd", "term": prefix + name, "estimate": float(np.sqrt(cov_re[i, i]))})
    for i in range(len(re_names)):
        for j in range(i + 1, len(re_names)):
            corr = cov_re[i, j] / np.sqrt(cov_re[i, i] * cov_re[j, j])
            rows.append(
                {
                    "kind": "corr",
                    "term": f"{prefix}{re_names[i]} x {re_names[j]}",
                    "estimate": float(corr),
                }
            )
    for name, var in zip(model.exog_vc.names, np.asarray(res.vcomp), strict=True):
        rows.append({"kind": "sd", "term": name, "estimate": float(np.sqrt(var))})
    rows.append({"kind": "sd", "term": "Residual", "estimate": float(np.sqrt(res.scale))})
    out = pd.DataFrame(rows)
    out["optimizer"] = optimizer
    out["converged"] = True
    out["reml"] = reml
    out["n_obs"] = int(res.nobs)
    # lme4's isSingular: a diagonal element of the relative Cholesky factor of a random-effects
    # covariance (an SD, or an SD times sqrt(1 - r^2)) or a relative variance-component SD
    # below 1e-4. statsmodels' own boundary warning (an absolute variance < 0.01) also counts:
    # its optimizers stop near, not at, the boundary (0.003 where lme4 gives 0).
    scale = float(res.scale)
    rel = []
    if re_names:
        chol = np.linalg.cholesky(cov_re / scale + 1e-300 * np.eye(len(re_names)))
        rel += list(np.abs(np.diag(chol)))
    rel += list(np.sqrt(np.maximum(np.asarray(res.vcomp, float), 0) / scale))
    boundary_warned = any("boundary of the parameter space" in m for m in notes)
    out["singular"] = bool(any(r < SINGULAR_TOL for r in rel) or boundary_warned)
    out["loglik"] = float(res.llf)
    out["notes"] = "; ".join(notes)
    return out


def prepare_wtp(
    data: pd.DataFrame,
    dv: str = "wtp_premium_pct",
    between: str = "format",
    levels: Sequence[str] | None = None,
    transform: str | None = None,
    needed: Sequence[str] = ("participant_id", "pair_id"),
) -> tuple[pd.DataFrame, tuple[str, ...], list[str]]:
    """The WTP rows a model fits: outcome ``y`` on its scale and the format dummies.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial; rows with an empty ``dv`` (or ``needed`` column) are left out.
    dv, between : str
        Premium (percent of the other price) and format columns.
    levels : sequence of str, optional
        The formats, reference first (:func:`analysis.stats.choice.format_levels`, taken over
        every row so that a format without WTP answers is named).
    transform : {None, "log"}
        ``"log"``: ``y = log(1 + premium / 100)``, the log of the stated price relative to the
        other product's price (defined at a zero premium).
    needed : sequence of str
        Other columns the model uses (the grouping factors).

    Returns
    -------
    (pandas.DataFrame, tuple of str, list of str)
        The rows with ``y`` and one 0/1 column ``_x<j>`` per non-reference level; the levels;
        the dummies' names.

    Raises
    ------
    ValueError
        A format without WTP answers (the effect is not identified), a premium of -100 % or
        below with the log, an unknown transform, a grouping factor with one level, or the
        same answer everywhere.
    """
    import numpy as np

    df = data[list(dict.fromkeys([dv, between, *needed]))].dropna().copy()
    named = format_levels(data, between) if levels is None else levels
    missing = [level for level in named if not (df[between] == level).any()]
    if missing:
        raise ValueError(
            f"WTP answers only under {sorted(set(df[between]))}; none under {list(missing)}: "
            "the format effect is not identified"
        )
    levels = format_levels(df, between, named)
    for group in needed:
        if df[group].nunique() < 2:
            # lme4: "grouping factors must have > 1 sampled level".
            raise ValueError(
                f"{group!r} has {df[group].nunique()} level among the WTP answers; a random "
                "intercept needs at least 2"
            )
    y = df[dv].astype(float)
    if transform == "log":
        if (y <= -100).any():
            raise ValueError(f"{dv!r} has premiums <= -100 %: their log is undefined")
        df["y"] = np.log1p(y / 100.0)
    elif transform is None:
        df["y"] = y
    else:
        raise ValueError(f"unknown transform {transform!r}; use None or 'log'")
    if df["y"].nunique() < 2:
        raise ValueError(f"every {dv!r} answer is {y.iloc[0]:g}: there is no variance to model")
    return df, levels, add_format_dummies(df, between, levels)


def wtp_mixed(
    data: pd.DataFrame,
    *,
    dv: str = "wtp_premium_pct",
    between: str = "format",
    subject: str = "participant_id",
    item: str = "pair_id",
    levels: Sequence[str] | None = None,
    baseline: str | None = DEFAULT_BASELINE,
    transform: str | None = None,
    model: str = "auto",
    optimizers: Sequence[str] = DEFAULT_OPTIMIZERS,
    maxiter: int | None = None,
    padjust: str = "holm",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Format contrasts of willingness to pay from a linear mixed model (REML).

    ``wtp ~ format + (1 | participant) + (1 | pair)`` with format a k-level factor, treatment
    contrasts against the reference and each mitigated level against the baseline
    (:func:`analysis.stats.choice.format_contrasts`); on the default model each contrast's t
    test has Satterthwaite's df, as ``lmerTest::contest(m, L, joint = FALSE)``.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial; rows with an empty ``dv`` are left out.
    dv : str
        WTP premium in percent of the other product's price.
    between, subject, item : str
        Format, participant and pair columns.
    levels : sequence of str, optional
        The formats, reference first; default ``original``, ``summary``, then the rest,
        required when there is no ``original`` (the sign of every effect depends on it).
    baseline : str, optional
        The level mitigated formats are compared with.
    transform : {None, "log"}
        ``"log"`` models ``log(1 + premium / 100)`` (:func:`prepare_wtp`); the estimates are
        then log ratios.
    model : {"auto", "crossed_sparse", "crossed", "pair_fixed"}
        ``crossed_sparse``: :func:`crossed_lmm` (lme4's profiled REML, Satterthwaite df);
        ``crossed``: the same model with statsmodels' dense ``MixedLM`` (a cross-check; normal
        p, no df); ``pair_fixed``: ``y ~ format + C(item) + (1|subject)`` (statsmodels).
        ``auto`` picks ``crossed_sparse`` whenever the smaller factor has at most 3,000 levels,
        else ``pair_fixed``.
    optimizers : sequence of str
        statsmodels optimizers tried in order (``crossed`` and ``pair_fixed`` only).
    maxiter : int, optional
        Iteration limit of each statsmodels optimizer.
    padjust : str
        Correction across the contrasts.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per contrast: ``contrast``, ``family``, ``level``, ``versus``, ``estimate``
        (difference in mean WTP), ``se``, ``statistic`` (estimate / se), ``df``
        (Satterthwaite; NaN on the statsmodels paths), ``p_val`` (t with ``df``, else normal),
        ``p_adj``, ``padjust``, ``p_method``, ``p_val_z`` (normal), ``ci_low``, ``ci_high``,
        ``d_standardised`` (estimate / the SD of one observation, sqrt(sd_subject^2 +
        sd_item^2 + sd_residual^2), Westfall, Kenny & Judd 2014); and on every row
        ``intercept``, ``intercept_se``, ``intercept_ci_low``, ``intercept_ci_high`` (mean WTP
        with the reference format for an average participant and pair), ``icc_subject``,
        ``icc_item``, ``model``, ``formula``, ``reason`` (why that model), ``optimizer``,
        ``converged``, ``singular`` (as ``lme4::isSingular``), ``n_obs``, ``n_subjects``,
        ``n_items``, ``sd_subject``, ``sd_item`` (NaN for ``pair_fixed``), ``sd_residual``,
        ``loglik_reml``, ``aic_ml``, ``bic_ml`` (ML refit; NaN on the statsmodels paths),
        ``transform``, ``notes``.

    Raises
    ------
    ConvergenceError
        No optimizer converged; nothing is reported.
    ValueError
        A format without WTP answers, or a grouping factor with one level.
    """
    import numpy as np
    import pandas as pd

    df, levels, fixed = prepare_wtp(data, dv, between, levels, transform, [subject, item])
    contrasts = format_contrasts(levels, baseline)
    weights = {c.name: c.weights for c in contrasts}
    n_obs, n_subjects, n_items = len(df), df[subject].nunique(), df[item].nunique()
    if model == "auto":
        if min(n_subjects, n_items) <= MAX_SPARSE_SMALL_LEVELS:
            chosen = "crossed_sparse"
            reason = (
                "crossed random intercepts by profiled REML in a sparse formulation "
                "(crossed_lmm: lme4's criterion, Satterthwaite df as lmerTest; checked against "
                "both to 1e-6)"
            )
        else:
            chosen = "pair_fixed"
            reason = (
                "pair as fixed effect + participant random intercept: both factors have more "
                f"than {MAX_SPARSE_SMALL_LEVELS:,} levels, too many for the crossed fit"
            )
    elif model in ("crossed", "crossed_sparse", "pair_fixed"):
        chosen, reason = model, "requested"
    else:
        raise ValueError(
            f"unknown model {model!r}; use auto, crossed_sparse, crossed or pair_fixed"
        )
    df["_subject"] = pd.factorize(df[subject])[0]
    df["_item"] = pd.factorize(df[item])[0]
    formula = f"{dv} ~ {between} + (1 | {subject}) + (1 | {item})"
    fit = {"optimizers": optimizers, "maxiter": maxiter, "confidence": confidence}
    # The statsmodels paths name the contrasts' terms as their design columns.
    named = {n: dict(zip(["Intercept", *fixed], w, strict=True)) for n, w in weights.items()}
    if chosen == "crossed":
        table = lmm(
            df,
            formula="y ~ " + " + ".join(fixed),
            vc_formula={"subject": "0 + C(_subject)", "item": "0 + C(_item)"},
            contrasts=named,
            **fit,
        )
    elif chosen == "crossed_sparse":
        large, small = ("_subject", "_item") if n_subjects >= n_items else ("_item", "_subject")
        table = crossed_lmm(
            df, dv="y", fixed=fixed, large=large, small=small, confidence=confidence,
            contrasts=weights,
        )  # fmt: skip
        table["term"] = table["term"].replace({"_subject": "subject", "_item": "item"})
        table["notes"] = table["notes"].str.replace("_subject", subject).str.replace("_item", item)
    else:
        table = lmm(
            df,
            formula="y ~ " + " + ".join(fixed) + " + C(_item)",
            groups="_subject",
            contrasts=named,
            **fit,
        )
        formula = f"{dv} ~ {between} + C({item}) + (1 | {subject})"
    if transform == "log":
        formula = formula.replace(dv, f"log(1 + {dv}/100)", 1)
    sds = table[table["kind"] == "sd"].set_index("term")["estimate"]
    icpt = table[table["kind"] == "fixed"].set_index("term").loc["Intercept"]
    sd_subject = float(sds.get("subject", sds.get("_subject: Group", np.nan)))
    sd_item = float(sds.get("item", np.nan))
    sd_residual = float(sds["Residual"])
    total_var = float(sum(v * v for v in (sd_subject, sd_item, sd_residual) if np.isfinite(v)))
    out = contrast_rows(table, contrasts, padjust)
    has_df = "df" in out.columns and bool(np.isfinite(out["df"].to_numpy(float)).all())
    if not has_df:
        out["df"] = np.nan
    if "p_val_z" not in out.columns:
        out["p_val_z"] = out["p_val"]
    first = table.iloc[0]
    columns = ["contrast", "family", "level", "versus", "estimate", "se", "statistic", "df",
               "p_val", "p_adj", "padjust", "p_method", "p_val_z", "ci_low", "ci_high"]  # fmt: skip
    out["p_method"] = "t, Satterthwaite df" if has_df else "normal (Wald z)"
    # One constructor, not an assign of each column: pandas' inserts cost more than the fit.
    return pd.DataFrame(
        {
            **{c: out[c] for c in columns},
            "d_standardised": out["estimate"] / np.sqrt(total_var),
            "intercept": float(icpt["estimate"]),
            "intercept_se": float(icpt["se"]),
            "intercept_ci_low": float(icpt["ci_low"]),
            "intercept_ci_high": float(icpt["ci_high"]),
            "icc_subject": sd_subject**2 / total_var,
            "icc_item": sd_item**2 / total_var,
            "model": chosen,
            "formula": formula,
            "reason": reason,
            "optimizer": first["optimizer"],
            "converged": True,
            "singular": bool(first["singular"]),
            "n_obs": n_obs,
            "n_subjects": n_subjects,
            "n_items": n_items,
            "sd_subject": sd_subject,
            "sd_item": sd_item,
            "sd_residual": sd_residual,
            "loglik_reml": float(first["loglik"]) if "loglik" in table else np.nan,
            "aic_ml": float(first["aic_ml"]) if "aic_ml" in table else np.nan,
            "bic_ml": float(first["bic_ml"]) if "bic_ml" in table else np.nan,
            "transform": transform or "none",
            "notes": first["notes"],
        }
    )


def wtp_by_format(
    data: pd.DataFrame,
    *,
    dv: str = "wtp_premium_pct",
    between: str = "format",
    subject: str = "participant_id",
    levels: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Mean WTP premium per format, with a t interval over participants' means.

    Averaging within participant first makes the interval respect the repeated measures (each
    participant counts once per format).

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between, subject : str
        Premium, format and participant columns.
    levels : sequence of str, optional
        Order of the levels (:func:`analysis.stats.choice.format_levels`).
    confidence : float
        Coverage of the interval.

    Returns
    -------
    pandas.DataFrame
        One row per level: ``<between>``, ``n_obs``, ``n_subjects``, ``mean_obs`` (mean over
        trials), ``estimate`` (mean of participant means), ``sd`` (of participant means),
        ``ci_low``, ``ci_high``, ``p_val`` (NaN).
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import t

    rows = []
    df = data[[dv, between, subject]].dropna()
    # A format without answers gets its row (n_obs 0): the table describes what was asked.
    for level in format_levels(data, between) if levels is None else levels:
        sel = df[df[between] == level]
        means = sel.groupby(subject)[dv].mean().astype(float)
        n = len(means)
        mean = float(means.mean()) if n else np.nan
        sd = float(means.std(ddof=1)) if n > 1 else np.nan
        half = t.ppf(0.5 + confidence / 2, n - 1) * sd / np.sqrt(n) if n > 1 else np.nan
        rows.append(
            {
                between: level,
                "n_obs": len(sel),
                "n_subjects": n,
                "mean_obs": float(sel[dv].astype(float).mean()) if len(sel) else np.nan,
                "estimate": mean,
                "sd": sd,
                "ci_low": mean - half,
                "ci_high": mean + half,
                "p_val": np.nan,
            }
        )
    return pd.DataFrame(rows)


def wtp_slopes(
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
    """Each contrast with random slopes, and the likelihood-ratio test of those slopes.

    Per contrast, the trials of its two formats are fitted with the maximal structure of this
    design (Barr et al. 2013), ``wtp ~ x + (1 + x | participant) + (1 + x | pair)`` with ``x``
    the 0/1 code of the contrast's level (:func:`crossed_slopes_lmm`): when the format effect
    varies across pairs, the intercept-only model's interval is too narrow. (With k formats a
    single model would carry a k x k covariance per factor; the pairwise models keep the
    structure lme4 users fit and read.) When the maximal model is singular it is simplified by
    the rule of :mod:`analysis.stats.simplify` (drop the correlations, then the zero-variance
    terms, refitting each time). Every number of a row (estimate, SDs, the slopes' test) is
    its final model's; the maximal model's estimate and every step are reported beside it. The
    slopes are tested by a likelihood-ratio test of the final model against the same model
    without its slope variances and correlations (ML fits, as ``anova(m0, m)`` in lme4;
    chi-square with as many df as slope parameters, conservative at the boundary).

    The formulas name a numeric 0/1 column (``format_summary``: 1 for the contrast's level)
    rather than the factor, so that they paste into ``lmer`` as the model fitted here: with a
    factor, lme4's ``(1 + format || g)`` is not ``(1 | g) + (0 + format | g)``.

    Parameters
    ----------
    data, dv, between, subject, item, levels, baseline, transform, padjust, confidence
        As :func:`wtp_mixed`.

    Returns
    -------
    pandas.DataFrame
        One row per contrast: ``contrast``, ``family``, ``level``, ``versus``, ``estimate``,
        ``se``, ``statistic``, ``df`` (Satterthwaite), ``p_val`` (t), ``p_adj``, ``padjust``,
        ``p_val_z``, ``ci_low``, ``ci_high`` (all of the final model), ``formula`` (the final
        model's), ``dummy`` (the 0/1 column the formulas name), ``maximal_formula``,
        ``maximal_estimate``, ``maximal_se``, ``maximal_singular`` (the maximal model's),
        ``simplified``, ``simplification`` (each step: formula, what was dropped and why,
        singular or not), ``singular`` (the final model), ``sd_subject``,
        ``sd_subject_slope``, ``corr_subject``, ``sd_item``, ``sd_item_slope``, ``corr_item``
        (0 / NaN for dropped terms), ``sd_residual``, ``loglik_reml``, ``aic_ml``, ``bic_ml``,
        ``lrt_chisq``, ``lrt_df``, ``lrt_p`` (the final model's slopes against ``lrt_null``;
        NaN with ``lrt_df`` 0 when no slope is left), ``lrt_null``, ``n_obs``, ``transform``,
        ``notes``.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import chi2

    df, levels, _ = prepare_wtp(data, dv, between, levels, transform, [subject, item])
    rows = []
    for c in format_contrasts(levels, baseline):
        part = df[df[between].isin([c.versus, c.level])].copy()
        part["x"] = (part[between] == c.level).astype(float)
        large, small, _, _ = crossed_order(part, subject, item)
        # A numeric 0/1 column, not the factor: with a factor, lme4's `||` does not split
        # (1 + format || g) into (1 | g) + (0 + format | g) but fits a 2 x 2 covariance of the
        # two level dummies, a different model. With the 0/1 column lmer fits them as written.
        dummy = re.sub(r"\W+", "_", f"{between}_{c.level}").strip("_")
        table, steps = simplify_slopes(
            part, dv="y", x="x", large=large, small=small, confidence=confidence,
            names={"y": dv, "x": dummy},
        )  # fmt: skip
        free = np.array([int(v) for v in steps["free"].iloc[-1]], bool)
        dev1 = float(steps["ml_deviance"].iloc[-1])
        lrt, lrt_df, null = slopes_lrt(
            part, y="y", x="x", large=large, small=small, free=free, dev1=dev1
        )
        eff = table[table["kind"] == "fixed"].set_index("term").loc["x"]
        est = table[table["kind"] != "fixed"].set_index("term")["estimate"]
        formulas = [
            steps["formula"].iloc[0],
            steps["formula"].iloc[-1],
            model_formula(null, dv, dummy, large, small),
        ]
        if transform == "log":
            formulas = [f.replace(dv, f"log(1 + {dv}/100)", 1) for f in formulas]
        history = "; ".join(
            f"{r.step}. {r.formula}: {r.action}; {'singular' if r.singular else 'not singular'}"
            for r in steps.itertuples()
        )
        rows.append(
            {
                "contrast": c.name,
                "family": c.family,
                "level": c.level,
                "versus": c.versus,
                **{k: eff[k] for k in _SLOPE_EFFECT},
                "formula": formulas[1],
                "dummy": (
                    f"{dummy} = 1 for {c.level}, 0 for {c.versus} (a numeric column: lme4 fits "
                    f"these formulas as written; with {between} a factor, `||` is a different "
                    "model)"
                ),
                "maximal_formula": formulas[0],
                "maximal_estimate": float(steps["estimate"].iloc[0]),
                "maximal_se": float(steps["se"].iloc[0]),
                "maximal_singular": bool(steps["singular"].iloc[0]),
                "simplified": len(steps) > 1,
                "simplification": history,
                "singular": bool(table["singular"].iloc[0]),
                "sd_subject": est[f"{subject}: Intercept"],
                "sd_subject_slope": est[f"{subject}: x"],
                "corr_subject": est[f"{subject}: Intercept x x"],
                "sd_item": est[f"{item}: Intercept"],
                "sd_item_slope": est[f"{item}: x"],
                "corr_item": est[f"{item}: Intercept x x"],
                "sd_residual": est["Residual"],
                "loglik_reml": float(table["loglik"].iloc[0]),
                "aic_ml": float(table["aic_ml"].iloc[0]),
                "bic_ml": float(table["bic_ml"].iloc[0]),
                "lrt_chisq": lrt,
                "lrt_df": lrt_df,
                "lrt_p": float(chi2.sf(lrt, lrt_df)) if lrt_df else np.nan,
                "lrt_null": formulas[2],
                "n_obs": len(part),
                "transform": transform or "none",
                "notes": table["notes"].iloc[0],
            }
        )
    out = pd.DataFrame(rows)
    out.insert(out.columns.get_loc("p_val") + 1, "p_adj", adjust_p(out["p_val"], padjust))
    out.insert(out.columns.get_loc("p_adj") + 1, "padjust", padjust)
    return out
