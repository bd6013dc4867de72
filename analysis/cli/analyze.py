"""``framelab analyze``: the statistics of the human data, written as a report folder."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

OPTIMIZERS = ("lbfgs", "bfgs", "powell", "cg", "nm")


class GreedyFilesCommand(click.Command):
    """A command whose file options take one or more values after one flag.

    ``--mturk Batch_*.csv`` reaches the program as ``--mturk a.csv b.csv c.csv`` once the shell
    has expanded the glob; click's options take one value each, so the arguments are rewritten
    to ``--mturk a.csv --mturk b.csv --mturk c.csv`` before click parses them. A value list ends
    at the next argument that starts with ``-``. Repeating the flag works as before.
    """

    greedy: tuple[str, ...] = ()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rewritten: list[str] = []
        flag: str | None = None
        for arg in args:
            if arg == "--":
                flag = None
            elif arg in self.greedy:
                flag = arg
                rewritten.append(arg)
                continue
            elif arg.startswith("-"):
                # "--mturk=a.csv b.csv": values may follow the "=" form too.
                flag = next((g for g in self.greedy if arg.startswith(g + "=")), None)
                if flag is not None:
                    rewritten.extend([flag, arg.split("=", 1)[1]])
                    continue
            elif flag is not None and rewritten[-1] != flag:
                rewritten.append(flag)
            rewritten.append(arg)
        return super().parse_args(ctx, rewritten)


def _greedy(*flags: str) -> type[GreedyFilesCommand]:
    return type("GreedyFiles", (GreedyFilesCommand,), {"greedy": flags})


@click.group()
def analyze() -> None:
    """Analyse human data: choice, sentiment-annotation, summary-rating and preference studies."""
    import gc

    # The imports of pandas, scipy, statsmodels and matplotlib create ~10^6 objects, and the
    # default thresholds (700, 10, 10) collect them again and again while they load: 3-9 % of
    # a 70 x 10 report's CPU. A short-lived command can afford rarer young collections; the
    # thresholds are put back when the command ends (it may run inside a longer process).
    before = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    click.get_current_context().call_on_close(lambda: gc.set_threshold(*before))


def _command_line() -> str:
    return "framelab " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _figure_worker(figures: bool):
    """Fork the figure worker first thing, once pandas is imported (the child then has it)."""
    if not figures:
        return None
    import pandas  # noqa: F401 - every analysis needs it; imported before the fork, only once

    from analysis.report.figure_worker import start_figure_worker

    worker = start_figure_worker()
    if worker is not None:
        click.get_current_context().call_on_close(worker.close)
    return worker


def _stage_figures(worker):
    """``analyze_choice``'s ``on_stage``: hand each stage's final figures to the worker."""
    if worker is None:
        return None
    from analysis.report.study_sections import stage_figures

    def on_stage(results, stage: str) -> None:
        worker.submit(results, stage_figures(results, stage))

    return on_stage


def _write(results, out_dir: str, title: str, figures: bool, worker=None) -> int:
    from analysis.report.writer import write_results

    written = write_results(
        results, out_dir, title=title, command=_command_line(), figures=figures, worker=worker
    )
    return len(written)


def _report_options(fn):
    """Every report's output folder and its figures switch."""
    fn = click.option("--no-figures", is_flag=True, help="Skip the PNG figures.")(fn)
    return click.option(
        "--out",
        "out_dir",
        required=True,
        type=click.Path(file_okay=False),
        help="Output folder (created).",
    )(fn)


def _authenticity_options(fn):
    """The authenticity rule's options (``analysis: exclusions: authenticity``)."""
    fn = click.option(
        "--authenticity-canary",
        is_flag=True,
        help="Exclude participants whose answers carry the study's canary word (auth_canary).",
    )(fn)
    return click.option(
        "--authenticity-max-score",
        type=click.FloatRange(min=0),
        default=None,
        help="Exclude participants whose authenticity score (the export's auth_score) is "
        "above this.",
    )(fn)


