"""The format effect adjusted for participant covariates (age, sex, country from Prolific).

Two models, the same as the unadjusted ones plus the covariates as fixed effects:

- choice: GEE logistic regression clustered by participant (exchangeable, robust SEs), as
  :func:`analysis.stats.choice.choice_clustered`;
- WTP: ``y ~ format + covariates + (1 | participant) + (1 | pair)`` by the sparse REML fit
  (:func:`analysis.stats.crossed.crossed_lmm`, Satterthwaite df).

Format is the k-level factor of the unadjusted models, with the same contrasts
(:func:`analysis.stats.choice.format_contrasts`).

Covariates are coded explicitly: a numeric column (age) is centred at the participants' mean so
the intercept stays the baseline of an average participant; a text column becomes treatment
dummies against its most frequent level, levels with fewer than ``min_level_n`` participants
pooled as ``other``. Rows with a missing covariate are left out (complete cases) and counted.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from analysis.stats.choice import (
    DEFAULT_BASELINE,
    add_format_dummies,
    adjust_p,
    format_contrasts,
    format_levels,
)
from analysis.stats.crossed import ConvergenceError, crossed_lmm, crossed_order
from analysis.stats.wtp import prepare_wtp

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["adjusted_models", "code_covariates"]


def _safe(name: str) -> str:
    return re.sub(r"\W+", "_", name).strip("_") or "level"


def code_covariates(
    data: pd.DataFrame,
    covariates: Sequence[str],
    *,
    subject: str = "participant_id",
    min_level_n: int = 5,
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Numeric design columns for ``covariates``; complete cases only.

    Parameters
    ----------
    data : pandas.DataFrame
        Trial-level rows with the covariate columns.
    covariates : sequence of str
        Column names.
    subject : str
        Participant column (levels are counted over participants, not trials).
    min_level_n : int
        Text levels with fewer participants are pooled as ``other``.

    Returns
    -------
    (pandas.DataFrame, list of str, list of str)
        The complete-case rows with added design columns ``cov_<name>...``; the design column
        names; one description per covariate (``age: centred at 38.2``, ``sex: reference
        Female``).

    Raises
    ------
    ValueError
        A covariate column is missing, or a covariate has a single value after pooling.
    """
    import pandas as pd

    missing = [c for c in covariates if c not in data.columns]
    if missing:
        raise ValueError(
            f"covariate column(s) {missing} not in the data (available with --demographics: "
            "age, sex, country, nationality, ethnicity, language, student_status, "
            "employment_status)"
        )
    df = data.dropna(subset=list(covariates)).copy()
    people = df.drop_duplicates(subject)
    cols: list[str] = []
    notes: list[str] = []
    for cov in covariates:
        num = pd.to_numeric(df[cov], errors="coerce")
        if num.notna().all():
            centre = float(pd.to_numeric(people[cov]).mean())
            name = f"cov_{_safe(cov)}"
            df[name] = num.astype(float) - centre
            cols.append(name)
            notes.append(f"{cov}: numeric, centred at the participants' mean {centre:.4g}")
            continue
        values = df[cov].astype(str).str.strip()
        counts = people[cov].astype(str).str.strip().value_counts()
        rare = set(counts[counts < min_level_n].index)
        if rare and len(rare) < len(counts):
            values = values.where(~values.isin(rare), "other")
            counts = values[~df[subject].duplicated()].value_counts()
        if len(counts) < 2:
            raise ValueError(f"covariate {cov!r} has one level only ({counts.index[0]!r})")
        reference = str(counts.index[0])
        for level in sorted(set(counts.index) - {reference}):
            name = f"cov_{_safe(cov)}[{level}]"
            df[name] = (values == level).astype(float)
            cols.append(name)
        pooled = f"; {len(rare)} level(s) with < {min_level_n} participants pooled" if rare else ""
        notes.append(f"{cov}: categorical, reference {reference!r}{pooled}")
    return df, cols, notes


