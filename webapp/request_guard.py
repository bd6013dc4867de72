"""Check every request once, before any other ``before_request`` function or view runs.

Two checks that would leave every new route open again if each view made them:

* the body is bounded by what its route takes (:mod:`webapp.request_limits`), before anything
  parses it; a participant page's URL is looked up before its body is read, so a made-up
  token never costs a form parse;
* the path, query and form may carry no character that no page can use: a NUL in a slug, a
  participant ID or a login name reached PostgreSQL and failed there as a 500 (``/s/a%00b``
  without logging in). The rule itself is :func:`webapp.text_rules.forbidden_character`.

Both run before the participant gate and CSRF (which read the form) touch the body or the
database: :func:`register` must be the app's first ``before_request`` registration, which
:func:`webapp.create_app` makes it.
"""

from __future__ import annotations

from flask import Flask, request
from flask_babel import lazy_gettext

from webapp import request_limits
from webapp.errors import ParticipantError
from webapp.text_rules import forbidden_character

CODE = "E400-CHARACTERS"
MESSAGE = lazy_gettext(
    "The link or the form you sent contains characters that cannot be used here (for example "
    "invisible control characters). Nothing was saved. Please use the link exactly as you "
    "received it, or type your answer again."
)


def _refuse() -> ParticipantError:
    # A form sent to a clean address can be shown again there (the participant's page with
    # their earlier answers safe); a bad address offers no link.
    clean = request.method == "POST" and forbidden_character(request.path) is None
    return ParticipantError(CODE, MESSAGE, 400, link=request.path if clean else None)


def _logged_in() -> bool:
    from webapp.sessions import console_researcher

    return console_researcher() is not None


def _admit_body() -> bool:
    """Bound the body, look a participant page's URL up, then read the body; False: unread."""
    endpoint = request.endpoint
    limit = request_limits.limit_for(endpoint, request.method, request.mimetype, _logged_in)
    request_limits.bound_request(limit)
    link = None
    if endpoint == "participant.page" and limit.max_bytes:
        from webapp.participant.lookup import page_url_is_known

        args = request.view_args or {}
        if not page_url_is_known(str(args.get("slug")), str(args.get("token"))):
            request_limits.skip_body()  # the view says why, without the body
            return False
        link = request.path  # their page: what they answered before is safe there
    request_limits.admit_body(limit, link=link)
    return limit.max_bytes > 0


def check_request() -> None:
    """Bound and admit the body; raise a friendly 400 for a forbidden character.

    Links and field names are one line; form values may hold tabs and line breaks (a typed
    reason, an address). Uploaded files are not form values: their own readers check them.
    """
    if forbidden_character(request.path) is not None:
        raise _refuse()
    for key, values in request.args.lists():
        if any(forbidden_character(s) is not None for s in (key, *values)):
            raise _refuse()
    if not _admit_body():
        return
    for key, values in request.form.lists():
        if forbidden_character(key) is not None:
            raise _refuse()
        if any(forbidden_character(v, line_breaks=True) is not None for v in values):
            raise _refuse()


def register(app: Flask) -> None:
    """Run :func:`check_request` before every request of ``app``.

    Flask runs ``before_request`` functions in the order they were registered, so this must
    come before CSRF protection (``csrf.init_app``) and the blueprints (the participant gate
    is an app-wide hook of the researcher blueprint).
    """
    app.before_request(check_request)
