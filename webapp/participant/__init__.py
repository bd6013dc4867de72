"""Participant-facing pages: entry, consent, task pages and the end of the session."""

from flask import Blueprint

bp = Blueprint("participant", __name__, template_folder="templates")

from webapp.participant import home, routes  # noqa: E402,F401  (registers the views)
