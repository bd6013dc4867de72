"""How large a request body each route may receive, enforced before anything parses it.

Anyone can send a body to any route, and parsing is what costs: Werkzeug bounds neither the
size nor the field count of an urlencoded form (``MAX_FORM_MEMORY_SIZE`` and
``MAX_FORM_PARTS`` apply to multipart only), and a million fields cost seconds of CPU and
hundreds of MiB. So one bound for every route is not enough: each endpoint gets the bound of
what it legitimately takes (:func:`limit_for`): nothing for ``GET``, a few KiB for the console
login and the consent form, the largest answer page a study can have for participant pages,
and a large bound only for the two console uploads, only for a logged-in researcher sending
``multipart/form-data``.

:func:`admit_body` enforces the bound before the form is parsed: a declared ``Content-Length``
over it is refused before a byte is read; a body without one (chunked) is read at most one
byte past it and refused; a body longer than it declared is read only as far as declared. The
fields of an urlencoded or multipart body are counted in its raw bytes before it is parsed.
Uploads are not held in memory: Werkzeug's multipart parser streams them under the same byte
bound and counts their parts as they arrive.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flask import g, request
from flask_babel import lazy_gettext
from werkzeug.datastructures import ImmutableMultiDict, MultiDict
from werkzeug.exceptions import RequestEntityTooLarge

from webapp import bundle
from webapp.participant_error import ParticipantError
from webapp.services import reconcile
from webapp.tasks.base import PAGE_FORM_BYTES, PAGE_FORM_FIELDS

KIB = 1024
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class BodyLimit:
    """At most ``max_bytes`` of body and ``max_fields`` form fields.

    ``streamed``: an upload, parsed as it arrives instead of read into memory first.
    """

    max_bytes: int
    max_fields: int
    streamed: bool = False


NOTHING = BodyLimit(0, 0)
# One participant answer page: the bound every task type's page form is held to when its
# study is validated (webapp.tasks.base.PAGE_FORM_BYTES).
PARTICIPANT_PAGE = BodyLimit(PAGE_FORM_BYTES, PAGE_FORM_FIELDS)
# The consent form: a CSRF token, two buttons and the recruiter's IDs (each at most 128).
CONSENT = BodyLimit(16 * KIB, 32)
# A username (80 characters), a password (200) and a CSRF token.
LOGIN = BodyLimit(8 * KIB, 8)
# A console form sent without a valid console session is refused anyway (login_required).
CONSOLE_ANONYMOUS = BodyLimit(8 * KIB, 16)
# Console forms of a logged-in researcher; the largest is a list of IDs to reject.
CONSOLE = BodyLimit(256 * KIB, 64)
# A form of a route not listed here (one added later): a small bound until it is given one.
OTHER = BodyLimit(16 * KIB, 32)
# Multipart framing of one part (boundary, headers, a file name of up to 200 characters).
_PART_OVERHEAD = 1 * KIB
UPLOADS = {
    "researcher.upload": BodyLimit(
        bundle.MAX_BUNDLE_BYTES + (bundle.MAX_FILES + 8) * _PART_OVERHEAD,
        bundle.MAX_FILES + 8,
        streamed=True,
    ),
    "researcher.reconcile_import": BodyLimit(
        reconcile.MAX_BYTES + 8 * _PART_OVERHEAD, 8, streamed=True
    ),
}
PARTICIPANT = {"participant.start": CONSENT, "participant.page": PARTICIPANT_PAGE}

_ADMITTED = "framelab_body_admitted"
_LIMIT = "framelab_body_limit"


def limit_for(
    endpoint: str | None, method: str, mimetype: str, logged_in: Callable[[], bool]
) -> BodyLimit:
    """The body bound of a request to ``endpoint``.

    Parameters
    ----------
    endpoint : str or None
        The matched endpoint (``None``: no route matched, the request ends in a 404 or 405).
    method : str
        The HTTP method.
    mimetype : str
        The body's media type, without parameters.
    logged_in : callable
        Whether the request carries a valid console session; called only for console routes.

    Returns
    -------
    BodyLimit
        Bytes and fields the body may have.

    Examples
    --------
    >>> limit_for("participant.page", "GET", "", lambda: False).max_bytes
    0
    >>> limit_for("researcher.upload", "POST", "multipart/form-data", lambda: False).streamed
    False
    """
    if method in SAFE_METHODS or endpoint is None:
        return NOTHING
    if endpoint in PARTICIPANT:
        return PARTICIPANT[endpoint]
    if endpoint == "researcher.login":
        return LOGIN
    if not endpoint.startswith("researcher."):
        return OTHER
    if not logged_in():
        return CONSOLE_ANONYMOUS
    upload = UPLOADS.get(endpoint)
    if upload is not None and mimetype == "multipart/form-data":
        return upload
    return CONSOLE


def field_count(data: bytes, mimetype: str, boundary: str | None) -> int:
    """The number of fields in a raw form body, counted without parsing it.

    Examples
    --------
    >>> field_count(b"a=1&b=2&c", "application/x-www-form-urlencoded", None)
    3
    >>> field_count(b"--x\\r\\n...\\r\\n--x\\r\\n...\\r\\n--x--\\r\\n", "multipart/form-data", "x")
    2
    """
    if not data:
        return 0
    if mimetype == "application/x-www-form-urlencoded":
        return data.count(b"&") + 1
    if mimetype == "multipart/form-data" and boundary:
        return max(data.count(b"--" + boundary.encode("latin-1", "replace")) - 1, 0)
    return 0


def bound_request(limit: BodyLimit) -> None:
    """Apply ``limit`` to this request and refuse a declared length over it (unread).

    Raises
    ------
    werkzeug.exceptions.RequestEntityTooLarge
        The ``Content-Length`` is larger than the bound.
    """
    setattr(g, _LIMIT, limit)
    # A buffered body is read one byte past its bound, so that "larger" can be told from
    # "exactly as large" on a body without a declared length (Werkzeug's stream stops at
    # the bound without a word).
    request.max_content_length = limit.max_bytes + (0 if limit.streamed else 1)
    request.max_form_parts = limit.max_fields
    request.max_form_memory_size = min(limit.max_bytes, PARTICIPANT_PAGE.max_bytes)
    declared = request.content_length
    if declared is not None and declared > limit.max_bytes:
        raise RequestEntityTooLarge()


def skip_body() -> None:
    """Leave this request's body unread: nothing may parse it, and its form reads as empty."""
    setattr(g, _LIMIT, NOTHING)
    setattr(g, _ADMITTED, False)
    request.max_content_length = 0


