"""Commands of the web platform, available as ``framelab …`` and ``flask --app webapp …``.

``framelab`` finds them through :mod:`webapp.commands`, which lists them without importing Flask.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import click
from flask import Flask, current_app
from flask.cli import with_appcontext


@click.group()
def study() -> None:
    """Load, list and open or close studies."""


@study.command("load")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace task blocks even if participants exist.")
@click.option(
    "--owner",
    default=None,
    help="Researcher who owns the study in the console (unowned studies: admins only).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Only validate: report every error and note of each file; the database is not touched.",
)
@with_appcontext
def study_load(files: tuple[Path, ...], force: bool, owner: str | None, check: bool) -> None:
    """Load or update studies from YAML files (they are live at once; the console makes drafts).

    A study file names only files of its own folder (no absolute paths, ``..`` or symbolic
    links; regular files within the size limits of :mod:`webapp.bundle`). With ``--check``
    each file is validated as loading would (its pairs file, images and ``analysis:`` block
    included) and nothing is stored.
    """
    from webapp.extensions import db
    from webapp.services import audit
    from webapp.services.accounts import get_researcher
    from webapp.services.studies import StudyLoadError, load_study
    from webapp.studydef import folder_bundle, load_bundle
    from webapp.validation import StudyDefinitionError, error_lines

    if check and (force or owner):
        raise click.UsageError("--check stores nothing: --force and --owner do not apply to it")
    owner_row = get_researcher(owner) if owner else None
    if owner and owner_row is None:
        raise click.ClickException(f"no researcher {owner!r}; create it with create-researcher")
    failed = False
    for path in files:
        notes: list[str] = []
        try:
            if check:
                definition = load_bundle(folder_bundle(path), notes)
            else:
                result = load_study(path, force=force)
                notes = list(result.notes)
        except StudyDefinitionError as exc:
            for line in error_lines(exc):  # each error of the file on its own line
                click.echo(f"error: {line}", err=True)
            failed = True
            continue
        except StudyLoadError as exc:
            click.echo(f"error: {exc}", err=True)
            failed = True
            continue
        for note in notes:
            click.echo(f"note: {note}", err=True)
        if check:
            click.echo(f"valid: {definition.slug} from {path} (not stored)")
            continue
        s = result.study
        if owner_row is not None:
            s.owner_id = owner_row.id
        audit.record("cli", "study.load", study=s, detail={"source": str(path), "owner": owner})
        db.session.commit()
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
        click.echo(
            f"{s.slug}\tv{s.version}\t{s.title}\t{summary or 'no participants'}\t{s.state.value}"
        )


@study.command("state")
@click.argument("slug")
@click.argument("target", type=click.Choice(["live", "paused", "closed"]))
@with_appcontext
def study_state(slug: str, target: str) -> None:
    """Move a study to live, paused or closed (as the console's buttons do; audited)."""
    from webapp.models import StudyState
    from webapp.services.researchers import ConsoleError, change_state
    from webapp.services.studies import get_study

    s = get_study(slug)
    if s is None:
        raise click.ClickException(f"no study {slug!r}; load it with `framelab study load`")
    before = s.state.value
    try:
        change_state(s, StudyState(target), "cli")
    except ConsoleError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{slug}: {before} -> {target}")


@study.command("timeouts")
@click.argument("slugs", nargs=-1)
@with_appcontext
def study_timeouts(slugs: tuple[str, ...]) -> None:
    """Mark participants idle beyond their study's time limit as timed out (audited; for cron)."""
    from webapp.extensions import db
    from webapp.models import Study, utcnow
    from webapp.services import timeouts
    from webapp.services.studies import get_study

    if slugs:
        studies = [get_study(s) for s in slugs]
    else:
        studies = [get_study(slug) for slug in db.session.scalars(db.select(Study.slug))]
    for s in studies:
        if s is None:
            raise click.ClickException("no such study; see `framelab study list`")
        codes = timeouts.sweep(s, utcnow(), actor="cli")
        click.echo(f"{s.slug}: {len(codes)} timed out")


@click.command()
@click.argument("slug")
@click.option(
    "--format",
    "fmt",
    default="long",
    show_default=True,
    # Task types add formats (items, pairs, ...): the export refuses one the study lacks.
    help="long, wide, page-times, codebook, or a task type's table: items, pairs (docs/export.md).",
)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="FILE.csv, or FILE.parquet for Parquet.",
)
@click.option("--include-platform-ids", is_flag=True, help="Add raw Prolific/MTurk IDs (long).")
@click.option(
    "--include-test",
    "--include-preview",
    "include_test",
    is_flag=True,
    help="Keep test participants (bots, researcher previews), with an is_test column.",
)
@click.option("--include-excluded", is_flag=True, help="Keep participants a researcher excluded.")
@with_appcontext
def export(
    slug: str,
    fmt: str,
    out: Path,
    include_platform_ids: bool,
    include_test: bool,
    include_excluded: bool,
) -> None:
    """Export a study's responses (see docs/export.md)."""
    from webapp.services import audit
    from webapp.services.export import ParquetUnavailable, export_table
    from webapp.services.studies import get_study

    s = get_study(slug)
    if s is None:
        raise click.ClickException(f"no study {slug!r}; load it with `framelab study load`")
    options = {
        "include_platform_ids": include_platform_ids,
        "include_test": include_test,
        "include_excluded": include_excluded,
    }
    try:
        n = export_table(s, fmt, out, **options)
    except (ValueError, ParquetUnavailable) as exc:
        raise click.ClickException(str(exc)) from None
    audit.record("cli", "export", study=s, detail={"format": fmt, "out": out.name, **options})
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
    "--p-target",
    "p_target_formats",
    multiple=True,
    metavar="FORMAT=P",
    help="Probability of choosing the target in any format, e.g. mitigated:self-debias=0.6 "
    "(repeat per format; overrides the two options above for its format).",
)
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
@click.option(
    "--p-shift",
    type=click.FloatRange(0, 1),
    default=0.3,
    show_default=True,
    help="Sentiment studies: chance that a bot labels an item against its base sentiment.",
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
    p_target_formats: tuple[str, ...],
    wtp_mean_pct: float,
    wtp_target_shift_pct: float,
    wtp_sd_pct: float,
    fail_quiz: float,
    abandon: float,
    rating_mean: float,
    p_choose_a: float,
    p_position: float,
    p_shift: float,
    seed: int | None,
) -> None:
    """Run simulated participants through the real pages (in-process or over HTTP).

    Bots are always test participants (IDs ``test-…``): they are left out of counts, bonuses,
    payment files and exports unless asked for; `framelab clear-test-data` removes them. Over
    HTTP the server must share this configuration's SECRET_KEY, which signs their entry.
    In-process the bots spend their scripted think time on a simulated clock that starts now,
    so the durations recorded are the script's (repeatable with --seed and, for the server's
    assignment, FRAMELAB_ASSIGNMENT_SEED), not this machine's speed.
    """
    from webapp.bots import BotBehaviour, parse_format_effects, run_bots
    from webapp.clock import SimulatedClock
    from webapp.definition_cache import study_definition
    from webapp.extensions import db
    from webapp.services.studies import get_study

    try:
        effects = parse_format_effects(p_target_formats)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--p-target") from None
    s = get_study(slug)
    if s is None:
        raise click.ClickException(f"no study {slug!r}; load it with `framelab study load`")
    definition = study_definition(s)
    # End this command's transaction: on SQLite it holds the write lock the bots need.
    db.session.remove()
    behaviour = BotBehaviour(
        platform=platform,
        p_target={"original": p_target_original, "summary": p_target_summary, **effects},
        wtp_mean_pct=wtp_mean_pct,
        wtp_target_shift_pct=wtp_target_shift_pct,
        wtp_sd_pct=wtp_sd_pct,
        rating_mean=rating_mean,
        p_choose_a=p_choose_a,
        p_position=p_position,
        p_shift=p_shift,
    )
    if url is None and current_app.config["CLOCK"] is None:
        current_app.config["CLOCK"] = SimulatedClock()
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
        test_secret=current_app.config["SECRET_KEY"],
    )
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items()))
    click.echo(f"ran {n} bots on {slug} ({'HTTP ' + url if url else 'in-process'}): {counts}")
    if summary.errors:
        for err in summary.errors[:10]:
            click.echo(f"error: {err}", err=True)
        raise SystemExit(1)


