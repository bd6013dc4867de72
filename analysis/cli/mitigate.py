"""``framelab mitigate …``: list, run and compare the 18 bias-mitigation methods.

One subcommand per method (``framelab mitigate mirostat --target 2.0 …``) with its hyperparameters
as options (seed values as defaults), ``run METHOD`` for scripting, ``list`` and ``compare``.
The commands are thin: read items, build the backend, call :mod:`analysis.mitigation`, write.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from analysis.cli.engine import EngineOptions, engine_options, with_options
from analysis.mitigation.registry import METHODS, MethodSpec
from analysis.safecsv import write_csv

# The engine options (backend, model, decoding, --gguf-file, --revision, --attn, --threads …)
# are `framelab generate`'s, from one shared definition (analysis.cli.engine).
_BACKEND_OPTIONS: list[Callable[..., Any]] = [
    engine_options(("transformers", "openai"), model_required=True),
    click.option("--no-progress", is_flag=True, help="No progress bars."),
]

_INPUT_OPTIONS: list[Callable[..., Any]] = [
    click.option("--template", "templates", multiple=True,
                 help="KEY=PATH: your own prompt file (.txt/.json). KEY is summarize or "
                 "fact-check (the baseline prompt the methods build on) or a method's own step "
                 "(cot, debias-prefix, … : `framelab mitigate templates`); repeatable."),
    click.option("--prompts", "prompts_file", type=click.Path(dir_okay=False),
                 help="YAML/JSON file of your own prompts: task, step or method -> text "
                 "(docs/mitigation.md, 'Your own prompts'); --template wins for a key in both."),
    click.option("--map", "mappings", multiple=True,
                 help="FIELD=COLUMN, repeatable (e.g. --map text=article)."),
    click.option("--id-field", help="Column with item IDs (default item_id or id)."),
    click.option("--limit", type=int, help="Only the first N items."),
]  # fmt: skip


def _backend(kw: Mapping[str, Any], model: str | None = None) -> Any:
    """Build the backend the engine options describe (``model`` overrides ``--model``)."""
    return EngineOptions.pop(dict(kw)).make_backend(model)


def _items(path: str, kw: Mapping[str, Any], dataset: str | None = None) -> list[dict[str, Any]]:
    from analysis.llm.loaders import LoaderError, parse_mapping, read_items

    try:
        return read_items(
            path,
            mapping=parse_mapping(kw["mappings"]),
            id_field=kw["id_field"],
            dataset=dataset,
            limit=kw["limit"],
        )
    except LoaderError as exc:
        raise click.ClickException(str(exc)) from exc


def _templates(
    specs: tuple[str, ...], method: str | None = None, prompts_file: str | None = None
) -> dict[str, Any]:
    """``--prompts FILE`` and ``KEY=PATH`` options as ``{key: PromptTemplate}`` (a clear error
    for bad files).

    KEY is a task (``summarize``, ``fact-check``: the baseline prompts) or a mitigation step
    (``cot`` …). With ``method``, a step that method does not use is refused rather than
    silently ignored. A prompts file may cover every method; each run takes what it uses.
    """
    from analysis.llm.templates import TemplateError, load_template_file
    from analysis.mitigation.prompt_file import load_prompts
    from analysis.mitigation.prompts import STEPS, load_step_file

    out: dict[str, Any] = {}
    if prompts_file:
        try:
            out.update(load_prompts(prompts_file))
        except TemplateError as exc:
            raise click.BadParameter(str(exc), param_hint="--prompts") from exc
    for spec in specs:
        key, sep, path = spec.partition("=")
        key = key.strip().removeprefix("mitigate-")
        if not sep or (key not in {"summarize", "fact-check"} and key not in STEPS):
            raise click.BadParameter(
                f"expected KEY=PATH with KEY summarize, fact-check or one of the steps "
                f"{', '.join(sorted(STEPS))}; got {spec!r}",
                param_hint="--template",
            )
        if method is not None and key in STEPS and method not in STEPS[key].methods:
            raise click.BadParameter(
                f"{key} is a prompt of {', '.join(STEPS[key].methods)}, not of {method}",
                param_hint="--template",
            )
        try:
            if key in STEPS:
                out[key] = load_step_file(path, key)
            else:
                out[key] = load_template_file(path, key)
        except TemplateError as exc:
            raise click.BadParameter(str(exc), param_hint="--template") from exc
    return out


def _run(name: str, params: Mapping[str, Any], kw: Mapping[str, Any]) -> None:
    """Run one method over the input file and report the counts."""
    from analysis.mitigation.runner import run_method

    items = _items(kw["input_path"], kw, kw["dataset"])
    try:
        run = run_method(
            name,
            items,
            _backend(kw),
            kw["out_path"],
            params={k: v for k, v in params.items() if v is not None},
            task=kw.get("task") or "summarize",
            dataset=kw["dataset"],
            progress=not kw["no_progress"],
            argv=sys.argv,
            templates=_templates(kw["templates"], name, kw["prompts_file"]),
        )
    except (KeyError, ValueError) as exc:
        raise click.ClickException(str(exc).strip("'\"")) from exc
    click.echo(run.describe())
    if run.n_failed:
        for error in run.errors[:5]:
            click.echo(f"  failed: {error}", err=True)
        sys.exit(1)


def _io_options(func: Callable[..., Any]) -> Callable[..., Any]:
    return with_options(
        [
            click.option("--input", "input_path", required=True,
                         type=click.Path(exists=True, dir_okay=False),
                         help="Items: CSV/JSONL with item_id and text."),
            click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
                         help="Output JSONL (appended; re-runs resume)."),
            click.option("--dataset", help="Dataset name for items without one."),
            *_INPUT_OPTIONS,
            *_BACKEND_OPTIONS,
        ]
    )(func)  # fmt: skip


def _method_command(spec: MethodSpec) -> click.Command:
    def command(**kw: Any) -> None:
        params = {p.name: kw.pop(p.name) for p in spec.params}
        _run(spec.name, params, kw)

    for param in reversed(spec.params):
        command = click.option(
            f"--{param.name.replace('_', '-')}",
            param.name,
            type=param.type,
            default=param.default,
            show_default=True,
            help=param.help,
        )(command)
    backends = ", ".join(spec.backends)
    help_text = f"{spec.definition}\n\nFamily: {spec.family}; target: {spec.target_bias}; " + (
        f"backends: {backends}."
    )
    return click.command(name=spec.name, help=help_text)(_io_options(command))


@click.group()
def mitigate() -> None:
    """Bias-mitigation methods: one subcommand per method, plus list, run and compare."""


for _spec in METHODS.values():
    mitigate.add_command(_method_command(_spec))


@mitigate.command("list")
@click.option("--family", help="Only methods of this family.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True)  # fmt: skip
@click.option("--definitions", is_flag=True, help="Also print each method's definition.")
def list_command(family: str | None, fmt: str, definitions: bool) -> None:
    """Print the 18 methods with family, target bias, hyperparameters and backends."""
    from analysis.mitigation.registry import method_table

    table = method_table()
    if family:
        table = table.loc[table["family"] == family]
    if not definitions and fmt == "table":
        table = table.drop(columns="definition")
    if fmt == "csv":
        click.echo(write_csv(table), nl=False)
    elif fmt == "json":
        click.echo(json.dumps(table.to_dict("records"), indent=2))
    else:
        click.echo(table.to_string(index=False))


@mitigate.command("templates")
@click.option("--show", is_flag=True, help="Print the template text.")
def templates_command(show: bool) -> None:
    """List the methods' own prompts: step, methods, placeholders, file and text hash."""
    from analysis.llm.templates import PROMPT_DIR
    from analysis.mitigation.prompts import STEPS, step_template

    click.echo("step (--template STEP=PATH)  text hash         file; placeholders; methods")
    for step in STEPS.values():
        tpl = step_template(step.name)
        where = Path(tpl.source).relative_to(PROMPT_DIR) if tpl.source else "-"
        fields = " ".join("{" + f + "}" for f in step.fields) or "none"
        click.echo(f"{step.name:28} {tpl.hash()}  {where}; {fields}; {', '.join(step.methods)}")
        if show:
            click.echo("    " + tpl.user.replace("\n", "\n    "))