def admit_body(limit: BodyLimit, *, link: str | None = None) -> None:
    """Read the body within ``limit`` and count its fields, before the form is parsed.

    A buffered body is read into the request's cache, from which Werkzeug then parses the form;
    a streamed one (an upload) is left to the multipart parser, under the same byte bound and
    ``max_form_parts``.

    Parameters
    ----------
    limit : BodyLimit
        The request's bound (see :func:`bound_request`, which must have run).
    link : str, optional
        Where the refusal page sends the participant back to (their page).

    Raises
    ------
    werkzeug.exceptions.RequestEntityTooLarge
        More bytes than the bound.
    webapp.participant_error.ParticipantError
        ``E400-FIELDS``: more fields than the bound.
    """
    if limit.max_bytes == 0:  # a body was not expected: nothing is read, and nothing parses
        skip_body()
        return
    if not limit.streamed:
        data = request.get_data(cache=True)
        if len(data) > limit.max_bytes:
            raise RequestEntityTooLarge()
        fields = field_count(data, request.mimetype, request.mimetype_params.get("boundary"))
        if fields > limit.max_fields:
            raise ParticipantError(
                "E400-FIELDS",
                lazy_gettext(
                    "That form had more fields than a page can send (at most %(n)s), so "
                    "nothing from it was saved. Your earlier answers are safe. Please go back, "
                    "reload the page and answer again.",
                    n=limit.max_fields,
                ),
                400,
                link=link,
            )
    setattr(g, _ADMITTED, True)


def current_limit() -> BodyLimit | None:
    """The bound applied to this request (``None`` before :func:`bound_request`)."""
    return g.get(_LIMIT)


def admitted_form() -> MultiDict[str, str]:
    """The request's form if its body was admitted, else an empty one (nothing is read).

    Error pages look at the form (MTurk's parameters); a refused or unread body must not be
    parsed there either.
    """
    if g.get(_ADMITTED):
        return request.form
    return ImmutableMultiDict()