@click.command("clear-test-data")
@click.argument("slug")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@with_appcontext
def clear_test_data(slug: str, yes: bool) -> None:
    """Delete a study's test participants (bots, previews) and all their rows; audited.

    Real participants and their rows are never touched.
    """
    from webapp.models import utcnow
    from webapp.services import testdata
    from webapp.services.studies import get_study

    s = get_study(slug)
    if s is None:
        raise click.ClickException(f"no study {slug!r}; see `framelab study list`")
    n = testdata.count_test_participants(s)
    if n["participants"] == 0:
        click.echo(f"{slug} has no test participants; nothing to clear")
        return
    if not yes:
        click.confirm(
            f"Delete {n['participants']} test participant(s) of {slug} "
            f"({n['previews']} preview(s)) and all their answers?",
            abort=True,
        )
    try:
        counts = testdata.clear_test_data(s, actor="cli", now=utcnow())
    except testdata.ClearRefused as exc:
        raise click.ClickException(str(exc)) from None
    rows = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if v)
    click.echo(f"cleared the test data of {slug}: {rows}")


@click.command("create-researcher")
@click.argument("username")
@click.password_option()
@click.option("--admin", is_flag=True, help="Admins see and manage every study.")
@with_appcontext
def create_researcher(username: str, password: str, admin: bool) -> None:
    """Create a researcher account (or reset its password)."""
    from webapp.services import audit
    from webapp.services.researchers import set_researcher

    try:
        set_researcher(username, password, is_admin=admin or None)
        audit.record("cli", "researcher.set", detail={"username": username, "admin": admin})
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
        # An admin, so the demo sees the studies loaded from the command line (unowned).
        set_researcher("demo", password, is_admin=True)
        click.echo(f"researcher: {base}/researcher/login  (user demo, password {password})")
    for s in db.session.scalars(db.select(Study).order_by(Study.slug)):
        click.echo(f"participant: {base}/s/{s.slug}?participant=demo-{secrets.token_hex(4)}")
    db.session.remove()  # release the connection (and SQLite's lock) before serving
    if os.environ.get("FRAMELAB_SERVE_DRY_RUN") == "1":  # lets tests check the output
        return
    app.run(host=host, port=port, threaded=True, use_reloader=False)


