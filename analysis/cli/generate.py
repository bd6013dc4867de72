"""``framelab generate TASK``: run one LLM task over an input file into a resumable JSONL."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from analysis.cli.engine import EngineOptions, engine_options, explicit_decoding, with_options

TASK_HELP = {
    "summarize": "Summarize each text (baseline prompt; --template words-100: about 100 words).",
    "reframe": "Add an opposite-sentiment prefix/suffix to each statement (WildFrame one-shot).",
    "judge-framing": "Label the framing of each text Positive/Negative/Neutral (--backend vader "
    "for the lexicon baseline).",
    "fact-check": "Answer True/False for each statement (--template confidence adds a tag).",
    "perspective-summary": "One-sentence left/right summaries of mixed passages, both orders.",
    "judge-pair": "Pick the better of a human and a generated summary, in both orders.",
    "negate": "Rewrite each text to state the opposite (falsified news, `framelab news falsify`).",
}


def _common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--input", "input_path", required=True, type=click.Path(dir_okay=False)),
        click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False)),
        click.option(
            "--loader",
            type=click.Choice(["generic", "amazon", "mediasum", "wildframe", "polisum", "allnews"]),
            default="generic",
            show_default=True,
            help="Input layout.",
        ),
        click.option("--map", "mappings", multiple=True, help="FIELD=COLUMN, repeatable."),
        click.option(
            "--meta", "meta_path", help="Amazon product metadata JSONL (--loader amazon)."
        ),
        click.option("--category", help="Amazon category filter (needs --meta)."),
        click.option("--news-cutoff", help="All the News: keep articles dated on or before DATE."),
        click.option(
            "--max-input-tokens",
            type=int,
            default=4000,
            show_default=True,
            help="Amazon: drop longer reviews; with --limit N the N longest are kept. "
            "MediaSum, All the News: drop longer texts; --limit N draws N at random (--seed).",
        ),
        click.option("--id-field", help="Column with item IDs (default item_id or id)."),
        click.option(
            "--text-field",
            default="text",
            show_default=True,
            help="Field with the text; dotted paths reach into nested records (input.text).",
        ),
        click.option("--dataset", help="Dataset name for items without one."),
        click.option("--limit", type=int, help="Only the first N items."),
        click.option(
            "--template",
            help="Prompt template: a name (`framelab generate templates`), a .txt/.json file "
            "with your own wording, or TASK=PATH.",
        ),
        click.option(
            "--prompts",
            "prompts_file",
            type=click.Path(dir_okay=False),
            help="YAML/JSON file of your own prompts (task, step or method -> text, as "
            "`framelab mitigate --prompts`); this task's entry replaces its default prompt.",
        ),
        click.option("--method", default="baseline", show_default=True),
        click.option("--no-progress", is_flag=True, help="No progress bar."),
    ]
    return engine_options()(with_options(options)(func))


def _make_command(task: str) -> click.Command:
    extra: list[Callable[..., Any]] = []
    if task == "reframe":
        extra.append(
            click.option(
                "--position",
                "positions",
                type=click.Choice(["prefix", "suffix"]),
                multiple=True,
                help="Frame positions (default both).",
            )
        )
    if task == "perspective-summary":
        extra += [
            click.option("--left-field", default="left", show_default=True),
            click.option("--right-field", default="right", show_default=True),
            click.option(
                "--passage-seed",
                type=int,
                default=0,
                show_default=True,
                help="Run seed of the shuffle of each side's passages before they alternate "
                "(each item's own seed is recorded as passage_seed).",
            ),
        ]
    if task == "judge-pair":
        extra += [
            click.option("--human-field", default="human_summary", show_default=True),
            click.option("--generated-field", default="generated_summary", show_default=True),
            click.option(
                "--pair-names",
                default="summary_1,summary_2",
                show_default=True,
                help="FIRST,SECOND: the names the judge sees for the two summaries and answers "
                "with (the default is the overlap paper's, Fig. 2).",
            ),
        ]

    def command(**kw: Any) -> None:
        _run(task, kw)

    command.__doc__ = TASK_HELP[task]
    for option in extra:
        command = option(command)
    return click.command(name=task)(_common_options(command))


def _run(task: str, kw: dict[str, Any]) -> None:
    """Load inputs, build the backend, run the task and report what happened."""
    engine = EngineOptions.pop(kw)
    from analysis.llm.loaders import LoaderError, load, parse_mapping
    from analysis.llm.tasks import TaskInputError, TaskOptions, run_task

    extra: dict[str, Any] = {}
    if kw["loader"] == "amazon":
        extra = {
            "meta_path": kw["meta_path"],
            "category": kw["category"],
            "max_tokens": kw["max_input_tokens"],
        }
    elif kw["loader"] in ("mediasum", "allnews"):
        # The paper's draw: a seeded random --limit of the texts within the token budget.
        extra = {"max_tokens": kw["max_input_tokens"], "seed": kw["seed"]}
        if kw["loader"] == "allnews":
            extra["cutoff"] = kw["news_cutoff"]
    try:
        items = load(
            kw["loader"],
            kw["input_path"],
            mapping=parse_mapping(kw["mappings"]),
            id_field=kw["id_field"],
            dataset=kw["dataset"],
            limit=kw["limit"],
            **extra,
        )
    except LoaderError as exc:
        raise click.ClickException(str(exc)) from exc
    options = TaskOptions(
        text_field=kw["text_field"],
        dataset=kw["dataset"],
        positions=tuple(kw.get("positions") or ("prefix", "suffix")),
        left_field=kw.get("left_field", "left"),
        right_field=kw.get("right_field", "right"),
        passage_seed=kw.get("passage_seed", 0),
        human_field=kw.get("human_field", "human_summary"),
        generated_field=kw.get("generated_field", "generated_summary"),
        pair_names=_pair_names(kw.get("pair_names") or "summary_1,summary_2"),
    )
    try:
        backend = engine.make_backend()
        summary = run_task(
            task,
            items,
            backend,
            kw["out_path"],
            template=_template_choice(task, kw),
            method=kw["method"],
            options=options,
            progress=not kw["no_progress"],
            argv=sys.argv,
            explicit_decoding=explicit_decoding(),
        )
    except (TaskInputError, KeyError, ValueError) as exc:
        raise click.ClickException(str(exc).strip("'\"")) from exc
    click.echo(summary.describe())
    click.echo(f"manifest: {summary.manifest}")
    if summary.n_failed:
        for error in summary.errors[:5]:
            click.echo(f"  failed: {error}", err=True)
        sys.exit(1)


@click.group()
def generate() -> None:
    """Generate LLM stimuli: one verb per task, resumable JSONL out (docs/generation.md)."""


for _task in TASK_HELP:
    generate.add_command(_make_command(_task))


def _pair_names(spec: str) -> tuple[str, str]:
    names = [n.strip() for n in spec.split(",")]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise click.BadParameter(
            f"expected two different names FIRST,SECOND, got {spec!r}", param_hint="--pair-names"
        )
    return names[0], names[1]


def _template_choice(task: str, kw: dict[str, Any]) -> Any:
    """``--template`` as given, or this task's prompt from ``--prompts FILE`` (not both)."""
    if not kw.get("prompts_file"):
        return kw["template"]
    from analysis.llm.templates import TemplateError
    from analysis.mitigation.prompt_file import load_prompts

    try:
        prompts = load_prompts(kw["prompts_file"])
    except TemplateError as exc:
        raise click.BadParameter(str(exc), param_hint="--prompts") from exc
    if task not in prompts:
        return kw["template"]
    if kw["template"]:
        raise click.UsageError(
            f"--template and --prompts both give the {task} prompt: keep one of them"
        )
    return prompts[task]


