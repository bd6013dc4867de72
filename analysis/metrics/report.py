"""Assemble every metric the given records allow into report sections, and render the HTML page.

:func:`build_report` looks at which generation tasks the records hold and computes the matching
metrics; a section that cannot be computed says why instead of failing the whole report. Writing
files is the CLI's job (``framelab metrics report``).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pandas as pd

from analysis.metrics.embed import Embedder, PrimacyEmbedder

__all__ = [
    "ReportOptions",
    "Section",
    "build_report",
    "extraction_section",
    "framing_section",
    "hallucination_section",
    "overlap_section",
    "position_section",
    "primacy_section",
    "render_html",
]

PlotFn = Callable[[Any], Any]


TITLES = {
    "framing": "Framing change (φframe)",
    "primacy": "Primacy and coverage (s_b, s_m, s_e, ψpri)",
    "position": "Position bias (Wasserstein distance)",
    "hallucination": "Hallucination (strict accuracy s_TH, δH)",
    "judge_overlap": "Judge overlap bias",
    "extraction": "Perspective extraction coverage",
}


@dataclass(frozen=True)
class ReportOptions:
    """Choices of ``framelab metrics report``; field names say which option each follows."""

    alpha: float = 0.05
    unit: str = "tokens"
    source_field: str = "text"
    summary_field: str = "output"
    k: int = 3
    mapping: str = "tfidf"
    gold_field: str = "gold"
    top_k: int = 1
    tolerance: float = 0.1
    unique_mapping: bool = False
    cap_sentences: str | None = None  # None, "gold" or a sentence count
    seed: int = 0
    cutoffs: Mapping[str, str | date] = field(default_factory=dict)
    pair_field: str = "pair_id"
    truth_field: str = "truth"
    date_field: str = "date"
    undated: str = "report"
    human_field: str = "human_summary"
    generated_field: str = "generated_summary"
    length_filter: bool = False
    bins: int = 10
    summarizer_field: str = "summarizer"
    rephrased_field: str = "rephrased"
    left_field: str = "left"
    right_field: str = "right"
    lexicon: Mapping[str, float] | None = None
    high_arousal: float | None = None
    bertscore_model: str | None = None
    bertscore_layers: int | None = None
    reference_field: str = "{perspective}_summary"
    n_bins: int = 5
    match_judge: bool = True


@dataclass
class Section:
    """One report section: tables to write as CSV, figures to draw, notes for the reader."""

    key: str
    title: str
    description: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, PlotFn] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _tasks(records: pd.DataFrame) -> set[str]:
    return set(records["task"].dropna()) if "task" in records.columns else set()


def framing_section(records: pd.DataFrame, opts: ReportOptions) -> Section:
    """Framing change from judge-framing records."""
    from analysis.metrics.framing import (
        framing_change,
        framing_mean_of_means,
        join_framing,
        transition_matrix,
    )
    from analysis.plots.metrics import plot_framing_transitions

    sec = Section(
        "framing",
        TITLES["framing"],
        "Share of items whose summary framing differs from the source framing, and the six "
        "off-diagonal transitions in % of items, per model, dataset and method.",
    )
    pairs = join_framing(records, match_judge=opts.match_judge)
    if pairs.empty:
        sec.notes.append(
            "judge-framing records found, but no summary judgment matched a source judgment "
            "(same item, dataset and judge)."
        )
        return sec
    table = framing_change(pairs)
    sec.tables = {
        "framing_pairs": pairs,
        "framing_change": table,
        "framing_mean_of_means": framing_mean_of_means(table),
        "framing_transition_matrix": transition_matrix(pairs)
        .rename_axis(index="source \\ summary", columns=None)
        .reset_index(),
    }
    sec.figures["framing_transitions"] = lambda ax: plot_framing_transitions(table, ax)
    return sec


def primacy_section(
    records: pd.DataFrame, opts: ReportOptions, embedder: Embedder | PrimacyEmbedder | None
) -> Section:
    """Primacy and coverage from summarize records."""
    from analysis.metrics.primacy import (
        primacy_mean_of_means,
        primacy_scores,
        primacy_similarities,
    )
    from analysis.metrics.records import summary_pairs
    from analysis.plots.metrics import plot_primacy

    sec = Section(
        "primacy",
        TITLES["primacy"],
        f"Cosine similarity of each summary to the beginning, middle and end third of its source "
        f"(split by {opts.unit}); ψpri = share with s_b > s_m + {opts.alpha}, ψrec = share with "
        f"s_e > s_m + {opts.alpha}; paired t-test of s_b vs s_m.",
    )
    if embedder is None:
        sec.notes.append("skipped: no sentence embedder (run without --no-primacy).")
        return sec
    pairs = summary_pairs(records, source=opts.source_field, summary=opts.summary_field)
    sims = primacy_similarities(pairs, embedder=embedder, unit=opts.unit, progress=True)
    scores = primacy_scores(sims, alpha=opts.alpha)
    if isinstance(embedder, PrimacyEmbedder):
        sec.notes.append(f"embedding: {embedder.describe()}.")
    sec.tables = {
        "primacy_items": sims,
        "primacy_scores": scores,
        "primacy_mean_of_means": primacy_mean_of_means(scores),
    }
    sec.figures["primacy"] = lambda ax: plot_primacy(scores, ax)
    return sec


def position_section(data: pd.DataFrame, opts: ReportOptions) -> Section:
    """Position bias from rows of ``id``, ``article``, ``gold``, ``summaries``."""
    from analysis.metrics.position import (
        cap_sentences,
        position_bias,
        position_rouge_correlation,
        positional_distribution,
        summary_positions,
        summary_rouge,
        systems_long,
    )
    from analysis.plots.metrics import plot_positional_distribution

    mapped = (
        "most similar article sentence"
        if opts.top_k == 1
        else (
            f"top-{opts.top_k} most similar article sentences (one when the best similarity is "
            f"at least {1 - opts.tolerance:g})"
        )
    )
    sec = Section(
        "position",
        TITLES["position"],
        f"Articles cut into K = {opts.k} segments of near-equal sentence count; each summary "
        f"sentence mapped to its {mapped} ({opts.mapping}); Wasserstein distance between the "
        "gold and each system's positional distribution; ROUGE F1 vs gold; Spearman ρ of W "
        "against ROUGE across systems.",
    )
    long = systems_long(data)
    if opts.cap_sentences:
        cap = None if opts.cap_sentences == "gold" else int(opts.cap_sentences)
        long = cap_sentences(long, n=cap, seed=opts.seed)
        cut = int((long["n_sentences"] < long["n_sentences_before"]).sum())
        sec.notes.append(
            f"summaries sampled to {'the gold summary' + chr(39) + 's' if cap is None else cap} "
            f"sentence count (seed {opts.seed}): {cut} summaries were longer and were sampled."
        )
    positions = summary_positions(
        long, k=opts.k, method=opts.mapping, top_k=opts.top_k, tolerance=opts.tolerance,
        unique=opts.unique_mapping,
    )  # fmt: skip
    dist = positional_distribution(positions, k=opts.k)
    bias = position_bias(positions).merge(summary_rouge(long), on="system")
    sec.tables = {
        "position_bias": bias,
        "position_rouge_correlation": position_rouge_correlation(bias),
        "position_distribution": dist,
        "position_sentences": positions,
    }
    if len(bias) < 3:
        sec.notes.append(
            f"Spearman ρ of W against ROUGE needs at least three systems; {len(bias)} given."
        )
    sec.figures["position_distribution"] = lambda ax: plot_positional_distribution(dist, ax)
    return sec


def hallucination_section(records: pd.DataFrame, opts: ReportOptions) -> Section:
    """Fact-check accuracy around the cutoff from fact-check records."""
    from analysis.metrics.hallucination import (
        confidence_breakdown,
        hallucination_gap,
        hallucination_mean_of_means,
        hallucination_scores,
    )
    from analysis.metrics.records import column, select_task
    from analysis.plots.metrics import plot_hallucination

    sec = Section(
        "hallucination",
        TITLES["hallucination"],
        "Actual-news, falsified-news and strict (both items of a true/negated pair right) "
        "accuracy before and after each model's knowledge cutoff; δH = |s_pre − s_post|.",
    )
    rows = select_task(records, "fact-check")
    cols = {n: column(rows, f) for n, f in (("pair", opts.pair_field),
            ("truth", opts.truth_field), ("date", opts.date_field))}  # fmt: skip
    if not opts.cutoffs:
        sec.notes.append("no --cutoff MODEL=DATE given: only the overall period is reported.")
    scores = hallucination_scores(
        rows, cutoffs=opts.cutoffs, pair=cols["pair"], truth=cols["truth"], date=cols["date"],
        undated=opts.undated,
    )  # fmt: skip
    undated = scores.loc[scores["period"] == "undated"]
    if len(undated):
        n = int((undated["n_true"] + undated["n_false"]).sum())
        sec.notes.append(
            f"{n} answer(s) to items without a date are reported as period 'undated', "
            "neither before nor after the cutoff (--undated refuse makes this an error)."
        )
    sec.tables = {
        "hallucination_scores": scores,
        "hallucination_gap": hallucination_gap(scores),
        "hallucination_mean_of_means": hallucination_mean_of_means(scores),
        "hallucination_confidence": confidence_breakdown(
            rows,
            cutoffs=opts.cutoffs,
            truth=cols["truth"],
            date=cols["date"],
            undated=opts.undated,
        ),  # fmt: skip
    }
    sec.figures["hallucination"] = lambda ax: plot_hallucination(scores, ax)
    return sec


def overlap_section(records: pd.DataFrame, opts: ReportOptions) -> Section:
    """Judge overlap bias from judge-pair records."""
    from analysis.metrics.overlap import (
        judge_outcomes,
        length_filter,
        outcome_shares,
        overlap_similarity,
        pair_judgments,
        similarity_range,
    )
    from analysis.plots.metrics import plot_judge_outcomes

    sec = Section(
        "judge_overlap",
        TITLES["judge_overlap"],
        "Outcome of the two-order judgments per item (GT, Generated, tied-chose-first, "
        "tied-chose-last, other) by similarity of the generated to the human summary "
        "(mean of BLEU-1, BLEU-4, ROUGE-1, ROUGE-2), per judge and per judge and summarizer.",
    )
    verdicts = pair_judgments(
        records, reference=opts.human_field, generated=opts.generated_field,
        summarizer=opts.summarizer_field, rephrased=opts.rephrased_field,
    )  # fmt: skip
    verdicts["system"] = verdicts["first"].where(verdicts["first"] != "gt", verdicts["second"])
    # One similarity per pair: each summarizer's (and each rephrased) summary has its own.
    pair_keys = ["item_id", "system", "summary_version"]
    texts = verdicts.drop_duplicates(pair_keys)[[*pair_keys, "reference", "generated"]]
    if opts.length_filter:
        texts = length_filter(texts)
        sec.notes.append(
            f"95–105-word filter on the human reference summary: {len(texts)} pairs kept."
        )
    sims = overlap_similarity(texts)
    outcomes = judge_outcomes(verdicts, gt="gt", keys=["summary_version"]).merge(
        sims.drop(columns=["reference", "generated"]), on=pair_keys, how="inner"
    )
    shares = outcome_shares(outcomes, bins=opts.bins)
    sec.tables = {
        "judge_outcomes": outcomes,
        "judge_outcome_shares": shares,
        "judge_outcome_shares_by_summarizer": outcome_shares(
            outcomes, bins=opts.bins, by=("judge", "system")
        ),
        "judge_similarity_range": similarity_range(outcomes),
    }
    if outcomes["summary_version"].nunique() > 1:
        sec.tables["judge_outcome_shares_by_version"] = outcome_shares(
            outcomes, bins=opts.bins, by=("judge", "summary_version")
        )
    for judge in sorted(shares["judge"].astype(str).unique()):
        part = shares.loc[shares["judge"].astype(str) == judge]
        sec.figures[f"judge_outcomes_{_slug(judge)}"] = lambda ax, p=part: plot_judge_outcomes(
            p, ax
        )
    return sec


def extraction_section(records: pd.DataFrame, opts: ReportOptions) -> Section:
    """Extraction coverage from perspective-summary records."""
    from analysis.metrics.extraction import (
        coverage_by,
        coverage_by_perspective,
        extraction_coverage,
        high_arousal_threshold,
        perspective_inputs,
    )
    from analysis.plots.metrics import plot_extraction_coverage
    from analysis.plots.perspective import plot_coverage_by_perspective

    sec = Section(
        "extraction",
        TITLES["extraction"],
        "Extractive fragment coverage (Grusky et al. 2018) of each perspective summary against "
        "each source passage, by passage position, length percentile (unique terms only), "
        "arousal percentile (mean lexicon arousal, and the density of highly arousing terms) "
        "and by perspective: each perspective's summaries on passages of either side.",
    )
    inputs = perspective_inputs(records, left=opts.left_field, right=opts.right_field)
    table = extraction_coverage(inputs, lexicon=opts.lexicon, high_arousal=opts.high_arousal)
    sec.tables["extraction_passages"] = table
    kinds = ["position", "length"] + (["arousal", "arousal_density"] if opts.lexicon else [])
    if not opts.lexicon:
        sec.notes.append("no --lexicon (NRC VAD file) given: arousal breakdown skipped.")
    else:
        cut = (
            high_arousal_threshold(opts.lexicon) if opts.high_arousal is None else opts.high_arousal
        )
        sec.notes.append(f"highly arousing terms: lexicon arousal >= {cut:g}.")
    for by in kinds:
        binned = coverage_by(table, by=by, n_bins=opts.n_bins)
        sec.tables[f"extraction_by_{by}"] = binned
        sec.figures[f"extraction_by_{by}"] = lambda ax, b=binned: plot_extraction_coverage(b, ax)
    by_side = coverage_by_perspective(table)
    sec.tables["extraction_by_perspective"] = by_side
    sec.figures["extraction_by_perspective"] = lambda ax: plot_coverage_by_perspective(by_side, ax)
    if opts.bertscore_model:
        _bertscore_tables(sec, inputs, records, opts)
    return sec


def _bertscore_tables(
    sec: Section, inputs: pd.DataFrame, records: pd.DataFrame, opts: ReportOptions
) -> None:
    """BERTScore of each perspective summary against its perspective's reference summary."""
    from analysis.metrics.bertscore import (
        bertscore,
        bertscore_means,
        default_num_layers,
        perspective_references,
    )

    pairs = perspective_references(inputs, records, reference_field=opts.reference_field)
    if pairs.empty:
        sec.notes.append(
            f"BERTScore skipped: no record has a reference summary ({opts.reference_field!r})."
        )
        return
    model = str(opts.bertscore_model)
    layers = opts.bertscore_layers or default_num_layers(model)
    scores = bertscore(pairs["summary"], pairs["reference"], model=model, num_layers=layers)
    table = pd.concat([pairs, scores], axis=1)
    sec.tables["perspective_bertscore"] = table
    sec.tables["perspective_bertscore_means"] = bertscore_means(table)
    rule = (
        "the option --bertscore-layers"
        if opts.bertscore_layers
        else "bert-score's table of best layers for a known model name, else the model's last layer"
    )
    sec.notes.append(
        f"BERTScore (bert-score) with {model}, layer {layers} (from {rule}), no IDF, not "
        f"rescaled: {len(table)} summaries with a reference. Per-summary scores are in [0, 1]; "
        "the means are reported x 100, as PoliSum's Table 3 does (which used the "
        "deberta-large-xnli checkpoint through Torchmetrics, 001 §4 and Appendix F)."
    )


