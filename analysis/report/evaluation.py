"""Tables, figures and report sections of summary-rating and pairwise-preference studies.

``analyze_ratings`` / ``analyze_preferences`` are pure (DataFrames in, ``Results`` out);
``figures`` and ``sections`` are what :func:`analysis.report.writer.write_results` calls for
results of kind ``ratings`` and ``preferences``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from analysis.exclusions import RaterRules, exclude_raters, exclusion_summary
from analysis.report.pipeline import Results, library_versions
from analysis.report.rules import rule_status, rules_meta

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["analyze_preferences", "analyze_ratings", "figures", "sections"]

RATING_SPECS = {
    "rating_table": "mean rating per system (rows) and dimension (columns): the published table",
    "rating_means": (
        "mean rating per system and dimension; ratings of a summary averaged first, t 95% CI "
        "over summaries"
    ),
    "rating_means_by_perspective": "the same, split by the summarised perspective",
    "icc": (
        "intraclass correlation per dimension (pingouin.intraclass_corr; targets = summaries). "
        "Raters not crossed with summaries: one-way ICC(1,1), ICC(1,k) only, raters relabelled "
        "as the 1st..k-th rating of a summary, summaries with fewer than k ratings left out; "
        "Shrout & Fleiss F-based CIs"
    ),
    "alpha": (
        "Krippendorff's alpha, ordinal metric over the whole scale, per dimension (krippendorff "
        "package; percentile bootstrap CI over summaries)"
    ),
    "metric_tau": (
        "Kendall's tau-b between each automatic metric and the mean human rating, one "
        "observation per summary (scipy.stats.kendalltau; Fieller-Hartley-Pearson Fisher-z CI)"
    ),
}

PREFERENCE_SPECS = {
    "similarity": (
        "per pair: mean of sentence BLEU-1, BLEU-4 (sacrebleu / 100), ROUGE-1, ROUGE-2 F1 "
        "(rouge-score) of the generated summary against the reference"
    ),
    "preference_by_bin": (
        "share of verdicts preferring the reference per generated system and similarity bin; "
        "Wilson 95% CI; exact binomial test of 0.5 (verdicts treated as independent)"
    ),
    "order_consistency": (
        "per rater: share choosing the first-shown summary (Wilson CI, binomial test of 0.5); "
        "reference preference when shown first vs second; order_consistency = 1 - |difference|; "
        "repeat_consistency over pairs seen in both orders"
    ),
    "outcomes": (
        "per pair and judge: GT / Generated / tied-chose-first / tied-chose-last / other. "
        "Humans: the majority verdict of the raters who saw each order (a tied vote is no "
        "choice: other); LLM judges: their two judge-pair verdicts"
    ),
    "outcome_shares": "share of each outcome per judge and similarity bin, on common pairs",
}


def analyze_ratings(
    ratings: pd.DataFrame,
    metrics: pd.DataFrame | None = None,
    *,
    rules: RaterRules | None = None,
    dimensions: Sequence[str] | None = None,
    n_boot: int = 1000,
) -> Results:
    """Run the summary-rating analysis.

    Parameters
    ----------
    ratings : pandas.DataFrame
        ``analysis.io.load_ratings`` output.
    metrics : pandas.DataFrame, optional
        ``summary_id`` plus numeric automatic metrics (``analysis.io.load_metric_table``).
    rules : RaterRules, optional
        Exclusion rules (:func:`analysis.exclusions.exclude_raters`; default none).
    dimensions : sequence of str, optional
        Column order of the rating table; default the order of first appearance.
    n_boot : int
        Bootstrap replicates of the alpha intervals.

    Returns
    -------
    Results
        Kind ``ratings``; tables ``exclusions``, ``exclusion_rules``, ``rating_table``,
        ``rating_means``, ``rating_means_by_perspective`` (when perspectives are recorded),
        ``icc``, ``alpha`` and, with metrics, ``metric_tau``.

    Raises
    ------
    ValueError
        No ratings, every rater excluded, or a rule that is on cannot read its column.
    """
    from analysis.stats import ratings as rs

    if ratings.empty:
        raise ValueError("no ratings to analyse")
    res = Results(kind="ratings")
    n_input = len(ratings)
    ratings = _screen(ratings, rules, res)
    dims = list(dimensions) if dimensions else list(dict.fromkeys(ratings["dimension"]))
    scale_min, scale_max = int(ratings["scale_min"].min()), int(ratings["scale_max"].max())
    means = rs.rating_means(ratings)
    order = {d: i for i, d in enumerate(dims)}
    means = means.assign(_d=means["dimension"].map(order)).sort_values(["system", "_d"])
    res.tables["rating_means"] = means.drop(columns="_d").reset_index(drop=True)
    table = means.pivot(index="system", columns="dimension", values="estimate")
    res.tables["rating_table"] = table.reindex(columns=dims).reset_index().rename_axis(None, axis=1)
    if ratings["perspective"].notna().any():
        res.tables["rating_means_by_perspective"] = rs.rating_means(
            ratings[ratings["perspective"].notna()], by=("perspective",)
        )
    alpha = rs.rating_alpha(ratings, scale=range(scale_min, scale_max + 1), n_boot=n_boot)
    for name, table in (("icc", rs.rating_icc(ratings)), ("alpha", alpha)):
        # Report the dimensions in the table's order, not alphabetically.
        ranked = table.assign(_d=table["dimension"].map(order)).sort_values("_d", kind="stable")
        res.tables[name] = ranked.drop(columns="_d").reset_index(drop=True)
    if metrics is not None:
        means_per_summary = rs.summary_means(ratings)
        res.tables["metric_tau"] = rs.metric_rating_tau(means_per_summary, metrics)
    res.meta = {
        "n_ratings_input": n_input,
        "n_ratings": len(ratings),
        "n_raters": int(ratings["participant_id"].nunique()),
        "n_summaries": int(ratings["summary_id"].nunique()),
        "n_sources": int(ratings["item_id"].nunique()),
        "systems": sorted(ratings["system"].unique()),
        "dimensions": dims,
        "scale": [scale_min, scale_max],
        "ratings_per_summary": float(
            ratings.groupby(["summary_id", "dimension"]).size().groupby("summary_id").mean().mean()
        ),
        "exclusion_rules": rules_meta(res.tables["exclusion_rules"]),
        "specifications": RATING_SPECS,
        "versions": library_versions("pingouin"),
    }
    return res


def _screen(data: pd.DataFrame, rules: RaterRules | None, res: Results) -> pd.DataFrame:
    """The rows the rater rules keep; their tables ``exclusions`` and ``exclusion_rules`` on
    ``res``. A rule that is on but finds no column to read is refused: the analysis would
    otherwise run on every rater as if it had screened them."""
    kept, excluded = exclude_raters(data, rules)
    status = rule_status(data, excluded, rules or RaterRules())
    unchecked = status[status["status"] == "not checked"]
    if len(unchecked):
        raise ValueError(
            "; ".join(f"{r.rule} cannot be applied: {r.why}" for r in unchecked.itertuples())
            + " (an export written before the platform recorded authenticity, or a file "
            "without its auth_ columns): export the study again, or leave the rule out"
        )
    if kept.empty:
        raise ValueError("every rater was excluded; nothing to analyse")
    res.tables["exclusions"] = exclusion_summary(data, excluded)
    res.tables["exclusion_rules"] = status
    return kept


def analyze_preferences(
    verdicts: pd.DataFrame,
    pairs: pd.DataFrame,
    judge_records: pd.DataFrame | None = None,
    *,
    rules: RaterRules | None = None,
    reference: str = "human",
    bins: Sequence[float] | int = 5,
) -> Results:
    """Run the pairwise-preference analysis, with LLM judges' outcomes beside the humans'.

    Parameters
    ----------
    verdicts : pandas.DataFrame
        ``analysis.io.load_preferences`` output.
    pairs : pandas.DataFrame
        ``analysis.io.load_pairs`` output: the two summaries of each pair (for the similarity).
    judge_records : pandas.DataFrame, optional
        ``judge-pair`` generation records (``analysis.metrics.records.read_records``); their
        ``item_id`` is the pair ID.
    rules : RaterRules, optional
        Exclusion rules (:func:`analysis.exclusions.exclude_raters`; default none).
    reference : str
        The human (reference) summary's system name.
    bins : int or sequence of float
        Similarity bins.

    Returns
    -------
    Results
        Kind ``preferences``; tables ``exclusions``, ``exclusion_rules``, ``similarity``,
        ``preference_by_bin``, ``order_consistency``, ``outcomes`` and ``outcome_shares``.

    Raises
    ------
    ValueError
        No verdicts, every rater excluded, a rule that is on cannot read its column, or the
        pairs do not match the verdicts.
    """
    import numpy as np
    import pandas as pd

    from analysis.metrics.overlap import judge_outcomes, overlap_similarity, pair_judgments
    from analysis.stats import preferences as ps

    if verdicts.empty:
        raise ValueError("no preference verdicts to analyse")
    res = Results(kind="preferences")
    n_input = len(verdicts)
    verdicts = _screen(verdicts, rules, res)
    missing = sorted(set(verdicts["pair_id"]) - set(pairs["pair_id"]))
    if missing:
        raise ValueError(
            f"{len(missing)} pair(s) without texts in the pairs table, e.g. {missing[0]}"
        )
    ref_is_a = pairs["system_a"] == reference
    ref_is_b = pairs["system_b"] == reference
    if not (ref_is_a ^ ref_is_b).all():
        bad = pairs.loc[~(ref_is_a ^ ref_is_b)].iloc[0]
        raise ValueError(f"pair {bad['pair_id']!r} does not contain the reference {reference!r}")
    texts = pd.DataFrame(
        {
            "pair_id": pairs["pair_id"],
            "source_id": pairs["source_id"],
            "system": np.where(ref_is_a, pairs["system_b"], pairs["system_a"]),
            "reference": np.where(ref_is_a, pairs["summary_a"], pairs["summary_b"]),
            "generated": np.where(ref_is_a, pairs["summary_b"], pairs["summary_a"]),
        }
    )
    similarity = overlap_similarity(texts).drop(columns=["reference", "generated"])
    marked = ps.mark_reference(verdicts, reference=reference)
    marked = marked.merge(similarity[["pair_id", "similarity"]], on="pair_id", how="left")
    res.tables["similarity"] = similarity
    res.tables["preference_by_bin"] = ps.preference_by_bin(marked, bins=bins)
    res.tables["order_consistency"] = ps.order_consistency(marked)
    outcomes = [ps.human_pair_outcomes(marked)]
    judges: list[str] = []
    if judge_records is not None and len(judge_records):
        judged = judge_outcomes(pair_judgments(judge_records), gt="gt")
        judges = sorted(judged["judge"].astype(str).unique())
        outcomes.append(judged)
    cols = ["item_id", "judge", "outcome", "choice_gt_first", "choice_gt_second"]
    res.tables["outcomes"] = pd.concat([o[cols] for o in outcomes], ignore_index=True).rename(
        columns={"item_id": "pair_id"}
    )
    res.tables["outcome_shares"] = ps.outcomes_side_by_side(
        outcomes, similarity.rename(columns={"pair_id": "item_id"}), bins=bins
    )
    orders = marked.groupby("pair_id")["reference_first"].agg(["sum", "size"])
    res.meta = {
        "n_verdicts_input": n_input,
        "n_verdicts": len(verdicts),
        "n_raters": int(verdicts["participant_id"].nunique()),
        "n_pairs": int(verdicts["pair_id"].nunique()),
        "reference": reference,
        "systems": sorted(marked["system"].unique()),
        "judges": judges,
        "share_preferring_reference": float(marked["chose_reference"].mean()),
        "pairs_with_balanced_orders": int((2 * orders["sum"] == orders["size"]).sum()),
        "exclusion_rules": rules_meta(res.tables["exclusion_rules"]),
        "specifications": PREFERENCE_SPECS,
        "versions": library_versions("sacrebleu", "rouge-score"),
    }
    return res


def figures(results: Results) -> list[tuple[str, str, object, tuple[float, float]]]:
    """Figure jobs ``(file name, caption, draw(ax), size)`` of a ratings/preferences report.

    Parameters
    ----------
    results : Results
        Output of :func:`analyze_ratings` or :func:`analyze_preferences`.

    Returns
    -------
    list of tuple
        The jobs the writer draws and saves.
    """
    from analysis.plots import ratings as pr

    t, m = results.tables, results.meta
    jobs: list[tuple[str, str, object, tuple[float, float]]] = []
    if results.kind == "ratings":
        scale = tuple(m["scale"])
        n_bars = len(t["rating_means"])
        jobs.append(
            (
                "rating_means.png",
                "Mean rating per system and dimension, 95% t CIs over summaries",
                lambda ax: pr.plot_rating_means(t["rating_means"], scale=scale, ax=ax),
                (max(6.0, 0.35 * n_bars + 2), 4.2),
            )
        )
        if "metric_tau" in t and t["metric_tau"]["estimate"].notna().any():
            jobs.append(
                (
                    "metric_tau.png",
                    "Kendall's tau, automatic metric vs mean human rating per summary",
                    lambda ax: pr.plot_metric_tau(t["metric_tau"], ax=ax),
                    (7.0, 4.0),
                )
            )
    else:
        jobs.append(
            (
                "preference_by_bin.png",
                "Share of verdicts preferring the human summary by similarity bin, 95% CIs "
                "(dashed: overall)",
                lambda ax: pr.plot_preference_by_bin(t["preference_by_bin"], ax=ax),
                (6.5, 4.2),
            )
        )
        jobs.append(
            (
                "outcomes_by_bin.png",
                "Outcome shares by similarity bin: humans (majority per order) vs LLM judges",
                lambda ax: pr.plot_outcomes_by_bin(t["outcome_shares"], ax=ax),
                (9.0, 4.5),
            )
        )
        jobs.append(
            (
                "order_consistency.png",
                "Share of each rater's verdicts for the first-shown summary, 95% CIs",
                lambda ax: pr.plot_order_consistency(t["order_consistency"], ax=ax),
                (6.0, 4.2),
            )
        )
    return jobs


def sections(results: Results, figs: dict[str, str], table) -> list[dict[str, object]]:
    """Report sections of a ratings/preferences report.

    Parameters
    ----------
    results : Results
        Output of :func:`analyze_ratings` or :func:`analyze_preferences`.
    figs : dict of str to str
        Drawn figures, file name to caption.
    table : callable
        :func:`analysis.report.tables.report_table`: a result table as the report typesets it.

    Returns
    -------
    list of dict
        Sections with ``title``, ``text``, ``tables`` and ``figures``.
    """
    from analysis.report.study_sections import exclusions_section

    t, m = results.tables, results.meta

    def fig(*names: str) -> list[tuple[str, str]]:
        return [(figs[k], k) for k in names if k in figs]

    rows = "ratings" if results.kind == "ratings" else "verdicts"
    excluded = exclusions_section(t, f"Excluded {rows} by reason")
    if results.kind == "ratings":
        text = (
            f"{m['n_ratings']} ratings by {m['n_raters']} raters of {m['n_summaries']} summaries "
            f"of {m['n_sources']} sources (systems: {', '.join(m['systems'])}; scale "
            f"{m['scale'][0]}-{m['scale'][1]}; {m['ratings_per_summary']:.2f} ratings per "
            "summary and dimension on average)."
        )
        out = [
            excluded,
            {
                "title": "Ratings",
                "text": text,
                "tables": [
                    (
                        "Mean rating: system x dimension",
                        table(t["rating_table"], name="rating_table"),
                    ),
                    ("Means with CIs", table(t["rating_means"], name="rating_means")),
                ]
                + (
                    [
                        (
                            "By perspective",
                            table(
                                t["rating_means_by_perspective"], name="rating_means_by_perspective"
                            ),
                        )
                    ]
                    if "rating_means_by_perspective" in t
                    else []
                ),
                "figures": fig("rating_means.png"),
            },
            {
                "title": "Rater agreement",
                "text": "",
                "tables": [
                    ("Intraclass correlation (pingouin)", table(t["icc"], name="icc")),
                    ("Krippendorff's alpha, ordinal", table(t["alpha"], name="alpha")),
                ],
                "figures": [],
            },
        ]
        if "metric_tau" in t:
            out.append(
                {
                    "title": "Automatic metrics vs human ratings",
                    "text": "",
                    "tables": [
                        ("Kendall's tau per summary", table(t["metric_tau"], name="metric_tau"))
                    ],
                    "figures": fig("metric_tau.png"),
                }
            )
        return out
    text = (
        f"{m['n_verdicts']} verdicts by {m['n_raters']} raters on {m['n_pairs']} pairs; "
        f"{m['share_preferring_reference']:.1%} prefer the reference ({m['reference']}); "
        f"{m['pairs_with_balanced_orders']} pairs were seen equally often in both orders."
    )
    judges = ", ".join(m["judges"]) or "none given"
    return [
        excluded,
        {
            "title": "Human preference",
            "text": text,
            "tables": [
                (
                    "Preference by similarity bin",
                    table(t["preference_by_bin"], name="preference_by_bin"),
                )
            ],
            "figures": fig("preference_by_bin.png"),
        },
        {
            "title": "Humans and LLM judges",
            "text": f"LLM judges: {judges}.",
            "tables": [
                ("Outcome shares by bin", table(t["outcome_shares"], name="outcome_shares"))
            ],
            "figures": fig("outcomes_by_bin.png"),
        },
        {
            "title": "Order consistency",
            "text": "",
            "tables": [("Per rater", table(t["order_consistency"], name="order_consistency"))],
            "figures": fig("order_consistency.png"),
        },
    ]
