"""Researcher views: thin wrappers over :mod:`webapp.services` (accounts, studies, payments).

Login is a signed-session flag rather than Flask-Login: there is no "remember me" and no user
loading beyond one primary key, so the extension would add a dependency and no safety. The
session is cleared at login (no fixation: nothing set before login survives it) and carries a
fingerprint of the password hash and the account's session version, so a password reset or a
logout ends every session of the account, including copies of the cookie
(:func:`webapp.services.accounts.session_researcher`). The console's session is its own
``SameSite=Lax`` cookie (:mod:`webapp.sessions`).
"""

from __future__ import annotations

import functools
import io
import os
import secrets
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from flask import (
    Response,
    abort,
    current_app,
    flash,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)

from webapp import bundle as bundles
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import ParticipantStatus, Platform, Researcher, Study, StudyState, utcnow
from webapp.researcher.blueprint import bp
from webapp.researcher.forms import (
    BonusForm,
    ClearTestDataForm,
    DuplicateForm,
    FileNotUsedForm,
    LoadForm,
    LoginForm,
    ParticipantActionForm,
    PreviewForm,
    ReconcileForm,
    StateForm,
    UploadForm,
)
from webapp.services import accounts, audit, payments, reconcile, testdata
from webapp.services import export as export_service
from webapp.services import researchers as console
from webapp.services.design import study_formats, study_sequences
from webapp.services.monitor import FLAG_FILTERS
from webapp.services.researchers import ConsoleError, SlugTaken, authenticate
from webapp.services.studies import (
    LoadResult,
    StudyLoadError,
    bundle_zip,
    get_study,
    status_counts,
)
from webapp.tasks import get_task_type
from webapp.validation import StudyDefinitionError, error_lines

_EXPORT_TYPES = {"csv": "text/csv", "parquet": "application/vnd.apache.parquet"}
ITEMS_PER_PAGE = 100


def _secret() -> str:
    return current_app.config["SECRET_KEY"]


def _current_researcher() -> Researcher | None:
    return accounts.session_researcher(session, _secret())


def login_required(view: Callable[..., Any]) -> Callable[..., Any]:
    """Refuse anonymous requests: JSON endpoints answer 401, pages redirect to the login."""

    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        researcher = _current_researcher()
        if researcher is None:
            session.pop("researcher_id", None)
            if request.path.endswith(".json"):
                return jsonify(error="login required"), 401
            return redirect(url_for("researcher.login"))
        g.researcher = researcher
        return view(*args, **kwargs)

    return wrapped


def study_or_404(slug: str) -> Study:
    """The study if the logged-in researcher may see it; 404 otherwise (existence not leaked)."""
    study = get_study(slug)
    if study is None or not accounts.can_access(g.researcher, study):
        abort(404)
    return study


def public_base_url() -> str:
    """The platform's public address: FRAMELAB_PUBLIC_URL (as for the CLI), else this request's.

    The study page's links and the recruiters' listings use it, so what the console shows is
    what a listing would carry.
    """
    return (
        current_app.config.get("PUBLIC_URL")
        or os.environ.get("FRAMELAB_PUBLIC_URL")
        or request.host_url
    )


def _back(slug: str, section: str, warning: str) -> Response:
    """Return to a section of the study page with a warning shown in that section."""
    flash(warning, f"warning:{section}")
    return redirect(url_for("researcher.study", slug=slug) + f"#{section}")


def _flash_loaded(result: LoadResult) -> None:
    """Say what a load did, and each note on the file (a key spelled the older way)."""
    flash(f"{result.action}: {result.study.slug} (version {result.study.version})", "info")
    for note in result.notes:
        flash(f"note: {note}", "warning")


def _studies_dir() -> Path:
    return Path(current_app.config["STUDIES_DIR"])


def active_window() -> timedelta:
    """How long after their last page a started participant still counts as active."""
    return timedelta(minutes=current_app.config["ACTIVE_WINDOW_MINUTES"])