def adjusted_models(
    data: pd.DataFrame,
    covariates: Sequence[str],
    *,
    levels: Sequence[str] | None = None,
    baseline: str | None = DEFAULT_BASELINE,
    transform: str | None = None,
    padjust: str = "holm",
    subject: str = "participant_id",
    item: str = "pair_id",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Format contrasts on choice (GEE) and WTP (crossed LMM) adjusted for covariates.

    Parameters
    ----------
    data : pandas.DataFrame
        Trial-level rows after exclusions, with ``chose_target``, ``wtp_premium_pct``,
        ``format`` and the covariate columns.
    covariates : sequence of str
        Columns to adjust for.
    levels : sequence of str, optional
        The formats, reference first (:func:`analysis.stats.choice.format_levels`).
    baseline : str, optional
        The level mitigated formats are compared with (:func:`format_contrasts`).
    transform : {None, "log"}
        WTP transform, as in the unadjusted model.
    padjust : str
        Correction across the format contrasts of a model.
    subject, item : str
        Participant and pair columns.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per model and term: ``model`` (``choice GEE (log odds)`` / ``WTP LMM``),
        ``term`` (the format contrasts first, ``summary vs original``, then the covariates),
        ``family`` (``vs reference``, ``vs baseline`` or ``covariate``), ``estimate, se,
        statistic, df`` (Satterthwaite for the LMM; NaN for GEE, z), ``p_val``, ``p_adj``
        (contrasts only), ``ci_low, ci_high, n_obs, n_rows_dropped`` (missing covariates),
        ``coding``, ``notes`` (why the GEE rows are missing: a separated outcome, fewer than 2
        participants, no convergence; why the WTP rows are: a format without answers, a
        grouping factor with one level; else empty).
    """
    import numpy as np
    import pandas as pd
    import statsmodels.api as sm
    from scipy.stats import norm

    levels = format_levels(data, "format", levels)
    contrasts = format_contrasts(levels, baseline)
    df, cols, coding = code_covariates(data, covariates, subject=subject)
    names = [c.name for c in contrasts] + cols
    families = [c.family for c in contrasts] + ["covariate"] * len(cols)
    k, n_c = len(cols), len(contrasts)
    parts: list[pd.DataFrame] = []

    def add(model: str, fit: pd.DataFrame, n_obs: int) -> None:
        fit = fit.assign(model=model, term=names, family=families, n_obs=n_obs)
        fit.insert(fit.columns.get_loc("p_val") + 1, "p_adj", np.nan)
        fit.loc[: n_c - 1, "p_adj"] = adjust_p(fit["p_val"].iloc[:n_c], padjust)
        parts.append(fit)

    choice = df.dropna(subset=["chose_target"]).copy()
    fixed = add_format_dummies(choice, "format", levels)
    y = choice["chose_target"].astype(float).to_numpy()
    gee_problem = None
    # As in choice_clustered: a format whose trials all chose (or all rejected) the target means
    # no finite log odds ratio (statsmodels' GEE still returns one, with a small SE).
    if any(y[(choice["format"] == lv).to_numpy()].mean() in (0.0, 1.0) for lv in levels):
        gee_problem = (
            "the outcome is (quasi-)separated by format (a format's trials all chose or all "
            "rejected the target): no finite log odds ratio"
        )
    elif choice[subject].nunique() < 2:
        gee_problem = "fewer than 2 participants: no robust SE"
    else:
        codes, _ = pd.factorize(choice[subject])
        order = np.argsort(codes, kind="stable")
        exog = np.column_stack(
            [np.ones(len(choice)), *(choice[c].to_numpy(float) for c in [*fixed, *cols])]
        )
        with warnings.catch_warnings(record=True):
            # statsmodels warns on non-convergence; the flag below is checked instead.
            warnings.simplefilter("always")
            gee = sm.GEE(
                y[order],
                exog[order],
                groups=codes[order],
                family=sm.families.Binomial(),
                cov_struct=sm.cov_struct.Exchangeable(),
            ).fit(maxiter=200, ctol=1e-10)
        if not bool(getattr(gee, "converged", True)):
            gee_problem = "the GEE did not converge in 200 iterations"
    if gee_problem is None:
        eye = np.eye(1 + len(fixed) + k)
        L = np.vstack([[*c.weights, *[0.0] * k] for c in contrasts] + list(eye[1 + len(fixed) :]))
        beta, cov = np.asarray(gee.params), np.asarray(gee.cov_params())
        est, se = L @ beta, np.sqrt(np.einsum("ij,jk,ik->i", L, cov, L))
        crit = norm.ppf(0.5 + confidence / 2)
        fit = pd.DataFrame({"estimate": est, "se": se, "statistic": est / se, "df": np.nan})
        fit["p_val"] = 2 * norm.sf(np.abs(est / se))
        fit["ci_low"], fit["ci_high"] = est - crit * se, est + crit * se
        add("choice GEE (log odds)", fit, len(choice))

    wtp_problem = None
    wtp = df.dropna(subset=["wtp_premium_pct"])
    if len(wtp):
        try:
            wtp, _, fixed = prepare_wtp(
                wtp, "wtp_premium_pct", "format", levels, transform, [subject, item, *cols]
            )
        except ValueError as exc:
            wtp_problem = str(exc)
    if len(wtp) and wtp_problem is None:
        large, small, _, _ = crossed_order(wtp, subject, item)
        table = crossed_lmm(
            wtp, dv="y", fixed=[*fixed, *cols], large=large, small=small,
            confidence=confidence,
            contrasts={c.name: [*c.weights, *[0.0] * k] for c in contrasts},
        ).set_index("term")  # fmt: skip
        fit = table.loc[[*(c.name for c in contrasts), *cols]].reset_index(drop=True)
        model = "WTP LMM" + (" (log ratio)" if transform == "log" else "")
        add(model, fit[["estimate", "se", "statistic", "df", "p_val", "ci_low", "ci_high"]],
            len(wtp))  # fmt: skip
    notes = []
    if gee_problem:
        notes.append(f"choice GEE not reported: {gee_problem}")
    if wtp_problem:
        notes.append(f"WTP LMM not reported: {wtp_problem}")
    if not parts:
        raise ConvergenceError("; ".join(notes) or "no choices and no WTP answers")
    out = pd.concat(parts, ignore_index=True)
    first = ["model", "term", "family"]
    out = out[first + [c for c in out.columns if c not in first]]
    out["n_rows_dropped"] = len(data) - len(df)
    out["coding"] = "; ".join(coding)
    out["notes"] = "; ".join(notes)
    return out
