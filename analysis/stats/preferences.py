"""Pairwise preferences between a human (reference) summary and a generated one.

Do people share the LLM judges' preference for generated summaries, and does it grow with the
overlap between the two? Input is long: one row per (rater, pair) verdict, with the systems shown
first and second and the chosen system, as the platform's ``pairwise_preference`` export
(``docs/export.md``) writes it. Each rater sees a pair in one order; the design balances the orders
across raters, so per pair the two orders' majority verdicts give the same outcome categories as
an LLM judge's two verdicts (:func:`analysis.metrics.overlap.judge_outcomes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "human_pair_outcomes",
    "mark_reference",
    "order_consistency",
    "outcomes_side_by_side",
    "preference_by_bin",
]


def mark_reference(
    data: pd.DataFrame,
    *,
    reference: str = "human",
    first: str = "system_first",
    second: str = "system_second",
    chosen: str = "chosen_system",
) -> pd.DataFrame:
    """Add the reference-centred columns every other function here reads.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per verdict.
    reference : str
        The system name of the human (reference) summary; every pair must contain it once.
    first, second, chosen : str
        Columns with the system shown first, shown second, and chosen.

    Returns
    -------
    pandas.DataFrame
        ``data`` plus ``system`` (the non-reference system of the pair), ``reference_first``
        (1 if the reference was shown first), ``chose_reference`` and ``chose_first`` (0/1).

    Raises
    ------
    ValueError
        A pair without the reference system (or with it on both sides), or a chosen system that
        was not shown.
    """
    import numpy as np

    ref_first = data[first] == reference
    ref_second = data[second] == reference
    bad = ~(ref_first ^ ref_second)
    if bad.any():
        row = data.loc[bad].iloc[0]
        raise ValueError(
            f"exactly one of {first}/{second} must be the reference system {reference!r}; "
            f"found {row[first]!r} and {row[second]!r}"
        )
    shown = (data[chosen] == data[first]) | (data[chosen] == data[second])
    if not shown.all():
        row = data.loc[~shown].iloc[0]
        raise ValueError(f"chosen system {row[chosen]!r} was not one of the two shown")
    out = data.copy()
    out["system"] = np.where(ref_first, data[second], data[first])
    out["reference_first"] = ref_first.astype(int)
    out["chose_reference"] = (data[chosen] == reference).astype(int)
    out["chose_first"] = (data[chosen] == data[first]).astype(int)
    return out


def preference_by_bin(
    marked: pd.DataFrame,
    *,
    similarity: str = "similarity",
    bins: Sequence[float] | int = 5,
    by: Sequence[str] = ("system",),
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Share of verdicts preferring the reference summary, overall and per similarity bin.

    Parameters
    ----------
    marked : pandas.DataFrame
        Output of :func:`mark_reference` with a similarity column (the overlap of the pair's two
        summaries, :func:`analysis.metrics.overlap.overlap_similarity`).
    similarity : str
        Similarity column, in [0, 1].
    bins : int or sequence of float, default 5
        Bin edges, or a number of equal-width bins over [0, 1]; closed on the left, the last one
        on both sides (as :func:`analysis.metrics.overlap.outcome_shares`).
    by : sequence of str
        Grouping columns (default: the generated system).
    confidence : float
        Coverage of the Wilson intervals.

    Returns
    -------
    pandas.DataFrame
        One row per (group, bin), plus one per group with ``bin`` = ``all``: the ``by`` columns,
        ``bin``, ``bin_low``, ``bin_high``, ``n`` (verdicts), ``n_pairs``, ``n_reference``
        (verdicts preferring the reference), ``estimate`` (their share), ``ci_low``,
        ``ci_high`` (Wilson), ``p_val`` (exact two-sided binomial test of share = 0.5).

    Notes
    -----
    The interval and test treat verdicts as independent; a rater's verdicts are not, so read
    them as descriptive. Empty bins are listed with n = 0.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import binomtest

    from analysis.stats.choice import wilson_ci

    edges = np.linspace(0, 1, bins + 1) if isinstance(bins, int) else np.asarray(bins, float)
    sims = marked[similarity].to_numpy(dtype=float)
    idx = np.clip(np.digitize(sims, edges) - 1, 0, len(edges) - 2)
    inside = ~(np.isnan(sims) | (sims < edges[0]) | (sims > edges[-1]))
    keys = list(by)
    rows = []

    def row(key_vals, label, low, high, part):
        n = len(part)
        k = int(part["chose_reference"].sum())
        ci_low, ci_high = wilson_ci(k, n, confidence)
        rows.append(
            {
                **key_vals,
                "bin": label,
                "bin_low": low,
                "bin_high": high,
                "n": n,
                "n_pairs": int(part["pair_id"].nunique()) if "pair_id" in part else np.nan,
                "n_reference": k,
                "estimate": k / n if n else np.nan,
                "ci_low": float(ci_low),
                "ci_high": float(ci_high),
                "p_val": float(binomtest(k, n).pvalue) if n else np.nan,
            }
        )

    df = marked.assign(_bin=idx, _inside=inside)
    groups = df.groupby(keys, sort=True, dropna=False) if keys else [((), df)]
    for key, group in groups:
        key_vals = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row(key_vals, "all", float(edges[0]), float(edges[-1]), group)
        kept = group[group["_inside"]]
        for b in range(len(edges) - 1):
            label = f"[{edges[b]:.2f}, {edges[b + 1]:.2f}" + ("]" if b == len(edges) - 2 else ")")
            row(key_vals, label, float(edges[b]), float(edges[b + 1]), kept[kept["_bin"] == b])
    columns = [*keys, "bin", "bin_low", "bin_high", "n", "n_pairs", "n_reference"]
    return pd.DataFrame(rows, columns=[*columns, "estimate", "ci_low", "ci_high", "p_val"])


def order_consistency(
    marked: pd.DataFrame,
    *,
    rater: str = "participant_id",
    pair: str = "pair_id",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Per rater: how much the verdicts follow the position rather than the summary.

    Parameters
    ----------
    marked : pandas.DataFrame
        Output of :func:`mark_reference`.
    rater, pair : str
        Column names.
    confidence : float
        Coverage of the Wilson interval of ``share_first``.

    Returns
    -------
    pandas.DataFrame
        One row per rater: ``rater`` column, ``n`` (verdicts), ``share_first`` (share choosing
        the summary shown first; 0.5 = no position preference), ``ci_low``, ``ci_high``
        (Wilson), ``p_val`` (exact binomial test of share_first = 0.5), ``pref_reference_first``
        and ``pref_reference_second`` (share preferring the reference when it was shown first /
        second), ``order_consistency`` (``1 - |pref_reference_first - pref_reference_second|``:
        1 when the order changes nothing, NaN when the rater saw only one order),
        ``n_repeated_pairs`` and ``repeat_consistency`` (pairs this rater judged in both orders,
        and the share of them given the same system both times; NaN when none).
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import binomtest

    from analysis.stats.choice import wilson_ci

    rows = []
    for who, group in marked.groupby(rater, sort=True):
        n = len(group)
        k = int(group["chose_first"].sum())
        low, high = wilson_ci(k, n, confidence)
        ref_first = group.loc[group["reference_first"] == 1, "chose_reference"]
        ref_second = group.loc[group["reference_first"] == 0, "chose_reference"]
        a = float(ref_first.mean()) if len(ref_first) else np.nan
        b = float(ref_second.mean()) if len(ref_second) else np.nan
        both = group.groupby(pair)["reference_first"].nunique()
        repeated = both[both == 2].index
        if len(repeated):
            # Last verdict per order: a pair repeated in the same order counts once.
            last = group[group[pair].isin(repeated)].drop_duplicates(
                [pair, "reference_first"], keep="last"
            )
            same = last.groupby(pair)["chose_reference"].nunique() == 1
            repeat = float(same.mean())
        else:
            repeat = np.nan
        rows.append(
            {
                rater: who,
                "n": n,
                "share_first": k / n,
                "ci_low": float(low),
                "ci_high": float(high),
                "p_val": float(binomtest(k, n).pvalue),
                "pref_reference_first": a,
                "pref_reference_second": b,
                "order_consistency": 1 - abs(a - b),
                "n_repeated_pairs": len(repeated),
                "repeat_consistency": repeat,
            }
        )
    columns = [
        rater,
        "n",
        "share_first",
        "ci_low",
        "ci_high",
        "p_val",
        "pref_reference_first",
        "pref_reference_second",
        "order_consistency",
        "n_repeated_pairs",
        "repeat_consistency",
    ]
    return pd.DataFrame(rows, columns=columns)


def human_pair_outcomes(
    marked: pd.DataFrame, *, pair: str = "pair_id", judge_name: str = "humans"
) -> pd.DataFrame:
    """Outcome categories of the human verdicts, pooled per pair and order by majority.

    Per pair, the verdicts with the reference shown first (from some raters) and shown second
    (from others) each give a majority choice; the two choices then make one outcome exactly as
    an LLM judge's two verdicts do.

    Parameters
    ----------
    marked : pandas.DataFrame
        Output of :func:`mark_reference`.
    pair : str
        Pair column.
    judge_name : str
        The ``judge`` value of the rows.

    Returns
    -------
    pandas.DataFrame
        The shape of :func:`analysis.metrics.overlap.judge_outcomes` with ``item_id`` = the pair:
        ``item_id``, ``judge``, ``system`` (``generated``), ``choice_gt_first``,
        ``choice_gt_second`` (``gt``, ``generated`` or None for a tied vote or a missing order)
        and ``outcome`` (``GT``, ``Generated``, ``tied-chose-first``, ``tied-chose-last``,
        ``other``), plus ``n_gt_first`` and ``n_gt_second`` (verdicts per order).
    """
    import pandas as pd

    from analysis.metrics.overlap import judge_outcomes

    rows = []
    counts = {}
    for (pid, ref_first), group in marked.groupby([pair, "reference_first"], sort=True):
        share = float(group["chose_reference"].mean())
        label = "gt" if share > 0.5 else ("generated" if share < 0.5 else "tied")
        order = ("gt", "generated") if ref_first else ("generated", "gt")
        rows.append({"item_id": str(pid), "model": judge_name, "first": order[0]})
        rows[-1].update(second=order[1], label=label)
        counts[(str(pid), "gt_first" if ref_first else "gt_second")] = len(group)
    verdicts = pd.DataFrame(rows, columns=["item_id", "model", "first", "second", "label"])
    out = judge_outcomes(verdicts, gt="gt")
    # A tied vote is no choice: `judge_outcomes` already makes that order's outcome "other".
    for col in ("choice_gt_first", "choice_gt_second"):
        out[col] = out[col].where(out[col] != "tied", None)
    out["n_gt_first"] = [counts.get((i, "gt_first"), 0) for i in out["item_id"]]
    out["n_gt_second"] = [counts.get((i, "gt_second"), 0) for i in out["item_id"]]
    return out


def outcomes_side_by_side(
    outcomes: Sequence[pd.DataFrame],
    similarity: pd.DataFrame,
    *,
    item: str = "item_id",
    bins: Sequence[float] | int = 5,
) -> pd.DataFrame:
    """Outcome shares per similarity bin for humans and LLM judges in one table.

    Parameters
    ----------
    outcomes : sequence of pandas.DataFrame
        Outputs of :func:`human_pair_outcomes` and
        :func:`analysis.metrics.overlap.judge_outcomes` (one row per item and judge).
    similarity : pandas.DataFrame
        ``item`` and ``similarity`` per item (the pair's overlap).
    item : str
        Item column shared by the outcomes and the similarity table.
    bins : int or sequence of float
        As :func:`analysis.metrics.overlap.outcome_shares`.

    Returns
    -------
    pandas.DataFrame
        :func:`analysis.metrics.overlap.outcome_shares` by ``judge``: ``judge``, ``bin_low``,
        ``bin_high``, ``outcome``, ``n``, ``share``; humans and judges on the same items only.
    """
    import pandas as pd

    from analysis.metrics.overlap import outcome_shares

    cols = ["item_id", "judge", "outcome"]
    pooled = pd.concat([o[cols] for o in outcomes], ignore_index=True)
    sims = similarity[[item, "similarity"]].rename(columns={item: "item_id"})
    sims = sims.assign(item_id=sims["item_id"].astype(str)).drop_duplicates("item_id")
    pooled = pooled.assign(item_id=pooled["item_id"].astype(str)).merge(sims, on="item_id")
    # Compare like with like: only items that every source (humans, each judge) has.
    n_sources = pooled["judge"].nunique()
    common = pooled.groupby("item_id")["judge"].nunique()
    pooled = pooled[pooled["item_id"].isin(common[common == n_sources].index)]
    return outcome_shares(pooled, bins=bins, by=("judge",))
