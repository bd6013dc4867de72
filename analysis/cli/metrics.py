"""``framelab metrics …``: compute content-alteration metrics from generation records.

Thin commands: read records, call one section builder of :mod:`analysis.metrics.report`, write its
tables (CSV) and figures (PNG) into ``--out``. ``report`` does all sections and an HTML page.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from analysis.cli.engine import with_options
from analysis.metrics.embed import DEFAULT_WINDOW_WORDS
from analysis.safecsv import write_csv

INPUT = click.option(
    "--input",
    "-i",
    "inputs",
    multiple=True,
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Records file (.jsonl, .csv, .parquet); repeat for several.",
)
OUT = click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the CSVs and PNGs (created).",
)


def _records(inputs: Sequence[Path]):
    from analysis.metrics.records import read_records

    try:
        return read_records(inputs)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc


def _write(section, out: Path, figures: bool = True) -> dict[str, str]:
    """Write a section's tables and figures; return figure name -> file name."""
    out.mkdir(parents=True, exist_ok=True)
    for name, table in section.tables.items():
        write_csv(table, out / f"{name}.csv")
    for note in section.notes:
        click.echo(f"note: {note}", err=True)
    return _draw(section, out) if figures else {}


def _draw(section, out: Path) -> dict[str, str]:
    """Draw a section's figures as PNGs in ``out``; return figure name -> file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images = {}
    for name, draw in section.figures.items():
        fig, ax = plt.subplots(figsize=(8, 4.5))
        try:
            draw(ax)
            fig.tight_layout()
            fig.savefig(out / f"{name}.png", dpi=110)
            images[name] = f"{name}.png"
        finally:
            plt.close(fig)
    return images


def _build(builder, *args):
    """Run a section builder; unusable input is a clean error naming what is wrong."""
    try:
        return builder(*args)
    except (KeyError, ValueError) as exc:
        raise click.ClickException(str(exc.args[0]) if exc.args else repr(exc)) from exc


def _show(section, table: str) -> None:
    if table in section.tables:
        click.echo(section.tables[table].to_string(index=False, float_format=lambda v: f"{v:.4g}"))


def _cutoffs(values: Sequence[str]) -> dict[str, str]:
    cutoffs = {}
    for value in values:
        model, sep, day = value.rpartition("=")
        if not sep or not model or not day:
            raise click.BadParameter(
                f"expected MODEL=YYYY-MM-DD, got {value!r}", param_hint="--cutoff"
            )
        cutoffs[model] = day
    return cutoffs


E5_PREFIXES = ("query: ", "passage: ")


def _embedder(model: str, device: str | None, batch_size: int, prefix: str, query_prefix: str,
              passage_prefix: str, e5: bool, max_seq_length: int | None,
              chunk_words: int):  # fmt: skip
    from analysis.metrics.embed import DEFAULT_MODEL, PRIMACY_SCALE_WARNING, primacy_embedder

    if model in (DEFAULT_MODEL, "default"):
        click.echo(PRIMACY_SCALE_WARNING, err=True)
    if prefix:
        if query_prefix or passage_prefix or e5:
            raise click.UsageError("--prefix sets both prefixes; give it or the per-role ones")
        query_prefix = passage_prefix = prefix
    if e5:
        if query_prefix or passage_prefix:
            raise click.UsageError("--e5 sets both prefixes; give it or --query/--passage-prefix")
        query_prefix, passage_prefix = E5_PREFIXES
    if chunk_words < 0:
        raise click.BadParameter(
            "0 (truncate) or a positive word count", param_hint="--chunk-words"
        )
    try:
        embedder = primacy_embedder(
            model, device=device, batch_size=batch_size, query_prefix=query_prefix,
            passage_prefix=passage_prefix, max_seq_length=max_seq_length, window_words=chunk_words,
        )  # fmt: skip
    except ImportError as exc:
        raise click.ClickException(f"{exc} (pip install 'framelab[llm]')") from exc
    if not chunk_words:
        click.echo(
            f"primacy: --chunk-words 0: each summary and third is TRUNCATED at "
            f"{embedder.query.max_seq_length} word pieces (the model's limit); the report "
            "counts the texts that were cut.",
            err=True,
        )
    return embedder


@click.group()
def metrics() -> None:
    """Compute content-alteration and bias metrics from generation records."""


@metrics.command()
@INPUT
@OUT
@click.option(
    "--any-judge", is_flag=True, help="Pair source and summary labels from different judges."
)
def framing(inputs: tuple[Path, ...], out: Path, any_judge: bool) -> None:
    """Framing change φframe and the six transitions from judge-framing records."""
    from analysis.metrics.report import ReportOptions, framing_section

    section = _build(framing_section, _records(inputs), ReportOptions(match_judge=not any_judge))
    _write(section, out)
    _show(section, "framing_change")


EMBED_OPTIONS = [
    click.option("--model", "embed_model", default="all-MiniLM-L6-v2", show_default=True,
                 help="Sentence-transformers model directory (default: the offline MiniLM)."),
    click.option("--device", default=None, help="cpu, cuda, … (default: automatic)."),
    click.option("--batch-size", default=64, show_default=True, help="Texts per forward pass."),
    click.option("--prefix", default="",
                 help="Prepended to every text, summaries and thirds alike."),
    click.option("--query-prefix", default="",
                 help='Prepended to each summary (E5: "query: ").'),
    click.option("--passage-prefix", default="",
                 help='Prepended to each source third and window (E5: "passage: ").'),
    click.option("--e5", is_flag=True,
                 help='An E5 model: summaries get "query: ", source thirds "passage: ".'),
    click.option("--max-seq-length", type=int, default=None,
                 help="Model input limit in word pieces (MiniLM: 256; longer text is cut)."),
    click.option("--chunk-words", type=int, default=DEFAULT_WINDOW_WORDS, show_default=True,
                 help="Embed each text as the mean of windows of this many words, covering "
                      "the whole third; 0 embeds texts whole, truncated at the model's limit."),
]  # fmt: skip
PRIMACY_OPTIONS = [
    click.option("--unit", type=click.Choice(["tokens", "sentences"]), default="tokens",
                 show_default=True, help="Cut sources into thirds by tokens or sentences."),
    click.option("--alpha", default=0.05, show_default=True, help="Margin of ψpri and ψrec."),
    click.option("--source-field", default="text", show_default=True,
                 help="Field with the source text (found as input.<field> too)."),
    click.option("--summary-field", default="output", show_default=True,
                 help="Field with the summary."),
]  # fmt: skip


@metrics.command()
@INPUT
@OUT
@with_options(EMBED_OPTIONS + PRIMACY_OPTIONS)
def primacy(inputs, out, embed_model, device, batch_size, prefix, query_prefix, passage_prefix, e5,
            max_seq_length, chunk_words,
            unit, alpha, source_field, summary_field) -> None:  # fmt: skip
    """Similarity of summaries to source thirds, ψpri, ψrec and the s_b vs s_m t-test."""
    from analysis.metrics.report import ReportOptions, primacy_section

    opts = ReportOptions(alpha=alpha, unit=unit, source_field=source_field,
                         summary_field=summary_field)  # fmt: skip
    embedder = _embedder(embed_model, device, batch_size, prefix, query_prefix, passage_prefix,
                         e5, max_seq_length, chunk_words)  # fmt: skip
    section = _build(primacy_section, _records(inputs), opts, embedder)
    _write(section, out)
    _show(section, "primacy_scores")


HALLUCINATION_OPTIONS = [
    click.option("--cutoff", "cutoffs", multiple=True, metavar="MODEL=DATE",
                 help="A model's knowledge cutoff (repeat per model)."),
    click.option("--pair-field", default="pair_id", show_default=True,
                 help="Field shared by a true item and its negation."),
    click.option("--truth-field", default="truth", show_default=True,
                 help="Field with the item's truth value."),
    click.option("--date-field", default="date", show_default=True,
                 help="Field with the news date (ISO)."),
    click.option("--undated", type=click.Choice(["report", "refuse"]), default="report",
                 show_default=True,
                 help="Items without a date: their own period 'undated', or an error."),
]  # fmt: skip


@metrics.command()
@INPUT
@OUT
@with_options(HALLUCINATION_OPTIONS)
def hallucination(inputs, out, cutoffs, pair_field, truth_field, date_field, undated) -> None:
    """Actual, falsified and strict fact-check accuracy around each model's cutoff, and δH."""
    from analysis.metrics.report import ReportOptions, hallucination_section

    opts = ReportOptions(cutoffs=_cutoffs(cutoffs), pair_field=pair_field,
                         truth_field=truth_field, date_field=date_field,
                         undated=undated)  # fmt: skip
    section = _build(hallucination_section, _records(inputs), opts)
    _write(section, out)
    _show(section, "hallucination_scores")
    _show(section, "hallucination_gap")


