"""Console views of the pre-registration and the interim looks (webapp.services.looks).

The study page shows the frozen hash and each recorded look against its bound; when a bound
was crossed it offers to pause recruitment, through a confirmation page that says what pausing
does. Nothing is paused before the researcher confirms there.
"""

from __future__ import annotations

from typing import Any

from flask import flash, g, redirect, render_template, url_for
from flask_wtf import FlaskForm
from wtforms import HiddenField

from webapp.extensions import db
from webapp.models import InterimLook, Study
from webapp.researcher.blueprint import bp
from webapp.researcher.routes import login_required, study_or_404
from webapp.services import looks as looks_service


class PauseForm(FlaskForm):
    """Pause recruitment for a crossed look; ``confirm`` is set by the confirmation page."""

    confirm = HiddenField()


@bp.context_processor
def _looks_panel() -> dict[str, Any]:
    def panel(s: Study) -> dict[str, Any] | None:
        data = looks_service.looks_panel(s)
        return None if data is None else {"data": data, "form": PauseForm()}

    return {"looks_panel": panel}


@bp.post("/studies/<slug>/looks/<int:look>/pause")
@login_required
def pause_for_look(slug: str, look: int) -> Any:
    """Show what pausing for a crossed look does; pause once confirmed (audited)."""
    s = study_or_404(slug)
    back = url_for("researcher.study", slug=slug) + "#looks"
    form = PauseForm()
    if not form.validate_on_submit():
        flash("That form had expired or was not valid; please try again.", "warning:looks")
        return redirect(back)
    row = db.session.scalar(
        db.select(InterimLook).where(InterimLook.study_id == s.id, InterimLook.look == look)
    )
    if row is None or not row.crossed:
        flash(f"Look {look} crossed no bound: there is nothing to pause for.", "warning:looks")
        return redirect(back)
    if form.confirm.data != "yes":
        return render_template(
            "researcher/looks_confirm.html",
            s=s,
            look=row,
            lines=looks_service.pause_plan(s, row),
            form=form,
            study=None,
        )
    try:
        done = looks_service.pause_for_look(s, look, g.researcher)
    except looks_service.LookError as exc:
        flash(str(exc), "warning:looks")
        return redirect(back)
    for line in done:
        flash(line, "info:looks")
    return redirect(back)
