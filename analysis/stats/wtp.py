"""Willingness to pay: linear mixed-effects models (REML).

Model choice (``wtp_mixed``)
----------------------------
The model is ``wtp ~ format + (1 | participant) + (1 | pair)``: crossed random intercepts.

- ``crossed_sparse`` (the default at every size): profiled REML in a sparse formulation
  (:func:`crossed_lmm`), lme4's criterion and lmerTest's Satterthwaite df; checked against
  lme4 1.1-31 / lmerTest 3.1-3 to 1e-6 (``tests/analysis/r/``). 70 x 10 in ~0.1 s, 100,000 rows
  in about a second. Used while the smaller factor has at most ``MAX_SPARSE_SMALL_LEVELS``
  levels.
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
The sparse fit uses bounded Nelder-Mead on the two relative SDs, as lme4 uses derivative-free
optimizers, with tolerances far below lme4's defaults and two restarts. statsmodels optimizers
are tried in the given order (``lbfgs`` first); the first fit that reports convergence with a
usable Hessian is kept and named in the ``optimizer`` column. If no fit converges,
:class:`ConvergenceError` is raised: a fit that did not converge is never reported.
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
    "crossed_lmm",
    "crossed_slopes_lmm",
    "lmm",
    "wtp_by_format",
    "wtp_mixed",
    "wtp_slopes",
]

DEFAULT_OPTIMIZERS = ("lbfgs", "bfgs", "powell")
# Participants x pairs up to which the count table is held dense (8 bytes a cell: 40 MB).
DENSE_COUNT_CELLS = 5_000_000
SINGULAR_TOL = 1e-4  # lme4's isSingular: a relative SD (theta) below this is at the boundary.
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
        ``(reference, treatment)``; default ``("original", "summary")``, required when the
        column holds other values (the sign of the effect depends on it).
    transform : {None, "log"}
        ``"log"`` models ``log(1 + premium / 100)``, the log of the stated price relative to the
        other product's price (defined at a zero premium); the estimate is then a log ratio.
    model : {"auto", "crossed_sparse", "crossed", "pair_fixed"}
        ``crossed_sparse``: ``y ~ format + (1|subject) + (1|item)`` by :func:`crossed_lmm`
        (lme4's profiled REML, Satterthwaite df); ``crossed``: the same model with statsmodels'
        dense ``MixedLM`` (a cross-check; normal p, no df); ``pair_fixed``:
        ``y ~ format + C(item) + (1|subject)`` (statsmodels). ``auto`` picks ``crossed_sparse``
        whenever the smaller factor has at most 3,000 levels, else ``pair_fixed``.
    optimizers : sequence of str
        statsmodels optimizers tried in order (``crossed`` and ``pair_fixed`` only).
    maxiter : int, optional
        Iteration limit of each statsmodels optimizer.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row: ``effect`` (``format[summary]``), ``estimate``, ``se``, ``statistic``
        (estimate / se), ``df`` (Satterthwaite, as lmerTest; NaN on the statsmodels paths),
        ``p_val`` (t with ``df``, else normal), ``p_method``, ``p_val_z`` (normal),
        ``ci_low``, ``ci_high`` (t with ``df``, else normal), ``intercept``, ``intercept_se``,
        ``intercept_ci_low``, ``intercept_ci_high`` (the mean WTP with the reference format, for
        an average participant and pair), ``d_standardised`` (estimate / the SD of one
        observation, sqrt(sd_subject^2 + sd_item^2 + sd_residual^2), Westfall, Kenny & Judd
        2014), ``icc_subject``, ``icc_item`` (each variance over that total), ``model``,
        ``formula``, ``reason`` (why that model), ``optimizer``, ``converged``, ``singular``
        (a variance or correlation at the boundary, as ``lme4::isSingular``), ``n_obs``,
        ``n_subjects``, ``n_items``, ``sd_subject``, ``sd_item`` (NaN for ``pair_fixed``),
        ``sd_residual``, ``loglik_reml``, ``aic_ml``, ``bic_ml`` (ML refit; NaN on the
        statsmodels paths), ``transform``, ``notes``, ``reference``, ``treatment``.

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
    small_levels = min(n_subjects, n_items)
    if model == "auto":
        if small_levels <= MAX_SPARSE_SMALL_LEVELS:
            chosen = "crossed_sparse"
            reason = (
                "crossed random intercepts by profiled REML in a sparse formulation "
                "(crossed_lmm: lme4's criterion, Satterthwaite df as lmerTest; matches both to "
                "1e-6, tests/analysis/stats/test_wtp_lme4.py)"
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
    eff, icpt = fixed.loc["x"], fixed.loc["Intercept"]
    sd_subject = float(sds.get("subject", sds.get("_subject: Group", np.nan)))
    sd_item = float(sds.get("item", np.nan))
    sd_residual = float(sds["Residual"])
    components = [v for v in (sd_subject, sd_item, sd_residual) if np.isfinite(v)]
    total_var = float(sum(v * v for v in components))
    has_df = "df" in fixed.columns and np.isfinite(float(eff.get("df", np.nan)))

    def col(name):
        return float(table[name].iloc[0]) if name in table.columns else np.nan

    return pd.DataFrame(
        {
            "effect": [f"{between}[{trt}]"],
            "estimate": [eff["estimate"]],
            "se": [eff["se"]],
            "statistic": [eff["statistic"]],
            "df": [float(eff["df"]) if has_df else np.nan],
            "p_val": [eff["p_val"]],
            "p_method": ["t, Satterthwaite df" if has_df else "normal (Wald z)"],
            "p_val_z": [float(eff.get("p_val_z", eff["p_val"]))],
            "ci_low": [eff["ci_low"]],
            "ci_high": [eff["ci_high"]],
            "intercept": [icpt["estimate"]],
            "intercept_se": [icpt["se"]],
            "intercept_ci_low": [icpt["ci_low"]],
            "intercept_ci_high": [icpt["ci_high"]],
            "d_standardised": [float(eff["estimate"]) / np.sqrt(total_var)],
            "icc_subject": [sd_subject**2 / total_var],
            "icc_item": [sd_item**2 / total_var],
            "model": [chosen],
            "formula": [formula],
            "reason": [reason],
            "optimizer": [table["optimizer"].iloc[0]],
            "converged": [True],
            "singular": [bool(table["singular"].iloc[0])],
            "n_obs": [n_obs],
            "n_subjects": [n_subjects],
            "n_items": [n_items],
            "sd_subject": [sd_subject],
            "sd_item": [sd_item],
            "sd_residual": [sd_residual],
            "loglik_reml": [col("loglik")],
            "aic_ml": [col("aic_ml")],
            "bic_ml": [col("bic_ml")],
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


class _CrossedProblem:
    """Profiled (RE)ML deviance of ``y ~ X + (1 | large) + (1 | small)`` in a sparse form.

    ``theta = (sd_large, sd_small) / sigma`` (lme4's relative covariance factor for two scalar
    random intercepts). ``A = Lambda' Z' Z Lambda + I`` is solved through the Schur complement
    of its diagonal ``large`` block, an ``n_small x n_small`` dense matrix.
    """

    def __init__(self, X, y, g1, g2):
        import numpy as np
        import scipy.sparse as sp

        n = len(y)
        self.n, self.p = n, X.shape[1]
        W = np.column_stack([X, y])
        q1, q2 = g1.max() + 1, g2.max() + 1
        self.n1 = np.bincount(g1, minlength=q1).astype(float)
        self.n2 = np.bincount(g2, minlength=q2).astype(float)
        self.counts = sp.csr_matrix((np.ones(n), (g1, g2)), shape=(q1, q2))
        # Dense counts when they are small: scipy.sparse's per-call overhead (~1 ms) dominates
        # a 70 x 10 table, and the optimizer needs a few hundred evaluations.
        self.dense = q1 * q2 <= DENSE_COUNT_CELLS
        if self.dense:
            self.counts = self.counts.toarray()
        # Z'W for each factor: per-level column sums of [X | y].
        self.zw1 = np.zeros((q1, self.p + 1))
        self.zw2 = np.zeros((q2, self.p + 1))
        np.add.at(self.zw1, g1, W)
        np.add.at(self.zw2, g2, W)
        self.wtw = W.T @ W
        # Start and bounds of the optimizer on theta, and which entries are SDs (lme4's
        # ``lower == 0``): the fit is singular when one of those is below SINGULAR_TOL.
        self.theta0 = np.array([1.0, 1.0])
        self.bounds = [(0, None), (0, None)]
        self.diag_index = [0, 1]

    def pieces(self, theta):
        """Return ``(W' V^-1 W, log det A)`` with ``V`` in units of ``sigma^2``."""
        import numpy as np
        import scipy.sparse as sp

        t1, t2 = theta
        d1 = t1 * t1 * self.n1 + 1.0
        d2 = t2 * t2 * self.n2 + 1.0
        if self.dense:
            c = self.counts * (t1 * t2)  # off-diagonal block of A
            cd = c / d1[:, None]
            schur = np.diag(d2) - c.T @ cd
        else:
            c = self.counts.multiply(t1 * t2).tocsr()
            cd = sp.diags(1.0 / d1) @ c
            schur = np.diag(d2) - (c.T @ cd).toarray()
        chol = np.linalg.cholesky(schur)
        f = t1 * self.zw1  # Lambda' Z' W, large block
        g = t2 * self.zw2
        # A^{-1} [f; g] through the Schur complement of the diagonal block.
        b = np.linalg.solve(schur, g - cd.T @ f)
        a = (f - c @ b) / d1[:, None]
        m = self.wtw - (f.T @ a + g.T @ b)
        logdet_a = np.log(d1).sum() + 2 * np.log(np.diag(chol)).sum()
        return m, logdet_a

    def _split(self, theta):
        import numpy as np

        m, logdet_a = self.pieces(theta)
        p = self.p
        xtx, xty, yty = m[:p, :p], m[:p, p], m[p, p]
        beta = np.linalg.solve(xtx, xty)
        return xtx, beta, yty - xty @ beta, logdet_a

    def deviance(self, theta, reml: bool = True) -> float:
        """-2 log-likelihood (REML criterion when ``reml``) profiled over beta and sigma."""
        import numpy as np

        xtx, _, r2, logdet_a = self._split(theta)
        dof = self.n - self.p if reml else self.n
        dev = logdet_a + dof * (1 + np.log(2 * np.pi * r2 / dof))
        if reml:
            dev += np.linalg.slogdet(xtx)[1]
        return float(dev)

    def deviance_vp(self, varpar) -> float:
        """REML criterion at ``(theta, sigma)``, sigma not profiled (lmerTest's ``devfun_vp``)."""
        import numpy as np

        *theta, sigma = varpar
        xtx, _, r2, logdet_a = self._split(theta)
        s2 = sigma * sigma
        dof = self.n - self.p
        return float(logdet_a + np.linalg.slogdet(xtx)[1] + dof * np.log(2 * np.pi * s2) + r2 / s2)

    def vcov_vp(self, varpar):
        """Covariance of the fixed effects at ``(theta, sigma)``: ``sigma^2 (X'V^-1X)^-1``."""
        import numpy as np

        *theta, sigma = varpar
        return sigma * sigma * np.linalg.inv(self._split(theta)[0])

    def fit(self, reml: bool = True):
        """Minimise the profiled deviance over ``theta >= 0``; return ``(theta, deviance)``."""
        import numpy as np
        from scipy.optimize import minimize

        def dev(theta):
            return self.deviance(theta, reml)

        # Derivative-free, as lme4 (Nelder-Mead / BOBYQA on theta): finite-difference
        # gradients of a deviance in the hundreds of thousands are too noisy for L-BFGS-B's
        # stopping rules. The tolerances are far below lme4's defaults so that the fit stops
        # *at* the optimum (the reference numbers in tests/analysis/r/ are lme4's at a tightened
        # optimum). Near the optimum a simplex can cycle on the deviance's rounding noise
        # without meeting both tolerances (seen on Penicillin), so convergence is judged over
        # restarts: one run met the tolerances and a restart from the best point found no lower
        # deviance beyond that noise.
        x0 = self.theta0
        bounds = self.bounds
        scale = abs(dev(x0))
        options = {"xatol": 1e-9, "fatol": 1e-13 * scale, "maxiter": 1000 * len(x0)}

        def run(start):
            return minimize(dev, x0=start, method="Nelder-Mead", bounds=bounds, options=options)

        res = run(x0)
        met = bool(res.success)
        settled = False
        for _ in range(3):
            again = run(res.x)
            met = met or bool(again.success)
            settled = again.fun >= res.fun - 1e-10 * scale
            if again.fun < res.fun:
                res = again
            if settled and met:
                break
        if not (met and settled):
            raise ConvergenceError(
                f"sparse crossed {'REML' if reml else 'ML'}: Nelder-Mead did not converge "
                f"({res.message}); no estimate"
            )
        return np.asarray(res.x, float), float(res.fun)


class _CrossedSlopesProblem(_CrossedProblem):
    """Profiled (RE)ML deviance of ``y ~ X + (1 + x | large) + (1 + x | small)``.

    lme4's formulation (Bates et al. 2015, section 3): each factor has a 2 x 2 lower-triangular
    relative covariance factor ``T`` (``theta`` = its entries column-wise, as ``getME(m,
    "theta")``: large first, the factor with more levels, as lme4 orders its terms), so that
    the random effects of a level are ``sigma T u``, ``u ~ N(0, I)``. ``A = Lambda' Z' Z
    Lambda + I`` is block diagonal over the ``large`` levels (2 x 2 blocks), so it is solved
    through the Schur complement of that block, a ``2 n_small x 2 n_small`` dense matrix.
    """

    def __init__(self, X, y, x, g1, g2):
        import numpy as np

        n = len(y)
        self.n, self.p = n, X.shape[1]
        W = np.column_stack([X, y])
        z = np.column_stack([np.ones(n), x])  # the random-effect covariates of a row
        q1, q2 = g1.max() + 1, g2.max() + 1
        zz = z[:, :, None] * z[:, None, :]  # per-row 2 x 2
        self.m_cell = np.zeros((q1, q2, 2, 2))
        np.add.at(self.m_cell, (g1, g2), zz)
        self.m1 = self.m_cell.sum(axis=1)
        self.m2 = self.m_cell.sum(axis=0)
        zw = z[:, :, None] * W[:, None, :]  # per-row 2 x (p + 1)
        self.zw1 = np.zeros((q1, 2, self.p + 1))
        self.zw2 = np.zeros((q2, 2, self.p + 1))
        np.add.at(self.zw1, g1, zw)
        np.add.at(self.zw2, g2, zw)
        self.wtw = W.T @ W
        self.q1, self.q2 = q1, q2
        # lme4's start: T = I for both factors; the off-diagonal entries are unbounded.
        self.theta0 = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
        self.bounds = [(0, None), (None, None), (0, None)] * 2
        self.diag_index = [0, 2, 3, 5]

    @staticmethod
    def factor(t):
        import numpy as np

        return np.array([[t[0], 0.0], [t[1], t[2]]])

    def pieces(self, theta):
        """Return ``(W' V^-1 W, log det A)`` with ``V`` in units of ``sigma^2``."""
        import numpy as np

        t1, t2 = self.factor(theta[:3]), self.factor(theta[3:])
        q1, q2 = self.q1, self.q2
        # Everything as stacked 2 x 2 products (matmul broadcasts over the levels): einsum's
        # generic loops were 10x slower here.
        d1 = t1.T @ self.m1 @ t1 + np.eye(2)  # (q1, 2, 2): the diagonal blocks of A
        d2 = t2.T @ self.m2 @ t2 + np.eye(2)  # (q2, 2, 2)
        c = t1.T @ self.m_cell @ t2  # (q1, q2, 2, 2): the off-diagonal block, per cell
        det1 = d1[:, 0, 0] * d1[:, 1, 1] - d1[:, 0, 1] * d1[:, 1, 0]
        inv1 = np.empty_like(d1)
        inv1[:, 0, 0] = d1[:, 1, 1] / det1
        inv1[:, 1, 1] = d1[:, 0, 0] / det1
        inv1[:, 0, 1] = -d1[:, 0, 1] / det1
        inv1[:, 1, 0] = -d1[:, 1, 0] / det1
        cmat = c.transpose(0, 2, 1, 3).reshape(q1, 2, 2 * q2)  # rows (j, a), columns (l, d)
        cd = inv1 @ cmat  # D1^-1 C, per large level
        schur = -(cmat.reshape(2 * q1, 2 * q2).T @ cd.reshape(2 * q1, 2 * q2))
        idx = np.arange(q2)
        schur4 = schur.reshape(q2, 2, q2, 2)
        schur4[idx, :, idx, :] += d2
        chol = np.linalg.cholesky(schur)
        f = t1.T @ self.zw1  # (q1, 2, p + 1): Lambda' Z' W, large block
        g = (t2.T @ self.zw2).reshape(2 * q2, -1)
        ff = f.reshape(2 * q1, -1)
        b = np.linalg.solve(schur, g - cd.reshape(2 * q1, 2 * q2).T @ ff)
        a = inv1 @ (f - cmat @ b)  # (q1, 2, p + 1)
        m = self.wtw - (ff.T @ a.reshape(2 * q1, -1) + g.T @ b)
        logdet_a = np.log(det1).sum() + 2 * np.log(np.diag(chol)).sum()
        return m, logdet_a

    def fit(self, reml: bool = True):
        """Minimise the profiled deviance over the six entries of ``theta``.

        Nelder-Mead to a moderate tolerance, then L-BFGS-B with central-difference gradients
        from there (six parameters: a simplex alone needs thousands of evaluations to reach
        the tolerance of the intercept-only fit).
        """
        import numpy as np
        from scipy.optimize import minimize

        def dev(theta):
            return self.deviance(theta, reml)

        scale = abs(dev(self.theta0))
        first = minimize(
            dev,
            x0=self.theta0,
            method="Nelder-Mead",
            bounds=self.bounds,
            options={"xatol": 1e-6, "fatol": 1e-10 * scale, "maxiter": 6000, "adaptive": True},
        )
        polish = minimize(
            dev,
            x0=first.x,
            method="L-BFGS-B",
            bounds=self.bounds,
            jac="3-point",
            options={"ftol": 1e-15, "gtol": 1e-9, "maxiter": 500},
        )
        best = polish if polish.fun <= first.fun else first
        # Converged: the simplex met its tolerances, and the gradient polish did not move the
        # criterion beyond its rounding noise, or ended by its own convergence test.
        settled = polish.success or abs(polish.fun - first.fun) <= 1e-9 * scale
        if not (first.success and settled):
            raise ConvergenceError(
                f"sparse crossed random-slope {'REML' if reml else 'ML'} fit did not converge "
                f"({first.message}; {polish.message}); no estimate"
            )
        return np.asarray(best.x, float), float(best.fun)


def _one_blas_thread():
    """Context in which BLAS runs on one thread (a no-op without threadpoolctl).

    Every product in the sparse fit is at most ``n_small`` wide; BLAS threads only add
    synchronisation there, and on a loaded 2-core machine a 20 x 3,000 x 20 product took
    9 ms with OpenBLAS' threads against 1 ms on one (bench/wtp_models.py). threadpoolctl comes
    with scikit-learn, a dependency of the analysis extra.
    """
    from contextlib import nullcontext

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings it
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _hessian(fun, x, rel_step: float = 1e-4):
    """Central-difference Hessian of a scalar function (Richardson-extrapolated once)."""
    import numpy as np

    x = np.asarray(x, float)
    k = len(x)

    def at(h):
        out = np.empty((k, k))
        f0 = fun(x)
        for i in range(k):
            ei = np.zeros(k)
            ei[i] = h[i]
            out[i, i] = (fun(x + ei) - 2 * f0 + fun(x - ei)) / h[i] ** 2
            for j in range(i):
                ej = np.zeros(k)
                ej[j] = h[j]
                val = (
                    fun(x + ei + ej) - fun(x + ei - ej) - fun(x - ei + ej) + fun(x - ei - ej)
                ) / (4 * h[i] * h[j])
                out[i, j] = out[j, i] = val
        return out

    h = rel_step * np.maximum(np.abs(x), 1e-2) * 64
    h1, h2 = at(h), at(h / 2)
    return (4 * h2 - h1) / 3


def _jacobian(fun, x, rel_step: float = 1e-4):
    """Central-difference Jacobian of an array-valued function: ``out[i] = d fun / d x_i``."""
    import numpy as np

    x = np.asarray(x, float)
    out = []
    for i in range(len(x)):
        h = rel_step * max(abs(x[i]), 1e-2)
        e = np.zeros(len(x))
        e[i] = h
        out.append((fun(x + e) - fun(x - e)) / (2 * h))
    return out


def _satterthwaite_df(problem: _CrossedProblem, theta, sigma: float, contrasts):
    """Satterthwaite denominator df of each contrast row ``L`` (as lmerTest).

    ``df = 2 (L C L')^2 / (g' A g)`` with ``C = vcov(beta)`` as a function of the variance
    parameters ``(theta, sigma)``, ``g`` its gradient along ``L``, and ``A = 2 H^-1`` the
    asymptotic covariance of the variance parameters from the Hessian ``H`` of the REML
    criterion (Kuznetsova, Brockhoff & Christensen 2017, section 3.2).
    """
    import numpy as np

    varpar = np.array([*theta, sigma], float)
    hess = _hessian(problem.deviance_vp, varpar)
    cov_vp = 2 * np.linalg.pinv(hess)
    cov_beta = problem.vcov_vp(varpar)
    jac = _jacobian(problem.vcov_vp, varpar)
    out = []
    for L in np.atleast_2d(contrasts):
        var = float(L @ cov_beta @ L)
        grad = np.array([L @ j @ L for j in jac])
        out.append(2 * var * var / float(grad @ cov_vp @ grad))
    return np.array(out)


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
    (Bates et al. 2015, section 3), with lmerTest's Satterthwaite degrees of freedom
    (Kuznetsova et al. 2017). Written by hand because statsmodels fits crossed effects with a
    dense ``n_obs x levels`` design (minutes and gigabytes beyond ~10,000 rows x 1,000
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
        Coverage of the intervals of the fixed effects.

    Returns
    -------
    pandas.DataFrame
        Rows as :func:`lmm`: fixed effects (``kind == "fixed"``: ``term, estimate, se,
        statistic`` (t = estimate / se), ``df`` (Satterthwaite; REML fits only, else NaN),
        ``p_val`` (t with ``df``; normal when ``df`` is NaN), ``p_val_z`` (normal),
        ``ci_low, ci_high`` (t with ``df``); SEs are ``sigma^2 (X' V^-1 X)^-1`` at the optimum,
        as lme4) and SDs of ``large``, ``small`` and ``Residual``; plus, on every row,
        ``optimizer`` (``nelder-mead``, bounded, on the relative SDs), ``converged``, ``reml``,
        ``n_obs``, ``singular`` (a relative SD below 1e-4, as ``lme4::isSingular``),
        ``criterion`` (REML criterion or ML deviance, -2 log L), ``loglik`` (-criterion / 2),
        ``loglik_ml``, ``aic_ml``, ``bic_ml`` (the ML fit, as ``AIC(refitML(m))``; ``k`` = fixed
        effects + 2 SDs + residual), ``notes``.

    Raises
    ------
    ConvergenceError
        The optimizer did not report convergence.

    Notes
    -----
    Checked against lme4 1.1-31 / lmerTest 3.1-3 on ``Penicillin`` and simulated designs
    (``tests/analysis/stats/test_wtp_lme4.py``, R script in ``tests/analysis/r/``) and against
    statsmodels' dense crossed fit (``tests/analysis/stats/test_wtp.py``).
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import norm, t

    df = data[[dv, *fixed, large, small]].dropna()
    n = len(df)
    X = np.column_stack([np.ones(n), *(df[c].to_numpy(float) for c in fixed)])
    y = df[dv].to_numpy(float)
    p = X.shape[1]
    problem = _CrossedProblem(X, y, pd.factorize(df[large])[0], pd.factorize(df[small])[0])
    with _one_blas_thread():
        theta, criterion = problem.fit(reml)
        _, dev_ml = (theta, criterion) if not reml else problem.fit(reml=False)
        xtx, beta, r2, _ = problem._split(theta)
        dof = n - p if reml else n
        sigma = float(np.sqrt(r2 / dof))
        cov = sigma * sigma * np.linalg.inv(xtx)
        # Satterthwaite df are defined for the REML criterion (as lmerTest); none for ML fits.
        dfs = _satterthwaite_df(problem, theta, sigma, np.eye(p)) if reml else np.full(p, np.nan)
    rows: list[dict[str, object]] = []
    for i, term in enumerate(["Intercept", *fixed]):
        est, s = float(beta[i]), float(np.sqrt(cov[i, i]))
        ddf = float(dfs[i])
        p_z = float(2 * norm.sf(abs(est / s)))
        if np.isfinite(ddf):
            p_val = float(2 * t.sf(abs(est / s), ddf))
            crit = float(t.ppf(0.5 + confidence / 2, ddf))
        else:
            p_val, crit = p_z, float(norm.ppf(0.5 + confidence / 2))
        rows.append(
            {
                "kind": "fixed",
                "term": term,
                "estimate": est,
                "se": s,
                "statistic": est / s,
                "df": ddf,
                "p_val": p_val,
                "p_val_z": p_z,
                "ci_low": est - crit * s,
                "ci_high": est + crit * s,
            }
        )
    rows.append({"kind": "sd", "term": large, "estimate": float(theta[0]) * sigma})
    rows.append({"kind": "sd", "term": small, "estimate": float(theta[1]) * sigma})
    rows.append({"kind": "sd", "term": "Residual", "estimate": sigma})
    out = pd.DataFrame(rows)
    out["optimizer"] = "nelder-mead"
    out["converged"] = True
    out["reml"] = reml
    out["n_obs"] = n
    boundary = [name for name, th in zip((large, small), theta, strict=True) if th < SINGULAR_TOL]
    out["singular"] = bool(boundary)
    out["criterion"] = criterion
    out["loglik"] = -criterion / 2
    k = p + 3
    out["loglik_ml"] = -dev_ml / 2
    out["aic_ml"] = dev_ml + 2 * k
    out["bic_ml"] = dev_ml + k * np.log(n)
    out["notes"] = (
        f"singular fit: the SD of {', '.join(boundary)} is at the boundary (0)" if boundary else ""
    )
    return out


def crossed_slopes_lmm(
    data: pd.DataFrame,
    *,
    dv: str,
    x: str,
    large: str,
    small: str,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """``dv ~ x + (1 + x | large) + (1 + x | small)`` by profiled REML, as ``lme4::lmer``.

    The maximal random-effects structure of a within-participant, within-pair design (Barr et
    al. 2013): each participant and each pair has its own intercept and its own effect of
    ``x``, correlated. lme4's formulation (relative covariance factor ``Lambda_theta``; Bates et
    al. 2015) with ``A = Lambda' Z' Z Lambda + I`` solved through the Schur complement of its
    block-diagonal ``large`` part; Satterthwaite df as lmerTest.

    Parameters
    ----------
    data : pandas.DataFrame
        Long data; rows with a missing value in the used columns are dropped.
    dv, x : str
        Outcome and the (numeric, e.g. 0/1) predictor that also varies by level.
    large, small : str
        Grouping columns (``large``: the factor with more levels, as lme4 orders them).
    confidence : float
        Coverage of the intervals of the fixed effects.

    Returns
    -------
    pandas.DataFrame
        Fixed rows as :func:`crossed_lmm` (``Intercept`` and ``x``, with Satterthwaite ``df``);
        ``sd`` rows ``<factor>: Intercept``, ``<factor>: <x>`` and ``Residual``; ``corr`` rows
        ``<factor>: Intercept x <x>`` (NaN when an SD is 0); every row also ``optimizer``,
        ``converged``, ``reml``, ``n_obs``, ``singular`` (an SD or the remaining diagonal of a
        2 x 2 factor below 1e-4, as ``lme4::isSingular``), ``criterion``, ``loglik``,
        ``loglik_ml``, ``aic_ml``, ``bic_ml`` (``k`` = 2 fixed + 6 covariance + residual),
        ``theta`` (lme4's ``getME(m, "theta")`` as text), ``notes``.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import norm, t

    df = data[[dv, x, large, small]].dropna()
    n = len(df)
    xv = df[x].to_numpy(float)
    X = np.column_stack([np.ones(n), xv])
    problem = _CrossedSlopesProblem(
        X, df[dv].to_numpy(float), xv, pd.factorize(df[large])[0], pd.factorize(df[small])[0]
    )
    p = 2
    with _one_blas_thread():
        theta, criterion = problem.fit(reml=True)
        _, dev_ml = problem.fit(reml=False)
        xtx, beta, r2, _ = problem._split(theta)
        sigma = float(np.sqrt(r2 / (n - p)))
        cov = sigma * sigma * np.linalg.inv(xtx)
        dfs = _satterthwaite_df(problem, theta, sigma, np.eye(p))
    rows: list[dict[str, object]] = []
    for i, term in enumerate(["Intercept", x]):
        est, s = float(beta[i]), float(np.sqrt(cov[i, i]))
        ddf = float(dfs[i])
        crit = float(t.ppf(0.5 + confidence / 2, ddf))
        rows.append(
            {
                "kind": "fixed",
                "term": term,
                "estimate": est,
                "se": s,
                "statistic": est / s,
                "df": ddf,
                "p_val": float(2 * t.sf(abs(est / s), ddf)),
                "p_val_z": float(2 * norm.sf(abs(est / s))),
                "ci_low": est - crit * s,
                "ci_high": est + crit * s,
            }
        )
    boundary = []
    for name, th in ((large, theta[:3]), (small, theta[3:])):
        tf = _CrossedSlopesProblem.factor(th)
        vc = sigma * sigma * tf @ tf.T
        sd0, sd1 = np.sqrt(np.diag(vc))
        rows.append({"kind": "sd", "term": f"{name}: Intercept", "estimate": float(sd0)})
        rows.append({"kind": "sd", "term": f"{name}: {x}", "estimate": float(sd1)})
        corr = vc[0, 1] / (sd0 * sd1) if sd0 > 0 and sd1 > 0 else np.nan
        rows.append({"kind": "corr", "term": f"{name}: Intercept x {x}", "estimate": float(corr)})
        if min(abs(th[0]), abs(th[2])) < SINGULAR_TOL:
            boundary.append(name)
    rows.append({"kind": "sd", "term": "Residual", "estimate": sigma})
    out = pd.DataFrame(rows)
    out["optimizer"] = "nelder-mead + l-bfgs-b"
    out["converged"] = True
    out["reml"] = True
    out["n_obs"] = n
    out["singular"] = bool(boundary)
    out["criterion"] = criterion
    out["loglik"] = -criterion / 2
    k = p + 6 + 1
    out["loglik_ml"] = -dev_ml / 2
    out["aic_ml"] = dev_ml + 2 * k
    out["bic_ml"] = dev_ml + k * np.log(n)
    out["theta"] = " ".join(f"{v:.8g}" for v in theta)
    out["notes"] = (
        "singular fit: the covariance of "
        + ", ".join(boundary)
        + " is at the boundary (an SD of 0 or a correlation of +-1)"
        if boundary
        else ""
    )
    return out


def wtp_slopes(
    data: pd.DataFrame,
    *,
    dv: str = "wtp_premium_pct",
    between: str = "format",
    subject: str = "participant_id",
    item: str = "pair_id",
    levels: Sequence[str] | None = None,
    transform: str | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Format effect with random slopes, and the likelihood-ratio test of those slopes.

    ``wtp ~ format + (1 + format | participant) + (1 + format | pair)``
    (:func:`crossed_slopes_lmm`),
    the maximal structure of this design (Barr et al. 2013): when the format effect varies
    across pairs, the intercept-only model's interval is too narrow. The slopes are tested
    against ``(1 | participant) + (1 | pair)`` by a likelihood-ratio test of the ML fits (as
    ``anova(m0, m1)`` in lme4; chi-square with 4 df, conservative because variances are tested
    at the boundary).

    Parameters
    ----------
    data, dv, between, subject, item, levels, transform, confidence
        As :func:`wtp_mixed`.

    Returns
    -------
    pandas.DataFrame
        One row: ``effect``, ``estimate``, ``se``, ``statistic``, ``df`` (Satterthwaite),
        ``p_val`` (t), ``p_val_z``, ``ci_low``, ``ci_high``, ``formula``, ``singular`` (as
        ``lme4::isSingular``), ``sd_subject``, ``sd_subject_slope``, ``corr_subject``,
        ``sd_item``, ``sd_item_slope``, ``corr_item``, ``sd_residual``, ``loglik_reml``,
        ``aic_ml``, ``bic_ml``, ``lrt_chisq``, ``lrt_df``, ``lrt_p`` (slopes vs intercepts),
        ``n_obs``, ``transform``, ``notes``, ``reference``, ``treatment``.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import chi2

    df, ref, trt = _prepare(data, dv, between, levels, transform, [subject, item])
    n_subjects, n_items = df[subject].nunique(), df[item].nunique()
    large, small = (subject, item) if n_subjects >= n_items else (item, subject)
    table = crossed_slopes_lmm(df, dv="y", x="x", large=large, small=small, confidence=confidence)
    # The intercept-only model's ML deviance for the likelihood-ratio test (same rows).
    problem = _CrossedProblem(
        np.column_stack([np.ones(len(df)), df["x"].to_numpy(float)]),
        df["y"].to_numpy(float),
        pd.factorize(df[large])[0],
        pd.factorize(df[small])[0],
    )
    with _one_blas_thread():
        _, dev0 = problem.fit(reml=False)
    dev1 = -2 * float(table["loglik_ml"].iloc[0])
    lrt = max(dev0 - dev1, 0.0)
    eff = table[table["kind"] == "fixed"].set_index("term").loc["x"]
    est = table[table["kind"] != "fixed"].set_index("term")["estimate"]
    formula = f"{dv} ~ {between} + (1 + {between} | {subject}) + (1 + {between} | {item})"
    if transform == "log":
        formula = formula.replace(dv, f"log(1 + {dv}/100)", 1)
    return pd.DataFrame(
        {
            "effect": [f"{between}[{trt}]"],
            "estimate": [eff["estimate"]],
            "se": [eff["se"]],
            "statistic": [eff["statistic"]],
            "df": [eff["df"]],
            "p_val": [eff["p_val"]],
            "p_val_z": [eff["p_val_z"]],
            "ci_low": [eff["ci_low"]],
            "ci_high": [eff["ci_high"]],
            "formula": [formula],
            "singular": [bool(table["singular"].iloc[0])],
            "sd_subject": [est[f"{subject}: Intercept"]],
            "sd_subject_slope": [est[f"{subject}: x"]],
            "corr_subject": [est[f"{subject}: Intercept x x"]],
            "sd_item": [est[f"{item}: Intercept"]],
            "sd_item_slope": [est[f"{item}: x"]],
            "corr_item": [est[f"{item}: Intercept x x"]],
            "sd_residual": [est["Residual"]],
            "loglik_reml": [float(table["loglik"].iloc[0])],
            "aic_ml": [float(table["aic_ml"].iloc[0])],
            "bic_ml": [float(table["bic_ml"].iloc[0])],
            "lrt_chisq": [lrt],
            "lrt_df": [4],
            "lrt_p": [float(chi2.sf(lrt, 4))],
            "n_obs": [len(df)],
            "transform": [transform or "none"],
            "notes": [table["notes"].iloc[0]],
            "reference": [ref],
            "treatment": [trt],
        }
    )