def _guarded(key: str, build: Callable[..., Section], *args: Any) -> Section:
    """Run a section builder; unusable input becomes a note instead of ending the report."""
    try:
        return build(*args)
    except (KeyError, ValueError) as exc:
        reason = exc.args[0] if exc.args else type(exc).__name__
        return Section(key, TITLES.get(key, key), "", notes=[f"skipped: {reason}"])


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text).strip("_") or "judge"


def build_report(
    records: pd.DataFrame,
    *,
    options: ReportOptions | None = None,
    embedder: Embedder | PrimacyEmbedder | None = None,
) -> list[Section]:
    """Compute every metric the records allow.

    Parameters
    ----------
    records : pandas.DataFrame
        Generation records (:func:`analysis.metrics.records.read_records`), possibly of several
        tasks, and/or position-bias rows (``id``, ``article``, ``gold``, ``summaries``).
    options : ReportOptions, optional
        Field names and metric parameters.
    embedder : callable, optional
        For primacy; without one the primacy section says it was skipped.

    Returns
    -------
    list of Section
        In the order framing, primacy, position, hallucination, judge overlap, extraction; only
        sections for which the records hold data.
    """
    from analysis.metrics.position import position_input_from_records
    from analysis.metrics.records import column

    opts = options or ReportOptions()
    tasks = _tasks(records)
    sections: list[Section] = []
    if "judge-framing" in tasks:
        sections.append(_guarded("framing", framing_section, records, opts))
    if "summarize" in tasks:
        sections.append(_guarded("primacy", primacy_section, records, opts, embedder))
    position_rows = []
    if {"article", "summaries"} <= set(records.columns):
        flat = records.dropna(subset=["article", "summaries"])
        position_rows.append(flat[["id", "article", "gold", "summaries"]])
    if "summarize" in tasks:
        try:
            column(records, opts.gold_field)
        except KeyError:
            pass  # summaries without a gold reference: no position bias to measure
        else:
            position_rows.append(
                position_input_from_records(
                    records,
                    gold=opts.gold_field,
                    source=opts.source_field,
                    summary=opts.summary_field,
                )  # fmt: skip
            )
    if position_rows:
        sections.append(
            _guarded(
                "position", position_section, pd.concat(position_rows, ignore_index=True), opts
            )
        )
    if "fact-check" in tasks:
        sections.append(_guarded("hallucination", hallucination_section, records, opts))
    if "judge-pair" in tasks:
        sections.append(_guarded("judge_overlap", overlap_section, records, opts))
    if "perspective-summary" in tasks:
        sections.append(_guarded("extraction", extraction_section, records, opts))
    return sections


