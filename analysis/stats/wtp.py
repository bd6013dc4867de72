"""Willingness to pay: linear mixed-effects models (REML).

Model choice (``wtp_mixed``)
----------------------------
The model is ``wtp ~ format + (1 | participant) + (1 | pair)``: crossed random intercepts.

- ``crossed``: statsmodels ``MixedLM`` with one constant group and two variance components. It
  builds the design densely, so time and memory grow with ``n_obs x (n_participants + n_pairs)``
  (measured on this project's 2-core VM: 3,000 rows x 310 levels ~3 s, 6,000 x 610 ~17 s; the
  issue reports 1,000 x 20 items at 37-160 s and ~2 GB). Used up to ``max_crossed_cells``.
- ``crossed_sparse``: the same model by profiled REML in a sparse formulation
  (:func:`crossed_lmm`; 100,000 rows in about a second). Used above that size while the smaller
  factor has at most ``MAX_SPARSE_SMALL_LEVELS`` levels.
- ``pair_fixed``: ``wtp ~ format + C(pair) + (1 | participant)``, statsmodels, block-diagonal by
  participant; in balanced designs with few pairs it gives the same format estimate. Used when
  both factors are too large for the above, or on request.

The result says which model ran and why.

Convergence
-----------
statsmodels optimizers are tried in the given order (``lbfgs`` first); the first fit that reports
convergence with a usable Hessian is kept and named in the ``optimizer`` column. The sparse fit
uses bounded Nelder-Mead on the two relative SDs, as lme4 uses derivative-free optimizers. If no
fit converges, :class:`ConvergenceError` is raised: a fit that did not converge is never reported.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_OPTIMIZERS",
    "ConvergenceError",
    "lmm",
    "wtp_by_format",
    "wtp_mixed",
]

DEFAULT_OPTIMIZERS = ("lbfgs", "bfgs", "powell")
# n_obs x (participants + pairs) above which the dense crossed fit is replaced (module docstring).
MAX_CROSSED_CELLS = 1_000_000
# The sparse crossed fit factorises a dense matrix over the smaller factor's levels.
MAX_SPARSE_SMALL_LEVELS = 3_000


class ConvergenceError(RuntimeError):
    """No optimizer produced a converged mixed-model fit; nothing is reported."""


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
        notes = attempts + [m for m in messages if "Retrying" not in m]
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

    Returns
    -------
    pandas.DataFrame
        One row per fixed effect (``kind == "fixed"``) with ``term, estimate, se, statistic``
        (z = estimate / se; lme4 prints the same ratio as "t value"), ``p_val`` (normal),
        ``ci_low, ci_high``; then one row per random-effect standard deviation and correlation
        (``kind == "sd"`` / ``"corr"``, ``estimate`` only) and the residual SD. Every row also has
        ``optimizer, converged, reml, n_obs, notes``.

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
    se = res.bse_fe
    rows: list[dict[str, object]] = []
    for term in fe.index:
        est, s = float(fe[term]), float(se[term])
        rows.append(
            {
                "kind": "fixed",
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
    out["notes"] = "; ".join(notes)
    return out


def _prepare(
    data: pd.DataFrame,
    dv: str,
    between: str,
    levels: Sequence[str] | None,
    transform: str | None,
    needed: Sequence[str],
) -> tuple[pd.DataFrame, str, str]:
    import numpy as np

    from analysis.stats.choice import _levels

    ref, trt = _levels(data, between, levels)
    df = data[list(dict.fromkeys([dv, between, *needed]))].dropna().copy()
    y = df[dv].astype(float)
    if transform == "log":
        if (y <= -100).any():
            raise ValueError(f"{dv!r} has premiums <= -100 %: their log is undefined")
        # log of the stated price relative to the other price: defined at a zero premium.
        df["y"] = np.log1p(y / 100.0)
    elif transform is None:
        df["y"] = y
    else:
        raise ValueError(f"unknown transform {transform!r}; use None or 'log'")
    df["x"] = (df[between] == trt).astype(float)
    return df, ref, trt


def wtp_mixed(
    data: pd.DataFrame,
    *,
    dv: str = "wtp_premium_pct",
    between: str = "format",
    subject: str = "participant_id",
    item: str = "pair_id",
    levels: Sequence[str] | None = None,
    transform: str | None = None,
    model: str = "auto",
    max_crossed_cells: int = MAX_CROSSED_CELLS,
    optimizers: Sequence[str] = DEFAULT_OPTIMIZERS,
    maxiter: int | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Effect of format on willingness to pay from a linear mixed model (REML).

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial; rows with an empty ``dv`` are left out.
    dv : str
        WTP premium in percent of the other product's price.
    between, subject, item : str
        Format, participant and pair columns.
    levels : sequence of str, optional
        ``(reference, treatment)``; default ``("original", "summary")``.
    transform : {None, "log"}
        ``"log"`` models ``log(1 + premium / 100)``, the log of the stated price relative to the
        other product's price (defined at a zero premium); the estimate is then a log ratio.
    model : {"auto", "crossed", "crossed_sparse", "pair_fixed"}
        ``crossed``: ``y ~ format + (1|subject) + (1|item)`` with statsmodels (dense);
        ``crossed_sparse``: the same model with :func:`crossed_lmm`; ``pair_fixed``:
        ``y ~ format + C(item) + (1|subject)``. ``auto`` picks ``crossed`` when
        ``n_obs * (n_subjects + n_items) <= max_crossed_cells``, else ``crossed_sparse`` when
        the smaller factor has at most 3,000 levels, else ``pair_fixed`` (module docstring).
    max_crossed_cells : int
        Size budget of the dense crossed fit.
    optimizers : sequence of str
        Tried in order until one converges.
    maxiter : int, optional
        Iteration limit of each optimizer.
    confidence : float
        Coverage of the Wald interval.

    Returns
    -------
    pandas.DataFrame
        One row: ``effect`` (``format[summary]``), ``estimate``, ``se``, ``statistic`` (z),
        ``p_val``, ``ci_low``, ``ci_high``, ``model`` (``crossed``, ``crossed_sparse`` or
        ``pair_fixed``), ``formula``,
        ``reason`` (why that model), ``optimizer``, ``converged``, ``n_obs``, ``n_subjects``,
        ``n_items``, ``sd_subject``, ``sd_item`` (NaN for ``pair_fixed``), ``sd_residual``,
        ``transform``, ``notes`` (warnings, e.g. a variance on the boundary).

    Raises
    ------
    ConvergenceError
        No optimizer converged; nothing is reported.
    """
    import numpy as np
    import pandas as pd

    df, ref, trt = _prepare(data, dv, between, levels, transform, [subject, item])
    n_obs = len(df)
    n_subjects = df[subject].nunique()
    n_items = df[item].nunique()
    cells = n_obs * (n_subjects + n_items)
    small_levels = min(n_subjects, n_items)
    if model == "auto":
        if cells <= max_crossed_cells:
            chosen = "crossed"
            reason = (
                f"crossed random intercepts: n_obs x (participants + pairs) = {cells:,} "
                f"<= {max_crossed_cells:,}, small enough for statsmodels' dense crossed fit"
            )
        elif small_levels <= MAX_SPARSE_SMALL_LEVELS:
            chosen = "crossed_sparse"
            reason = (
                f"crossed random intercepts, sparse formulation: n_obs x (participants + pairs) "
                f"= {cells:,} > {max_crossed_cells:,} is too large for statsmodels' dense "
                "crossed fit (time and memory grow with that product); the same model is fitted "
                "by profiled REML through the Schur complement of the participant block "
                "(crossed_lmm, checked against lme4 and statsmodels)"
            )
        else:
            chosen = "pair_fixed"
            reason = (
                f"pair as fixed effect + participant random intercept: n_obs x (participants + "
                f"pairs) = {cells:,} > {max_crossed_cells:,} and both factors have more than "
                f"{MAX_SPARSE_SMALL_LEVELS:,} levels, too many for either crossed fit"
            )
    elif model in ("crossed", "crossed_sparse", "pair_fixed"):
        chosen, reason = model, "requested"
    else:
        raise ValueError(
            f"unknown model {model!r}; use auto, crossed, crossed_sparse or pair_fixed"
        )

    df["_subject"] = pd.factorize(df[subject])[0]
    df["_item"] = pd.factorize(df[item])[0]
    formula = f"{dv} ~ {between} + (1 | {subject}) + (1 | {item})"
    if chosen == "crossed":
        table = lmm(
            df,
            formula="y ~ x",
            vc_formula={"subject": "0 + C(_subject)", "item": "0 + C(_item)"},
            optimizers=optimizers,
            maxiter=maxiter,
            confidence=confidence,
        )
    elif chosen == "crossed_sparse":
        large, small = ("_subject", "_item") if n_subjects >= n_items else ("_item", "_subject")
        table = crossed_lmm(
            df, dv="y", fixed=["x"], large=large, small=small, confidence=confidence
        )
        table["term"] = table["term"].replace({"_subject": "subject", "_item": "item"})
        table["notes"] = table["notes"].str.replace("_subject", subject).str.replace("_item", item)
    else:
        table = lmm(
            df,
            formula="y ~ x + C(_item)",
            groups="_subject",
            optimizers=optimizers,
            maxiter=maxiter,
            confidence=confidence,
        )
        formula = f"{dv} ~ {between} + C({item}) + (1 | {subject})"
    if transform == "log":
        formula = formula.replace(dv, f"log(1 + {dv}/100)", 1)
    fixed = table[table["kind"] == "fixed"].set_index("term")
    sds = table[table["kind"] == "sd"].set_index("term")["estimate"]
    eff = fixed.loc["x"]
    return pd.DataFrame(
        {
            "effect": [f"{between}[{trt}]"],
            "estimate": [eff["estimate"]],
            "se": [eff["se"]],
            "statistic": [eff["statistic"]],
            "p_val": [eff["p_val"]],
            "ci_low": [eff["ci_low"]],
            "ci_high": [eff["ci_high"]],
            "model": [chosen],
            "formula": [formula],
            "reason": [reason],
            "optimizer": [table["optimizer"].iloc[0]],
            "converged": [True],
            "n_obs": [n_obs],
            "n_subjects": [n_subjects],
            "n_items": [n_items],
            "sd_subject": [float(sds.get("subject", sds.get("_subject: Group", np.nan)))],
            "sd_item": [float(sds.get("item", np.nan))],
            "sd_residual": [float(sds["Residual"])],
            "transform": [transform or "none"],
            "notes": [table["notes"].iloc[0]],
            "reference": [ref],
            "treatment": [trt],
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
        Order of the levels.
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

    from analysis.stats.choice import _levels

    ref, trt = _levels(data, between, levels)
    rows = []
    df = data[[dv, between, subject]].dropna()
    for level in (ref, trt):
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


def crossed_lmm(
    data: pd.DataFrame,
    *,
    dv: str,
    fixed: Sequence[str] = (),
    large: str,
    small: str,
    reml: bool = True,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Linear mixed model with two crossed random intercepts, fitted in a sparse formulation.

    ``dv ~ 1 + fixed + (1 | large) + (1 | small)`` by profiled REML, as ``lme4::lmer``
    (Bates et al. 2015, section 3). Written by hand because statsmodels fits crossed effects
    with a dense ``n_obs x levels`` design (minutes and gigabytes beyond ~10,000 rows x 1,000
    participants) and no installed library offers a sparse crossed fit. The trick: with one
    factor's block diagonal (each row belongs to one participant) the relative covariance
    ``A = Lambda' Z' Z Lambda + I`` is solved through the Schur complement of that diagonal,
    an ``n_small x n_small`` dense matrix, so each deviance evaluation costs
    O(n_obs + n_large x n_small) instead of O(n_obs x levels).

    Parameters
    ----------
    data : pandas.DataFrame
        Long data; rows with a missing value in the used columns are dropped.
    dv : str
        Outcome column.
    fixed : sequence of str
        Numeric fixed-effect columns (an intercept is always included).
    large, small : str
        Grouping columns: ``large`` may have many levels (participants), ``small`` should have
        at most a few thousand (pairs, items).
    reml : bool
        REML (default) or ML.
    confidence : float
        Coverage of the Wald intervals.

    Returns
    -------
    pandas.DataFrame
        Rows as :func:`lmm`: fixed effects (``kind == "fixed"``: ``term, estimate, se,
        statistic, p_val, ci_low, ci_high``; SEs are ``sigma^2 (X' V^-1 X)^-1`` at the optimum,
        as lme4) and SDs of ``large``, ``small`` and ``Residual``; plus ``optimizer``
        (``nelder-mead``, bounded, on the relative SDs), ``converged``, ``reml``, ``n_obs``,
        ``notes``.

    Raises
    ------
    ConvergenceError
        The optimizer did not report convergence.

    Notes
    -----
    Checked against lme4 on ``Penicillin`` and against statsmodels' dense crossed fit
    (``tests/analysis/stats/test_wtp.py``).
    """
    import numpy as np
    import pandas as pd
    import scipy.sparse as sp
    from scipy.optimize import minimize
    from scipy.stats import norm

    df = data[[dv, *fixed, large, small]].dropna()
    n = len(df)
    X = np.column_stack([np.ones(n), *(df[c].to_numpy(float) for c in fixed)])
    y = df[dv].to_numpy(float)
    W = np.column_stack([X, y])
    p = X.shape[1]
    g1, _ = pd.factorize(df[large])
    g2, _ = pd.factorize(df[small])
    q1, q2 = g1.max() + 1, g2.max() + 1
    n1 = np.bincount(g1, minlength=q1).astype(float)
    n2 = np.bincount(g2, minlength=q2).astype(float)
    counts = sp.csr_matrix((np.ones(n), (g1, g2)), shape=(q1, q2))
    # Z'W for each factor: per-level column sums of [X | y].
    zw1 = np.zeros((q1, p + 1))
    zw2 = np.zeros((q2, p + 1))
    np.add.at(zw1, g1, W)
    np.add.at(zw2, g2, W)
    wtw = W.T @ W
    dof = n - p if reml else n

    def pieces(theta):
        t1, t2 = theta
        d1 = t1 * t1 * n1 + 1.0
        d2 = t2 * t2 * n2 + 1.0
        c = counts.multiply(t1 * t2).tocsr()  # off-diagonal block of A
        cd = sp.diags(1.0 / d1) @ c
        schur = np.diag(d2) - (c.T @ cd).toarray()
        chol = np.linalg.cholesky(schur)
        f = t1 * zw1  # Lambda' Z' W, large block
        g = t2 * zw2
        # A^{-1} [f; g] through the Schur complement of the diagonal block.
        rhs = g - cd.T @ f
        b = np.linalg.solve(schur, rhs)
        a = (f - c @ b) / d1[:, None]
        m = wtw - (f.T @ a + g.T @ b)  # W' V^{-1} W (V in units of sigma^2)
        logdet_a = np.log(d1).sum() + 2 * np.log(np.diag(chol)).sum()
        return m, logdet_a

    def deviance(theta):
        m, logdet_a = pieces(theta)
        xtx, xty, yty = m[:p, :p], m[:p, p], m[p, p]
        beta = np.linalg.solve(xtx, xty)
        r2 = yty - xty @ beta
        dev = logdet_a + dof * (1 + np.log(2 * np.pi * r2 / dof))
        if reml:
            dev += np.linalg.slogdet(xtx)[1]
        return dev

    # Derivative-free, as lme4 (Nelder-Mead / BOBYQA on theta): finite-difference gradients of
    # a deviance in the hundreds of thousands are too noisy for L-BFGS-B's stopping rules. The
    # function tolerance scales with the deviance, whose rounding noise grows with n; a restart
    # from the first optimum guards against a collapsed simplex.
    x0 = np.array([1.0, 1.0])
    options = {"xatol": 1e-6, "fatol": max(1e-8, 1e-12 * abs(deviance(x0))), "maxiter": 4000}
    bounds = [(0, None), (0, None)]
    res = minimize(deviance, x0=x0, method="Nelder-Mead", bounds=bounds, options=options)
    if res.success:
        res = minimize(deviance, x0=res.x, method="Nelder-Mead", bounds=bounds, options=options)
    if not res.success:
        raise ConvergenceError(
            f"sparse crossed REML: Nelder-Mead did not converge ({res.message}); no estimate"
        )
    theta = res.x
    m, _ = pieces(theta)
    xtx, xty, yty = m[:p, :p], m[:p, p], m[p, p]
    beta = np.linalg.solve(xtx, xty)
    sigma2 = (yty - xty @ beta) / dof
    cov = sigma2 * np.linalg.inv(xtx)
    crit = norm.ppf(0.5 + confidence / 2)
    rows: list[dict[str, object]] = []
    for i, term in enumerate(["Intercept", *fixed]):
        est, s = float(beta[i]), float(np.sqrt(cov[i, i]))
        rows.append(
            {
                "kind": "fixed",
                "term": term,
                "estimate": est,
                "se": s,
                "statistic": est / s,
                "p_val": float(2 * norm.sf(abs(est / s))),
                "ci_low": est - crit * s,
                "ci_high": est + crit * s,
            }
        )
    sigma = float(np.sqrt(sigma2))
    rows.append({"kind": "sd", "term": large, "estimate": float(theta[0]) * sigma})
    rows.append({"kind": "sd", "term": small, "estimate": float(theta[1]) * sigma})
    rows.append({"kind": "sd", "term": "Residual", "estimate": sigma})
    out = pd.DataFrame(rows)
    out["optimizer"] = "nelder-mead"
    out["converged"] = True
    out["reml"] = reml
    out["n_obs"] = n
    boundary = [name for name, t in zip((large, small), theta, strict=True) if t < 1e-4]
    out["notes"] = f"variance of {', '.join(boundary)} at the boundary (0)" if boundary else ""
    return out
