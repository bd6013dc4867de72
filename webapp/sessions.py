"""Two session cookies: one for participants, one for the researcher console.

Participant pages must work inside MTurk's iframe, so in production their cookie is
``SameSite=None``. The console needs no framing and should not send its cookie on cross-site
requests, so it gets its own ``SameSite=Lax`` cookie (``CONSOLE_SESSION_COOKIE_NAME``).
Flask has one session interface per app; this one picks the cookie by the request path (the
console is everything under the researcher blueprint's URL prefix). Each cookie carries its own
CSRF token, so the forms of each side keep working. Participant pages that need to know
whether a researcher is previewing read the console cookie through :func:`console_researcher`
(read-only, and checked like every console request).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Request, current_app, g, has_request_context, request
from flask.sessions import SecureCookieSessionInterface
from itsdangerous import BadSignature


def is_console_path(app: Flask, path: str) -> bool:
    """True if ``path`` belongs to the researcher console."""
    prefix = (app.blueprints["researcher"].url_prefix or "/researcher").rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


class AudienceSessionInterface(SecureCookieSessionInterface):
    """Signed-cookie sessions whose cookie name and SameSite depend on who the page is for.

    Flask calls the ``get_cookie_*`` hooks while the request context is pushed, in both
    ``open_session`` and ``save_session``, so the current path decides.
    """

    def open_session(self, app: Flask, request: Request) -> Any:
        # No cookie (every participant page after consent): an empty session without building
        # the signing serializer first, as Flask's own method does.
        if app.secret_key and not request.cookies.get(self.get_cookie_name(app)):
            return self.session_class()
        return super().open_session(app, request)

    def save_session(self, app: Flask, session: Any, response: Any) -> None:
        # Empty and untouched: nothing to set or delete (Flask's method would still work out
        # every cookie attribute first); a read still varies the response by cookie.
        if not session and not session.modified:
            if session.accessed:
                response.vary.add("Cookie")
            return
        super().save_session(app, session, response)

    def _console(self, app: Flask) -> bool:
        return has_request_context() and is_console_path(app, request.path)

    def get_cookie_name(self, app: Flask) -> str:
        if self._console(app):
            return str(app.config["CONSOLE_SESSION_COOKIE_NAME"])
        return super().get_cookie_name(app)

    def get_cookie_samesite(self, app: Flask) -> str | None:
        if self._console(app):
            return str(app.config["CONSOLE_SESSION_COOKIE_SAMESITE"])
        return super().get_cookie_samesite(app)

    def get_cookie_httponly(self, app: Flask) -> bool:
        return True if self._console(app) else super().get_cookie_httponly(app)


def console_session(app: Flask, req: Request) -> dict[str, Any]:
    """Return the contents of the console cookie sent with ``req`` (empty if none or forged)."""
    value = req.cookies.get(app.config["CONSOLE_SESSION_COOKIE_NAME"])
    if not value:  # every participant request without a console cookie: no serializer built
        return {}
    serializer = app.session_interface.get_signing_serializer(app)  # type: ignore[attr-defined]
    if serializer is None:
        return {}
    max_age = int(app.permanent_session_lifetime.total_seconds())
    try:
        data = serializer.loads(value, max_age=max_age)
    except BadSignature:
        return {}
    return data if isinstance(data, dict) else {}


def console_researcher() -> Any:
    """Return the researcher whose valid console session came with this request, or ``None``.

    For participant pages (preview gate, preview flag): the console cookie is checked exactly
    like a console request (:func:`webapp.services.accounts.session_researcher`), so a cookie
    from before a logout or a password change counts as nobody.
    """
    from webapp.services.accounts import session_researcher

    if "framelab_console_researcher" not in g:
        data = console_session(current_app, request)
        secret = current_app.config["SECRET_KEY"]
        g.framelab_console_researcher = session_researcher(data, secret) if data else None
    return g.framelab_console_researcher


def register(app: Flask) -> None:
    """Install the session interface."""
    app.session_interface = AudienceSessionInterface()