def _table_html(table: pd.DataFrame) -> str:
    # pandas escapes cell text; long text columns are left to the CSVs.
    shown = table.head(50)
    text_cols = [c for c in shown.columns if shown[c].astype(str).str.len().max() > 120]
    return shown.drop(columns=text_cols).to_html(
        index=False, float_format=lambda v: f"{v:.4g}", na_rep="", border=0, classes="t"
    )


def render_html(
    sections: list[Section], images: Mapping[str, str], *, title: str = "FrameLab metrics"
) -> str:
    """A self-contained HTML page: per section its description, notes, figures and tables.

    Parameters
    ----------
    sections : list of Section
        From :func:`build_report`.
    images : mapping
        Figure name -> relative path of its PNG.

    Returns
    -------
    str
        The HTML document. Tables show at most 50 rows; the CSVs hold everything.
    """
    esc = html.escape
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{esc(title)}</title><style>body{{font-family:sans-serif;max-width:1100px;"
        "margin:2em auto;padding:0 1em}table.t{border-collapse:collapse;font-size:13px;"
        "margin:.5em 0 1.5em}table.t td,table.t th{border:1px solid #ccc;padding:2px 6px}"
        "img{max-width:100%}.note{color:#8a5300}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
    ]
    if not sections:
        parts.append("<p class='note'>The input holds no records any metric applies to.</p>")
    for sec in sections:
        parts.append(f"<h2 id='{esc(sec.key)}'>{esc(sec.title)}</h2><p>{esc(sec.description)}</p>")
        parts.extend(f"<p class='note'>{esc(note)}</p>" for note in sec.notes)
        for name in sec.figures:
            if name in images:
                parts.append(f"<img src='{esc(images[name])}' alt='{esc(name)}'>")
        for name, table in sec.tables.items():
            parts.append(f"<h3>{esc(name)} <small>({len(table)} rows, "
                         f"<a href='{esc(name)}.csv'>CSV</a>)</small></h3>")  # fmt: skip
            parts.append(_table_html(table))
    parts.append("</body></html>")
    return "\n".join(parts)