@generate.command("templates")
@click.option("--task", help="Only this task's templates.")
@click.option("--show", is_flag=True, help="Print the template text.")
def templates_command(task: str | None, show: bool) -> None:
    """List the named prompt templates."""
    from pathlib import Path

    from analysis.llm.templates import PROMPT_DIR, list_templates

    click.echo("task                 name         text hash (records' template_hash adds settings)")
    for tpl in list_templates(task):
        where = f"  {Path(tpl.source).relative_to(PROMPT_DIR)}" if tpl.source else ""
        paper = "".join(f" {k}={v}" for k, v in tpl.decoding.items())
        paper = f"  default decoding:{paper}" if paper else ""
        click.echo(f"{tpl.task:20} {tpl.name:12} {tpl.hash()}{where}{paper}")
        if show:
            click.echo("    " + tpl.user.replace("\n", "\n    "))


@generate.command("product-pairs")
@click.option("--rows", type=click.Path(exists=True, dir_okay=False), help="One row per review.")
@click.option("--summaries", type=click.Path(exists=True, dir_okay=False))
@click.option("--source-judgments", type=click.Path(exists=True, dir_okay=False))
@click.option("--summary-judgments", type=click.Path(exists=True, dir_okay=False))
@click.option("--map", "mappings", multiple=True, help="FIELD=COLUMN for --rows, repeatable.")
@click.option("--out-dir", required=True, type=click.Path(file_okay=False), help="e.g. stimuli")
@click.option("--slug", required=True, help="Study slug and file stem.")
@click.option("--title", default="Choosing between products", show_default=True)
@click.option("--n-pairs", type=int, help="At most this many pairs.")
@click.option(
    "--mitigated",
    multiple=True,
    metavar="METHOD=FILE",
    help="A `framelab mitigate` output: a format mitigated:METHOD (repeatable; a k-format study).",
)
@click.option(
    "--mitigated-judgments",
    multiple=True,
    metavar="METHOD=FILE",
    help="judge-framing on that output's summaries (--text-field output), one per --mitigated.",
)
def product_pairs_command(
    rows: str | None,
    summaries: str | None,
    source_judgments: str | None,
    summary_judgments: str | None,
    mappings: tuple[str, ...],
    out_dir: str,
    slug: str,
    title: str,
    n_pairs: int | None,
    mitigated: tuple[str, ...],
    mitigated_judgments: tuple[str, ...],
) -> None:
    """Build a product-pair stimulus set and its study YAML from judged summaries.

    Give either --rows (review, summary, review_framing, summary_framing, product_type,
    manufacturer, price_usd per row) or the three outputs of `framelab generate`: summarize,
    judge-framing on the reviews and judge-framing on the summaries (--text-field output).
    With --mitigated, a k-format study: a text and its generation record per format and product
    (docs/generation.md).
    """
    if mitigated or mitigated_judgments:
        _format_pairs(
            summaries, source_judgments, summary_judgments, mitigated, mitigated_judgments,
            out_dir=out_dir, slug=slug, title=title, n_pairs=n_pairs,
        )  # fmt: skip
        return
    from analysis.llm.builders import BuildError, build_product_pairs, join_generations
    from analysis.llm.loaders import LoaderError, parse_mapping, read_items
    from analysis.llm.store import read_records

    try:
        if rows:
            table = read_items(rows, mapping=parse_mapping(mappings))
        elif summaries and source_judgments and summary_judgments:
            table = join_generations(
                read_records(summaries),
                read_records(source_judgments),
                read_records(summary_judgments),
            )
        else:
            raise click.UsageError(
                "give --rows, or --summaries with --source-judgments and --summary-judgments"
            )
        result = build_product_pairs(table, out_dir, slug=slug, title=title, n_pairs=n_pairs)
    except (BuildError, LoaderError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{len(result.pairs)} pairs -> {result.pairs_path}")
    click.echo(f"study -> {result.study_path} (load with: framelab study load {result.study_path})")
    for product_type, reason in result.skipped.items():
        click.echo(f"  skipped {product_type}: {reason}")


@generate.command("annotation-items")
@click.option("--input", "input_path", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False))
@click.option("--keep-changed", is_flag=True, help="Keep reframings that altered the statement.")
def annotation_items_command(input_path: str, out_path: str, keep_changed: bool) -> None:
    """Turn `framelab generate reframe` output into a sentiment_annotation item CSV."""
    from analysis.llm.builders import BuildError, annotation_items, write_items_csv
    from analysis.llm.store import read_records

    try:
        items, dropped = annotation_items(read_records(input_path), keep_changed=keep_changed)
    except (BuildError, KeyError) as exc:
        raise click.ClickException(str(exc)) from exc
    path = write_items_csv(items, out_path)
    click.echo(f"{len(items)} items -> {path} ({dropped} reframings dropped)")


