"""Commands of the web platform, available as ``framelab …`` and ``flask --app webapp …``.

``COMMANDS`` maps a command name to ``"module:attribute"`` so ``framelab`` can import lazily.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

COMMANDS: dict[str, str] = {
    "study": "webapp.cli:study",
    "export": "webapp.cli:export",
    "bots": "webapp.cli:bots",
    "serve": "webapp.cli:serve",
    "create-researcher": "webapp.cli:create_researcher",
}


@click.group()
def study() -> None:
    """Load and list study definitions."""


@study.command("load")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace task blocks even if participants exist.")
@with_appcontext
def study_load(files: tuple[Path, ...], force: bool) -> None:
    """Load or update studies from YAML files."""
    from webapp.services.studies import StudyLoadError, load_study
    from webapp.studydef import StudyDefinitionError

    failed = False
    for path in files:
        try:
            result = load_study(path, force=force)
        except (StudyDefinitionError, StudyLoadError) as exc:
            click.echo(f"error: {exc}", err=True)
            failed = True
            continue
        s = result.study
        click.echo(f"{result.action}: {s.slug} (version {s.version}) from {path}")
    if failed:
        raise SystemExit(1)


@study.command("list")
@with_appcontext
def study_list() -> None:
    """List loaded studies with participant counts."""
    from webapp.extensions import db
    from webapp.models import Study
    from webapp.services.studies import status_counts

    studies = db.session.scalars(db.select(Study).order_by(Study.slug)).all()
    if not studies:
        click.echo("no studies loaded (framelab study load stimuli/studies/*.yaml)")
    for s in studies:
        counts = status_counts(s)
        summary = ", ".join(f"{k} {v['total']}" for k, v in counts.items() if v["total"])
        click.echo(f"{s.slug}\tv{s.version}\t{s.title}\t{summary or 'no participants'}")


@click.command()
@click.argument("slug")
@click.option("--format", "fmt", type=click.Choice(["long"]), default="long", show_default=True)
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--include-platform-ids", is_flag=True, help="Add raw Prolific/MTurk IDs.")
@click.option("--include-preview", is_flag=True, help="Keep researcher preview sessions.")
@with_appcontext
def export(
    slug: str, fmt: str, out: Path, include_platform_ids: bool, include_preview: bool
) -> None:
    """Export a study's responses (see docs/export.md)."""
    from webapp.services.export import export_long
    from webapp.services.studies import get_study

    s = get_study(slug)
    if s is None:
        raise click.ClickException(f"no study {slug!r}; load it with `framelab study load`")
    n = export_long(
        s, out, include_platform_ids=include_platform_ids, include_preview=include_preview
    )
    click.echo(f"wrote {n} rows to {out}")


