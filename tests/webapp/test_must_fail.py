"""Submissions that must be refused (oTree's SubmissionMustFail), and friendly error pages."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from webapp.bots import SubmissionDidNotFail
from webapp.extensions import db
from webapp.models import ChoiceResponse, Participant, QuizAttempt


def _count(query, model):
    return query(lambda: db.session.scalar(select(func.count()).select_from(model)))


def _to_first_choice(bot):
    bot.open()
    for _ in range(3):  # consent, instructions, quiz
        bot.step()
    assert bot.page.kind == "choice"
    return bot


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("ten dollars", "Please enter an amount in US dollars"),
        ("-5", "$0.00 or more"),
        ("100000", "at most $500.00"),
        ("1.234", "Please enter an amount in US dollars"),
        ("", "Please enter an amount"),
    ],
)
def test_bad_wtp_is_refused_keeps_what_was_typed_and_saves_nothing(make_bot, query, typed, message):
    bot = _to_first_choice(make_bot())
    bot.step()
    assert bot.page.kind == "wtp"
    page = bot.must_fail({"premium": typed}, expect_invalid=True)
    assert page.kind == "wtp" and message in page.text
    assert f'value="{typed}"' in page.text  # what was typed is kept
    assert query(lambda: db.session.scalars(select(ChoiceResponse)).one().wtp_premium_usd) is None
    ok = bot.post({**bot.answer(), "premium": "$12.50"})
    assert ok.kind == "choice"
    c = query(lambda: db.session.scalars(select(ChoiceResponse)).one())
    assert c.wtp_premium_usd == 12.5
    assert c.wtp_premium_pct == pytest.approx(1250 / c.other_price_usd)


def test_tampered_page_token_gets_an_error_page_and_loses_nothing(make_bot, query):
    bot = _to_first_choice(make_bot())
    bot.step()
    bot.step()  # one full trial saved
    token = bot.answer()["page"]
    seq, sig = token.split(".")
    for bad in (f"{int(seq) + 5}.{sig}", f"{seq}.{'0' * len(sig)}", "garbage", None):
        page = bot.must_fail({"page": bad}, expect_code="E400-TAMPER", expect_status=400)
        assert "Your earlier answers are safe" in page.text
        bot.reload()
    assert _count(query, ChoiceResponse) == 1
    assert bot.page.kind == "choice" and bot.page.main["data-trial"] == "1"


def test_tampered_choice_value_is_refused(make_bot, query):
    bot = _to_first_choice(make_bot())
    page = bot.must_fail({"side": "middle"}, expect_invalid=True)
    assert page.kind == "choice" and "Not a valid choice" in page.text
    page = bot.must_fail({"side": None}, expect_invalid=True)
    assert "Please choose one of the two products" in page.text
    assert _count(query, ChoiceResponse) == 0


def test_replayed_and_double_posts_create_nothing(make_bot, query):
    bot = _to_first_choice(make_bot())
    data = bot.answer()
    first = bot.post(data)
    assert first.kind == "wtp"
    # The back button (or a double click) sends the same form again: redirected, nothing new.
    again = bot.post(data)
    assert again.kind == "wtp" and "already answered" in again.text
    assert again.url == first.url
    assert _count(query, ChoiceResponse) == 1
    with pytest.raises(SubmissionDidNotFail):  # a valid, current answer is accepted
        bot.must_fail({})


def test_replayed_quiz_attempt_is_not_counted_twice(make_bot, query):
    bot = make_bot(fail_quiz=True)
    bot.open()
    bot.step()
    bot.step()
    data = bot.answer()
    bot.post(data)
    bot.post(data)
    assert _count(query, QuizAttempt) == 1
    assert query(lambda: db.session.scalars(select(Participant)).one().status.value) == "started"


def test_a_page_post_without_its_page_token_is_refused_and_saves_nothing(make_bot, query):
    # The page token is the participant form's anti-forgery token (webapp.tasks.base.PageForm):
    # a cross-site form cannot read it, so a forged post arrives without a valid one.
    bot = _to_first_choice(make_bot())
    assert 'name="csrf_token"' not in bot.page.text  # the page's form carries no session token
    page = bot.must_fail({"page": None}, expect_code="E400-TAMPER", expect_status=400)
    assert "Your earlier answers are safe" in page.text
    assert _count(query, ChoiceResponse) == 0


def test_the_pages_need_no_cookie_after_consent(make_bot, query):
    # MTurk shows the study in an iframe; a browser that blocks third-party cookies sends none.
    # Consent's CSRF token is dropped once it has been checked, and every later page is
    # answered with only its URL and page token.
    bot = make_bot()
    bot.open()
    bot.step()  # consent
    client = bot.transport.client
    assert client.get_cookie("session") is None  # emptied at enrolment: the browser drops it
    while bot.page.forms:
        client._cookies.clear()  # noqa: SLF001 (the test client's jar: no cookie on any request)
        bot.step()
    assert (bot.page.kind, bot.page.status) == ("external", 303)  # off to Prolific, completed
    assert _count(query, ChoiceResponse) == 10
    assert query(lambda: db.session.scalars(select(Participant)).one().status.value) == "completed"


def test_unknown_study_and_bad_parameters_get_coded_pages(client, study):
    cases = [
        ("/s/no-such-study?participant=x", 404, "E404-STUDY"),
        ("/s/product-choice-demo", 400, "E400-PARAMS"),
        ("/s/product-choice-demo?PROLIFIC_PID=abc", 400, "E400-PARAMS"),  # no STUDY_ID
        ("/s/product-choice-demo?participant=%3Cscript%3E", 400, "E400-PARAMS"),
        (
            "/s/product-choice-demo?workerId=AW&hitId=H&assignmentId=A&turkSubmitTo="
            "https%3A%2F%2Fevil.example.com",
            400,
            "E400-PARAMS",
        ),
        ("/s/product-choice-demo/p/forged-token", 404, "E404-SESSION"),
        ("/nowhere", 404, "E404-PAGE"),
    ]
    for url, status, code in cases:
        resp = client.get(url)
        html = resp.get_data(as_text=True)
        assert resp.status_code == status, url
        assert f'data-error-code="{code}"' in html, url
        assert "Traceback" not in html and "<script>" not in html
    resp = client.put("/s/product-choice-demo/start")
    assert resp.status_code == 405
    assert 'data-error-code="E405-METHOD"' in resp.get_data(as_text=True)


def test_server_errors_show_a_code_not_a_traceback(app, client, study, monkeypatch):
    from webapp.services import entry

    def boom(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(entry, "find_participant", boom)
    resp = client.get("/s/product-choice-demo?participant=x")
    html = resp.get_data(as_text=True)
    assert resp.status_code == 500 and 'data-error-code="E500-SERVER"' in html
    assert "secret internals" not in html and "Traceback" not in html


def test_a_page_without_a_cookie_opens_an_empty_session_and_sets_none(make_bot, query):
    # webapp.sessions: no cookie means an empty session without the signing serializer, and
    # an empty untouched session sets no cookie; a message flashed for the next page still
    # travels in the cookie and is gone after that page.
    from unittest import mock

    from flask.sessions import SecureCookieSessionInterface

    bot = _to_first_choice(make_bot())
    client = bot.transport.client
    url = bot.page.url
    with mock.patch.object(
        SecureCookieSessionInterface, "get_signing_serializer", autospec=True
    ) as serializer:
        resp = client.get(url)
    assert resp.status_code == 200 and "Set-Cookie" not in resp.headers
    serializer.assert_not_called()
    data = bot.answer()
    bot.post(data)  # answered
    replay = client.post(url, data=data)  # the same answer again: a replay, told so
    assert replay.status_code == 302 and "Set-Cookie" in replay.headers
    page = client.get(url)
    assert "already answered" in page.get_data(as_text=True)
    assert "session=;" in page.headers.get("Set-Cookie", "")  # emptied: the browser drops it
    assert _count(query, ChoiceResponse) == 1


def test_made_up_url_tokens_are_not_remembered(client, study):
    # webapp.services.flow keeps verified URL tokens per process; made-up ones (any length an
    # attacker likes) get the friendly 404 and are never stored, so they cannot grow memory.
    from webapp.services import flow

    before = len(flow._VERIFIED)  # noqa: SLF001
    for i in range(50):
        resp = client.get(f"/s/{study.slug}/p/{'x' * 2000}{i}")
        assert resp.status_code == 404 and b"E404-SESSION" in resp.data
    assert len(flow._VERIFIED) == before  # noqa: SLF001
    token = flow.participant_token(7, "s")
    assert flow._token_ids(token, "s") == (7, None)  # noqa: SLF001
    assert flow._VERIFIED[token, "s"] == (7, None)  # noqa: SLF001
