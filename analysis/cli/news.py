"""``framelab news sync|falsify|export``: the self-updating NewsLens dataset (docs/newslens.md)."""

from __future__ import annotations

import os
import sys
from datetime import date
from pathlib import Path

import click


def _day(value: str | None, name: str) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date (YYYY-MM-DD)", param_hint=name) from None


@click.group()
def news() -> None:
    """Collect post-cutoff news, falsify its descriptions, export fact-check pairs."""


@news.command()
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False),
    help="Dataset directory (created; append-only).",
)
@click.option(
    "--since",
    help="Oldest publishedAt asked for (YYYY-MM-DD); default the day before the collection day.",
)
@click.option("--query", default="politics", show_default=True, help="NewsAPI q.")
@click.option(
    "--domains",
    "domains_file",
    type=click.Path(exists=True, dir_okay=False),
    help="File with one domain per line (default: the seed's nine trusted outlets).",
)
@click.option(
    "--api-url",
    envvar="NEWSAPI_URL",
    default=None,
    help="NewsAPI base URL (env NEWSAPI_URL; default https://newsapi.org).",
)
@click.option("--date", "day", help="Collection day (YYYY-MM-DD); default today (UTC).")
@click.option(
    "--max-results",
    type=int,
    default=100,
    show_default=True,
    help="The plan's results per query (free plan 100).",
)
@click.option(
    "--max-pages",
    type=int,
    default=1,
    show_default=True,
    help="API requests per run (free plan: 100 a day in all).",
)
@click.option(
    "--retries",
    type=int,
    default=4,
    show_default=True,
    help="Retries after a 429 or 5xx, with exponential backoff.",
)
@click.option(
    "--delay",
    type=float,
    default=1.0,
    show_default=True,
    help="Seconds between two page requests to one host.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=20.0,
    show_default=True,
    help="Seconds one page may take in all (robots.txt and redirects included).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    default=5_000_000,
    show_default=True,
    help="Pages larger than this are abandoned while streaming (too_large).",
)
@click.option("--workers", type=int, default=4, show_default=True, help="Hosts in parallel.")
@click.option("--no-fetch", is_flag=True, help="Keep API descriptions; do not scrape pages.")
def sync(out, since, query, domains_file, api_url, day, max_results, max_pages, retries, delay,
         timeout, max_bytes, workers, no_fetch) -> None:  # fmt: skip
    """Pull today's articles into DATASET_DIR (a second run the same day adds nothing)."""
    from analysis.news import DEFAULT_DOMAINS
    from analysis.news.fetch import FetchOptions
    from analysis.news.newsapi import DEFAULT_API_URL, NewsAPIError, domains_from_lines
    from analysis.news.outbound import TEST_LOOPBACK_ENV, loopback_ports_from_text
    from analysis.news.sync import sync as run_sync
    from analysis.news.sync import today_utc

    key = os.environ.get("NEWSAPI_KEY", "").strip()
    if not key:
        raise click.ClickException("set NEWSAPI_KEY to your NewsAPI key (https://newsapi.org)")
    domains = DEFAULT_DOMAINS
    if domains_file:
        try:
            domains = domains_from_lines(
                Path(domains_file).read_text(encoding="utf-8").splitlines()
            )
        except ValueError as exc:
            raise click.ClickException(f"{domains_file}: {exc}") from exc
        if not domains:
            raise click.ClickException(f"{domains_file} lists no domain")
    try:
        loopback = loopback_ports_from_text(os.environ.get(TEST_LOOPBACK_ENV, ""))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    if loopback:
        click.echo(f"warning: {TEST_LOOPBACK_ENV} is set: pages on loopback ports "
                   f"{sorted(loopback)} are fetched (a test setting; unset it in production)",
                   err=True)  # fmt: skip
    collection_day = _day(day, "--date")
    options = FetchOptions(delay=delay, timeout=timeout, max_bytes=max_bytes, workers=workers)
    try:
        result = run_sync(
            out, api_key=key, api_url=api_url or DEFAULT_API_URL, query=query, domains=domains,
            since=_day(since, "--since"), clock=(lambda: collection_day) if collection_day
            else today_utc, max_results=max_results, max_pages=max_pages,
            fetch_options=options, fetch_pages=not no_fetch, retries=retries,
            allow_loopback_ports=loopback,
        )  # fmt: skip
    except NewsAPIError as exc:
        raise click.ClickException(f"{exc} (the run log is in {out}/logs/)") from exc
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(result.describe())
    import json

    from analysis.news.store import DedupReport

    counts = json.loads((Path(out) / "manifest.json").read_text(encoding="utf-8"))["counts"]
    click.echo(f"dataset: {DedupReport(**counts).describe()} (duplicates removed at read time)")


