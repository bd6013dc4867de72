"""Participant-facing pages: entry, consent, task pages and the end of the session."""

from webapp.participant import home, images, routes  # noqa: F401  (registers the views)
from webapp.participant.blueprint import bp

__all__ = ["bp"]