@generate.command("rating-set")
@click.option(
    "--input",
    "input_paths",
    required=True,
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="perspective-summary records (JSONL), one file per model or one for all; repeatable.",
)
@click.option(
    "--references",
    type=click.Path(exists=True, dir_okay=False),
    help="CSV with item_id, perspective, text: reference (e.g. human) summaries.",
)
@click.option(
    "--order",
    type=click.Choice(["left_first", "right_first"]),
    default="left_first",
    show_default=True,
)
@click.option("--reference-system", default="reference", show_default=True)
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False))
@click.option(
    "--metrics-out",
    type=click.Path(dir_okay=False),
    help="Also write BLEU/ROUGE of each summary against the reference (for analyze ratings).",
)
def rating_set_command(
    input_paths: tuple[str, ...],
    references: str | None,
    order: str,
    reference_system: str,
    out_path: str,
    metrics_out: str | None,
) -> None:
    """Build a summary_rating stimulus set from perspective-summary records."""
    import csv

    from analysis.llm.builders import BuildError
    from analysis.llm.builders_eval import rating_set, summary_metrics, write_jsonl
    from analysis.llm.store import read_records

    refs: dict[tuple[str, str], str] | None = None
    if references:
        with open(references, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = {"item_id", "perspective", "text"} - set(reader.fieldnames or [])
            if missing:
                raise click.ClickException(f"{references}: missing column(s) {sorted(missing)}")
            refs = {(r["item_id"], r["perspective"]): r["text"] for r in reader}
    records = [rec for path in input_paths for rec in read_records(path)]
    try:
        sources = rating_set(
            records, references=refs, order=order, reference_system=reference_system
        )
        path = write_jsonl(sources, out_path)
        click.echo(f"{len(sources)} sources -> {path}")
        if metrics_out:
            import pandas as pd

            from analysis.safecsv import write_csv

            rows = summary_metrics(sources, reference_system=reference_system)
            write_csv(pd.DataFrame(rows), metrics_out)
            click.echo(f"{len(rows)} summary metrics -> {metrics_out}")
    except BuildError as exc:
        raise click.ClickException(str(exc)) from exc


@generate.command("preference-set")
@click.option(
    "--input",
    "input_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="judge-pair records (JSONL) or the items given to judge-pair.",
)
@click.option("--human-system", default="human", show_default=True)
@click.option("--generated-system", default=None, help="Default: the records' model name.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False))
def preference_set_command(
    input_path: str, human_system: str, generated_system: str | None, out_path: str
) -> None:
    """Build a pairwise_preference stimulus set (human vs generated summary) from judge-pair."""
    from analysis.llm.builders import BuildError
    from analysis.llm.builders_eval import preference_set, write_jsonl
    from analysis.llm.store import read_records

    try:
        pairs = preference_set(
            read_records(input_path),
            human_system=human_system,
            generated_system=generated_system,
        )
    except BuildError as exc:
        raise click.ClickException(str(exc)) from exc
    path = write_jsonl(pairs, out_path)
    click.echo(f"{len(pairs)} pairs -> {path}")


@generate.command("rephrased-pairs")
@click.option(
    "--input",
    "input_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="summarize records made with --template rephrase on judge-pair items.",
)
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False))
def rephrased_pairs_command(input_path: str, out_path: str) -> None:
    """Judge-pair items with the rephrased generated summaries (the overlap paper's step)."""
    from analysis.llm.builders import BuildError
    from analysis.llm.builders_eval import rephrased_pairs, write_jsonl
    from analysis.llm.store import read_records

    try:
        items = rephrased_pairs(read_records(input_path))
    except BuildError as exc:
        raise click.ClickException(str(exc)) from exc
    path = write_jsonl(items, out_path)
    click.echo(f"{len(items)} rephrased pairs -> {path}")


