"""Security headers (participant pages may be framed by MTurk only, and only for MTurk
sessions), and a warning when a reverse proxy's forwarding headers go unread."""

from __future__ import annotations

from flask import Flask, Response, g, request

MTURK_ANCESTORS = "https://*.mturk.com https://workersandbox.mturk.com https://www.mturk.com"
# Forms may post (and their redirects may lead) to the recruiters' completion endpoints.
FORM_ACTION = "'self' https://app.prolific.com https://*.mturk.com https://workersandbox.mturk.com"
HSTS = "max-age=31536000; includeSubDomains"


def allow_mturk_framing() -> None:
    """Mark the current response as an MTurk page that MTurk may show in its iframe."""
    g.framelab_mturk_frame = True


PROXY_WARNING = (
    "requests arrive with %s but FRAMELAB_PROXY_HOPS is 0: every visitor has the proxy's "
    "address here, so the login and enrolment limits count all of them as one client (one "
    "person's failed logins lock everyone out). Set FRAMELAB_PROXY_HOPS to the number of "
    "proxies in front of the app (docs/platform.md, Deploy)."
)


def register(app: Flask) -> None:
    """Add the headers to every response (HSTS in production only); warn once about a proxy
    whose forwarding headers nobody reads."""
    hsts = app.config.get("ENV_NAME") == "production"
    if not int(app.config.get("PROXY_HOPS") or 0):
        warned: list[str] = []  # once per process: the first forwarded request says it

        @app.before_request
        def _unread_proxy_headers() -> None:
            if warned:
                return
            header = next(
                (h for h in ("X-Forwarded-For", "Forwarded") if h in request.headers), None
            )
            if header is not None:
                warned.append(header)
                app.logger.warning(PROXY_WARNING, header)

    @app.after_request
    def _headers(response: Response) -> Response:
        framed = bool(g.get("framelab_mturk_frame"))
        ancestors = MTURK_ANCESTORS if framed else "'none'"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            f"form-action {FORM_ACTION}; base-uri 'none'; object-src 'none'; "
            f"frame-ancestors {ancestors}"
        )
        if not framed:
            # X-Frame-Options cannot name MTurk, so it is only sent when nobody may frame us.
            response.headers["X-Frame-Options"] = "DENY"
        response.headers["X-Content-Type-Options"] = "nosniff"
        # Participant URLs carry a session token: never leak it to other sites.
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers.setdefault("Cache-Control", "no-store")
        if hsts:
            # Production is served over HTTPS only: browsers must never try plain HTTP again.
            response.headers["Strict-Transport-Security"] = HSTS
        return response