POSITION_OPTIONS = [
    click.option("--mapping", type=click.Choice(["tfidf", "rouge1"]), default="tfidf",
                 show_default=True, help="How summary sentences are matched to the article."),
    click.option("--gold-field", default="gold", show_default=True,
                 help="Field with the gold summary."),
    click.option("--top-k", default=1, show_default=True,
                 help="Map each summary sentence to its top K article sentences (paper: 1, 2, 3)."),
    click.option("--tolerance", default=0.1, show_default=True,
                 help="Top-k: a sentence whose best similarity is >= 1 - TOLERANCE keeps one."),
    click.option("--unique-per-summary", is_flag=True,
                 help="Count each article sentence once per summary (the authors' code)."),
    click.option("--cap-sentences", metavar="gold|N",
                 help="Sample longer summaries down to the gold summary's (or N) sentences."),
    click.option("--seed", default=0, show_default=True, help="Seed of --cap-sentences."),
]  # fmt: skip


@metrics.command()
@INPUT
@OUT
@click.option("--k", "k", type=int, required=True, help="Number of segments per article.")
@with_options(POSITION_OPTIONS)
@click.option("--id-field", default="id", show_default=True)
@click.option("--article-field", default="article", show_default=True)
@click.option("--summaries-field", default="summaries", show_default=True,
              help="Field mapping system name -> generated summary.")  # fmt: skip