@click.command()
@click.argument("slug")
@click.option("--platform", type=click.Choice(["prolific", "mturk"]), required=True)
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--force",
    is_flag=True,
    help="Write bonuses already written to a file again (never those the API pays or paid).",
)
@click.option(
    "--file-not-used",
    "not_used",
    multiple=True,
    metavar="CODE",
    help=(
        "The payment file with this participant's bonus was never uploaded: make it payable "
        "again (repeat for several, or 'all'); audited. Writes no file."
    ),
)
@with_appcontext
def bonus(
    slug: str, platform: str, out: Path | None, force: bool, not_used: tuple[str, ...]
) -> None:
    """Issue bonuses by the study's rule and write Prolific's or MTurk's payment file.

    The file carries every bonus that is due and not yet sent; the ledger records each as sent
    by file, and `framelab recruit SLUG bonus` never pays those. If you did not upload the
    file, say so with --file-not-used.
    """
    from webapp.definition_cache import study_definition
    from webapp.models import Platform, utcnow
    from webapp.recruit.results import cents
    from webapp.services.payments import (
        PaymentError,
        file_not_used,
        issue_bonuses,
        write_bonus_file,
    )
    from webapp.services.studies import get_study

    s = get_study(slug)
    if s is None:
        raise click.ClickException(f"no study {slug!r}; load it with `framelab study load`")
    if not_used:
        if out is not None or force:
            raise click.ClickException(
                "--file-not-used writes no file: leave out --out and --force"
            )
        try:
            done = file_not_used(s, Platform(platform), not_used, actor="cli", now=utcnow())
        except PaymentError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(
            f"payable again: {len(done)} bonus(es) ({' '.join(done)}); the next `framelab "
            f"recruit {slug} bonus` (or a new file) pays them, after checking {platform}'s own "
            "record of bonuses"
        )
        return
    if out is None:
        raise click.ClickException("give --out FILE (or --file-not-used CODE)")
    # The ledger records the bonuses as sent by file when they are issued: a file that cannot be
    # written must be refused before that, not after.
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.ClickException(f"cannot write {out}: {exc.strerror}; nothing issued") from None
    if not os.access(out.parent, os.W_OK):
        raise click.ClickException(f"cannot write into {out.parent}; nothing issued")
    try:
        issue = issue_bonuses(
            s, Platform(platform), issued_by="cli", now=utcnow(), to_file=True, force=force
        )
    except PaymentError as exc:
        raise click.ClickException(f"{exc}; use --force to write the file again") from None
    try:
        with out.open("w", newline="", encoding="utf-8") as fh:
            n = write_bonus_file(issue.lines, Platform(platform), fh)
    except OSError as exc:
        # The rows are issued and committed; nothing was paid. --force writes the same rows again.
        raise click.ClickException(
            f"cannot write {out}: {exc.strerror}; the ledger holds {len(issue.lines)} bonus(es) "
            "as sent by file and nothing was paid: write the file again with --force"
        ) from None
    again = len(issue.lines) - issue.newly_issued - issue.from_ledger
    currency = study_definition(s).payment.currency
    click.echo(
        f"wrote {n} bonuses ({cents(sum(line.amount_cents for line in issue.lines), currency)}) "
        f"to {out}: "
        f"{issue.newly_issued} new, {again} written again, {issue.from_ledger} issued earlier "
        f"and not yet sent, {issue.skipped_issued - issue.from_ledger - again} already issued "
        f"and skipped, {issue.zero} with no bonus"
    )
    click.echo(
        "the ledger records them as sent by file: upload the file to pay them; the API never "
        "pays them (if you do not upload it: --file-not-used CODE)"
    )
    if issue.reconciled:
        click.echo(f"paid only participants the last {platform} reconciliation file lists")
    for code, reason in issue.excluded:
        click.echo(f"left out: {code}: {reason}")
    for code, why in issue.not_written:
        click.echo(f"not written: {code}: {why}")


