"""Security headers. Participant pages may be framed by MTurk only, and only for MTurk sessions."""

from __future__ import annotations

from flask import Flask, Response, g

MTURK_ANCESTORS = "https://*.mturk.com https://workersandbox.mturk.com https://www.mturk.com"
# Forms may post (and their redirects may lead) to the recruiters' completion endpoints.
FORM_ACTION = "'self' https://app.prolific.com https://*.mturk.com https://workersandbox.mturk.com"
HSTS = "max-age=31536000; includeSubDomains"


def allow_mturk_framing() -> None:
    """Mark the current response as an MTurk page that MTurk may show in its iframe."""
    g.framelab_mturk_frame = True


def register(app: Flask) -> None:
    """Add the headers to every response (HSTS in production only)."""
    hsts = app.config.get("ENV_NAME") == "production"

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