@mitigate.command("run")
@click.argument("method")
@click.option("--set", "sets", multiple=True, help="Hyperparameter NAME=VALUE, repeatable.")
@click.option("--task", type=click.Choice(["summarize", "fact-check"]),
              help="Task of the baseline (methods know their own).")  # fmt: skip
@_io_options
def run_command(method: str, sets: tuple[str, ...], **kw: Any) -> None:
    """Run METHOD (or ``baseline``) over --input into --out."""
    params: dict[str, str] = {}
    for item in sets:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--set")
        params[name.strip().replace("-", "_")] = value.strip()
    _run(method, params, kw)


def _is_fact(item: Mapping[str, Any]) -> bool:
    return "pair_id" in item and "truth" in item


def _unique_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prefix item IDs with their dataset when several datasets reuse the same IDs."""
    ids = [str(i["item_id"]) for i in items]
    if len(set(ids)) == len(ids):
        return items
    return [{**i, "item_id": f"{i.get('dataset')}/{i['item_id']}"} for i in items]


def _embedder(spec: str) -> Callable[..., Any]:
    """``default`` (all-MiniLM-L6-v2), ``hashing`` (no model; smoke runs only) or a model path."""
    if spec == "hashing":

        def embed(texts: Any) -> Any:
            from sklearn.feature_extraction.text import HashingVectorizer

            vec = HashingVectorizer(n_features=2**12, alternate_sign=False)
            return vec.transform(list(texts)).toarray()

        return embed
    from analysis.metrics.embed import sentence_transformer_embedder

    return sentence_transformer_embedder(None if spec == "default" else spec)


def _check_judge(judge: str | None, model: str | None, allow_self: bool, *, needed: bool) -> str:
    """The framing judge to use: one fixed model, refused when it is the model under test."""
    if not needed:
        return judge or "vader"  # fact checks only: nothing is judged
    if judge is None:
        raise click.UsageError(
            "give --judge: framing is judged by one fixed model for every model under test "
            "(a checkpoint or served model name, or 'vader'); '--judge model "
            "--allow-self-judge' lets the model under test judge itself"
        )
    if judge == "model" or (model is not None and judge == model):
        if not allow_self:
            raise click.UsageError(
                f"--judge {judge} is the model under test: its framing labels would move with "
                "every model compared. Name a fixed judge, or add --allow-self-judge."
            )
        click.echo(
            "warning: the model under test judges its own framing (--allow-self-judge); "
            "phi_frame is then not comparable across models.",
            err=True,
        )
        return "model"
    return judge


@mitigate.command("compare")
@click.option(
    "--dataset",
    "datasets",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Documents to summarise (item_id, text); repeat for several datasets, each "
    "named after its file. Items with pair_id and truth are taken as fact checks.",
)
@click.option(
    "--facts",
    type=click.Path(exists=True, dir_okay=False),
    help="Fact-check statements (item_id, text, pair_id, truth, date).",
)
@click.option(
    "--methods",
    default="all",
    show_default=True,
    help="'all' or a comma-separated list of methods; the baseline always runs.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory for records, tables and the plot (re-runs resume).",
)
@click.option(
    "--judge",
    default=None,
    help="Framing judge, one fixed model for every model under test (as in the seed study): "
    "a checkpoint or served model name, or 'vader' (lexicon baseline). Required with "
    "--dataset. 'model' (the model under test judging itself) needs --allow-self-judge.",
)
@click.option(
    "--allow-self-judge",
    is_flag=True,
    help="Let the model under test judge its own summaries' framing (not the paper's setup).",
)
@click.option(
    "--embedder",
    default="default",
    show_default=True,
    help="Primacy embedder: 'default' (all-MiniLM-L6-v2), a sentence-transformers "
    "path, or 'hashing' (bag of words, for smoke runs only).",
)
@click.option("--cutoff", help="The model's knowledge cutoff (ISO date) for the fact checks.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="ψpri margin.")
@click.option(
    "--set", "sets", multiple=True, help="METHOD.NAME=VALUE hyperparameter override, repeatable."
)
@with_options([*_INPUT_OPTIONS, *_BACKEND_OPTIONS])
def compare_command(
    datasets: tuple[str, ...],
    facts: str | None,
    methods: str,
    out_dir: str,
    judge: str | None,
    allow_self_judge: bool,
    embedder: str,
    cutoff: str | None,
    alpha: float,
    sets: tuple[str, ...],
    **kw: Any,
) -> None:
    """Run the baseline and the methods and write the seed study's comparison tables."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from analysis.llm.backends import make_backend
    from analysis.mitigation.compare import (
        check_items,
        plot_comparison,
        run_comparison,
        select_methods,
    )

    if not datasets and not facts:
        raise click.UsageError("give --dataset FILE (summaries) and/or --facts FILE")
    try:
        chosen = select_methods(methods)
    except KeyError as exc:
        raise click.BadParameter(str(exc).strip("'\""), param_hint="--methods") from exc
    params: dict[str, dict[str, str]] = {}
    for item in sets:
        target, sep, value = item.partition("=")
        method, dot, name = target.partition(".")
        if not sep or not dot:
            raise click.BadParameter(f"expected METHOD.NAME=VALUE, got {item!r}", "--set")
        params.setdefault(method.strip(), {})[name.strip().replace("-", "_")] = value.strip()
    summary_items, fact_items = [], []
    try:
        for path in datasets:
            loaded = _items(path, kw, dataset=Path(path).stem)
            # A --dataset file may also hold fact-check statements: they are the items with a pair.
            stated = [i for i in loaded if _is_fact(i)]
            docs = [i for i in loaded if not _is_fact(i)]
            check_items(docs, kind="summaries", source=path)
            check_items(stated, kind="facts", source=path)
            summary_items += docs
            fact_items += stated
        if facts:
            stated = _items(facts, kw)
            check_items(stated, kind="facts", source=facts)  # before any model is loaded
            fact_items += stated
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    summary_items = _unique_ids(summary_items)
    judge = _check_judge(judge, kw.get("model"), allow_self_judge, needed=bool(summary_items))
    if summary_items and embedder == "default":
        from analysis.metrics.embed import PRIMACY_SCALE_WARNING

        click.echo(PRIMACY_SCALE_WARNING, err=True)
    backend = _backend(kw)
    if judge == "model":
        judge_backend = backend
    elif judge == "vader":
        judge_backend = make_backend("vader", None)
    else:
        judge_backend = _backend(kw, model=judge)
    try:
        result = run_comparison(
            backend,
            out_dir,
            methods=chosen,
            summary_items=summary_items,
            fact_items=fact_items,
            judge=judge_backend,
            embedder=_embedder(embedder) if summary_items else None,
            cutoff=cutoff,
            params=params,
            alpha=alpha,
            progress=not kw["no_progress"],
            templates=_templates(kw["templates"], prompts_file=kw["prompts_file"]),
        )
    except (KeyError, ValueError) as exc:
        raise click.ClickException(str(exc).strip("'\"")) from exc
    out = Path(out_dir)
    for run in result.runs:
        click.echo(run.describe())
    if result.summarization is not None:
        write_csv(result.summarization, out / "summarization_table.csv")
        ax = plot_comparison(result.summarization)
        ax.figure.tight_layout()
        ax.figure.savefig(out / "summarization_table.png", dpi=110)
        plt.close(ax.figure)
        click.echo(result.summarization[
            ["dataset", "method", "phi_frame", "s_b", "s_m", "s_e", "psi_pri"]
        ].to_string(index=False, float_format=lambda v: f"{v:.3f}"))  # fmt: skip
    if result.fact_checking is not None:
        write_csv(result.fact_checking, out / "fact_check_table.csv")
        click.echo(result.fact_checking[
            ["period", "method", "actual_acc", "falsified_acc", "strict_acc",
             "actual_news_error_rate", "strict_error_rate"]
        ].to_string(index=False, float_format=lambda v: f"{v:.3f}"))  # fmt: skip
        click.echo(
            "actual_news_error_rate = 1 - actual-news accuracy (real news called false); its "
            "'post' row, averaged over models, is the seed study's headline hallucination rate. "
            "strict_error_rate = 1 - strict accuracy (s_TH)."
        )
    click.echo(f"tables and plot in {out}")
    if any(run.n_failed for run in result.runs):
        sys.exit(1)