# -- accounts -------------------------------------------------------------------------------


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    """Log a researcher in (rate limited per account and client, per client, and overall)."""
    form = LoginForm()
    error, status = None, 200
    if form.validate_on_submit():
        username = form.username.data or ""
        client = accounts.client_hash(request.remote_addr, _secret())
        now = utcnow()
        limit = accounts.reserve_attempt(username, client, now)
        if not limit.allowed:
            minutes = -(-limit.retry_after_s // 60)
            error = f"Too many failed logins. Try again in {minutes} minute(s)."
            status = 429
        else:
            researcher = authenticate(username, form.password.data or "")
            if researcher is not None:
                accounts.record_login(username, client, now)
                session.clear()  # nothing from before the login survives it
                session.update(accounts.session_values(researcher, _secret()))
                audit.record(researcher, "login")
                return redirect(url_for("researcher.index"))
            error = "Unknown username or wrong password."
    return render_template("researcher/login.html", form=form, error=error, study=None), status


@bp.post("/logout")
@login_required
def logout() -> Any:
    """Log out: end every session of the account, including copies of this cookie."""
    accounts.end_sessions(g.researcher, commit=False)
    audit.record(g.researcher, "logout")
    session.clear()
    return redirect(url_for("researcher.login"))


# -- studies --------------------------------------------------------------------------------


def _load_form() -> LoadForm:
    form = LoadForm()
    names = sorted(p.name for p in _studies_dir().glob("*.yaml"))
    form.name.choices = names
    return form


@bp.get("/")
@login_required
def index() -> str:
    """List the researcher's studies with their state and counts; upload or load one."""
    return _index()


def _index(
    upload: UploadForm | None = None,
    errors: list[str] | None = None,
    load: LoadForm | None = None,
) -> Any:
    # One column per format sequence (A, B, C, … for k formats) where sequences mean something.
    rows = [
        (
            s,
            status_counts(s),
            study_sequences(study_definition(s).tasks) if console.uses_sequences(s) else (),
        )
        for s in accounts.visible_studies(g.researcher)
    ]
    html = render_template(
        "researcher/index.html",
        rows=rows,
        upload=upload or UploadForm(),
        load=load or _load_form(),
        limits={
            "file": bundles.size_text(bundles.MAX_FILE_BYTES),
            "bundle": bundles.size_text(bundles.MAX_BUNDLE_BYTES),
            "yaml": bundles.size_text(bundles.MAX_YAML_BYTES),
            "files": bundles.MAX_FILES,
        },
        errors=errors or [],
        researcher=g.researcher,
        study=None,
    )
    return (html, 422) if errors else html


@bp.post("/studies/upload")
@login_required
def upload() -> Any:
    """Validate an uploaded study bundle and store it as a draft; errors are shown inline."""
    form = UploadForm()
    if not form.validate_on_submit():
        return _index(form, ["Choose a study YAML file or a zip to upload."])
    uploads = [form.file.data, *(f for f in form.stimuli.data or () if f and f.filename)]
    # MAX_CONTENT_LENGTH bounds the request; each file is read at most one byte past the limit.
    files = [(f.filename or "", f.read(bundles.MAX_BUNDLE_BYTES + 1)) for f in uploads]
    try:
        bundle = bundles.bundle_from_upload(files)
        result = console.load_uploaded_study(
            bundle, g.researcher, force=form.force.data, slug=form.slug.data
        )
    except bundles.BundleError as exc:
        return _index(form, [f"upload: {exc}"])
    except SlugTaken as exc:
        db.session.rollback()
        form.slug.data = exc.suggestion
        return _index(form, [str(exc)])
    except StudyDefinitionError as exc:
        db.session.rollback()
        return _index(form, error_lines(exc))
    except (StudyLoadError, ConsoleError) as exc:
        db.session.rollback()
        return _index(form, [str(exc)])
    _flash_loaded(result)
    return redirect(url_for("researcher.study", slug=result.study.slug))


@bp.post("/studies/load")
@login_required
def load() -> Any:
    """Load a study YAML from the studies folder as a draft (under its slug or another)."""
    form = _load_form()
    if not form.validate_on_submit():
        return _index(errors=["Choose one of the study files."], load=form)
    try:
        result = console.load_study_for(
            _studies_dir() / form.name.data, g.researcher, slug=form.slug.data
        )
    except SlugTaken as exc:  # e.g. a demo loaded by `make run`: offer a free slug
        db.session.rollback()
        form.slug.data = exc.suggestion
        return _index(errors=[str(exc)], load=form)
    except StudyDefinitionError as exc:
        db.session.rollback()
        return _index(errors=error_lines(exc), load=form)
    except (StudyLoadError, ConsoleError) as exc:
        db.session.rollback()
        return _index(errors=[str(exc)], load=form)
    _flash_loaded(result)
    return redirect(url_for("researcher.study", slug=result.study.slug))


@bp.get("/studies/<slug>")
@login_required
def study(slug: str) -> str:
    """The study's dashboard: state, links, live counts, participants, exports, payments."""
    s = study_or_404(slug)
    overview = _overview(s)
    _overviews().put(s.id, overview)  # a fresh page starts the polls from these numbers
    return render_template(
        "researcher/study.html",
        s=s,
        dash=overview,
        table=_table(s),
        flag_filters=FLAG_FILTERS,
        links=console.recruitment_links(s, public_base_url()),
        transitions=sorted(t.value for t in console.TRANSITIONS[s.state]),
        duplicate_form=DuplicateForm(data={"slug": console.free_slug(s.slug, g.researcher)}),
        ledger=payments.ledger_rows(s),
        bonus_plans=_bonus_plans(s),
        state_form=StateForm(),
        action_form=ParticipantActionForm(),
        preview_form=PreviewForm(),
        bonus_form=BonusForm(),
        file_not_used_form=FileNotUsedForm(prefix="unused"),
        reconcile_form=ReconcileForm(),
        clear_form=ClearTestDataForm(),
        test_counts=testdata.count_test_participants(s),
        formats=export_service.formats_for(s),
        parquet_missing=(
            None if export_service.parquet_available() else export_service.PARQUET_MISSING
        ),
        study=None,
        # Messages of actions that came back to a section are shown there (macros.html).
        section_flashes_shown=True,
    )


def _bonus_plans(s: Study) -> dict[str, payments.BonusPlan]:
    """Per payable platform of the study: who a bonus run would leave out, and why."""
    plans = {}
    for name in study_definition(s).recruitment.platforms:
        platform = Platform(name)
        if platform in payments.PAYABLE_PLATFORMS:
            try:
                plans[name] = payments.bonus_plan(s, platform)
            except payments.PaymentError:
                return {}  # the study pays no bonus
    return plans


def _overview(s: Study) -> dict[str, Any]:
    """The dashboard's numbers, after timing out the abandoned (when configured)."""
    from webapp.services import monitor, timeouts

    now = utcnow()
    if current_app.config["AUTO_TIMEOUT"]:
        timeouts.sweep(s, now)
    data = console.dashboard(s, now, active_window())
    data["target"] = monitor.target_progress(s)
    data["funnel"] = monitor.funnel(s, now, active_window())
    data["shares"] = monitor.choice_shares(s)
    data["formats"] = list(study_formats(study_definition(s).tasks))
    data["time_limit_minutes"] = round(timeouts.time_limit(s).total_seconds() / 60, 1)
    data["authenticity"] = monitor.flag_summary(s, _assessed(s))
    return data


def _overviews() -> Any:
    """This process's overview cache (one per app)."""
    from webapp.services.monitor import OverviewCache

    cache = current_app.extensions.get("framelab_overview_cache")
    if cache is None:
        ttl = float(current_app.config["OVERVIEW_CACHE_SECONDS"])
        cache = current_app.extensions.setdefault("framelab_overview_cache", OverviewCache(ttl))
    return cache


def _assessed(s: Study) -> Any:
    """The study's authenticity assessment, computed at most once per cache period (it reads
    every answered page of the study; the table and the overview share it)."""
    from webapp.services import authenticity

    return _overviews().get(("authenticity", s.id), lambda: authenticity.assess(s))


def _table(s: Study) -> Any:
    """The participant table page the query string asks for (filter, sort, search, page)."""
    from webapp.services import monitor

    args = request.args
    return monitor.participant_table(
        s,
        status=args.get("status", "all"),
        sort=args.get("sort", "newest"),
        page=args.get("page", 1, type=int) or 1,
        query=args.get("q", "")[:128],
        flag=args.get("flag", "all"),
        assessed=_assessed(s),
    )


@bp.get("/studies/<slug>/live.json")
@login_required
def live(slug: str) -> Response:
    """Live numbers for the dashboard's polling script (the table page of the query string).

    The overview is computed at most once per study every few seconds in each web process,
    however many tabs poll it (:class:`webapp.services.monitor.OverviewCache`); the
    participant table page is read for each request.
    """
    s = study_or_404(slug)
    data = {**_overviews().get(s.id, lambda: _overview(s))}
    table = _table(s)
    data["participants"] = table.rows
    data["table"] = {"total": table.total, "page": table.page, "pages": table.pages}
    return jsonify(data)


@bp.post("/studies/<slug>/state")
@login_required
def change_state(slug: str) -> Response:
    """Move the study to another lifecycle state."""
    s = study_or_404(slug)
    form = StateForm()
    if form.validate_on_submit():
        if form.state.data == StudyState.closed.value and form.confirm.data != "close":
            # Never closed by one click: the confirmation page names the consequences.
            return redirect(url_for("researcher.confirm_close", slug=slug))
        try:
            console.change_state(s, StudyState(form.state.data), g.researcher)
            flash(f"{s.slug} is now {s.state.value}.", "info:lifecycle")
        except (ValueError, ConsoleError) as exc:
            flash(str(exc), "warning:lifecycle")
    return redirect(url_for("researcher.study", slug=slug))


@bp.post("/studies/<slug>/preview")
@login_required
def preview(slug: str) -> Response:
    """Start a preview session (flagged, left out of counts and exports); audited, so a POST."""
    s = study_or_404(slug)
    form = PreviewForm()
    if not form.validate_on_submit():
        return _back(slug, "links", "The preview form had expired; please try again.")
    token = secrets.token_hex(4)
    first = study_definition(s).tasks[0]
    if not form.block.data or (
        form.block.data == first.id and get_task_type(first.type).position == "first"
    ):
        # The consent block is the study link's own page: a preview from the start.
        audit.record(g.researcher, "study.preview", study=s)
        return redirect(console.preview_url(s, token, _secret()))
    from webapp.services.flow import participant_token
    from webapp.services.preview import preview_at

    blocks = [b.id for b in study_definition(s).tasks]
    if form.block.data not in blocks:
        return _back(slug, "links", "That page is not part of this study.")
    audit.record(g.researcher, "study.preview", study=s, detail={"block": form.block.data})
    p = preview_at(s, blocks.index(form.block.data), token, utcnow())
    token = participant_token(p.id, _secret())
    return redirect(url_for("participant.page", slug=slug, token=token))


@bp.post("/studies/<slug>/participants")
@login_required
def participant_action(slug: str) -> Response:
    """Mark a participant returned / timed out, or exclude / re-include them."""
    from webapp.services.monitor import find_participant

    s = study_or_404(slug)
    form = ParticipantActionForm()
    back = url_for("researcher.study", slug=slug) + "#participants"
    where = ":participants"  # the study page shows the message in that section
    if form.validate_on_submit():
        found = find_participant(s, form.participant.data or "")
        # A pseudonym or a recruiter ID: the latter is matched through the same salted hash.
        code, action = (found.code if found else form.participant.data), form.action.data
        if form.back.data == "participant" and found is not None:
            back = url_for("researcher.participant", slug=slug, code=found.code)
            where = ""
        try:
            if action in ("returned", "timed_out"):
                console.mark_participant(s, code, ParticipantStatus(action), g.researcher)
            else:
                console.exclude_participant(
                    s, code, form.reason.data or "", g.researcher, excluded=action == "exclude"
                )
            flash(f"{code}: {action.replace('_', ' ')}", f"info{where}")
        except ConsoleError as exc:
            flash(str(exc), f"warning{where}")
    else:
        flash("The action was incomplete.", f"warning{where}")
    return redirect(back)


# -- exports, payments, reconciliation ------------------------------------------------------


@bp.get("/studies/<slug>/export/<fmt>.<ext>")
@login_required
def export(slug: str, fmt: str, ext: str) -> Response:
    """Download an export (long, wide, page-times, codebook) as CSV or Parquet."""
    s = study_or_404(slug)
    if fmt not in export_service.formats_for(s) or ext not in _EXPORT_TYPES:
        abort(404)
    options = {
        "include_test": request.args.get("include_test") == "1",
        "include_excluded": request.args.get("include_excluded") == "1",
    }
    if ext == "parquet" and not export_service.parquet_available():
        return _back(slug, "exports", export_service.PARQUET_MISSING)
    rows, columns = export_service.build_table(s, fmt, **options)
    if ext == "parquet":
        buffer = io.BytesIO()
        export_service.write_parquet(rows, columns, buffer)
        body: bytes | str = buffer.getvalue()
    else:
        text = io.StringIO()
        export_service.write_csv(rows, columns, text)
        body = text.getvalue()
    audit.record(g.researcher, "export", study=s, detail={"format": fmt, "type": ext, **options})
    return Response(
        body,
        mimetype=_EXPORT_TYPES[ext],
        headers={"Content-Disposition": f'attachment; filename="{slug}-{fmt}.{ext}"'},
    )


@bp.get("/studies/<slug>/bundle.zip")
@login_required
def bundle_download(slug: str) -> Response:
    """Download the files the study's current version was loaded from, as a zip."""
    s = study_or_404(slug)
    body = bundle_zip(s)
    if body is None:  # loaded before bundles were kept
        abort(404)
    audit.record(g.researcher, "study.bundle", study=s, detail={"version": s.version})
    return Response(
        body,
        mimetype="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{slug}-v{s.version}.zip"'},
    )


@bp.get("/studies/<slug>/export-long.csv")
@login_required
def export_long(slug: str) -> Response:
    """Download the ``long`` export as CSV (kept for existing links)."""
    return export(slug, "long", "csv")


@bp.post("/studies/<slug>/bonus")
@login_required
def bonus(slug: str) -> Any:
    """Issue bonuses under the study's rule and download the platform's payment file."""
    s = study_or_404(slug)
    form = BonusForm()
    if not form.validate_on_submit():
        return _back(slug, "payments", "Choose a platform.")
    platform = Platform(form.platform.data)
    try:
        issue = payments.issue_bonuses(
            s,
            platform,
            issued_by=g.researcher.username,
            now=utcnow(),
            to_file=True,
            force=form.force.data,
        )
    except payments.PaymentError as exc:
        # The console's own wording (the service's message is shared with the CLI's --force).
        hint = "tick “Write bonuses already sent by file again” to download the file anyway"
        return _back(slug, "payments", f"{exc}; {hint}")
    if issue.excluded:
        left_out = "; ".join(f"{code}: {why}" for code, why in issue.excluded)
        flash(f"Bonuses left out on {platform.value}: {left_out}", "warning:payments")
    if issue.not_written:
        held = "; ".join(f"{code}: {why}" for code, why in issue.not_written)
        flash(f"Not in the file (the API pays or paid them): {held}", "warning:payments")
    out = io.StringIO()
    payments.write_bonus_file(issue.lines, platform, out)
    return Response(
        out.getvalue(),
        mimetype="text/csv",
        headers={
            "Content-Disposition": f'attachment; filename="{slug}-bonus-{platform.value}.csv"'
        },
    )


@bp.post("/studies/<slug>/bonus/file-not-used")
@login_required
def bonus_file_not_used(slug: str) -> Any:
    """Record that a payment file was never uploaded: its bonuses become payable again."""
    s = study_or_404(slug)
    form = FileNotUsedForm(prefix="unused")
    if not form.validate_on_submit():
        return _back(slug, "payments", "Choose the platform and name the participants.")
    try:
        done = payments.file_not_used(
            s,
            Platform(form.platform.data),
            (form.codes.data or "").split(),
            actor=g.researcher,
            now=utcnow(),
        )
    except payments.PaymentError as exc:
        return _back(slug, "payments", str(exc))
    flash(
        f"Payable again ({form.platform.data}): {' '.join(done)}. Pay them with a new file or "
        "the recruiter's Pay bonuses, which first checks the platform's own record.",
        "info:payments",
    )
    return redirect(url_for("researcher.study", slug=slug) + "#payments")


@bp.post("/studies/<slug>/reconcile")
@login_required
def reconcile_import(slug: str) -> Any:
    """Import a Prolific or MTurk export, update statuses and list mismatches."""
    s = study_or_404(slug)
    form = ReconcileForm()
    if not form.validate_on_submit():
        return _back(slug, "reconcile", "Choose the platform and a CSV file.")
    platform = Platform(form.platform.data)
    try:
        # One byte over the bound is enough to refuse the file without reading all of it.
        statuses = reconcile.read_export(platform, form.file.data.read(reconcile.MAX_BYTES + 1))
    except reconcile.ReconcileError as exc:
        return _back(slug, "reconcile", f"Could not read the file: {exc}")
    report = reconcile.reconcile(s, platform, statuses, g.researcher, now=utcnow())
    return render_template("researcher/reconcile.html", s=s, report=report, study=None)


@bp.get("/audit")
@login_required
def audit_log() -> str:
    """The audit log: the researcher's own actions and those on their studies (admins: all)."""
    events = audit.events_for(g.researcher)
    slugs = {s.id: s.slug for s in db.session.scalars(db.select(Study))}
    return render_template("researcher/audit.html", events=events, slugs=slugs, study=None)


@bp.get("/studies/<slug>/items")
@login_required
def items(slug: str) -> str:
    """Per item of a sentiment study, a page at a time: confirmed labels, open reservations,
    labels needed; totals over every item."""
    from webapp.services import slot_report
    from webapp.services.allocation import annotation_blocks

    s = study_or_404(slug)
    if not annotation_blocks(s):
        abort(404)
    now = utcnow()
    total = slot_report.item_count(s)
    pages = max(1, -(-total // ITEMS_PER_PAGE))
    page = min(max(1, request.args.get("page", 1, type=int) or 1), pages)
    rows = slot_report.item_status(s, now, offset=(page - 1) * ITEMS_PER_PAGE, limit=ITEMS_PER_PAGE)
    return render_template(
        "researcher/items.html",
        s=s,
        rows=rows,
        totals=slot_report.slot_totals(s, now),
        idle=slot_report.idle_holds(s, now),
        page=page,
        pages=pages,
        study=None,
    )