def position(inputs, out, k, mapping, gold_field, top_k, tolerance, unique_per_summary,
             cap_sentences, seed, id_field, article_field, summaries_field) -> None:  # fmt: skip
    """Position bias: Wasserstein distance of gold vs generated positional distributions.

    Each input line has an id, an article, a gold summary and {system: summary}; summarize
    records whose input carries a gold summary work too. Writes results.json.
    """
    from analysis.metrics.position import position_input_from_records
    from analysis.metrics.records import column
    from analysis.metrics.report import ReportOptions, position_section

    records = _records(inputs)
    opts = ReportOptions(k=k, mapping=mapping, gold_field=gold_field, top_k=top_k,
                         tolerance=tolerance, unique_mapping=unique_per_summary,
                         cap_sentences=_cap(cap_sentences), seed=seed)  # fmt: skip
    try:
        if summaries_field in records.columns:
            data = records.rename(
                columns={
                    id_field: "id",
                    article_field: "article",
                    gold_field: "gold",
                    summaries_field: "summaries",
                }  # fmt: skip
            )
            data = data[["id", "article", "gold", "summaries"]]
        else:
            column(records, gold_field)
            data = position_input_from_records(records, gold=gold_field)
    except KeyError as exc:
        raise click.ClickException(str(exc.args[0])) from exc
    section = _build(position_section, data, opts)
    if not section.tables:
        raise click.ClickException("; ".join(section.notes))
    _write(section, out)
    results = _position_results(section, k=k, mapping=mapping, n_articles=len(data))
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    _show(section, "position_bias")