def _given(flags: dict[str, bool]) -> list[str]:
    """The options given on the command line, of ``{option: whether it was given}``."""
    return [name for name, on in flags.items() if on]


def _echo_rater_rules(results) -> None:
    """The rules paragraph of a ratings or preferences report, when a rule is on."""
    from analysis.report.rules import rules_sentence

    status = results.tables["exclusion_rules"]
    if (status["status"] != "off").any():
        click.echo(rules_sentence(status))


@analyze.command("choice")
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--wtp-log", is_flag=True, help="Model log(1 + premium/100) instead of the premium in percent."
)
@click.option(
    "--wtp-model",
    type=click.Choice(["auto", "crossed_sparse", "crossed", "pair_fixed"]),
    default="auto",
    show_default=True,
    help="WTP mixed model; auto = crossed_sparse (lme4's REML) unless both factors are huge.",
)
@click.option(
    "--optimizer",
    "optimizers",
    multiple=True,
    type=click.Choice(OPTIMIZERS),
    help="Optimizer(s) of the statsmodels WTP models (--wtp-model crossed or pair_fixed), tried "
    "in order [default: lbfgs, bfgs, powell].",
)
@click.option(
    "--padjust",
    default="holm",
    show_default=True,
    type=click.Choice(["holm", "bonferroni", "fdr_bh", "fdr_by", "hommel", "sidak"]),
    help="Correction across the format contrasts of each model, and across pairs and "
    "contrasts in the per-pair tests.",
)
@click.option("--keep-incomplete", is_flag=True, help="Do not exclude non-completed participants.")
@click.option(
    "--keep-failed-quiz", is_flag=True, help="Do not exclude failed comprehension quizzes."
)
@click.option(
    "--keep-failed-attention", is_flag=True, help="Do not exclude failed attention checks."
)
@click.option(
    "--keep-duplicates", is_flag=True, help="Do not drop repeated (participant, pair) rows."
)
@click.option(
    "--min-duration-s",
    type=float,
    default=None,
    help="Exclude participants faster than this many seconds.",
)
@click.option(
    "--min-duration-frac",
    type=float,
    default=0.3,
    show_default=True,
    help="Exclude participants faster than this fraction of the median duration (0 disables).",
)
@_authenticity_options
@click.option(
    "--levels",
    "format_levels",
    default=None,
    metavar="REFERENCE,TREATMENT[,LEVEL...]",
    help="The formats to analyse, reference first (the reference sets every sign); trials of "
    "formats not named are left out and counted [default: original, summary, then the rest "
    "alphabetically].",
)
@click.option(
    "--baseline",
    default=None,
    help="The format each other non-reference format is also compared with [default: summary, "
    "when it is analysed and not the reference].",
)
@click.option(
    "--blocks",
    type=click.Choice(["separate", "pooled"]),
    default=None,
    help="Exports with several product-choice blocks: analyse each block on its own "
    "[default] or all blocks' trials together.",
)
@click.option(
    "--wtp-slopes",
    is_flag=True,
    help="Also fit random slopes of format by participant and pair, with their LR test.",
)
@click.option(
    "--demographics",
    "demographics_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Prolific's demographic export, joined by Participant id (age, sex, country).",
)
@click.option(
    "--id-map",
    "id_map_path",
    type=click.Path(exists=True, dir_okay=False),
    help="CSV participant_id,platform_participant_id for an export without platform IDs.",
)
@click.option(
    "--covariates",
    default=None,
    metavar="COL[,COL]",
    help="Adjust the choice GEE and WTP model for these participant columns "
    "(e.g. age,sex,country with --demographics).",
)
@click.option(
    "--prereg",
    "prereg_path",
    type=click.Path(exists=True, dir_okay=False),
    help="The study's pre-registration (framelab prereg): refuse a primary analysis that "
    "differs from it; report the pre-registered result at its stopping look.",
)
@click.option(
    "--study",
    "study_path",
    type=click.Path(exists=True, dir_okay=False),
    help="The study's YAML: its estimated_minutes sets the suggested absolute speed floor "
    "(min_duration_s) the report gives [default: from the observed median duration].",
)
@click.option("--no-gee", is_flag=True, help="Skip the clustered (GEE) robustness model.")
@click.option("--no-glmm", is_flag=True, help="Skip the logistic GLMM of the choices.")
@_report_options
def choice_command(
    input_path: str,
    out_dir: str,
    wtp_log: bool,
    wtp_model: str,
    optimizers: tuple[str, ...],
    padjust: str,
    keep_incomplete: bool,
    keep_failed_quiz: bool,
    keep_failed_attention: bool,
    keep_duplicates: bool,
    min_duration_s: float | None,
    min_duration_frac: float,
    authenticity_max_score: float | None,
    authenticity_canary: bool,
    format_levels: str | None,
    baseline: str,
    blocks: str,
    wtp_slopes: bool,
    demographics_path: str | None,
    id_map_path: str | None,
    covariates: str | None,
    prereg_path: str | None,
    study_path: str | None,
    no_gee: bool,
    no_glmm: bool,
    no_figures: bool,
) -> None:
    """Analyse a choice study: the platform's long export or a tidy CSV (INPUT).

    Any number of formats and product-choice blocks; each option applies to the design at hand
    or is refused with the reason.
    """
    worker = _figure_worker(not no_figures)
    from analysis.exclusions import ChoiceRules
    from analysis.io import ExportFormatError, load_choice
    from analysis.report.pipeline import analyze_choice
    from analysis.stats.wtp import ConvergenceError

    rules = ChoiceRules(
        require_completed=not keep_incomplete,
        require_quiz=not keep_failed_quiz,
        require_attention=not keep_failed_attention,
        drop_duplicates=not keep_duplicates,
        min_duration_s=min_duration_s,
        min_duration_frac_median=min_duration_frac or None,
        authenticity_max_score=authenticity_max_score,
        authenticity_canary=authenticity_canary,
    )
    levels = None
    if format_levels is not None:
        levels = tuple(v.strip() for v in format_levels.split(","))
        if len(levels) < 2 or not all(levels):
            raise click.BadParameter(
                "give at least two levels: REFERENCE,TREATMENT[,LEVEL...]", param_hint="--levels"
            )
    if id_map_path and not demographics_path:
        raise click.UsageError("--id-map is only used with --demographics FILE")
    if optimizers and wtp_model not in ("crossed", "pair_fixed"):
        raise click.UsageError(
            "--optimizer sets the statsmodels optimizers of --wtp-model crossed or pair_fixed; "
            f"--wtp-model {wtp_model} fits lme4's criterion by its own derivative-free search"
        )
    prereg = _prereg(prereg_path, rules, levels, wtp_log) if prereg_path else None
    estimated_minutes = _estimated_minutes(study_path) if study_path else None
    join_summary = None
    try:
        data = load_choice(input_path)
        exported = data
        _check_options(data, levels, baseline, blocks, wtp_log, wtp_model, wtp_slopes)
        if prereg is not None:
            from analysis.plan.prereg import check_study

            check_study(data, prereg[0])  # its PreregError is a ValueError, reported below
        if demographics_path:
            from analysis.demographics import (
                join_demographics,
                load_id_map,
                load_prolific_demographics,
            )

            data, join_summary = join_demographics(
                data,
                load_prolific_demographics(demographics_path),
                id_map=load_id_map(id_map_path) if id_map_path else None,
            )
        covariate_list = [c.strip() for c in (covariates or "").split(",") if c.strip()]
        missing = [c for c in covariate_list if c not in data.columns]
        if missing:
            raise click.BadParameter(
                f"{', '.join(missing)}: not a column of the export"
                + ("" if demographics_path else " (age, sex, country... come with --demographics)"),
                param_hint="--covariates",
            )
        results = analyze_choice(
            data,
            rules=rules,
            levels=levels,
            baseline=baseline or "summary",
            blocks=blocks or "separate",
            padjust=padjust,
            wtp_transform="log" if wtp_log else None,
            wtp_model=wtp_model,
            optimizers=optimizers or None,
            clustered=not no_gee,
            glmm=not no_glmm,
            wtp_slopes=wtp_slopes,
            covariates=covariate_list,
            on_stage=_stage_figures(worker),
            estimated_minutes=estimated_minutes,
        )
        if prereg is not None:
            from analysis.plan.looks import preregistered_tables

            record, frozen, console, edited = prereg
            tables, meta = preregistered_tables(exported, frozen)
            results.tables.update(tables)
            results.meta.update(meta)
            results.meta["preregistration"] = {
                "document": Path(prereg_path).name,  # type: ignore[arg-type]
                "prereg_sha256": record["prereg_sha256"],
                "bundle_sha256": record["bundle_sha256"],
                "command": record["command"],
                "console": console,
                "text_edited": edited,
                "amendment": record["amendment"],
                "test": frozen.test,
                "levels": list(frozen.levels),
                "direction": frozen.direction,
                "alpha": frozen.alpha,
                "statement": "the primary analysis is the pre-registered one",
            }
    except (ExportFormatError, ConvergenceError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    results.meta["input"] = str(Path(input_path).resolve())
    if join_summary is not None:
        results.meta["demographics_join"] = {
            "file": str(Path(demographics_path).resolve()),  # type: ignore[arg-type]
            **join_summary,
        }
    title = _title(exported, input_path, study_path, prereg[0] if prereg else None)
    results.meta["study"] = title
    n_files = _write(results, out_dir, title, not no_figures, worker)
    from analysis.report.console import choice_lines

    for line in choice_lines(results, covariates=covariates, join_summary=join_summary):
        click.echo(line)
    click.echo(f"wrote {n_files} files to {out_dir} (open report.html)")


def _check_options(data, levels, baseline, blocks, wtp_log, wtp_model, wtp_slopes) -> None:
    """Refuse an option that does not apply to this export, with the reason."""
    from analysis.stats.choice import format_levels

    present = data["format"].dropna()
    analysed = present[present.isin(levels)] if levels else present
    try:
        names = format_levels(analysed.to_frame("format"), "format", levels)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--levels") from None
    if baseline is not None and baseline not in names[1:]:
        raise click.BadParameter(
            f"{baseline!r} is not one of the analysed formats after the reference "
            f"{list(names[1:])}: no format is compared with it",
            param_hint="--baseline",
        )
    n_blocks = data["block"].nunique() if "block" in data.columns else 0
    if blocks is not None and n_blocks < 2:
        raise click.BadParameter(
            f"the export has {'one product-choice block' if n_blocks else 'no block column'}; "
            "separate and pooled are the same analysis",
            param_hint="--blocks",
        )
    if not data["wtp_premium_pct"].notna().any():
        given = _given(
            {"--wtp-log": wtp_log, "--wtp-model": wtp_model != "auto", "--wtp-slopes": wtp_slopes}
        )
        if given:
            raise click.UsageError(
                f"{', '.join(given)}: the export has no WTP answers (wtp_premium_pct is empty)"
            )


def _title(data, input_path: str, study_path: str | None, record: dict | None) -> str:
    """The report's title: the study's title and slug (from --study, the pre-registration or
    the export's study_slug), else the input file's name."""
    import yaml

    title = slug = None
    if study_path:
        raw = yaml.safe_load(Path(study_path).read_text(encoding="utf-8"))
        title, slug = raw.get("title"), raw.get("slug")
    elif record is not None:
        title, slug = record["study"].get("title"), record["study"].get("slug")
    elif "study_slug" in data.columns and data["study_slug"].nunique() == 1:
        slug = str(data["study_slug"].iloc[0])
    if title and slug:
        return f"{title} ({slug})"
    if title or slug:
        return f"Choice study: {title or slug}"
    return f"Choice study: {Path(input_path).name}"


def _prereg(path: str, rules, levels, wtp_log: bool):
    """The frozen record and plan of ``--prereg``, what the console's record says of it and
    whether its text was edited; refuse a run whose primary analysis differs, or a document
    the console did not record."""
    from analysis.cli import CONSOLE_RECORD
    from analysis.plan.prereg import (
        PreregError,
        check_console,
        check_run,
        check_text,
        read_prereg,
    )
    from analysis.plan.spec import PlanError

    lookup = click.get_current_context().meta.get(CONSOLE_RECORD)
    try:
        record = read_prereg(path)
        edited = check_text(path, record)
        plan = check_run(record, Path(path).name, levels=levels, exclusions=rules, log=wtp_log)
        slug = record["study"]["slug"]
        if lookup is None:
            console = (
                "not compared with the console's record: run through the `framelab` command, "
                "which reads the study's database"
            )
        else:
            try:
                console = check_console(record, lookup(slug))
            except LookupError as exc:
                console = f"not compared with the console's record of {slug}: {exc}"
    except (PreregError, PlanError) as exc:
        raise click.ClickException(str(exc)) from None
    return record, plan, console, edited


def _estimated_minutes(path: str) -> float:
    """The study YAML's ``estimated_minutes``, or a clear refusal naming the file."""
    import math

    import yaml

    name = Path(path).name
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise click.BadParameter(f"cannot read {name}: {exc}", param_hint="--study") from None
    value = raw.get("estimated_minutes") if isinstance(raw, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        value = None
    if value is None or value <= 0:
        raise click.BadParameter(
            f"{name} gives no estimated_minutes (a positive number of minutes)",
            param_hint="--study",
        )
    return float(value)


@analyze.command("annotations", cls=_greedy("--mturk", "--predictions"))
@click.option(
    "--export",
    "export_path",
    type=click.Path(exists=True, dir_okay=False),
    help="The platform's annotation long export.",
)
@click.option(
    "--mturk",
    "mturk_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="MTurk batch-results CSV(s): one or more after one flag (a shell glob), repeatable.",
)
@click.option(
    "--item-col", default="Input.item_id", show_default=True, help="MTurk item ID column."
)
@click.option(
    "--label-col",
    default="Answer.sentiment.label",
    show_default=True,
    help="MTurk label column (case-insensitive values).",
)
@click.option(
    "--base-col",
    default="Input.base_sentiment",
    show_default=True,
    help="MTurk base-sentiment column.",
)
@click.option("--worker-col", default="WorkerId", show_default=True, help="MTurk worker column.")
@click.option(
    "--predictions",
    "prediction_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Model judgments: CSV item_id,model,label or judge-framing JSONL; one or more after "
    "one flag (a shell glob), repeatable.",
)
@click.option(
    "--label-map",
    "label_maps",
    multiple=True,
    metavar="RAW=LABEL[,RAW=LABEL]",
    help="Read a model's label RAW as LABEL (positive/negative/neutral/other), e.g. "
    "mixed=other; repeatable. Labels neither standard nor mapped count as no shift and are "
    "listed in the report.",
)
@click.option(
    "--model-shift",
    "model_shift",
    multiple=True,
    default=("opposite",),
    type=click.Choice(["opposite", "neutral", "other"]),
    show_default=True,
    help="What counts as a model shift (repeatable).",
)
@click.option(
    "--human-shift",
    "human_shift",
    multiple=True,
    default=("opposite",),
    type=click.Choice(["opposite", "neutral"]),
    show_default=True,
    help="What counts as a human shift (repeatable): votes for the opposite sentiment, as "
    "WildFrame counts them; add neutral to count any departure from the base sentiment.",
)
@click.option(
    "--min-gold-accuracy",
    type=float,
    default=None,
    help="Exclude annotators below this share of correct gold answers.",
)
@_authenticity_options
@_report_options
def annotations_command(
    export_path: str | None,
    mturk_paths: tuple[str, ...],
    item_col: str,
    label_col: str,
    base_col: str,
    worker_col: str,
    prediction_paths: tuple[str, ...],
    label_maps: tuple[str, ...],
    model_shift: tuple[str, ...],
    human_shift: tuple[str, ...],
    min_gold_accuracy: float | None,
    authenticity_max_score: float | None,
    authenticity_canary: bool,
    out_dir: str,
    no_figures: bool,
) -> None:
    """Analyse a sentiment-annotation study (platform export or MTurk batches) and models."""
    worker = _figure_worker(not no_figures)
    from analysis.exclusions import AnnotationRules
    from analysis.external import load_mturk, load_predictions, parse_label_map
    from analysis.io import ExportFormatError, load_annotations
    from analysis.report.pipeline import analyze_annotations

    try:
        label_map = parse_label_map(label_maps)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--label-map") from exc

    if bool(export_path) == bool(mturk_paths):
        raise click.UsageError("give either --export FILE or one or more --mturk FILE")
    given = _given(
        {
            "--authenticity-max-score": authenticity_max_score is not None,
            "--authenticity-canary": authenticity_canary,
        }
    )
    if mturk_paths and given:
        raise click.UsageError(
            f"{' and '.join(given)} read the platform export's authenticity columns; MTurk "
            "batch results carry no auth_ columns (use --export)"
        )
    try:
        if export_path:
            labels = load_annotations(export_path)
            source = Path(export_path).name
        else:
            labels = load_mturk(
                list(mturk_paths),
                item_col=item_col,
                label_col=label_col,
                base_col=base_col,
                worker_col=worker_col,
            )
            source = ", ".join(Path(p).name for p in mturk_paths)
        predictions = (
            load_predictions(list(prediction_paths), label_map=label_map)
            if prediction_paths
            else None
        )
        results = analyze_annotations(
            labels,
            predictions,
            rules=AnnotationRules(
                min_gold_accuracy=min_gold_accuracy,
                authenticity_max_score=authenticity_max_score,
                authenticity_canary=authenticity_canary,
            ),
            model_shift_labels=model_shift,
            human_shift_labels=human_shift,
        )
    except (ExportFormatError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    results.meta["input"] = source
    n_files = _write(results, out_dir, f"Annotation study: {source}", not no_figures, worker)
    kappa = results.tables["agreement"].iloc[0]
    click.echo(
        f"{results.meta['n_items']} items, {results.meta['n_annotators']} annotators; "
        f"Fleiss' kappa = {kappa['estimate']:.3f}"
    )
    if "human_model" in results.tables:
        for _, row in results.tables["human_model"].iterrows():
            click.echo(f"  {row['model']}: r = {row['estimate']:.3f} (p = {row['p_val']:.3g})")
    if results.meta.get("unmapped_model_labels"):
        click.echo(
            "  model labels neither standard nor in --label-map (counted as no shift): "
            + ", ".join(repr(v) for v in results.meta["unmapped_model_labels"])
        )
    click.echo(f"wrote {n_files} files to {out_dir} (open report.html)")


@analyze.command("ratings")
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--metrics",
    "metrics_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Automatic metrics per summary: summary_id plus numeric columns (CSV/Parquet/JSONL).",
)
@click.option(
    "--dimensions",
    default=None,
    help="Comma-separated column order of the rating table [default: as in the export].",
)
@click.option("--include-surplus", is_flag=True, help="Keep ratings of expired reservations.")
@_authenticity_options
@_report_options
def ratings_command(
    input_path: str,
    metrics_path: str | None,
    dimensions: str | None,
    include_surplus: bool,
    authenticity_max_score: float | None,
    authenticity_canary: bool,
    out_dir: str,
    no_figures: bool,
) -> None:
    """Analyse a summary-rating study: the platform's rating long export (INPUT)."""
    worker = _figure_worker(not no_figures)
    from analysis.exclusions import RaterRules
    from analysis.io import ExportFormatError, load_metric_table, load_ratings
    from analysis.report.evaluation import analyze_ratings

    rules = RaterRules(authenticity_max_score, authenticity_canary)
    try:
        ratings = load_ratings(input_path, include_surplus=include_surplus)
        metrics = load_metric_table(metrics_path) if metrics_path else None
        dims = [d.strip() for d in dimensions.split(",") if d.strip()] if dimensions else None
        results = analyze_ratings(ratings, metrics, rules=rules, dimensions=dims)
    except (ExportFormatError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    results.meta["input"] = str(Path(input_path).resolve())
    n_files = _write(
        results, out_dir, f"Rating study: {Path(input_path).name}", not no_figures, worker
    )
    m = results.meta
    click.echo(
        f"{m['n_ratings']} ratings, {m['n_raters']} raters, {m['n_summaries']} summaries, "
        f"systems: {', '.join(m['systems'])}"
    )
    _echo_rater_rules(results)
    for _, row in results.tables["alpha"].iterrows():
        click.echo(f"  {row['dimension']}: Krippendorff's alpha (ordinal) = {row['estimate']:.3f}")
    click.echo(f"wrote {n_files} files to {out_dir} (open report.html)")


@analyze.command("preferences", cls=_greedy("--judge-records"))
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--pairs",
    "pairs_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="The study's pairs export (framelab export SLUG --format pairs): the two summaries.",
)
@click.option(
    "--judge-records",
    "judge_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="judge-pair generation records (JSONL; one or more after one flag, repeatable; put "
    "INPUT before them); item_id = pair_id.",
)
@click.option(
    "--reference",
    default="human",
    show_default=True,
    help="System name of the human (reference) summary.",
)
@click.option("--bins", type=int, default=5, show_default=True, help="Equal-width similarity bins.")
@click.option("--include-surplus", is_flag=True, help="Keep verdicts of expired reservations.")
@_authenticity_options
@_report_options
def preferences_command(
    input_path: str,
    pairs_path: str,
    judge_paths: tuple[str, ...],
    reference: str,
    bins: int,
    include_surplus: bool,
    authenticity_max_score: float | None,
    authenticity_canary: bool,
    out_dir: str,
    no_figures: bool,
) -> None:
    """Analyse a pairwise-preference study (INPUT: its long export) beside LLM judges."""
    worker = _figure_worker(not no_figures)
    from analysis.exclusions import RaterRules
    from analysis.io import ExportFormatError, load_pairs, load_preferences
    from analysis.metrics.records import read_records
    from analysis.report.evaluation import analyze_preferences

    rules = RaterRules(authenticity_max_score, authenticity_canary)
    try:
        verdicts = load_preferences(input_path, include_surplus=include_surplus)
        pairs = load_pairs(pairs_path)
        records = read_records(list(judge_paths)) if judge_paths else None
        results = analyze_preferences(
            verdicts, pairs, records, rules=rules, reference=reference, bins=bins
        )
    except (ExportFormatError, ValueError, KeyError) as exc:
        raise click.ClickException(str(exc)) from exc
    results.meta["input"] = str(Path(input_path).resolve())
    n_files = _write(
        results, out_dir, f"Preference study: {Path(input_path).name}", not no_figures, worker
    )
    m = results.meta
    click.echo(
        f"{m['n_verdicts']} verdicts, {m['n_raters']} raters, {m['n_pairs']} pairs; "
        f"{m['share_preferring_reference']:.1%} prefer {m['reference']!r}"
    )
    _echo_rater_rules(results)
    shares = results.tables["outcome_shares"]
    for judge, group in shares.groupby("judge", sort=True):
        totals = group.groupby("outcome")["n"].sum()
        total = int(totals.sum())
        parts = ", ".join(f"{k} {v / total:.0%}" for k, v in totals.items() if v and total)
        click.echo(f"  {judge}: {parts}")
    click.echo(f"wrote {n_files} files to {out_dir} (open report.html)")
