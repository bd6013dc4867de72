"""Product images of a study, served to its participants only (``/s/<slug>/p/<token>/image/…``).

An image is named by the SHA-256 of its content, which the study definition records at load:
the URL cannot name a path, so there is nothing to traverse, and an image's bytes never change
under its URL. It is sent with the type its magic bytes showed at load and ``nosniff`` (and the
app's content security policy), so a file that is also something else is never run as that.
"""

from __future__ import annotations

import re

from flask import Response

from webapp.errors import ParticipantError
from webapp.participant.blueprint import bp
from webapp.participant.lookup import request_page_rows, request_study
from webapp.services.studies import study_image

_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
# Private: the URL holds the participant's token. A day is longer than any session.
CACHE_CONTROL = "private, max-age=86400, immutable"


def _not_found() -> ParticipantError:
    return ParticipantError("E404-IMAGE", "This image is not part of the study.", 404)


@bp.route("/s/<slug>/p/<token>/image/<digest>", methods=["GET"])
def product_image(slug: str, token: str, digest: str) -> Response:
    """Send a product image of the participant's study."""
    if not _DIGEST_RE.match(digest):
        raise _not_found()
    study = request_study(slug)
    if study is None or request_page_rows(slug, token) is None:
        raise ParticipantError(
            "E404-SESSION", "We could not find your session. Please use the study link again.", 404
        )
    image = study_image(study, digest)
    if image is None:
        raise _not_found()
    response = Response(image.content, mimetype=image.media_type)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Disposition"] = "inline"
    response.headers["Cache-Control"] = CACHE_CONTROL
    response.set_etag(image.sha256)
    return response