def _cap(value: str | None) -> str | None:
    """Check --cap-sentences: ``gold`` or a positive sentence count."""
    if value is None or value == "gold" or (value.isdigit() and int(value) > 0):
        return value
    raise click.BadParameter(
        f"{value!r}: use 'gold' or a positive number", param_hint="--cap-sentences"
    )


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def _position_results(section, *, k: int, mapping: str, n_articles: int) -> dict[str, Any]:
    bias = section.tables["position_bias"]
    dist = section.tables["position_distribution"]

    def shares(system: str) -> list[float]:
        return dist.loc[dist["system"] == system].sort_values("segment")["share"].tolist()

    return {
        "k": k,
        "mapping": mapping,
        "n_articles": n_articles,
        "positions": [(j - 0.5) / k for j in range(1, k + 1)],
        "gold": {"distribution": shares("gold")},
        "systems": {
            row["system"]: {
                **{
                    key: _finite(row[key])
                    for key in ("wasserstein", "mean_position", "rouge1", "rouge2", "rougeL")
                },  # fmt: skip
                "n_sentences": int(row["n_sentences"]),
                "n_unmapped": int(row["n_unmapped"]),
                "distribution": shares(row["system"]),
            }
            for row in bias.to_dict(orient="records")
        },
    }


OVERLAP_OPTIONS = [
    click.option("--human-field", default="human_summary", show_default=True,
                 help="Field with the human (ground-truth) summary."),
    click.option("--generated-field", default="generated_summary", show_default=True,
                 help="Field with the generated summary."),
    click.option("--length-filter", is_flag=True,
                 help="Keep only items whose human reference has 95–105 words."),
    click.option("--bins", default=10, show_default=True,
                 help="Equal-width similarity bins over [0, 1]."),
    click.option("--summarizer-field", default="summarizer", show_default=True,
                 help="Field naming the model that wrote the generated summary."),
    click.option("--rephrased-field", default="rephrased", show_default=True,
                 help="Field that is true for a rephrased generated summary."),
]  # fmt: skip


@metrics.command("judge-overlap")
@INPUT
@OUT
@with_options(OVERLAP_OPTIONS)
def judge_overlap(inputs, out, human_field, generated_field, length_filter, bins,
                  summarizer_field, rephrased_field) -> None:  # fmt: skip
    """Judge outcomes (GT, Generated, tied) by BLEU/ROUGE similarity of the two summaries."""
    from analysis.metrics.report import ReportOptions, overlap_section

    opts = ReportOptions(human_field=human_field, generated_field=generated_field,
                         length_filter=length_filter, bins=bins,
                         summarizer_field=summarizer_field,
                         rephrased_field=rephrased_field)  # fmt: skip
    section = _build(overlap_section, _records(inputs), opts)
    _write(section, out)
    outcomes = section.tables["judge_outcomes"]
    click.echo(outcomes.groupby(["judge", "system", "outcome"]).size().to_string())


EXTRACTION_OPTIONS = [
    click.option("--lexicon", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                 help="NRC VAD lexicon file (word, valence, arousal, dominance; tab-separated)."),
    click.option("--left-field", default="left", show_default=True),
    click.option("--right-field", default="right", show_default=True),
    click.option("--n-bins", default=5, show_default=True, help="Percentile bins."),
    click.option("--high-arousal", type=float, default=None,
                 help="Arousal at or above which a term is highly arousing "
                      "(default: top quarter of the lexicon's scale, 0.75 on NRC VAD v1)."),
    click.option("--bertscore-model", type=click.Path(exists=True, file_okay=False),
                 help="Local checkpoint for BERTScore against the reference summaries."),
    click.option("--bertscore-layers", type=int,
                 help="BERTScore layer (default: bert-score's for a known name, else the last)."),
    click.option("--reference-field", default="{perspective}_summary", show_default=True,
                 help="Field of the perspective's reference summary."),
]  # fmt: skip


def _lexicon(path: Path | None):
    from analysis.metrics.extraction import read_vad_lexicon

    return read_vad_lexicon(path) if path else None