def _format_pairs(summaries, source_judgments, summary_judgments, mitigated, judgments, **kw):
    """The k-format branch of ``product-pairs``: one summary file per format."""
    from pathlib import Path

    from analysis.llm.builders import BuildError
    from analysis.llm.format_pairs import build_format_pairs, join_format_generations
    from analysis.llm.store import read_records

    if not (summaries and source_judgments and summary_judgments):
        raise click.UsageError(
            "--mitigated needs the baseline: --summaries, --source-judgments, --summary-judgments"
        )

    def files(specs: tuple[str, ...], option: str) -> dict[str, str]:
        out = {}
        for spec in specs:
            method, sep, path = spec.partition("=")
            if not sep or not method.strip() or not Path(path).is_file():
                raise click.BadParameter(
                    f"{spec!r}: give METHOD=FILE (an existing file)", param_hint=option
                )
            out[f"mitigated:{method.strip()}"] = path
        return out

    texts = {"summary": summaries, **files(mitigated, "--mitigated")}
    labels = {"summary": summary_judgments, **files(judgments, "--mitigated-judgments")}
    try:
        rows, dropped = join_format_generations(
            {f: list(read_records(p)) for f, p in texts.items()},
            list(read_records(source_judgments)),
            {f: list(read_records(p)) for f, p in labels.items()},
        )
        formats = ["summary", *sorted(f for f in texts if f != "summary")]
        result = build_format_pairs(rows, kw.pop("out_dir"), formats=formats, dropped=dropped, **kw)
    except (BuildError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"{len(result.rows) // 2} pairs in {len(result.formats)} formats -> {result.pairs_path}"
    )
    click.echo(f"study -> {result.study_path} (load with: framelab study load {result.study_path})")
    for reason, n in result.dropped.items():
        click.echo(f"  dropped {n} item(s): {reason}")
    for product_type, reason in result.skipped.items():
        click.echo(f"  skipped {product_type}: {reason}")
