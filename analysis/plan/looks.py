"""The pre-registered test at each look of a study, on its export (or on a simulated one).

Who is analysed at a look
-------------------------
Participants enter in the order they completed (``finished_at`` in the long export; an export
without it falls back to each participant's last ``answered_at``). Look ``k`` analyses the
shortest prefix of that order in which the pre-registered exclusion rules keep ``n_k``
participants (``n_k = ceil(fraction_k x planned_n)``): the completed, non-excluded participants
as they were when the ``n_k``-th of them completed. The same export, or any later one, gives
the same look again, so the console's look (``framelab looks``) and the report's
(``framelab analyze choice --prereg``) agree.

The statistic
-------------
``choice_glmm``: the Wald ``z`` of the log odds ratio (treatment vs reference) of
:func:`analysis.stats.choice.choice_glmm`. ``wtp_lmm``: the ``t`` of
:func:`analysis.stats.wtp.wtp_mixed` (Satterthwaite df) turned into the ``z`` with the same
one-sided p, ``Phi^-1(T_df(t))``, so the boundaries of the normal theory apply to its p-values.
Either is oriented so that large values favour the hypothesis (negated for ``direction: less``).
The models are not the z-tests the theory assumes; ``docs/analysis.md`` reports the simulated
type-I error of the sequential design with each.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from analysis.exclusions import exclude_choice
from analysis.plan.sequential import (
    boundaries,
    look_decision,
    stagewise_inference,
    stopping_look,
)

if TYPE_CHECKING:
    import pandas as pd

    from analysis.plan.spec import AnalysisPlan

__all__ = [
    "completion_order",
    "evaluate_looks",
    "look_sample",
    "preregistered_tables",
    "primary_result",
    "primary_test",
]


def completion_order(data: pd.DataFrame, *, subject: str = "participant_id") -> list[str]:
    """Participants in the order they completed (``finished_at``, else the last answer).

    Parameters
    ----------
    data : pandas.DataFrame
        Choice rows (the long export).
    subject : str
        Participant column.

    Returns
    -------
    list of str
        Participant ids; ties and participants without a time keep the order of their ids.
    """
    import pandas as pd

    per = data.groupby(subject, sort=True)
    answered = pd.to_datetime(per["answered_at"].max(), utc=True, format="ISO8601", errors="coerce")
    key = answered
    if "finished_at" in data.columns:
        finished = pd.to_datetime(
            per["finished_at"].first(), utc=True, format="ISO8601", errors="coerce"
        )
        key = finished.fillna(answered)
    frame = pd.DataFrame({"key": key, "id": key.index})
    return frame.sort_values(["key", "id"], kind="stable", na_position="last")["id"].tolist()


def look_sample(
    data: pd.DataFrame,
    n: int,
    plan: AnalysisPlan,
    *,
    order: list[str] | None = None,
    subject: str = "participant_id",
) -> pd.DataFrame | None:
    """The rows analysed at a look of ``n`` participants, or ``None`` before it is reached.

    Parameters
    ----------
    data : pandas.DataFrame
        Choice rows of every participant so far.
    n : int
        Participants the look analyses.
    plan : AnalysisPlan
        Its exclusion rules.
    order : list of str, optional
        Completion order (:func:`completion_order`), to reuse across looks.
    subject : str
        Participant column.

    Returns
    -------
    pandas.DataFrame or None
        The kept rows of the shortest prefix of the completion order with ``n`` participants
        kept (more only when a rule on the sample's median lets an earlier one back in).
    """
    order = completion_order(data, subject=subject) if order is None else order
    position = {pid: i for i, pid in enumerate(order)}
    rank = data[subject].map(position)
    # Adding a participant adds at most one kept participant (the median rule aside), so the
    # prefix is at least n long; it grows by the number still missing.
    size = n
    while size <= len(order):
        kept, _ = exclude_choice(data[rank < size], plan.exclusions, subject=subject)
        have = kept[subject].nunique()
        if have >= n:
            return kept
        size += n - have
    return None


def primary_test(data: pd.DataFrame, plan: AnalysisPlan) -> dict[str, object]:
    """Fit the pre-registered model on analysed rows; return its oriented statistic.

    Parameters
    ----------
    data : pandas.DataFrame
        Rows after the exclusion rules; rows of formats other than ``plan.levels`` are left
        out.
    plan : AnalysisPlan
        The test, levels, direction and transform.

    Returns
    -------
    dict
        ``estimate`` (log odds ratio, or the WTP difference on the model's scale), ``se``,
        ``se_z`` (``estimate / z``: the SE of the normal-theory scale; ``se`` for the GLMM),
        ``statistic`` (the model's z or t), ``df`` (t only), ``z`` (oriented: large values
        favour the hypothesis), ``p_val`` (fixed-design p in the pre-registered direction),
        ``n_participants``, ``singular``, ``notes``.

    Raises
    ------
    analysis.stats.crossed.ConvergenceError
        The model did not converge (no statistic).
    """
    from scipy.stats import norm
    from scipy.stats import t as t_dist

    # A k-format study: the primary test compares the plan's two formats, the others aside.
    data = data[data["format"].isin(plan.levels)]
    if plan.test == "choice_glmm":
        from analysis.stats.choice import choice_glmm

        row = choice_glmm(data, levels=plan.levels).iloc[0]
        estimate, se, statistic, df = row["log_odds"], row["se"], row["z"], math.nan
        z = float(statistic)
        n = int(row["n_subjects"])
    else:
        from analysis.stats.wtp import wtp_mixed

        transform = None if plan.transform == "none" else plan.transform
        fit = wtp_mixed(data, levels=plan.levels, transform=transform, model="crossed_sparse")
        row = fit.iloc[0]
        estimate, se, statistic, df = row["estimate"], row["se"], row["statistic"], row["df"]
        # The z with the same one-sided p, from the smaller tail (exact far out; a tail that
        # underflows to 0 gives an infinite z, beyond any bound).
        lower, upper = float(t_dist.cdf(statistic, df)), float(t_dist.sf(statistic, df))
        z = float(-norm.isf(lower) if lower < upper else norm.isf(upper))
        n = int(row["n_subjects"])
    oriented = -z if plan.direction == "less" else z
    # The SE at which estimate / SE is this z: the normal-theory scale of the adjusted interval.
    se_z = float(estimate) / z if z != 0 and math.isfinite(z) else float(se)
    if plan.direction == "two-sided":
        p_val = float(2 * norm.sf(abs(z)))
    else:
        p_val = float(norm.sf(oriented))
    return {
        "estimate": float(estimate),
        "se": float(se),
        "se_z": se_z,
        "statistic": float(statistic),
        "df": float(df),
        "z": oriented,
        "p_val": p_val,
        "n_participants": n,
        "singular": bool(row["singular"]),
        "notes": str(row["notes"]),
    }


def evaluate_looks(data: pd.DataFrame, plan: AnalysisPlan) -> pd.DataFrame:
    """The pre-registered test at every look the data have reached, against its boundary.

    Parameters
    ----------
    data : pandas.DataFrame
        The study's choice rows (long export), every participant so far.
    plan : AnalysisPlan
        The pre-registered analysis (a fixed design is one look at ``planned_n``).

    Returns
    -------
    pandas.DataFrame
        One row per planned look: ``look``, ``n_planned``, ``reached`` (bool), ``n_analysed``,
        ``fraction`` (analysed / planned N), ``estimate``, ``se``, ``statistic``, ``df``, ``z``
        (oriented), ``p_val`` (fixed-design), ``efficacy_z``, ``futility_z``, ``decision``
        (as :func:`analysis.plan.sequential.stopping_look`; empty before the look),
        ``crossed`` (an efficacy or futility bound was crossed here), ``participants`` (the
        analysed ids, space-separated), ``notes``.
        Looks after a stopping look are still computed (the report says the design stopped
        earlier); a model that did not converge leaves its look without a statistic.
    """
    import pandas as pd

    from analysis.stats.crossed import ConvergenceError

    design = plan.design()
    sizes = plan.look_sizes()
    order = completion_order(data)
    rows: list[dict[str, object]] = []
    for k, n in enumerate(sizes):
        sample = look_sample(data, n, plan, order=order)
        row: dict[str, object] = {"look": k + 1, "n_planned": n, "reached": sample is not None}
        if sample is not None:
            row["n_analysed"] = int(sample["participant_id"].nunique())
            row["participants"] = " ".join(sorted(sample["participant_id"].unique()))
            try:
                row.update(primary_test(sample, plan))
            except (ConvergenceError, ValueError) as exc:
                row["notes"] = f"no statistic: {exc}"
        rows.append(row)
    out = pd.DataFrame(rows)
    for col in ("n_analysed", "estimate", "se", "se_z", "statistic", "df", "z", "p_val"):
        if col not in out.columns:
            out[col] = math.nan
    for col in ("participants", "notes"):
        out[col] = out.get(col, pd.Series("", index=out.index)).fillna("")
    # Boundaries at the fractions actually analysed (Lan-DeMets), planned ones where not yet.
    actual = out["n_analysed"].where(out["reached"], out["n_planned"]).astype(float)
    bounds = boundaries(design, (actual / plan.planned_n).tolist())
    out["fraction"] = bounds["fraction"]
    out["efficacy_z"] = bounds["efficacy_z"]
    out["futility_z"] = bounds["futility_z"]
    decisions = []
    for k in range(len(out)):
        z = out["z"].iloc[k]
        reached = out["reached"].iloc[k] and not math.isnan(z)
        final = k == len(out) - 1
        decisions.append(
            look_decision(z, bounds.iloc[k], design.sided, final=final) if reached else ""
        )
    out["decision"] = decisions
    out["crossed"] = out["decision"].isin(["efficacy", "futility"])
    return out


def primary_result(looks: pd.DataFrame, plan: AnalysisPlan) -> pd.DataFrame:
    """The pre-registered primary result: where the design stopped and the adjusted inference.

    Parameters
    ----------
    looks : pandas.DataFrame
        :func:`evaluate_looks` output.
    plan : AnalysisPlan
        The pre-registered analysis.

    Returns
    -------
    pandas.DataFrame
        One row: ``test``, ``direction``, ``alpha``, ``look`` (the stopping look, or the last
        one reached), ``n_looks``, ``stopped`` (``efficacy``, ``futility``, ``not rejected``,
        or ``continue``: not finished), ``n_analysed``, ``z``, ``p_val`` (stage-wise adjusted),
        ``p_naive``,
        ``estimate`` (median unbiased, on the model's scale: log odds ratio or WTP difference),
        ``estimate_naive``, ``ci_low``, ``ci_high``, ``confidence``, ``odds_ratio``,
        ``or_ci_low``, ``or_ci_high`` (``choice_glmm``: the exponentiated values), ``reject``
        (the null hypothesis is rejected by the pre-registered rule), ``later_looks``
        (looks with data past the stopping look: the design had stopped before them).
    """
    import pandas as pd

    reached = looks[looks["reached"]]
    if reached.empty:
        raise ValueError(
            f"no look reached: the first look needs {int(looks['n_planned'].iloc[0])} "
            "completed, non-excluded participants"
        )
    bounds = boundaries(plan.design(), looks["fraction"].tolist())
    # Stopping is decided look by look: every look up to the stopping one needs its statistic.
    missing = reached[reached["z"].isna()]
    z = reached["z"].tolist()[: int(missing["look"].min()) - 1 if len(missing) else None]
    look, decision = stopping_look(z, bounds.iloc[: len(z)].reset_index(drop=True))
    if len(missing) and (decision == "continue" or not z):
        first = missing.iloc[0]
        raise ValueError(
            f"look {int(first['look'])} has no statistic ({first['notes']}); the pre-registered "
            "rule cannot be applied past it"
        )
    at = reached.iloc[look - 1]
    sign = -1.0 if plan.direction == "less" else 1.0
    inference = stagewise_inference(z[:look], bounds.iloc[:look], se=float(at["se_z"]), look=look)
    inf = inference.iloc[0]
    # Back to the model's own direction (the oriented scale flips it for "less").
    est, low, high = (sign * inf["estimate"], sign * inf["ci_low"], sign * inf["ci_high"])
    low, high = min(low, high), max(low, high)
    row = {
        "test": plan.test,
        "direction": plan.direction,
        "alpha": plan.alpha,
        "look": look,
        "n_looks": len(looks),
        "stopped": decision,
        "n_analysed": int(at["n_analysed"]),
        "z": float(at["z"]),
        "p_val": float(inf["p_val"]),
        "p_naive": float(inf["p_naive"]),
        "estimate": est,
        "estimate_naive": float(at["estimate"]),
        "ci_low": low,
        "ci_high": high,
        "confidence": float(inf["confidence"]),
        "reject": decision == "efficacy",
        "later_looks": int(len(reached) - look),
    }
    if plan.test == "choice_glmm":
        row.update(odds_ratio=math.exp(est), or_ci_low=math.exp(low), or_ci_high=math.exp(high))
    return pd.DataFrame([row])


def preregistered_tables(
    data: pd.DataFrame, plan: AnalysisPlan
) -> tuple[dict[str, pd.DataFrame], dict[str, object]]:
    """The report's pre-registered tables: every look, and the primary result (if reached).

    Parameters
    ----------
    data : pandas.DataFrame
        The study's choice rows (the final long export).
    plan : AnalysisPlan
        The frozen primary analysis.

    Returns
    -------
    (dict, dict)
        Tables ``looks`` (:func:`evaluate_looks` without the participant lists) and
        ``primary`` (:func:`primary_result`, when a look was reached), and meta entries
        (``primary_failed`` says why there is no primary result).
    """
    looks = evaluate_looks(data, plan)
    tables = {"looks": looks.drop(columns=["participants"])}
    meta: dict[str, object] = {}
    try:
        tables["primary"] = primary_result(looks, plan)
    except ValueError as exc:
        meta["primary_failed"] = str(exc)
    return tables, meta
