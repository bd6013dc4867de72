"""MTurk assignments on resume: the completion form posts the assignment that arrived with the
visit that finishes, every assignment is kept as history, and the bonus file pays the one the
study was finished with — not the first visit's, and not one planted by someone else."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from webapp.extensions import db
from webapp.models import MTurkAssignment, Platform, PlatformIdentity
from webapp.services.payments import compute_bonuses
from webapp.services.studies import get_study

# Two of the demo's ten pairs: these checks need participants, not their every page.
pytestmark = pytest.mark.demo_pairs(2)

WORKER = "A2WORKERRESUMES"
FIRST = {"assignmentId": "3FIRSTASSIGNMENT0000000000001", "hitId": "3FIRSTHIT00000000000000000001"}
SECOND = {
    "assignmentId": "3SECONDASSIGNMENT000000000002",
    "hitId": "3SECONDHIT0000000000000000002",
    "turkSubmitTo": "https://www.mturk.com",
}


def _form(page_text: str) -> tuple[str, dict[str, str]]:
    action = re.search(r'<form id="autosubmit" method="post" action="([^"]+)"', page_text)
    assert action is not None, "no MTurk completion form"
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page_text))
    return action.group(1), fields


def _finish(bot):
    page = bot.page
    while bot.verdict(page) is None:
        page = bot.step()
    assert page.kind == "completed", page.kind
    return page


def _history(app) -> list[tuple[str, str, bool]]:
    with app.app_context():
        rows = db.session.scalars(select(MTurkAssignment).order_by(MTurkAssignment.id))
        return [(r.assignment_id, r.return_url, r.submitted_at is not None) for r in rows]


def _bonus_assignment(app, slug: str) -> str | None:
    with app.app_context():
        (line,) = compute_bonuses(get_study(slug), Platform.mturk)
        return line.assignment_id


def test_a_worker_back_through_a_new_assignment_submits_the_new_one(app, study, make_bot):
    bot = make_bot(platform="mturk", external_id=WORKER)
    bot.open(bot.entry_url(FIRST))
    bot.step()  # consent
    bot.step()  # one more page; then the first assignment expires and MTurk gives a new one
    bot.open(bot.entry_url(SECOND))
    page = _finish(bot)
    action, fields = _form(page.text)
    assert action == "https://www.mturk.com/mturk/externalSubmit"
    assert fields["assignmentId"] == SECOND["assignmentId"]
    assert _history(app) == [
        (FIRST["assignmentId"], "https://workersandbox.mturk.com", False),
        (SECOND["assignmentId"], "https://www.mturk.com", True),
    ]
    assert _bonus_assignment(app, study.slug) == SECOND["assignmentId"]
    with app.app_context():
        ident = db.session.scalars(select(PlatformIdentity)).one()
        assert (ident.external_session_id, ident.external_study_id) == (
            SECOND["assignmentId"],
            SECOND["hitId"],
        )


def test_a_planted_assignment_is_neither_submitted_nor_paid(app, runner, study, make_bot):
    # Mallory knows the worker ID and arrives first with a made-up assignment.
    mallory = make_bot(platform="mturk", external_id=WORKER)
    mallory.open(mallory.entry_url({"assignmentId": "3PLANTEDBYMALLORY000000000000"}))
    mallory.step()  # consent: the worker's session now exists, started by Mallory
    # The real worker arrives through their own HIT and finishes.
    worker = make_bot(platform="mturk", external_id=WORKER)
    worker.open(worker.entry_url(SECOND))
    page = _finish(worker)
    assert _form(page.text)[1]["assignmentId"] == SECOND["assignmentId"]
    # Mallory's own page now shows the completion form with *her* visit's assignment: posting
    # it to MTurk does nothing for her, and it changes nothing here.
    mallory.reload()
    assert _form(mallory.page.text)[1]["assignmentId"] == "3PLANTEDBYMALLORY000000000000"
    assert _bonus_assignment(app, study.slug) == SECOND["assignmentId"]
    # The researcher sees both assignments in the history, the finishing one marked.
    assert [(a, done) for a, _, done in _history(app)] == [
        ("3PLANTEDBYMALLORY000000000000", False),
        (SECOND["assignmentId"], True),
    ]
    listed = runner.invoke(args=["mturk", "assignments", study.slug])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].startswith("participant_id,WorkerId,AssignmentId,HITId,submit_host")
    assert [(ln.split(",")[2], ln.split(",")[-1]) for ln in lines[1:]] == [
        ("3PLANTEDBYMALLORY000000000000", "0"),
        (SECOND["assignmentId"], "1"),
    ]


def test_a_page_url_cannot_borrow_another_workers_assignment(app, study, make_bot):
    alice = make_bot(platform="mturk", external_id="A3ALICE")
    bob = make_bot(platform="mturk", external_id="A3BOB")
    alice.open()
    alice.step()
    bob.open()
    bob.step()
    from webapp.services import flow

    with app.app_context():
        alice_row = db.session.scalars(
            select(MTurkAssignment).where(MTurkAssignment.assignment_id == "AA3ALICE")
        ).one()
        bob_pid = db.session.scalars(
            select(PlatformIdentity.participant_id).where(PlatformIdentity.external_id == "A3BOB")
        ).one()
        token = flow.participant_token(bob_pid, app.config["SECRET_KEY"], alice_row.id)
        assert flow.participant_from_token(token, app.config["SECRET_KEY"]).id == bob_pid
        assert flow.assignment_from_token(token, app.config["SECRET_KEY"]) is None
