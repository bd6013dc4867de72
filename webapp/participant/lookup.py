"""The study of a participant URL, looked up once per request.

The participant gate (:mod:`webapp.researcher.gate`) and the participant views both need the
study named by the URL; on the load test's pages the second identical query was a tenth of the
app's time. The memo lives in ``flask.g`` so the services stay free of request state.
"""

from __future__ import annotations

from flask import g

from webapp.models import Study
from webapp.services.studies import get_study


def request_study(slug: str) -> Study | None:
    """:func:`webapp.services.studies.get_study`, at most once per slug and request."""
    cache: dict[str, Study | None] = g.setdefault("framelab_studies", {})
    if slug not in cache:
        cache[slug] = get_study(slug)
    return cache[slug]