@click.command()
@click.argument("slug")
@click.option("--n", "n", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--url", default=None, help="Run against a server (e.g. http://127.0.0.1:5000).")
@click.option("--platform", type=click.Choice(["prolific", "mturk", "link"]), default="prolific")
@click.option("--p-target-original", type=click.FloatRange(0, 1), default=0.5, show_default=True)
@click.option("--p-target-summary", type=click.FloatRange(0, 1), default=0.5, show_default=True)
@click.option(
    "--wtp-mean-pct",
    type=float,
    default=10.0,
    show_default=True,
    help="Mean premium, percent of the other price, when the target is not chosen.",
)
@click.option(
    "--wtp-target-shift-pct",
    type=float,
    default=0.0,
    show_default=True,
    help="Added to the mean premium when the target is chosen.",
)
@click.option("--wtp-sd-pct", type=click.FloatRange(min=0), default=5.0, show_default=True)
@click.option(
    "--fail-quiz",
    type=click.FloatRange(0, 1),
    default=0.0,
    help="Share of bots that fail the quiz.",
)
@click.option(
    "--abandon", type=click.FloatRange(0, 1), default=0.0, help="Share of bots that stop midway."
)
@click.option(
    "--rating-mean",
    type=float,
    default=2.5,
    show_default=True,
    help="summary_rating: mean of the bots' ratings (sd 1, rounded into the scale).",
)
@click.option(
    "--p-choose-a",
    type=click.FloatRange(0, 1),
    default=0.5,
    show_default=True,
    help="pairwise_preference: probability of choosing the set's summary a.",
)
@click.option(
    "--p-position",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="pairwise_preference: share of verdicts that just take the summary shown first.",
)
@click.option("--seed", type=int, default=None, help="Seed of the bots' own choices.")
@with_appcontext
def bots(
    slug: str,
    n: int,
    concurrency: int,
    url: str | None,
    platform: str,
    p_target_original: float,
    p_target_summary: float,
    wtp_mean_pct: float,
    wtp_target_shift_pct: float,
    wtp_sd_pct: float,
    fail_quiz: float,
    abandon: float,
    rating_mean: float,
    p_choose_a: float,
    p_position: float,
    seed: int | None,
) -> None:
    """Run simulated participants through the real pages (in-process or over HTTP)."""
    from webapp.bots import BotBehaviour, run_bots
    from webapp.extensions import db
    from webapp.services.studies import get_study

    s = get_study(slug)
    if s is None:
        raise click.ClickException(f"no study {slug!r}; load it with `framelab study load`")
    definition = s.definition
    # End this command's transaction: on SQLite it holds the write lock the bots need.
    db.session.remove()
    behaviour = BotBehaviour(
        platform=platform,
        p_target={"original": p_target_original, "summary": p_target_summary},
        wtp_mean_pct=wtp_mean_pct,
        wtp_target_shift_pct=wtp_target_shift_pct,
        wtp_sd_pct=wtp_sd_pct,
        rating_mean=rating_mean,
        p_choose_a=p_choose_a,
        p_position=p_position,
    )
    summary = run_bots(
        current_app._get_current_object() if url is None else None,
        definition,
        n=n,
        behaviour=behaviour,
        url=url,
        concurrency=concurrency,
        fail_quiz_share=fail_quiz,
        abandon_share=abandon,
        seed=seed,
    )
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items()))
    click.echo(f"ran {n} bots on {slug} ({'HTTP ' + url if url else 'in-process'}): {counts}")
    if summary.errors:
        for err in summary.errors[:10]:
            click.echo(f"error: {err}", err=True)
        raise SystemExit(1)


@click.command("create-researcher")
@click.argument("username")
@click.password_option()
@with_appcontext
def create_researcher(username: str, password: str) -> None:
    """Create a researcher account (or reset its password)."""
    from webapp.services.researchers import set_researcher

    try:
        set_researcher(username, password)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"researcher {username!r} can now log in at /researcher/login")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--port",
    type=int,
    envvar="PORT",
    default=5000,
    show_default=True,
    help="Port (the PORT environment variable overrides the default).",
)
@with_appcontext
def serve(host: str, port: int) -> None:
    """Run the development server and print a participant link and the researcher link."""
    from webapp.extensions import db
    from webapp.models import Study
    from webapp.services.researchers import set_researcher

    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    base = f"http://{'127.0.0.1' if host in {'0.0.0.0', '::'} else host}:{port}"  # noqa: S104
    if app.config["ENV_NAME"] != "production":
        password = secrets.token_urlsafe(12)
        set_researcher("demo", password)
        click.echo(f"researcher: {base}/researcher/login  (user demo, password {password})")
    for s in db.session.scalars(db.select(Study).order_by(Study.slug)):
        click.echo(f"participant: {base}/s/{s.slug}?participant=demo-{secrets.token_hex(4)}")
    db.session.remove()  # release the connection (and SQLite's lock) before serving
    if os.environ.get("FRAMELAB_SERVE_DRY_RUN") == "1":  # lets tests check the output
        return
    app.run(host=host, port=port, threaded=True, use_reloader=False)


def register_commands(app: Flask) -> None:
    """Make the same commands available as ``flask --app webapp …``."""
    for command in (study, export, bots, serve, create_researcher):
        app.cli.add_command(command)
