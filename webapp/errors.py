"""Friendly, numbered error pages for participants: never a stack trace or an exception text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Flask, render_template, request
from flask_babel import gettext, lazy_gettext
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException

from webapp.participant_error import ParticipantError
from webapp.security import allow_mturk_framing

__all__ = ["ParticipantError", "register"]


@dataclass(frozen=True)
class _Page:
    code: str
    title: Any
    message: Any


_HTTP_PAGES = {
    400: _Page(
        "E400-REQUEST",
        lazy_gettext("Something was wrong with that request"),
        lazy_gettext("Please go back and try again."),
    ),
    404: _Page(
        "E404-PAGE",
        lazy_gettext("Page not found"),
        lazy_gettext("Please check the link you were given."),
    ),
    405: _Page(
        "E405-METHOD",
        lazy_gettext("That did not work"),
        lazy_gettext("This page cannot be used like that. Please use the buttons on the page."),
    ),
    500: _Page(
        "E500-SERVER",
        lazy_gettext("Something went wrong on our side"),
        lazy_gettext(
            "Your answers so far are saved. Please reload the page in a minute; if the "
            "problem stays, contact the researchers and quote this code."
        ),
    ),
}


MTURK_PARAMS = ("assignmentId", "hitId", "workerId", "turkSubmitTo")


def _from_mturk(*, database: bool = True) -> bool:
    """True when a participant URL's error belongs inside MTurk's frame.

    MTurk shows the study in an iframe; an error page that forbids framing leaves the worker
    looking at a blocked frame instead of "please return the HIT". The signs are MTurk's own
    parameters on the link or the consent form, a page token of an MTurk session, or the
    browser saying the page is loading into a frame (``frame-ancestors`` still lets only MTurk
    be the framer). Console and non-participant URLs never qualify.
    """
    if request.blueprint != "participant":
        return False
    if any(request.args.get(k) for k in MTURK_PARAMS):
        return True
    if request.method == "POST":
        from webapp.request_limits import admitted_form

        # Only a body the request guard admitted: a refused or unread one is never parsed.
        if any(admitted_form().get(k) for k in MTURK_PARAMS):
            return True
    if request.headers.get("Sec-Fetch-Dest") == "iframe":
        return True
    token = (request.view_args or {}).get("token")
    if not database or not isinstance(token, str):
        return False
    from flask import current_app

    from webapp.models import Platform
    from webapp.services.flow import participant_from_token

    try:
        participant = participant_from_token(token, current_app.config["SECRET_KEY"])
    except Exception:  # the error page must render whatever state the database is in
        return False
    return participant is not None and participant.platform is Platform.mturk


def _render(
    code: str,
    title: Any,
    message: Any,
    status: int,
    link: str | None = None,
    *,
    database: bool = True,
):
    mturk = _from_mturk(database=database)
    if mturk:
        allow_mturk_framing()
    return (
        render_template(
            "errors/error.html", code=code, title=title, message=message, link=link, mturk=mturk
        ),
        status,
    )


def register(app: Flask) -> None:
    """Register the error handlers on ``app``."""

    @app.errorhandler(ParticipantError)
    def participant_error(exc: ParticipantError):
        return _render(
            exc.code, gettext("We cannot continue here"), exc.message, exc.status, exc.link
        )

    @app.errorhandler(CSRFError)
    def csrf_error(exc: CSRFError):
        return _render(
            "E400-CSRF",
            gettext("This form has expired"),
            gettext(
                "Your session's security check failed (for example because cookies were "
                "blocked or the page was open for very long). Nothing was saved from this "
                "form; please go back, reload the page and answer again."
            ),
            400,
        )

    from sqlalchemy.exc import InterfaceError, OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    @app.errorhandler(OperationalError)
    @app.errorhandler(InterfaceError)
    @app.errorhandler(PoolTimeout)
    def database_unavailable(exc: Exception):
        # The database is restarting, unreachable, (SQLite) locked past the busy timeout, or
        # every pooled connection stayed busy past the pool's timeout (a flood of requests).
        # The request's transaction did not commit, so the page is safe to send again.
        app.logger.warning("database unavailable: %s", type(exc).__name__)
        from webapp.extensions import db

        try:
            db.session.rollback()
        except Exception:  # the connection is gone: discard the session (the pool replaces it)
            try:
                db.session.remove()
            except Exception:
                db.session.registry.clear()
        body, status = _render(
            "E503-BUSY",
            gettext("We are very busy for a moment"),
            gettext(
                "Nothing from this page was lost or saved twice: your earlier answers are "
                "safe. Please wait a few seconds, then reload the page and answer it again."
            ),
            503,
            link=request.full_path if request.method == "GET" else request.path,
            database=False,
        )
        return body, status, {"Retry-After": "5"}

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        if exc.code == 413:
            return _too_large()
        page = _HTTP_PAGES.get(exc.code or 500)
        if page is None:
            return _render(
                f"E{exc.code}",
                gettext("That did not work"),
                gettext("Please try again."),
                exc.code or 500,
            )
        return _render(page.code, page.title, page.message, exc.code or 500)

    @app.errorhandler(Exception)
    def server_error(exc: Exception):
        if isinstance(exc, HTTPException):
            return http_error(exc)
        app.logger.exception("unhandled error")
        from webapp.extensions import db

        db.session.rollback()
        page = _HTTP_PAGES[500]
        return _render(page.code, page.title, page.message, 500, database=False)


def _too_large():
    """The page for a body over its route's bound: the bound, and where to go back."""
    from flask import current_app, url_for

    from webapp.bundle import MAX_BUNDLE_BYTES, MAX_FILE_BYTES, MAX_YAML_BYTES, size_text
    from webapp.request_limits import current_limit
    from webapp.services.reconcile import MAX_BYTES as EXPORT_BYTES

    bound = current_limit()
    limit = size_text(
        bound.max_bytes if bound is not None else current_app.config["MAX_CONTENT_LENGTH"] or 0
    )
    console = request.blueprint == "researcher"
    if request.endpoint == "researcher.upload":
        message = (
            f"Nothing was saved: a study bundle may hold at most {size_text(MAX_BUNDLE_BYTES)}, "
            f"in files of at most {size_text(MAX_FILE_BYTES)} each (a study YAML at most "
            f"{size_text(MAX_YAML_BYTES)}); leave out or shrink the largest files (a zip "
            "compresses text well) and upload again."
        )
    elif request.endpoint == "researcher.reconcile_import":
        message = f"Nothing was read: a recruiter export may be at most {size_text(EXPORT_BYTES)}."
    elif console:
        message = f"Nothing was saved: this form may send at most {limit}."
    else:
        message = gettext(
            "Nothing from this page was saved: it can send at most %(limit)s. Your earlier "
            "answers are safe. Please go back, shorten your answer and send it again.",
            limit=limit,
        )
    if console:
        link = url_for("researcher.index")
    elif request.endpoint == "participant.page":
        link = request.path  # their page, as they left it
    else:
        link = None
    title = "That was too large to receive" if console else gettext("That was too large to receive")
    return _render("E413-TOO-LARGE", title, message, 413, link=link)
