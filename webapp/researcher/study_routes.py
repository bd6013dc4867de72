"""Console views around one study: the close confirmation, copies, one participant's page and
the preview bar shown over participant pages (thin wrappers over :mod:`webapp.services`)."""

from __future__ import annotations

from typing import Any

from flask import abort, flash, g, redirect, render_template, request, url_for

from webapp.extensions import db
from webapp.models import Participant, Study, StudyState, utcnow
from webapp.researcher.blueprint import bp
from webapp.researcher.forms import (
    ClearTestDataForm,
    DuplicateForm,
    ParticipantActionForm,
    StateForm,
)
from webapp.researcher.routes import active_window, login_required, study_or_404
from webapp.services import monitor, testdata
from webapp.services import researchers as console
from webapp.services.researchers import ConsoleError


@bp.get("/studies/<slug>/close")
@login_required
def confirm_close(slug: str) -> Any:
    """Ask before closing, naming what closing does to the people in the study now."""
    s = study_or_404(slug)
    if StudyState.closed not in console.TRANSITIONS[s.state]:
        flash(f"A {s.state.value} study cannot be closed.", "warning")
        return redirect(url_for("researcher.study", slug=slug))
    return render_template(
        "researcher/confirm_close.html",
        s=s,
        flight=monitor.in_flight(s, utcnow(), active_window()),
        window=int(active_window().total_seconds() // 60),
        state_form=StateForm(),
        study=None,
    )


@bp.post("/studies/<slug>/duplicate")
@login_required
def duplicate(slug: str) -> Any:
    """Copy the study's current version (definition and bundle) into a new draft."""
    s = study_or_404(slug)
    form = DuplicateForm()
    if not form.validate_on_submit():
        flash("Give the copy a slug.", "warning:lifecycle")
        return redirect(url_for("researcher.study", slug=slug) + "#lifecycle")
    try:
        result = console.duplicate_study(s, form.slug.data or "", g.researcher)
    except ConsoleError as exc:
        db.session.rollback()
        flash(str(exc), "warning:lifecycle")
        return redirect(url_for("researcher.study", slug=slug) + "#lifecycle")
    flash(f"Copied {s.slug} (version {s.version}) to {result.study.slug} as a draft.", "info")
    return redirect(url_for("researcher.study", slug=result.study.slug))


@bp.post("/studies/<slug>/test-data/clear")
@login_required
def clear_test_data(slug: str) -> Any:
    """Delete the study's test participants (bots, previews) and their rows; audited."""
    s = study_or_404(slug)
    back = url_for("researcher.study", slug=slug) + "#test-data"
    form = ClearTestDataForm()
    if not form.validate_on_submit():
        flash("Tick the box to confirm that the test data should be deleted.", "warning:test-data")
        return redirect(back)
    try:
        counts = testdata.clear_test_data(s, actor=g.researcher, now=utcnow())
    except testdata.ClearRefused as exc:
        flash(str(exc), "warning:test-data")
        return redirect(back)
    flash(
        f"Deleted {counts['participants']} test participant(s) and their answers; real "
        "participants were not touched.",
        "info:test-data",
    )
    return redirect(back)


@bp.get("/studies/<slug>/participants/<code>")
@login_required
def participant(slug: str, code: str) -> Any:
    """One participant: path with times per page, answers, platform ID, status, actions."""
    s = study_or_404(slug)
    p = db.session.scalar(
        db.select(Participant).where(Participant.study_id == s.id, Participant.code == code)
    )
    if p is None:
        abort(404)
    return render_template(
        "researcher/participant.html",
        s=s,
        record=monitor.participant_record(s, p),
        action_form=ParticipantActionForm(),
        study=None,
    )


@bp.get("/studies/<slug>/find")
@login_required
def find(slug: str) -> Any:
    """Open a participant's page by pseudonym or recruiter ID (the search box's exact match)."""
    s = study_or_404(slug)
    text = request.args.get("q", "")[:128]
    p = monitor.find_participant(s, text)
    if p is None:
        flash("No participant of this study has that ID.", "warning:participants")
        return redirect(url_for("researcher.study", slug=slug) + "#participants")
    return redirect(url_for("researcher.participant", slug=slug, code=p.code))


@bp.app_context_processor
def preview_bar() -> dict[str, Any]:
    """``preview_bar`` for base.html: set on participant pages a researcher is previewing."""
    study: Study | None = g.get("console_preview")
    if study is None or request.blueprint != "participant":
        return {}
    return {"preview_bar": {"study": study}}
