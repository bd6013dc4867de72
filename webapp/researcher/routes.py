"""Researcher views: log in, see studies with counts, download exports.

Login is a signed-session flag rather than Flask-Login: there is one role, no "remember me" and
no user loading beyond one primary key, so the extension would add a dependency and no safety.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from typing import Any

from flask import Response, redirect, render_template, session, url_for

from webapp.errors import ParticipantError
from webapp.extensions import db
from webapp.models import Researcher, Study
from webapp.researcher import bp
from webapp.researcher.forms import LoginForm
from webapp.services import export as export_service
from webapp.services.researchers import authenticate
from webapp.services.studies import get_study, status_counts


def login_required(view: Callable[..., Any]) -> Callable[..., Any]:
    """Redirect to the login page unless a researcher is logged in."""

    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        rid = session.get("researcher_id")
        if rid is None or db.session.get(Researcher, rid) is None:
            return redirect(url_for("researcher.login"))
        return view(*args, **kwargs)

    return wrapped


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    """Log a researcher in."""
    form = LoginForm()
    error = None
    if form.validate_on_submit():
        researcher = authenticate(form.username.data or "", form.password.data or "")
        if researcher is not None:
            session.clear()
            session["researcher_id"] = researcher.id
            return redirect(url_for("researcher.index"))
        error = "Unknown username or wrong password."
    return render_template("researcher/login.html", form=form, error=error, study=None)


@bp.post("/logout")
def logout() -> Any:
    """Log out."""
    session.pop("researcher_id", None)
    return redirect(url_for("researcher.login"))


@bp.get("/")
@login_required
def index() -> str:
    """List studies with participant counts by status and sequence."""
    studies = db.session.scalars(db.select(Study).order_by(Study.slug)).all()
    rows = [(s, status_counts(s)) for s in studies]
    return render_template("researcher/index.html", rows=rows, study=None)


@bp.get("/studies/<slug>/export-long.csv")
@login_required
def export_long(slug: str) -> Response:
    """Download the ``long`` export (pseudonymous; no platform IDs)."""
    study = get_study(slug)
    if study is None:
        raise ParticipantError("E404-STUDY", "No such study.", 404)
    buffer = io.StringIO()
    export_service.write_csv(
        export_service.choice_rows(study), export_service.LONG_CHOICE_COLUMNS, buffer
    )
    return Response(
        buffer.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{slug}-long.csv"'},
    )
