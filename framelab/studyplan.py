"""``framelab prereg`` and ``framelab looks``: research-package numbers recorded for the console.

These commands are the one place that uses both halves: they read a loaded study and its
export through the web app, compute with the research package (which the web app never imports)
and record the result in the database, where the console shows it
(:mod:`webapp.services.looks`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click
from flask.cli import with_appcontext

__all__ = ["looks", "prereg"]


def _loaded(slug: str) -> Any:
    from webapp.services.studies import get_study

    return get_study(slug)


def _bundle_folder(study: Any, folder: Path) -> tuple[Path, list[str]]:
    """Write the stored files of the study's current version into ``folder``.

    Returns the study YAML's path and the names of every stored file: the bundle the
    pre-registration freezes is exactly what the web app stores.
    """
    import yaml
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import StudyFile

    files = db.session.scalars(
        select(StudyFile).where(StudyFile.study_id == study.id, StudyFile.version == study.version)
    ).all()
    study_file = None
    for f in files:
        path = folder / f.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f.content)
        if "/" not in f.name and f.name.endswith((".yaml", ".yml")):
            doc = yaml.safe_load(f.content.decode("utf-8", errors="replace"))
            if isinstance(doc, dict) and doc.get("slug") == study.slug:
                study_file = path
    if study_file is None:
        raise click.ClickException(
            f"{study.slug} version {study.version} has no stored study file; load it again "
            "with `framelab study load`"
        )
    return study_file, [f.name for f in files]


def _folder_bundle(path: Path) -> list[str]:
    """The names of the files `framelab study load PATH` would store (the loader decides)."""
    from webapp.studydef import folder_bundle, load_bundle
    from webapp.validation import StudyDefinitionError

    try:
        bundle = folder_bundle(path)
        load_bundle(bundle)
    except StudyDefinitionError as exc:
        raise click.ClickException(str(exc)) from None
    return [f.name for f in bundle.files()]


def _amendment(loaded: Any, study: Any, reason: str | None, freeze: Any) -> dict | None:
    """The amendment block a new freeze of a loaded study needs, or ``None``; refuse a freeze
    after data collection began without ``--amend``, and ``--amend`` where nothing is amended."""
    from webapp.services import looks as looks_service

    history = looks_service.preregistration_history(loaded)
    if history:
        latest = history[-1]
        again = freeze(study, amendment=latest.record.get("amendment"))
        if again["prereg_sha256"] == latest.prereg_sha256:
            if reason is not None:
                raise click.UsageError(
                    f"--amend: this is {study.slug}'s recorded pre-registration unchanged "
                    f"({latest.prereg_sha256[:12]}); there is nothing to amend"
                )
            return latest.record.get("amendment")
    seen = looks_service.data_seen(loaded)
    if seen is None:
        if reason is not None:
            raise click.UsageError(
                f"--amend: data collection of {study.slug} has not begun; a pre-registration "
                "written now is no amendment (run without --amend)"
            )
        return None
    if not reason or not reason.strip():
        raise click.ClickException(
            f"data collection of {study.slug} has begun ({seen}): a new pre-registration is "
            f"an amendment. Say why with `framelab prereg {study.slug} --amend REASON`; the "
            "console and the report show it with what had been seen. Nothing was written."
        )
    return {
        "amends": [row.prereg_sha256 for row in history],
        "reason": reason.strip(),
        "seen": seen,
    }


def _not_loaded_files(loaded: Any, study: Any, path: str, reason: str | None) -> None:
    """Refuse a freeze of other files than the loaded study's once its data collection began
    (the document would read as written before data), and ``--amend`` for such files."""
    from webapp.services import looks as looks_service

    seen = looks_service.data_seen(loaded) if loaded is not None else None
    if seen is not None:
        raise click.ClickException(
            f"data collection of {study.slug} has begun ({seen}), with other files than these: "
            f"a pre-registration written now is an amendment of the loaded study. Load these "
            f"files first (`framelab study load {path}`), then run `framelab prereg "
            f"{study.slug} --amend REASON`. Nothing was written."
        )
    if reason is not None:
        raise click.UsageError(
            f"--amend: an amendment is recorded on the console, and {study.slug} is not "
            "loaded with these files"
        )


def _power_to_cite(summary: dict, study, power_dir: Path):
    """The power table of ``framelab plan power`` to cite, refused when it is not this design's
    power: another study, another analysis block or design, or fits that failed (each counted
    as not rejecting, so the power says more about the fits than about the design)."""
    import pandas as pd

    plan = study.require_plan()
    design = [block.as_dict() for block in study.blocks]
    where = f"--power {power_dir}"
    if summary.get("study") != study.slug:
        raise click.ClickException(
            f"{where}: simulated for {summary.get('study')!r}, not {study.slug!r}"
        )
    if summary.get("analysis") != plan.as_dict() or summary.get("design") != design:
        raise click.ClickException(
            f"{where}: simulated for another analysis block or design than {study.slug}'s "
            "current one (or by an older FrameLab that did not simulate the study's own "
            "design); run framelab plan power again"
        )
    table = pd.DataFrame(summary["table"])
    failed = table[table["n_failed"] > 0]
    if len(failed):
        row = failed.iloc[0]
        raise click.ClickException(
            f"{where}: {int(row['n_failed'])} of {int(row['n_sims'])} fits at N = "
            f"{int(row['n'])} did not converge and count as not rejecting, so the power table "
            "is no statement about the design; look at simulations.jsonl, fix the cause and "
            "run framelab plan power again"
        )
    return table


@click.command("prereg")
@click.argument("study_arg", metavar="STUDY")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for prereg.md and prereg.html.",
)
@click.option(
    "--power",
    "power_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A `framelab plan power` output folder to cite in the sample-size section.",
)
@click.option(
    "--amend",
    "reason",
    metavar="REASON",
    help="Once data collection has begun (a participant who is not a test participant "
    "entered, or a look was recorded): "
    "record this pre-registration as an amendment of the earlier ones, for this reason.",
)
@with_appcontext
def prereg(study_arg: str, out_dir: Path, power_dir: Path | None, reason: str | None) -> None:
    """Write and freeze the pre-registration of STUDY (a study YAML, or a loaded study's slug).

    The document hashes every file of the study's bundle as the web app stores it (the YAML,
    pairs files, images), the design, the analysis block and the primary analysis command;
    when the study is loaded (the same files), the hash is recorded and the console shows it.
    """
    import json
    from functools import partial

    from analysis.plan.prereg import freeze, render_html, render_markdown
    from analysis.plan.spec import PlanError, read_study
    from webapp.services import looks as looks_service

    summary = None
    if power_dir is not None:
        try:
            summary = json.loads((power_dir / "power.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise click.ClickException(f"{power_dir}: no power.json ({exc})") from None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(study_arg)
        loaded = None
        if path.is_file():
            names = _folder_bundle(path)
        else:
            loaded = _loaded(study_arg)
            if loaded is None:
                raise click.ClickException(
                    f"{study_arg!r} is neither a study file nor a loaded study's slug"
                )
            path, names = _bundle_folder(loaded, Path(tmp))
        try:
            study = read_study(path, names)
            power = _power_to_cite(summary, study, power_dir) if summary is not None else None
            scenario = summary["scenario"] if summary is not None else None
            frozen = partial(freeze, document="prereg.md", power=power, scenario=scenario)
            loaded = loaded or _loaded(study.slug)
            amendment = None
            if loaded is not None and looks_service.bundle_sha256(loaded) == study.bundle_sha256:
                amendment = _amendment(loaded, study, reason, frozen)
            else:
                _not_loaded_files(loaded, study, study_arg, reason)
            record = frozen(study, amendment=amendment)
        except PlanError as exc:
            raise click.ClickException(str(exc)) from None
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "prereg.md").write_text(render_markdown(record), encoding="utf-8")
    (out_dir / "prereg.html").write_text(render_html(record), encoding="utf-8")
    kind = "amendment" if amendment else "pre-registration"
    click.echo(
        f"{kind} of {study.slug}: hash {record['prereg_sha256']} (bundle "
        f"{record['bundle_sha256'][:12]}, {len(record['bundle'])} files); wrote "
        f"{out_dir / 'prereg.md'} and {out_dir / 'prereg.html'}"
    )
    if loaded is None:
        click.echo(
            f"not recorded for the console: {study.slug} is not loaded (framelab study load "
            f"{study_arg}, then run this again)"
        )
        return
    try:
        looks_service.record_preregistration(loaded, record, "prereg.md", "cli")
    except looks_service.LookError as exc:
        click.echo(f"not recorded for the console: {exc}")
        return
    click.echo(f"recorded: the console shows it on {study.slug}'s page")


@click.command("looks")
@click.argument("slug")
@with_appcontext
def looks(slug: str) -> None:
    """Run the pre-registered test at each look SLUG has reached; record new looks.

    A look is recorded once, when its count of completed, non-excluded participants is
    reached; a crossed bound is logged in the audit log and the console offers to pause.
    """
    from analysis.io import ExportFormatError, load_choice
    from analysis.plan.looks import evaluate_looks
    from analysis.plan.spec import PlanError, plan_from_dict
    from webapp.definition_cache import study_definition
    from webapp.services import looks as looks_service
    from webapp.services.export import export_table

    study = _loaded(slug)
    if study is None:
        raise click.ClickException(f"no study {slug!r}; load it with `framelab study load`")
    analysis = study_definition(study).analysis
    if analysis is None:
        raise click.ClickException(f"{slug} has no analysis: block (docs/analysis.md)")
    prereg = looks_service.latest_preregistration(study)
    block = analysis.as_dict()
    if prereg is not None and prereg.bundle_sha256 == looks_service.bundle_sha256(study):
        block = prereg.record["analysis"]
    else:
        click.echo(
            f"note: {slug} has no pre-registration of its current files (framelab prereg "
            f"{slug}); the looks use its analysis: block"
        )
    try:
        plan = plan_from_dict(block, file=f"{slug} analysis")
    except PlanError as exc:
        raise click.ClickException(str(exc)) from None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.csv"
        export_table(study, "long", path)
        try:
            data = load_choice(path)
        except ExportFormatError as exc:
            raise click.ClickException(str(exc)) from None
    if data.empty:
        click.echo(f"{slug}: no choices yet; look 1 needs {plan.look_sizes()[0]} participants")
        return
    table = evaluate_looks(data, plan)
    new = looks_service.record_looks(study, table.to_dict("records"), "cli")
    recorded = {row.look: row for row in looks_service.recorded_looks(study)}
    for _, r in table.iterrows():
        k = int(r["look"])
        row = recorded.get(k)
        if row is None:
            click.echo(f"look {k} at N = {int(r['n_planned'])}: not reached yet")
            continue
        state = "new" if row in new else "recorded earlier"
        if row.z is None:
            # Why the model gave none (e.g. it did not converge), as the analysis noted it.
            why = str(r.get("notes") or "").removeprefix("no statistic: ").strip()
            z = f"no statistic ({why})" if why else "no statistic"
        else:
            z = f"z = {row.z:.3f}"
        bound = f"efficacy bound {row.efficacy_z:.3f}"
        if row.futility_z is not None:
            bound += f", futility bound {row.futility_z:.3f}"
        click.echo(
            f"look {k} ({row.n_analysed} analysed, {state}): {z}; {bound}: "
            + ("BOUNDARY CROSSED, " if row.crossed else "")
            + row.decision
        )
    crossed = next((row for row in recorded.values() if row.crossed), None)
    if crossed is not None and crossed.paused_at is None:
        click.echo(
            f"The pre-registered rule says stop (look {crossed.look}); the console offers to "
            "pause recruitment on the study page, after you confirm."
        )
