"""A participant who closes the browser and comes back a day later resumes where they were.

The app's clock is ``webapp.models.utcnow`` as imported by the participant views; the test moves
it forward by a day (time travel), then opens the study link again from a fresh browser.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.extensions import db
from webapp.models import ChoiceResponse, Participant, ParticipantStatus, utcnow


def test_return_a_day_later_resumes_on_the_same_page_and_completes(
    app, study, make_bot, monkeypatch
):
    first = make_bot(platform="prolific", external_id="RETURNER1")
    page = first.open()
    while page.kind != "wtp" or page.main["data-trial"] != "3":
        page = first.step()
    where = (page.kind, page.main["data-pair"], page.main["data-trial"])

    import webapp.participant.routes as routes

    later = utcnow() + timedelta(days=1, minutes=7)
    monkeypatch.setattr(routes, "utcnow", lambda: later)

    # A new browser (no cookies) with the same Prolific link.
    second = Bot(
        FlaskTransport(app),
        study,
        BotBehaviour(platform="prolific"),
        external_id="RETURNER1",
    )
    page = second.open(first.entry_url())
    assert page.status == 200
    assert (page.kind, page.main["data-pair"], page.main["data-trial"]) == where
    result = second.run()
    assert result.outcome == "completed"

    with app.app_context():
        (p,) = db.session.scalars(select(Participant)).all()
        assert p.status is ParticipantStatus.completed
        assert p.finished_at is not None and p.finished_at >= later
        rows = db.session.scalars(select(ChoiceResponse).order_by(ChoiceResponse.trial_index))
        rows = list(rows)
    assert [r.trial_index for r in rows] == list(range(10))  # each trial exactly once
    assert all(r.wtp_premium_usd is not None for r in rows)
    resumed = rows[3]
    assert resumed.answered_at < later <= resumed.wtp_answered_at  # choice before, WTP after


def test_the_old_tab_posting_a_day_later_is_accepted_once(app, study, make_bot, monkeypatch):
    bot = make_bot(platform="link", external_id="OLDTAB")
    page = bot.open()
    while page.kind != "choice":
        page = bot.step()
    answer = bot.answer()

    import webapp.participant.routes as routes

    later = utcnow() + timedelta(days=1)
    monkeypatch.setattr(routes, "utcnow", lambda: later)
    nxt = bot.post(answer)  # the page stayed open overnight: still accepted (no CSRF expiry)
    assert nxt.status == 200 and nxt.kind == "wtp"
    again = bot.transport.request("POST", page.url, answer)  # and a replay changes nothing
    assert again[0] in (302, 303)
    with app.app_context():
        assert len(db.session.scalars(select(ChoiceResponse)).all()) == 1