@click.command()
@click.argument("slug")
@click.option("--platform", type=click.Choice(["prolific", "mturk"]), required=True)
@click.argument(
    "file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@with_appcontext
def reconcile(slug: str, platform: str, file: Path | None) -> None:
    """Import a Prolific submissions or MTurk assignments CSV; update statuses, list mismatches.

    Without FILE, the statuses come from the recruiter's API (the study's recruiter: block).
    """
    from webapp.models import Platform, utcnow
    from webapp.services import reconcile as service
    from webapp.services.studies import get_study

    s = get_study(slug)
    if s is None:
        raise click.ClickException(f"no study {slug!r}; load it with `framelab study load`")
    if file is None:
        from webapp.recruit import get_recruiter
        from webapp.recruit.base import RecruitError

        try:
            r = get_recruiter(s, actor="cli")
            if r.platform.value != platform:
                raise RecruitError(f"the study's recruiter is {r.label}, not {platform}")
            for line in r.status()[0].lines:
                click.echo(line)
        except RecruitError as exc:
            raise click.ClickException(f"{exc}; or give the platform's export FILE") from None
        return
    try:
        with file.open("rb") as fh:
            statuses = service.read_export(Platform(platform), fh.read(service.MAX_BYTES + 1))
    except service.ReconcileError as exc:
        raise click.ClickException(str(exc)) from None
    report = service.reconcile(s, Platform(platform), statuses, "cli", now=utcnow())
    changes = ", ".join(f"{k} {n}" for k, n in report.status_changes.items()) or "none"
    click.echo(f"{report.rows} rows, {report.matched} matched; status changes: {changes}")
    for who, note in report.mismatches:
        click.echo(f"mismatch: {who}: {note}")


@click.group()
def mturk() -> None:
    """Run a study on MTurk: an ExternalQuestion HIT, or a native batch of items."""


def _study_or_fail(slug: str):  # noqa: ANN202  (a Study; the models import stays lazy)
    from webapp.services.studies import get_study

    s = get_study(slug)
    if s is None:
        raise click.ClickException(f"no study {slug!r}; load it with `framelab study load`")
    return s


@mturk.command("external-question")
@click.argument("slug")
@click.option("--url", "base_url", required=True, help="Public https:// address of the platform.")
@click.option("--frame-height", type=click.IntRange(min=0), default=0, show_default=True)
@with_appcontext
def mturk_external_question(slug: str, base_url: str, frame_height: int) -> None:
    """Print the ExternalQuestion XML of a HIT that runs the study here."""
    from webapp.services.mturk import MTurkError, external_question_xml

    try:
        click.echo(external_question_xml(_study_or_fail(slug), base_url, frame_height), nl=False)
    except MTurkError as exc:
        raise click.ClickException(str(exc)) from None


@mturk.command("batch")
@click.argument("slug")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path))
@with_appcontext
def mturk_batch(slug: str, out: Path) -> None:
    """Write the crowd-html layout and input CSV of a native MTurk batch (one item per HIT)."""
    from webapp.services.mturk import MTurkError, write_batch

    try:
        layout, input_csv, n = write_batch(_study_or_fail(slug), out)
    except MTurkError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {layout} and {input_csv} ({n} items, one per HIT)")


