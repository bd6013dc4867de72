"""The platform's own address (``/``): who this server is for and where each visitor goes.

A participant opens a study by its link (``/s/SLUG?...``) from Prolific, MTurk or a researcher;
someone who arrives at the bare address (a researcher after ``make run``, a participant who cut
the link) gets this page instead of "page not found". It names no study: which studies run here
is not public.
"""

from __future__ import annotations

from flask import render_template

from webapp.participant.blueprint import bp


@bp.get("/")
def home() -> str:
    """A short page: participants need their study link, researchers sign in to the console."""
    return render_template("participant/home.html")
