"""Keep participants out of studies that are not live (a polite page instead).

Registered on the whole app by the researcher blueprint because the lifecycle belongs to the
console; the participant views stay unaware of it.
"""

from __future__ import annotations

from flask import current_app, g, request
from flask_babel import lazy_gettext

from webapp.errors import ParticipantError
from webapp.models import Study, StudyState
from webapp.participant.lookup import request_study
from webapp.researcher.blueprint import bp
from webapp.services.accounts import can_access
from webapp.services.entry import EntryError, find_participant, parse_entry
from webapp.services.researchers import participant_gate
from webapp.sessions import console_researcher

_STARTING = {"participant.entry", "participant.start"}
_MESSAGES = {
    StudyState.paused: (
        "E403-PAUSED",
        lazy_gettext(
            "This study is paused at the moment and is not taking new participants. Please try "
            "again later, or return the submission on the platform you came from (no penalty)."
        ),
        403,
    ),
    StudyState.closed: (
        "E410-CLOSED",
        lazy_gettext(
            "This study has closed and no longer takes answers. Thank you for your interest! "
            "Please return the submission on the platform you came from (no penalty)."
        ),
        410,
    ),
    StudyState.draft: (
        # Someone with a real link to a study being prepared is told it is not open
        # yet, not that the link is wrong (they would re-check a correct link).
        "E403-NOT-OPEN",
        lazy_gettext(
            "This study is not open yet. Please try again later, or return the submission on the "
            "platform you came from (no penalty)."
        ),
        403,
    ),
}


def _returning(study: Study) -> bool:
    """True when the study link names someone already enrolled (they resume, not start)."""
    source = request.args if request.method == "GET" else request.form
    params = {k: v for k, v in source.items() if v}  # the consent form sends empty fields
    try:
        entry = parse_entry(params, slug=study.slug, secret=current_app.config["SECRET_KEY"])
    except EntryError:
        return False  # the participant view explains what is wrong with the link
    return not entry.preview and find_participant(study, entry) is not None


@bp.before_app_request
def study_must_be_live() -> None:
    """Refuse participant pages of draft, paused (new arrivals) and closed studies."""
    if request.blueprint != "participant" or not request.view_args:
        return
    slug = request.view_args.get("slug")
    study = request_study(slug) if isinstance(slug, str) else None
    if study is None:
        return  # the participant view shows its own "not found" page
    # The same check as every console view: a logged-out or re-passworded session is no one.
    researcher = console_researcher()
    preview = researcher is not None and can_access(researcher, study)
    if preview:
        g.console_preview = study  # the preview bar over the page (study_routes.preview_bar)
    starting = request.endpoint in _STARTING and not _returning(study)
    blocked = participant_gate(study, starting=starting, preview=preview)
    if blocked is not None:
        raise ParticipantError(*_MESSAGES[blocked])