@mturk.command("assignments")
@click.argument("slug")
@with_appcontext
def mturk_assignments(slug: str) -> None:
    """Print every MTurk assignment the study's workers arrived with, as CSV.

    ``finished_with`` is 1 for the assignment each worker completed the study through (the one
    submitted and paid); other rows are earlier HITs or assignments brought by someone else
    with the worker's ID.
    """
    import csv
    import sys

    from webapp.services.assignments import assignment_history

    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(
        [
            "participant_id",
            "WorkerId",
            "AssignmentId",
            "HITId",
            "submit_host",
            "first_seen_at",
            "last_seen_at",
            "finished_with",
        ]
    )
    for r in assignment_history(_study_or_fail(slug)):
        writer.writerow(
            [
                r.participant_code,
                r.worker_id,
                r.assignment_id,
                r.hit_id,
                r.submit_host,
                r.first_seen_at.isoformat(),
                r.last_seen_at.isoformat(),
                int(r.finished_with),
            ]
        )


@click.command("import-mturk")
@click.argument("slug")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--item-col", default="Input.item_id", show_default=True)
@click.option("--label-col", default="Answer.sentiment.label", show_default=True)
@click.option("--base-col", default="Input.base_sentiment", show_default=True)
@with_appcontext
def import_mturk(
    slug: str, files: tuple[Path, ...], item_col: str, label_col: str, base_col: str
) -> None:
    """Import MTurk "Batch results" CSVs (each file whole, or refused with reasons per row)."""
    from webapp.models import utcnow
    from webapp.services.mturk import MTurkError, import_batch_results

    try:
        reports = import_batch_results(
            _study_or_fail(slug),
            list(files),
            now=utcnow(),
            item_col=item_col,
            label_col=label_col,
            base_col=base_col,
        )
    except MTurkError as exc:
        raise click.ClickException(str(exc)) from None
    for r in reports:
        if r.refused:
            click.echo(f"refused {r.path.name}: nothing imported; fix these rows:", err=True)
            for problem in r.problems:
                click.echo(f"  {problem}", err=True)
            continue
        click.echo(
            f"imported {r.imported} labels from {r.path.name} ({r.counted} counted, "
            f"{r.surplus} surplus, {len(r.skipped)} rows skipped)"
        )
        for note in r.skipped:
            click.echo(f"  skipped {note}")
    if any(r.refused for r in reports):
        raise SystemExit(1)


def register_commands(app: Flask) -> None:
    """Make the same commands available as ``flask --app webapp …``."""
    for command in (
        study,
        export,
        bots,
        clear_test_data,
        serve,
        create_researcher,
        bonus,
        reconcile,
        mturk,
        import_mturk,
    ):
        app.cli.add_command(command)
    from webapp.recruit.cli import recruit

    app.cli.add_command(recruit)
