"""Simplifying a singular maximal random-slope model, step by step and reported.

The maximal model of a within-participant, within-pair design is ``y ~ x + (1 + x | subject)
+ (1 + x | item)`` (Barr et al. 2013). When it is singular (a variance at 0 or a correlation at
+-1, as ``lme4::isSingular``), the data do not support that structure and its estimates sit on
the boundary. The rule, in the spirit of Barr et al. (2013, "keep it maximal", then simplify
only when the fit fails) and of Bates et al. (2015, "Parsimonious mixed models") / Matuschek et
al. (2017), whose first reductions are the correlation parameters and then the zero variance
components:

1. fit the maximal model; if it is not singular, keep it;
2. else drop both correlations (``(1 + x || g)``, i.e. ``(1 | g) + (0 + x | g)``) and refit;
3. while the fit is singular, drop every random term whose SD is at 0 (relative SD below
   lme4's isSingular tolerance, 1e-4, where lmer's default optimizer stops on that model:
   :func:`analysis.stats.singular.lmer_stop`) and refit.

Every step's singular decision is the one lmer with its defaults takes on that step's formula, so
that an lme4 user who follows the rule ends at the same model.

Every fit is by :func:`analysis.stats.crossed.crossed_slopes_lmm` with entries of lme4's
``theta`` held at 0, which is exactly the simpler ``lmer`` formula (checked against lmer with
the simplified formula, ``tests/analysis/r/``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.stats.crossed import crossed_slopes_lmm

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["model_formula", "random_terms", "simplify_slopes"]


def random_terms(free, x: str, group: str) -> str:
    """The lme4 random term(s) of one factor whose ``theta`` entries ``free`` are estimated."""
    intercept, corr, slope = (bool(v) for v in free)
    if intercept and slope:
        return f"(1 + {x} {'|' if corr else '||'} {group})"
    if intercept:
        return f"(1 | {group})"
    if slope:
        return f"(0 + {x} | {group})"
    return ""


def model_formula(free, dv: str, x: str, large: str, small: str) -> str:
    """The lme4 formula of the random-slope model whose six ``theta`` entries ``free`` are
    estimated (``x`` numeric, so that ``||`` splits the terms as written)."""
    terms = [random_terms(free[:3], x, large), random_terms(free[3:], x, small)]
    return " + ".join([f"{dv} ~ {x}", *(t for t in terms if t)])


def simplify_slopes(
    data: pd.DataFrame,
    *,
    dv: str,
    x: str,
    large: str,
    small: str,
    confidence: float = 0.95,
    names: dict[str, str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fit the maximal random-slope model and simplify it while it is singular (module rule).

    Parameters
    ----------
    data, dv, x, large, small, confidence
        As :func:`analysis.stats.crossed.crossed_slopes_lmm`.
    names : dict, optional
        Display names of ``dv``, ``x``, ``large`` and ``small`` in the formulas.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        The final fit (as :func:`crossed_slopes_lmm`) and one row per step: ``step``,
        ``formula``, ``free`` (which of lme4's six ``theta`` entries are estimated, as 0/1
        text), ``action`` (what was dropped, and why), ``singular``, ``estimate`` and
        ``se`` (of ``x``), ``reml_criterion``,
        ``ml_deviance`` (-2 log L of the ML refit), ``n_theta`` (estimated covariance
        parameters), ``notes``.
    """
    import numpy as np
    import pandas as pd

    names = names or {}
    shown = [names.get(v, v) for v in (dv, x, large, small)]
    free = np.ones(6, bool)
    steps: list[dict[str, object]] = []
    action = "maximal model (Barr et al. 2013)"
    while True:
        table = crossed_slopes_lmm(
            data, dv=dv, x=x, large=large, small=small, confidence=confidence, free=free
        )
        singular = bool(table["singular"].iloc[0])
        effect = table[(table["kind"] == "fixed") & (table["term"] == x)].iloc[0]
        steps.append(
            {
                "step": len(steps) + 1,
                "formula": model_formula(free, *shown),
                "free": "".join(str(int(v)) for v in free),
                "action": action,
                "singular": singular,
                "estimate": float(effect["estimate"]),
                "se": float(effect["se"]),
                "reml_criterion": float(table["criterion"].iloc[0]),
                "ml_deviance": -2 * float(table["loglik_ml"].iloc[0]),
                "n_theta": int(free.sum()),
                "notes": table["notes"].iloc[0],
            }
        )
        if not singular:
            break
        if free[1] or free[4]:
            free[[1, 4]] = False
            action = "singular: dropped the correlations (zero-correlation model)"
            continue
        at_zero = np.zeros(6, bool)
        at_zero[[int(i) for i in table["boundary"].iloc[0].split()]] = True
        if not at_zero.any():
            break  # singular without a zero SD left to drop: report it as it is
        labels = {0: f"(1 | {shown[2]})", 2: f"(0 + {shown[1]} | {shown[2]})"}
        labels |= {3: f"(1 | {shown[3]})", 5: f"(0 + {shown[1]} | {shown[3]})"}
        if not (free & ~at_zero).any():
            break  # no random effect would be left: keep this fit, reported as singular
        dropped = [labels[i] for i in np.flatnonzero(at_zero)]
        free &= ~at_zero
        action = f"singular: dropped the zero-variance term(s) {', '.join(dropped)}"
    return table, pd.DataFrame(steps)
