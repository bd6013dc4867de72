"""What the report's WTP figures show, computed apart from drawing them.

- :func:`crossed_conditional_modes`: residuals, fitted values and the random effects (conditional
  modes with conditional SDs, as ``lme4::ranef(m, condVar = TRUE)``) of the crossed
  random-intercept model ``y ~ X + (1 | subject) + (1 | item)`` at its estimated parameters;
- :func:`within_differences`: each participant's mean WTP with the treatment format minus their
  mean with the reference format, the quantity the format effect is about.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["crossed_conditional_modes", "within_differences"]


def crossed_conditional_modes(
    data: pd.DataFrame,
    *,
    y: str,
    x: Sequence[str],
    subject: str,
    item: str,
    beta: Sequence[float],
    sd_subject: float,
    sd_item: float,
    sd_residual: float,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Residuals and random effects of ``y ~ X + (1 | subject) + (1 | item)`` at given estimates.

    The random effects are the conditional modes ``b = (Z'Z + sigma^2 G^-1)^-1 Z'(y - X beta)``
    and their conditional variances ``sigma^2 (Z'Z + sigma^2 G^-1)^-1`` (diagonal), as lme4's
    ``ranef(condVar = TRUE)`` (Bates et al. 2015, eq. 16: given theta and beta). The system is
    solved through the Schur complement of the subject block, which is diagonal, so the cost is
    O(n_obs + n_subjects x n_items) like the fit (:func:`analysis.stats.crossed.crossed_lmm`).

    Parameters
    ----------
    data : pandas.DataFrame
        The rows the model was fitted to (rows with a missing value in the used columns are
        dropped, as in the fit).
    y, subject, item : str
        Outcome and the two grouping columns.
    x : sequence of str
        Numeric predictors (the format dummies).
    beta : sequence of float
        Fixed effects: the intercept, then one per column of ``x``.
    sd_subject, sd_item, sd_residual : float
        Estimated SDs (an SD of 0 gives random effects of exactly 0).

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        ``residuals``: one row per observation with ``subject, item, fitted`` (X beta + Z b, the
        conditional fit, as ``fitted(m)``), ``residual`` (y - fitted, as ``resid(m)``) and
        ``fitted_fixed`` (X beta). ``random_effects``: one row per level with ``group``
        (``subject``/``item``, the column name), ``level``, ``estimate`` (conditional mode),
        ``cond_sd`` (conditional SD), ``n_obs``.
    """
    import numpy as np
    import pandas as pd

    df = data[[y, *x, subject, item]].dropna()
    g1, levels1 = pd.factorize(df[subject])
    g2, levels2 = pd.factorize(df[item])
    q1, q2 = len(levels1), len(levels2)
    yy = df[y].to_numpy(float)
    fixed = beta[0] + df[list(x)].to_numpy(float) @ np.asarray(beta[1:], float)
    r = yy - fixed
    s2 = sd_residual**2
    n1 = np.bincount(g1, minlength=q1).astype(float)
    n2 = np.bincount(g2, minlength=q2).astype(float)
    counts = np.zeros((q1, q2))
    np.add.at(counts, (g1, g2), 1.0)
    zr1 = np.bincount(g1, weights=r, minlength=q1)
    zr2 = np.bincount(g2, weights=r, minlength=q2)
    b1 = np.zeros(q1)
    b2 = np.zeros(q2)
    v1 = np.zeros(q1)
    v2 = np.zeros(q2)
    # Scale the system by sigma^2: A = Z'Z + sigma^2 G^-1, rhs = Z' r; var = sigma^2 diag(A^-1).
    # A variance of 0 removes that factor (its effects are 0 with no uncertainty).
    use1, use2 = sd_subject > 0, sd_item > 0
    if use1 and use2:
        d1 = n1 + s2 / sd_subject**2
        d2 = n2 + s2 / sd_item**2
        m = counts / d1[:, None]  # A11^-1 A12
        schur = np.diag(d2) - counts.T @ m
        b2 = np.linalg.solve(schur, zr2 - m.T @ zr1)
        b1 = (zr1 - counts @ b2) / d1
        s_inv = np.linalg.inv(schur)
        v2 = s2 * np.diag(s_inv)
        v1 = s2 * (1.0 / d1 + np.einsum("ij,jk,ik->i", m, s_inv, m))
    elif use1:
        d1 = n1 + s2 / sd_subject**2
        b1, v1 = zr1 / d1, s2 / d1
    elif use2:
        d2 = n2 + s2 / sd_item**2
        b2, v2 = zr2 / d2, s2 / d2
    fitted = fixed + b1[g1] + b2[g2]
    residuals = pd.DataFrame(
        {
            subject: df[subject].to_numpy(),
            item: df[item].to_numpy(),
            "fitted": fitted,
            "residual": yy - fitted,
            "fitted_fixed": fixed,
        }
    )
    effects = pd.concat(
        [
            pd.DataFrame(
                {
                    "group": name,
                    "level": np.asarray(levels, dtype=object),
                    "estimate": b,
                    "cond_sd": np.sqrt(v),
                    "n_obs": n.astype(int),
                }
            )
            for name, levels, b, v, n in (
                (subject, levels1, b1, v1, n1),
                (item, levels2, b2, v2, n2),
            )
        ],
        ignore_index=True,
    )
    return residuals, effects


def within_differences(
    data: pd.DataFrame,
    *,
    dv: str = "wtp_premium_pct",
    between: str = "format",
    subject: str = "participant_id",
    levels: Sequence[str] = ("original", "summary"),
    confidence: float = 0.95,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each participant's mean ``dv`` with the treatment minus with the reference format.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per trial.
    dv, between, subject : str
        Outcome, format and participant columns.
    levels : sequence of str
        ``(reference, treatment)``.
    confidence : float
        Coverage of the t interval of the mean difference.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        Per participant with both formats: ``subject``, ``mean_<reference>``,
        ``mean_<treatment>``, ``difference`` (treatment - reference). Summary (one row):
        ``n_subjects`` (with both formats), ``n_without_both``, ``estimate`` (mean difference),
        ``sd``, ``ci_low``, ``ci_high`` (t over participants), ``reference``, ``treatment``.
    """
    import numpy as np
    import pandas as pd
    from scipy import stats

    ref, trt = levels
    df = data[[dv, between, subject]].dropna()
    means = df.pivot_table(index=subject, columns=between, values=dv, aggfunc="mean")
    for level in (ref, trt):
        if level not in means.columns:
            means[level] = np.nan
    both = means[[ref, trt]].dropna()
    per = pd.DataFrame(
        {
            subject: both.index.to_numpy(),
            f"mean_{ref}": both[ref].to_numpy(float),
            f"mean_{trt}": both[trt].to_numpy(float),
            "difference": (both[trt] - both[ref]).to_numpy(float),
        }
    )
    d = per["difference"].to_numpy(float)
    n = len(d)
    est = float(d.mean()) if n else np.nan
    sd = float(d.std(ddof=1)) if n > 1 else np.nan
    low = high = np.nan
    if n > 1:
        half = stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / np.sqrt(n)
        low, high = est - half, est + half
    summary = pd.DataFrame(
        {
            "n_subjects": [n],
            "n_without_both": [len(means) - n],
            "estimate": [est],
            "sd": [sd],
            "ci_low": [low],
            "ci_high": [high],
            "reference": [ref],
            "treatment": [trt],
        }
    )
    return per, summary
