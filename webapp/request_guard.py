"""Refuse requests whose path, query or form carries characters no page can use.

A NUL in a slug, a participant ID or a login name reached PostgreSQL and failed there as a
500 (``/s/a%00b`` without logging in). Checking each view's inputs would leave every new route
open again, so the whole request is checked once, before any other ``before_request`` function
(the participant gate, CSRF) or view touches the database. The rule itself is
:func:`webapp.text_rules.forbidden_character`.
"""

from __future__ import annotations

from flask import Flask, request

from webapp.errors import ParticipantError
from webapp.text_rules import forbidden_character

CODE = "E400-CHARACTERS"
MESSAGE = (
    "The link or the form you sent contains characters that cannot be used here (for example "
    "invisible control characters). Nothing was saved. Please use the link exactly as you "
    "received it, or type your answer again."
)


def _refuse() -> ParticipantError:
    # A form sent to a clean address can be shown again there (the participant's page with
    # their earlier answers safe); a bad address offers no link.
    clean = request.method == "POST" and forbidden_character(request.path) is None
    return ParticipantError(CODE, MESSAGE, 400, link=request.path if clean else None)


def check_request() -> None:
    """Raise a friendly 400 when the request's path, query or form has a forbidden character.

    Links and field names are one line; form values may hold tabs and line breaks (a typed
    reason, an address). Uploaded files are not form values: their own readers check them.
    """
    if forbidden_character(request.path) is not None:
        raise _refuse()
    for key, values in request.args.lists():
        if any(forbidden_character(s) is not None for s in (key, *values)):
            raise _refuse()
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    for key, values in request.form.lists():
        if forbidden_character(key) is not None:
            raise _refuse()
        if any(forbidden_character(v, line_breaks=True) is not None for v in values):
            raise _refuse()


def register(app: Flask) -> None:
    """Run :func:`check_request` first of all ``before_request`` functions of ``app``."""
    # Blueprints register app-wide hooks (the participant gate looks the slug up) before this
    # runs, and Flask runs hooks in registration order: go to the front explicitly.
    app.before_request_funcs.setdefault(None, []).insert(0, check_request)
