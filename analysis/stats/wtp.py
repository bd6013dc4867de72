"""Willingness to pay: linear mixed-effects models (statsmodels ``MixedLM``, REML).

Model choice (``wtp_mixed``)
----------------------------
The target model is ``wtp ~ format + (1 | participant) + (1 | pair)``: crossed random intercepts,
fitted in statsmodels as one constant group with two variance components. statsmodels builds that
design densely, so time and memory grow with ``n_obs x (n_participants + n_pairs)`` (measured on
this project's 2-core VM: 3,000 rows x 310 levels ~3 s, 6,000 x 610 ~17 s; the issue reports
1,000 x 20 items at 37-160 s and ~2 GB). Above ``max_crossed_cells`` the model is
``wtp ~ format + C(pair) + (1 | participant)``: with few pairs their effects are estimated
precisely as fixed effects, the participant grouping makes the fit block-diagonal (seconds for
100,000 rows), and in balanced designs the format estimate equals the crossed model's. The result
says which model ran and why.

Convergence
-----------
Optimizers are tried in the given order (``lbfgs`` first); the first fit that reports convergence
with a usable Hessian is kept and named in the ``optimizer`` column. If none converges,
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
    "lmm",
    "wtp_by_format",
    "wtp_mixed",
]

DEFAULT_OPTIMIZERS = ("lbfgs", "bfgs", "powell")
# n_obs x (participants + pairs) above which the crossed fit is replaced (see module docstring).
MAX_CROSSED_CELLS = 1_000_000


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
    model : {"auto", "crossed", "pair_fixed"}
        ``crossed``: ``y ~ format + (1|subject) + (1|item)``; ``pair_fixed``:
        ``y ~ format + C(item) + (1|subject)``; ``auto`` picks ``crossed`` when
        ``n_obs * (n_subjects + n_items) <= max_crossed_cells`` (see the module docstring).
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
        ``p_val``, ``ci_low``, ``ci_high``, ``model`` (``crossed`` / ``pair_fixed``), ``formula``,
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
    if model == "auto":
        if cells <= max_crossed_cells:
            chosen = "crossed"
            reason = (
                f"crossed random intercepts: n_obs x (participants + pairs) = {cells:,} "
                f"<= {max_crossed_cells:,}, small enough for statsmodels' dense crossed fit"
            )
        else:
            chosen = "pair_fixed"
            reason = (
                f"pair as fixed effect + participant random intercept: n_obs x (participants + "
                f"pairs) = {cells:,} > {max_crossed_cells:,}; statsmodels' crossed fit is dense "
                f"(time and memory grow with that product), while with {n_items} pairs their "
                "effects are estimated precisely as fixed effects and the format estimate matches "
                "the crossed model in balanced designs"
            )
    elif model in ("crossed", "pair_fixed"):
        chosen, reason = model, "requested"
    else:
        raise ValueError(f"unknown model {model!r}; use auto, crossed or pair_fixed")

    df["_subject"] = pd.factorize(df[subject])[0]
    df["_item"] = pd.factorize(df[item])[0]
    if chosen == "crossed":
        table = lmm(
            df,
            formula="y ~ x",
            vc_formula={"subject": "0 + C(_subject)", "item": "0 + C(_item)"},
            optimizers=optimizers,
            maxiter=maxiter,
            confidence=confidence,
        )
        formula = f"{dv} ~ {between} + (1 | {subject}) + (1 | {item})"
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
