"""The participant flow through the real routes, driven by bots."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import func, select

from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import (
    ChoiceResponse,
    PageVisit,
    Participant,
    ParticipantStatus,
    PlatformIdentity,
    QuizAttempt,
    TaskResponse,
)
from webapp.services.design import derive_sequence


def _participants(query):
    return query(lambda: db.session.scalars(select(Participant).order_by(Participant.id)).all())


def test_prolific_participant_completes_and_lands_on_prolific(make_bot, query, study):
    bot = make_bot(platform="prolific")
    result = bot.run()
    assert result.outcome == "completed"
    url = urlsplit(result.final_url)
    assert (url.netloc, url.path) == ("app.prolific.com", "/submissions/complete")
    code = study.recruitment.completion_codes.completed
    assert parse_qs(url.query) == {"cc": [code]}
    # consent, instructions, quiz, 10 x (choice, wtp), attention, demographics, debrief
    assert result.pages == 1 + 1 + 1 + 20 + 1 + 1 + 1

    def check():
        p = db.session.scalars(select(Participant)).one()
        assert p.status is ParticipantStatus.completed
        assert p.quiz_passed is True and p.attention_passed is True
        assert p.finished_at is not None and p.code.startswith("p_")
        choices = p.choices
        assert len(choices) == 10
        assert all(c.wtp_premium_usd is not None for c in choices)
        assert all(
            abs(c.wtp_premium_pct - 100 * c.wtp_premium_usd / c.other_price_usd) < 1e-9
            for c in choices
        )
        # What was shown is exactly what the recorded seed and sequence re-derive.
        shown = [(c.trial_index, c.pair_id, c.format, c.target_side) for c in choices]
        derived = [
            (t.trial_index, t.pair_id, t.format, t.target_side)
            for t in derive_sequence(study_definition(p.study).tasks, p.seed, p.sequence)
        ]
        assert shown == derived
        # Raw Prolific IDs live only in PlatformIdentity.
        ident = db.session.scalars(select(PlatformIdentity)).one()
        assert ident.external_id == bot.external_id and ident.external_session_id
        assert bot.external_id not in p.code
        n_visits = db.session.scalar(select(func.count()).select_from(PageVisit))
        assert n_visits == result.pages - 1  # every page after consent was timed
        assert all(c.server_rt_ms is not None and c.rt_ms is not None for c in choices)
        demo = db.session.scalars(
            select(TaskResponse).where(TaskResponse.task_type == "demographics")
        ).one()
        assert 18 <= demo.payload["answers"]["age"] <= 75

    query(check)


def test_chose_target_matches_the_side_shown(make_bot, query):
    bot = make_bot(p_target={"original": 1.0, "summary": 0.0})
    assert bot.run().outcome == "completed"
    choices = query(lambda: db.session.scalars(select(ChoiceResponse)).all())
    for c in choices:
        assert c.chose_target == (c.format == "original")
        assert c.chose_target == (c.chosen_side == c.target_side)


def test_same_id_resumes_on_the_same_page(make_bot, app, study):
    bot = make_bot(platform="link", external_id="resume-me")
    bot.open()
    for _ in range(5):  # consent, instructions, quiz, choice 1, wtp 1
        bot.step()
    assert bot.page.kind == "choice" and bot.page.main["data-trial"] == "1"
    where = bot.page.url
    # A new browser (no cookies) with the same ID comes back to the same page.
    again = make_bot(platform="link", external_id="resume-me").open()
    assert again.kind == "choice" and again.url == where
    assert again.main["data-pair"] == bot.page.main["data-pair"]


def test_repeat_participation_shows_the_code_again(make_bot, study, query):
    assert make_bot(platform="link", external_id="once").run().outcome == "completed"
    n_pages = query(lambda: db.session.scalar(select(func.count()).select_from(PageVisit)))
    page = make_bot(platform="link", external_id="once").open()
    # Not a second run: the outcome page again, with the code.
    assert page.status == 200 and page.kind == "completed" and page.main["data-returning"] == "1"
    code = study.recruitment.completion_codes.completed
    assert f'data-completion-code="{code}"' in page.text and "already finished" in page.text
    assert query(lambda: db.session.scalar(select(func.count()).select_from(PageVisit))) == (
        n_pages
    )


def test_excluded_ids_are_refused(app, make_bot, study):
    from webapp.models import Study

    def exclude():
        s = db.session.scalars(select(Study)).one()
        s.definition = {
            **s.definition,
            "recruitment": {**s.definition["recruitment"], "exclude_ids": ["pilot-7"]},
        }
        db.session.commit()

    with app.app_context():
        exclude()
    page = make_bot(platform="link", external_id="pilot-7").open()
    assert page.status == 403 and page.error_code == "E403-EXCLUDED"


def test_failing_the_quiz_screens_out_politely(make_bot, query, study):
    result = make_bot(fail_quiz=True).run()
    assert result.outcome == "screened_out"
    assert result.completion_code == study.recruitment.completion_codes.screened_out
    p = _participants(query)[0]
    assert p.status is ParticipantStatus.screened_out and p.quiz_passed is False
    attempts = query(lambda: db.session.scalars(select(QuizAttempt)).all())
    assert [a.attempt for a in attempts] == [1, 2] and not any(a.passed for a in attempts)


def test_quiz_second_attempt_can_pass(make_bot, query):
    bot = make_bot()
    bot.open()
    bot.step()
    bot.step()  # consent, instructions
    assert bot.page.kind == "quiz"
    bot.behaviour = type(bot.behaviour)(fail_quiz=True)
    page = bot.step()
    assert page.kind == "quiz" and "not correct" in page.text and "Attempt 2 of 2" in page.text
    bot.behaviour = type(bot.behaviour)(fail_quiz=False)
    assert bot.step().kind == "choice"
    p = _participants(query)[0]
    assert p.quiz_attempts == 2 and p.quiz_passed is True


def test_consent_page_consumes_nothing_and_decline_records_nothing(make_bot, query):
    bot = make_bot()
    page = bot.open()
    assert page.kind == "consent"
    assert _participants(query) == []  # link scanners and previews create nothing
    data = {**bot.answer()}
    data.pop("agree")
    data["decline"] = "y"
    page = bot.post(data)
    assert page.kind == "declined" and "return your submission" in page.text
    assert _participants(query) == []


def test_mturk_preview_shows_description_only(client, study):
    resp = client.get("/s/product-choice-demo?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    html = resp.get_data(as_text=True)
    assert resp.status_code == 200 and 'data-page="preview"' in html
    assert "<form" not in html and "accept the HIT" in html
    assert "frame-ancestors https://*.mturk.com" in resp.headers["Content-Security-Policy"]
    assert "X-Frame-Options" not in resp.headers


def test_mturk_completion_posts_to_the_sandbox(make_bot, query, study):
    bot = make_bot(platform="mturk")
    result = bot.run()
    assert result.outcome == "completed"
    form = bot.page.forms[0]
    assert form.action == "https://workersandbox.mturk.com/mturk/externalSubmit"
    assert form.method == "post"
    fields = form.hidden()
    assert fields == {
        "assignmentId": f"A{bot.external_id}",
        "completion_code": study.recruitment.completion_codes.completed,
    }
    assert "autosubmit.js" in bot.page.text


def test_only_mturk_sessions_may_be_framed(client, make_bot, study):
    bot = make_bot(platform="mturk")
    bot.open()
    bot.step()
    resp = client.get(bot.page.url)
    assert "frame-ancestors https://*.mturk.com" in resp.headers["Content-Security-Policy"]
    for url in ("/s/product-choice-demo?participant=x", "/s/nope", "/researcher/login"):
        resp = client.get(url)
        assert "frame-ancestors 'none'" in resp.headers["Content-Security-Policy"], url
        assert resp.headers["X-Frame-Options"] == "DENY"
        assert resp.headers["Referrer-Policy"] == "no-referrer"


@pytest.mark.demo_pairs(2)
def test_counterbalancing_alternates_sequences(make_bot, query):
    for _ in range(6):
        assert make_bot().run().outcome == "completed"
    assert sorted(p.sequence for p in _participants(query)) == list("AAABBB")


@pytest.mark.demo_pairs(2)
def test_dropouts_are_refilled(make_bot, query, app):
    # One participant abandons; while still recently active they hold their sequence.
    make_bot(abandon_at=4).run()
    first = _participants(query)[0].sequence
    make_bot().run()
    assert _participants(query)[1].sequence != first
    # Once idle beyond the active window the abandoned participant no longer counts, so the
    # next arrival refills the abandoned sequence to balance the completed participants.
    app.config["ACTIVE_WINDOW_MINUTES"] = 0
    make_bot().run()
    seqs = [p.sequence for p in _participants(query)]
    assert seqs[2] == first
