"""LLM-as-judge overlap bias: does a judge prefer the generated summary more when it overlaps
more with the human one?

Similarity of a generated summary to the human (ground-truth) summary is the mean of sentence-level
BLEU-1 and BLEU-4 (``sacrebleu``, rescaled to [0, 1]) and ROUGE-1 and ROUGE-2 F1 (``rouge-score``).
Each pair is judged twice, once in each order; the two verdicts give one outcome per item.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.metrics.records import each_group

__all__ = [
    "OUTCOMES",
    "judge_outcomes",
    "length_filter",
    "outcome_shares",
    "overlap_similarity",
    "pair_judgments",
    "similarity_range",
]

OUTCOMES = ("GT", "Generated", "tied-chose-first", "tied-chose-last", "other")


def overlap_similarity(
    data: pd.DataFrame, *, generated: str = "generated", reference: str = "reference"
) -> pd.DataFrame:
    """BLEU-1, BLEU-4, ROUGE-1, ROUGE-2 and their mean for each (generated, reference) pair.

    BLEU is sacrebleu's sentence-level BLEU (``BLEU(max_ngram_order=n, effective_order=True)``:
    ``13a`` tokenisation, case-sensitive, ``exp`` smoothing) divided by 100 so that all four lie in
    [0, 1]. ROUGE is ``rouge-score`` F1 with the Porter stemmer.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per pair; other columns are kept.
    generated, reference : str
        Columns with the generated and the human summary.

    Returns
    -------
    pandas.DataFrame
        ``data`` plus ``bleu1``, ``bleu4``, ``rouge1``, ``rouge2`` and ``similarity`` (their mean).

    Examples
    --------
    >>> df = pd.DataFrame({"generated": ["the cat sat"], "reference": ["the cat sat"]})
    >>> overlap_similarity(df)["similarity"].round(6).tolist()
    [1.0]
    """
    from rouge_score import rouge_scorer
    from sacrebleu.metrics import BLEU

    bleu1 = BLEU(max_ngram_order=1, effective_order=True)
    bleu4 = BLEU(max_ngram_order=4, effective_order=True)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2"], use_stemmer=True)
    scores = np.empty((len(data), 4))
    pairs = zip(data[generated].fillna(""), data[reference].fillna(""), strict=True)
    for i, (gen, ref) in enumerate(pairs):
        rouge = scorer.score(str(ref), str(gen))
        scores[i] = (
            bleu1.sentence_score(str(gen), [str(ref)]).score / 100,
            bleu4.sentence_score(str(gen), [str(ref)]).score / 100,
            rouge["rouge1"].fmeasure,
            rouge["rouge2"].fmeasure,
        )
    out = data.copy()
    for j, name in enumerate(("bleu1", "bleu4", "rouge1", "rouge2")):
        out[name] = scores[:, j]
    out["similarity"] = scores.mean(axis=1)
    return out


def length_filter(
    data: pd.DataFrame, *, columns: Sequence[str] = ("reference",), low: int = 95, high: int = 105
) -> pd.DataFrame:
    """Keep rows whose texts in ``columns`` all have ``low``..``high`` whitespace words (inclusive).

    The overlap paper keeps items whose *human reference* summary has 95–105 words, so the
    default filters ``reference``; the generated summaries are left as the model wrote them
    (filtering them instead kept 1 of 10 items whose references were all exactly 100 words).

    Examples
    --------
    >>> df = pd.DataFrame({"reference": ["w " * 95, "w " * 94], "generated": ["w", "w " * 100]})
    >>> len(length_filter(df))
    1
    """
    keep = np.ones(len(data), dtype=bool)
    for col in columns:
        words = data[col].fillna("").astype(str).str.split().str.len()
        keep &= words.between(low, high).to_numpy()
    return data.loc[keep].reset_index(drop=True)


def _outcome(gt_first: str | None, gt_second: str | None, gt: str, gen: str) -> str:
    """Outcome from the verdicts with the human summary shown first and shown second."""
    if gt_first not in (gt, gen) or gt_second not in (gt, gen):
        return "other"
    if gt_first == gt_second:
        return "GT" if gt_first == gt else "Generated"
    # The verdict flipped with the order, so it followed the position, not the summary.
    return "tied-chose-first" if gt_first == gt else "tied-chose-last"


def judge_outcomes(
    judgments: pd.DataFrame,
    *,
    gt: str = "human",
    item: str = "item_id",
    judge: str = "model",
    first: str = "first",
    second: str = "second",
    label: str = "label",
    keys: Sequence[str] = (),
) -> pd.DataFrame:
    """Combine the two-order verdicts of each item into one outcome.

    Parameters
    ----------
    judgments : pandas.DataFrame
        One row per verdict: the item, the judge, the system names shown first and second, and the
        chosen system name (anything else, e.g. ``"other"``, is no valid choice).
    gt : str, default "human"
        The name of the human (ground-truth) summary's system.
    item, judge, first, second, label : str
        Column names.
    keys : sequence of str
        Further columns that tell pairs of one item apart and are kept (e.g.
        ``summary_version``: an original and a rephrased summary of the same item are two
        pairs).

    Returns
    -------
    pandas.DataFrame
        One row per (item, judge, generated system, ``keys``): ``item_id``, ``judge``,
        ``system`` (the generated summary's system), the ``keys`` columns, ``choice_gt_first``
        and ``choice_gt_second`` (the verdicts with the human summary shown first / second;
        None if that order is missing) and
        ``outcome``: ``GT`` (human chosen both times), ``Generated`` (generated chosen both
        times), ``tied-chose-first`` / ``tied-chose-last`` (the first / last shown chosen both
        times) or ``other`` (a missing order or an invalid verdict).
    """
    extra = list(keys)
    df = judgments[[item, judge, first, second, label, *extra]].copy()
    df.columns = ["item_id", "judge", "first", "second", "label", *extra]
    bad = ~((df["first"] == gt) ^ (df["second"] == gt))
    if bad.any():
        row = df.loc[bad].iloc[0]
        raise ValueError(
            f"item {row['item_id']!r}: exactly one of first/second must be the human system {gt!r}"
        )
    df["system"] = df["first"].where(df["first"] != gt, df["second"])
    df["order"] = np.where(df["first"] == gt, "gt_first", "gt_second")
    # A rerun of the same order replaces the earlier verdict.
    index = ["item_id", "judge", "system", *extra]
    latest = df.drop_duplicates([*index, "order"], keep="last")
    wide = latest.pivot(index=index, columns="order", values="label")
    wide = wide.reindex(columns=["gt_first", "gt_second"])
    wide = wide.astype(object).where(wide.notna(), None).reset_index()
    wide = wide.rename(columns={"gt_first": "choice_gt_first", "gt_second": "choice_gt_second"})
    wide.columns.name = None
    wide["outcome"] = [
        _outcome(a, b, gt, s)
        for a, b, s in zip(
            wide["choice_gt_first"], wide["choice_gt_second"], wide["system"], strict=True
        )
    ]
    return wide


def outcome_shares(
    outcomes: pd.DataFrame,
    *,
    similarity: str = "similarity",
    bins: Sequence[float] | int = 10,
    by: Sequence[str] = ("judge",),
) -> pd.DataFrame:
    """Share of each outcome per similarity bin.

    Parameters
    ----------
    outcomes : pandas.DataFrame
        Output of :func:`judge_outcomes` with a similarity column (e.g. merged from
        :func:`overlap_similarity`).
    bins : int or sequence of float, default 10
        Bin edges, or a number of equal-width bins over [0, 1]. Bins are closed on the left and
        the last one on both sides.
    by : sequence of str, default ("judge",)
        Grouping columns.

    Returns
    -------
    pandas.DataFrame
        One row per (group, bin, outcome): the ``by`` columns, ``bin_low``, ``bin_high``,
        ``outcome``, ``n`` (items with this outcome) and ``share`` (over the bin's items; NaN for
        an empty bin).
    """
    edges = np.linspace(0, 1, bins + 1) if isinstance(bins, int) else np.asarray(bins, float)
    sims = outcomes[similarity].to_numpy(dtype=float)
    # np.digitize with right=False puts the upper edge in an extra bin: fold it into the last.
    idx = np.clip(np.digitize(sims, edges) - 1, 0, len(edges) - 2)
    outside = np.isnan(sims) | (sims < edges[0]) | (sims > edges[-1])
    df = outcomes.assign(_bin=idx).loc[~outside]
    keys = list(by)
    rows = []
    for key_vals, g in each_group(df, keys):
        for b in range(len(edges) - 1):
            in_bin = g.loc[g["_bin"] == b, "outcome"]
            for outcome in OUTCOMES:
                n = int((in_bin == outcome).sum())
                rows.append(
                    {
                        **key_vals,
                        "bin_low": edges[b],
                        "bin_high": edges[b + 1],
                        "outcome": outcome,
                        "n": n,
                        "share": n / len(in_bin) if len(in_bin) else np.nan,
                    }
                )
    return pd.DataFrame(rows, columns=[*keys, "bin_low", "bin_high", "outcome", "n", "share"])


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "rephrased"}
    return bool(value) and not pd.isna(value)  # type: ignore[call-overload]


def pair_judgments(
    records: pd.DataFrame,
    *,
    order: str = "order",
    reference: str = "human_summary",
    generated: str = "generated_summary",
    summarizer: str = "summarizer",
    rephrased: str = "rephrased",
) -> pd.DataFrame:
    """Verdicts of ``judge-pair`` generation records in the shape :func:`judge_outcomes` takes.

    The generation engine shows each pair twice, with ``order`` ``gt_first`` or
    ``generated_first``, and labels the verdict ``gt``, ``generated`` or ``other``.

    The overlap paper judges summaries by several summarizer models and reports outcomes per
    summarizer; it also has models rephrase and reorganize the human (ground-truth) summaries
    while keeping their long phrases (003 §2.2, Fig. 6), which gives candidates of *higher*
    overlap with the human summary and so widens the similarity range the bins cover, up to
    its upper end. An item's ``summarizer`` field
    names the model that wrote its generated summary (``generated`` when absent), and a true
    ``rephrased`` field marks a rephrased summary; both become part of the pair's identity, so
    two summarizers' (or an original and a rephrased) summaries of one item are two pairs.

    Returns
    -------
    pandas.DataFrame
        ``item_id``, ``model`` (the judge), ``first``, ``second`` (``gt`` or the summarizer),
        ``label`` (``gt``, the summarizer or ``other``), ``summary_version`` (``original`` /
        ``rephrased``), ``reference`` and ``generated`` (the two summaries' texts).
    """
    from analysis.metrics.records import column, select_task

    rows = select_task(records, "judge-pair")
    first = rows[column(rows, order)].astype(str).str.removesuffix("_first")
    if not first.isin(["gt", "generated"]).all():
        bad = sorted(set(first) - {"gt", "generated"})
        raise ValueError(f"order must be gt_first or generated_first, found {bad}")

    def optional(name: str) -> pd.Series | None:
        try:
            return rows[column(rows, name)]
        except KeyError:
            return None

    names = optional(summarizer)
    system = (
        names.astype(object).where(names.notna(), "generated").astype(str)
        if names is not None
        else pd.Series("generated", index=rows.index)
    )
    if (system == "gt").any():
        raise ValueError("a summarizer may not be called 'gt' (the human summary's name)")
    flags = optional(rephrased)
    version = (
        flags.map(lambda v: "rephrased" if _truthy(v) else "original")
        if flags is not None
        else pd.Series("original", index=rows.index)
    )
    label = rows["label"].where(rows["label"] != "generated", system)
    return pd.DataFrame(
        {
            "item_id": rows["item_id"].astype(str),
            "model": rows["model"],
            "first": np.where(first == "gt", "gt", system),
            "second": np.where(first == "gt", system, "gt"),
            "label": label,
            "summary_version": version,
            "reference": rows[column(rows, reference)],
            "generated": rows[column(rows, generated)],
        }
    ).reset_index(drop=True)


def similarity_range(
    outcomes: pd.DataFrame,
    *,
    by: Sequence[str] = ("summary_version",),
    similarity: str = "similarity",
) -> pd.DataFrame:
    """How much of the similarity scale the pairs cover, per group (e.g. original vs rephrased).

    Returns
    -------
    pandas.DataFrame
        The ``by`` columns, ``n``, ``min``, ``max``, ``mean`` of the similarity, and
        ``n_bins_covered`` (of ten equal-width bins over [0, 1], how many hold a pair).
    """
    keys = [c for c in by if c in outcomes.columns]
    rows = []
    for key_vals, g in each_group(outcomes, keys):
        sims = g[similarity].dropna().to_numpy(dtype=float)
        covered = np.unique(np.clip((sims * 10).astype(int), 0, 9)).size if sims.size else 0
        rows.append(
            {
                **key_vals,
                "n": int(sims.size),
                "min": sims.min() if sims.size else np.nan,
                "max": sims.max() if sims.size else np.nan,
                "mean": sims.mean() if sims.size else np.nan,
                "n_bins_covered": covered,
            }
        )
    return pd.DataFrame(rows, columns=[*keys, "n", "min", "max", "mean", "n_bins_covered"])
