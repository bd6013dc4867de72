"""Friendly, numbered error pages for participants: never a stack trace or an exception text."""

from __future__ import annotations

from dataclasses import dataclass

from flask import Flask, render_template, request
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException


class ParticipantError(Exception):
    """An error to show a participant with a code such as ``E404-STUDY``."""

    def __init__(self, code: str, message: str, status: int = 400, link: str | None = None):
        super().__init__(message)
        self.code, self.message, self.status, self.link = code, message, status, link


@dataclass(frozen=True)
class _Page:
    code: str
    title: str
    message: str


_HTTP_PAGES = {
    400: _Page(
        "E400-REQUEST", "Something was wrong with that request", "Please go back and try again."
    ),
    404: _Page("E404-PAGE", "Page not found", "Please check the link you were given."),
    405: _Page(
        "E405-METHOD",
        "That did not work",
        "This page cannot be used like that. Please use the buttons on the page.",
    ),
    500: _Page(
        "E500-SERVER",
        "Something went wrong on our side",
        "Your answers so far are saved. Please reload the page in a minute; if the "
        "problem stays, contact the researchers and quote this code.",
    ),
}


def _render(code: str, title: str, message: str, status: int, link: str | None = None):
    return (
        render_template("errors/error.html", code=code, title=title, message=message, link=link),
        status,
    )


def register(app: Flask) -> None:
    """Register the error handlers on ``app``."""

    @app.errorhandler(ParticipantError)
    def participant_error(exc: ParticipantError):
        return _render(exc.code, "We cannot continue here", exc.message, exc.status, exc.link)

    @app.errorhandler(CSRFError)
    def csrf_error(exc: CSRFError):
        return _render(
            "E400-CSRF",
            "This form has expired",
            "Your session's security check failed (for example because cookies were blocked "
            "or the page was open for very long). Nothing was saved from this form; please "
            "go back, reload the page and answer again.",
            400,
        )

    from sqlalchemy.exc import InterfaceError, OperationalError

    @app.errorhandler(OperationalError)
    @app.errorhandler(InterfaceError)
    def database_unavailable(exc: Exception):
        # The database is restarting, unreachable or (SQLite) locked past the busy timeout.
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
            "We are very busy for a moment",
            "Nothing from this page was lost or saved twice: your earlier answers are safe. "
            "Please wait a few seconds, then reload the page and answer it again.",
            503,
            link=request.full_path if request.method == "GET" else request.path,
        )
        return body, status, {"Retry-After": "5"}

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        page = _HTTP_PAGES.get(exc.code or 500)
        if page is None:
            return _render(
                f"E{exc.code}", "That did not work", "Please try again.", exc.code or 500
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
        return _render(page.code, page.title, page.message, 500)
