"""The format effect adjusted for participant covariates (age, sex, country from Prolific).

Two models, the same as the unadjusted ones plus the covariates as fixed effects:

- choice: GEE logistic regression clustered by participant (exchangeable, robust SEs), as
  :func:`analysis.stats.choice.choice_clustered`;
- WTP: ``y ~ format + covariates + (1 | participant) + (1 | pair)`` by the sparse REML fit
  (:func:`analysis.stats.crossed.crossed_lmm`, Satterthwaite df).

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
    transform: str | None = None,
    subject: str = "participant_id",
    item: str = "pair_id",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Format effect on choice (GEE) and WTP (crossed LMM) adjusted for covariates.

    Parameters
    ----------
    data : pandas.DataFrame
        Trial-level rows after exclusions, with ``chose_target``, ``wtp_premium_pct``,
        ``format`` and the covariate columns.
    covariates : sequence of str
        Columns to adjust for.
    levels : sequence of str, optional
        ``(reference, treatment)`` format levels.
    transform : {None, "log"}
        WTP transform, as in the unadjusted model.
    subject, item : str
        Participant and pair columns.
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per model and term: ``model`` (``choice GEE (log odds)`` / ``WTP LMM``),
        ``term`` (``format[<treatment>]`` first, then the covariates), ``estimate, se,
        statistic, df`` (Satterthwaite for the LMM; NaN for GEE, z), ``p_val, ci_low,
        ci_high, n_obs, n_rows_dropped`` (missing covariates), ``coding``, ``notes`` (why the
        GEE rows are missing: a separated outcome, fewer than 2 participants, no convergence;
        why the WTP rows are: answers under one format, a grouping factor with one level; else
        empty).
    """
    import numpy as np
    import pandas as pd
    import statsmodels.api as sm
    from scipy.stats import norm

    from analysis.stats.choice import _levels
    from analysis.stats.crossed import crossed_lmm

    ref, trt = _levels(data, "format", levels)
    df, cols, notes = code_covariates(data, covariates, subject=subject)
    dropped = len(data) - len(df)
    coding = "; ".join(notes)
    x_name = f"format[{trt}]"
    rows: list[dict[str, object]] = []

    choice = df.dropna(subset=["chose_target"])
    y = choice["chose_target"].astype(float).to_numpy()
    x = (choice["format"] == trt).to_numpy(float)
    gee_problem = None
    # As in choice_clustered: an empty cell of the format x choice table means no finite log
    # odds ratio (statsmodels' GEE still returns one, with a small SE).
    if min(int(((x == f) & (y == v)).sum()) for f in (0.0, 1.0) for v in (0.0, 1.0)) == 0:
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
            [np.ones(len(choice)), x, *(choice[c].to_numpy(float) for c in cols)]
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
        crit = norm.ppf(0.5 + confidence / 2)
        for i, term in enumerate([x_name, *cols], start=1):
            b, se = float(gee.params[i]), float(gee.bse[i])
            rows.append(
                {
                    "model": "choice GEE (log odds)",
                    "term": term,
                    "estimate": b,
                    "se": se,
                    "statistic": b / se,
                    "df": np.nan,
                    "p_val": float(2 * norm.sf(abs(b / se))),
                    "ci_low": b - crit * se,
                    "ci_high": b + crit * se,
                    "n_obs": len(choice),
                }
            )

    wtp = df.dropna(subset=["wtp_premium_pct"]).copy()
    wtp_problem = None
    if len(wtp):
        from analysis.stats.wtp import _check_design

        try:
            _check_design(wtp, "format", (ref, trt), (subject, item))
        except ValueError as exc:
            wtp_problem = str(exc)
    if len(wtp) and wtp_problem is None:
        y = wtp["wtp_premium_pct"].astype(float)
        wtp["_y"] = np.log1p(y / 100.0) if transform == "log" else y
        wtp["_x"] = (wtp["format"] == trt).astype(float)
        large, small = (
            (subject, item) if wtp[subject].nunique() >= wtp[item].nunique() else (item, subject)
        )
        table = crossed_lmm(
            wtp, dv="_y", fixed=["_x", *cols], large=large, small=small, confidence=confidence
        )
        fixed = table[table["kind"] == "fixed"].set_index("term")
        for term, label in [("_x", x_name), *((c, c) for c in cols)]:
            r = fixed.loc[term]
            rows.append(
                {
                    "model": "WTP LMM" + (" (log ratio)" if transform == "log" else ""),
                    "term": label,
                    **{k: float(r[k]) for k in ("estimate", "se", "statistic", "df", "p_val")},
                    "ci_low": float(r["ci_low"]),
                    "ci_high": float(r["ci_high"]),
                    "n_obs": len(wtp),
                }
            )
    notes = []
    if gee_problem:
        notes.append(f"choice GEE not reported: {gee_problem}")
    if wtp_problem:
        notes.append(f"WTP LMM not reported: {wtp_problem}")
    if not rows:
        from analysis.stats.wtp import ConvergenceError

        raise ConvergenceError("; ".join(notes) or "no choices and no WTP answers")
    out = pd.DataFrame(rows)
    out["n_rows_dropped"] = dropped
    out["coding"] = coding
    out["notes"] = "; ".join(notes)
    return out
