"""The study (and participant) of a participant URL, looked up once per request.

The request guard (:mod:`webapp.request_guard`, before a page's body is read), the participant
gate (:mod:`webapp.researcher.gate`) and the participant views all need the study named by the
URL; a page URL (``/s/<slug>/p/<token>``) also names the participant, and the page's lookup
reads both rows in one statement. The memo lives in ``flask.g`` so the services stay free of
request state.
"""

from __future__ import annotations

from flask import current_app, g, request

from webapp.definition_cache import study_definition
from webapp.i18n import use_language
from webapp.models import Study
from webapp.services import flow
from webapp.services.studies import get_study


def request_study(slug: str) -> Study | None:
    """:func:`webapp.services.studies.get_study`, at most once per slug and request."""
    cache: dict[str, Study | None] = g.setdefault("framelab_studies", {})
    if slug not in cache:
        token = (request.view_args or {}).get("token")
        found = request_page_rows(slug, token) if isinstance(token, str) else None
        cache[slug] = found.study if found is not None else get_study(slug)
    study = cache[slug]
    if study is not None:  # the rest of the request speaks the study's language
        use_language(study_definition(study).language)
    return study


def request_page_rows(slug: str, token: str) -> flow.PageRows | None:
    """The participant of a page URL in the study ``slug`` with the study (``None``: not ours,
    or not there), read once per request in one statement; on a POST under the participant's
    row lock, which the answer's transaction holds (:func:`webapp.services.flow.submit`)."""
    memo: dict[tuple[str, str], flow.PageRows | None] = g.setdefault("framelab_page_rows", {})
    if (slug, token) not in memo:
        memo[slug, token] = flow.participant_in_study(
            token, current_app.config["SECRET_KEY"], slug, lock=request.method == "POST"
        )
    return memo[slug, token]


def page_url_is_known(slug: str, token: str) -> bool:
    """Whether a page URL names a participant of the study ``slug``, asked before its body is read.

    This is the page's own lookup (:func:`request_page_rows`), made earlier and kept for the
    gate and the view, so it costs no statement; a made-up token is refused by its signature
    without one. A POST's lookup takes the participant's row lock (PostgreSQL) and every SQLite
    transaction the database's write lock (``BEGIN IMMEDIATE``), so the body, at most a page's
    bound, is read under it; production runs on PostgreSQL behind a proxy that passes bodies
    on whole.
    """
    return request_page_rows(slug, token) is not None