@metrics.command()
@INPUT
@OUT
@with_options(EXTRACTION_OPTIONS)
def extraction(inputs, out, lexicon, left_field, right_field, n_bins, high_arousal,
               bertscore_model, bertscore_layers, reference_field) -> None:  # fmt: skip
    """Extractive fragment coverage of perspective summaries by position, length and arousal.

    With --bertscore-model, also BERTScore of each summary against its perspective's reference.
    """
    from analysis.metrics.report import ReportOptions, extraction_section

    opts = ReportOptions(lexicon=_lexicon(lexicon), left_field=left_field,
                         right_field=right_field, n_bins=n_bins, high_arousal=high_arousal,
                         bertscore_model=bertscore_model, bertscore_layers=bertscore_layers,
                         reference_field=reference_field)  # fmt: skip
    section = _build(extraction_section, _records(inputs), opts)
    _write(section, out)
    _show(section, "extraction_by_position")


@metrics.command()
@INPUT
@OUT
@click.option("--no-primacy", is_flag=True, help="Skip primacy (needs no embedding model).")
@click.option("--no-figures", is_flag=True, help="Skip the PNGs (the CSVs and index.html only).")
@with_options(EMBED_OPTIONS + PRIMACY_OPTIONS + HALLUCINATION_OPTIONS + OVERLAP_OPTIONS)
@with_options(EXTRACTION_OPTIONS + POSITION_OPTIONS)
@click.option("--k", "k", default=3, show_default=True, help="Position-bias segments.")
@click.option("--any-judge", is_flag=True, help="Framing: pair labels from different judges.")
def report(inputs, out, no_primacy, no_figures, embed_model, device, batch_size, prefix,
           query_prefix, passage_prefix, e5, max_seq_length, chunk_words, unit, alpha,
           source_field, summary_field, cutoffs, pair_field, truth_field, date_field, undated,
           human_field, generated_field, length_filter, bins, summarizer_field, rephrased_field,
           lexicon, high_arousal, bertscore_model, bertscore_layers, reference_field, left_field,
           right_field,
           n_bins, mapping, gold_field, top_k, tolerance, unique_per_summary, cap_sentences, seed,
           k, any_judge) -> None:  # fmt: skip
    """Every metric the records allow: CSVs, PNGs and index.html in --out."""
    from analysis.metrics.report import ReportOptions, build_report, render_html

    records = _records(inputs)
    opts = ReportOptions(
        alpha=alpha, unit=unit, source_field=source_field, summary_field=summary_field, k=k,
        mapping=mapping, gold_field=gold_field, cutoffs=_cutoffs(cutoffs), pair_field=pair_field,
        truth_field=truth_field, date_field=date_field, undated=undated, human_field=human_field,
        generated_field=generated_field, length_filter=length_filter, bins=bins,
        summarizer_field=summarizer_field, rephrased_field=rephrased_field,
        left_field=left_field, right_field=right_field, lexicon=_lexicon(lexicon),
        high_arousal=high_arousal, bertscore_model=bertscore_model,
        bertscore_layers=bertscore_layers, reference_field=reference_field,
        n_bins=n_bins, match_judge=not any_judge, top_k=top_k, tolerance=tolerance,
        unique_mapping=unique_per_summary, cap_sentences=_cap(cap_sentences), seed=seed,
    )  # fmt: skip
    needs_embedder = not no_primacy and "task" in records and (records["task"] == "summarize").any()
    embedder = (
        _embedder(
            embed_model,
            device,
            batch_size,
            prefix,
            query_prefix,
            passage_prefix,
            e5,
            max_seq_length,
            chunk_words,
        )
        if needs_embedder
        else None
    )
    sections = build_report(records, options=opts, embedder=embedder)
    images: dict[str, str] = {}
    for section in sections:
        images.update(_write(section, out, figures=not no_figures))
    out.mkdir(parents=True, exist_ok=True)
    page = out / "index.html"
    page.write_text(render_html(sections, images), encoding="utf-8")
    names = ", ".join(s.key for s in sections) or "none"
    click.echo(f"sections: {names}\nwrote {page}")