@news.command()
@click.option("--dataset", "root", required=True, type=click.Path(exists=True, file_okay=False))
@click.option(
    "--backend",
    type=click.Choice(["transformers", "openai"]),
    default="transformers",
    show_default=True,
)
@click.option("--model", required=True, help="Checkpoint directory or served model name.")
@click.option(
    "--template",
    default="baseline",
    show_default=True,
    help="negate template (`framelab generate templates --task negate`).",
)
@click.option("--max-new-tokens", type=int, default=120, show_default=True)
@click.option("--batch-size", type=int, default=16, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default="auto", show_default=True)
@click.option("--dtype", default="auto", show_default=True)
@click.option(
    "--base-url",
    multiple=True,
    help="OpenAI-compatible server, e.g. http://host:8000/v1; repeat it for replicas.",
)
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True)
@click.option(
    "--embed-model",
    help="sentence-transformers directory for the meaning check "
    "(default: the offline all-MiniLM-L6-v2).",
)
@click.option(
    "--min-change",
    type=float,
    default=0.05,
    show_default=True,
    help="Below this share of changed words a negation is 'unchanged'.",
)
@click.option(
    "--min-cosine",
    type=float,
    default=0.5,
    show_default=True,
    help="Below this embedding cosine a negation is 'off_topic'.",
)
@click.option(
    "--nli-model",
    type=click.Path(exists=True, file_okay=False),
    help="Local NLI checkpoint (MNLI-style labels): adds P(contradiction) to the check.",
)
@click.option(
    "--min-contradiction",
    type=float,
    default=0.5,
    show_default=True,
    help="With --nli-model: below this a negation is 'not_contradiction'.",
)
@click.option("--no-progress", is_flag=True)
def falsify(root, backend, model, template, max_new_tokens, batch_size, seed, device, dtype,
            base_url, api_key_env, embed_model, min_change, min_cosine, nli_model,
            min_contradiction, no_progress) -> None:  # fmt: skip
    """Negate every description (resumable), check the meaning changed, refresh validation.csv."""
    from analysis.llm.backends import GenerationSettings, make_backend
    from analysis.llm.tasks import TaskInputError, run_task
    from analysis.metrics.embed import sentence_transformer_embedder
    from analysis.news.falsify import (
        NEGATE_FILE,
        CheckOptions,
        check_and_write,
        falsified_dir,
        negate_items,
        nli_scorer,
    )

    items, report = negate_items(root)
    click.echo(report.describe())
    if not items:
        raise click.ClickException(f"{root} has no article with a description: run news sync")
    settings = GenerationSettings(max_new_tokens=max_new_tokens, seed=seed, batch_size=batch_size)
    options = (
        {"device": device, "dtype": dtype}
        if backend == "transformers"
        else {"base_url": list(base_url) or None, "api_key_env": api_key_env}
    )
    out = falsified_dir(root) / NEGATE_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        engine = make_backend(backend, model, settings, **options)
        summary = run_task("negate", items, engine, out, template=template,
                           progress=not no_progress, argv=sys.argv)  # fmt: skip
    except (TaskInputError, KeyError, ValueError) as exc:
        raise click.ClickException(str(exc).strip("'\"")) from exc
    click.echo(summary.describe())
    embedder = sentence_transformer_embedder(embed_model)
    try:
        nli = nli_scorer(nli_model, device=device) if nli_model else None
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    check = CheckOptions(min_change=min_change, min_cosine=min_cosine,
                         min_contradiction=min_contradiction)  # fmt: skip
    checked, sheet = check_and_write(root, embedder=embedder, options=check, nli=nli)
    counts = checked["auto_check"].value_counts().to_dict()
    click.echo("meaning check: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    click.echo(f"validation sheet (fill in manual_valid): {sheet}")
    if summary.n_failed:
        sys.exit(1)


@news.command()
@click.option("--dataset", "root", required=True, type=click.Path(exists=True, file_okay=False))
@click.option(
    "--after-cutoff",
    help="Keep articles published after this date (a model's "
    "knowledge cutoff, YYYY-MM-DD); default all.",
)
@click.option(
    "--require",
    type=click.Choice(["manual", "auto", "none"]),
    default="manual",
    show_default=True,
    help="manual: marked valid by hand (as the seed study's pairs); auto: passed the "
    "meaning check and not rejected by hand; none: not rejected.",
)
@click.option("--falsifier", help="Whose negations, when several models falsified the set.")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False),
    help="Fact-check items (JSONL) for `framelab generate fact-check`.",
)
def export(root, after_cutoff, require, falsifier, out) -> None:
    """Write authentic/falsified pairs as fact-check items (two per pair, dated)."""
    from analysis.news.export import ExportError, export_pairs, write_items

    if after_cutoff:
        _day(after_cutoff[:10], "--after-cutoff")
    try:
        items, report = export_pairs(root, after_cutoff=after_cutoff, require=require,
                                     falsifier=falsifier)  # fmt: skip
    except (ExportError, FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    path = write_items(items, out, report=report, settings={
        "dataset": str(Path(root).resolve()), "after_cutoff": after_cutoff, "require": require,
        "falsifier": report.falsifier})  # fmt: skip
    click.echo(report.describe())
    click.echo(f"{len(items)} fact-check items -> {path}")
    click.echo(
        f"next: framelab generate fact-check --input {path} --out ANSWERS.jsonl --model MODEL; "
        "framelab metrics hallucination --input ANSWERS.jsonl --cutoff MODEL=DATE --out DIR"
    )
