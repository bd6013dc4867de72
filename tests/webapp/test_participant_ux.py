"""What a participant sees around errors, returns and progress, as HTTP tests through the
in-process bots: the post/redirect/get after a refused answer, the code page for a returning
finished participant, the error summary, the progress bar, the shuffled qualification and the
wording of small items; the browser-only parts (focus, Back, axe, the keyboard run) are in
``tests/e2e/test_participant_pages.py``.
"""

from __future__ import annotations

import re
from html import unescape

from sqlalchemy import select

from tests.webapp.sentiment.conftest import bot_for  # noqa: F401  (fixture)
from webapp.extensions import db
from webapp.models import Participant, TaskResponse

PROGRESS = re.compile(r'<progress id="study-progress" max="(\d+)" value="(\d+)">')


def _walk_to(bot, kind: str):
    page = bot.open()
    while page.kind != kind:
        page = bot.step()
    return page


def _h1(page) -> str:
    return unescape(re.search(r"<h1>(.*?)</h1>", page.text, re.S).group(1)).strip()


# -- post/redirect/get for refused submissions -----------------------------------------
def test_a_refused_submission_redirects_and_keeps_what_was_typed(make_bot):
    bot = make_bot(platform="link")
    page = _walk_to(bot, "wtp")
    data = {**bot.answer(), "premium": "twelve"}
    status, location, _ = bot.transport.request("POST", page.url, data)
    # A 303 to the page itself: Back and reload never land on a POST response.
    assert status == 303 and location.endswith(page.url)
    shown = bot.reload()
    assert shown.status == 200 and shown.invalid and shown.kind == "wtp"
    assert 'value="twelve"' in shown.text
    assert "Please enter an amount in US dollars" in shown.text
    # Single use: the next view of the page is fresh.
    again = bot.reload()
    assert not again.invalid and "twelve" not in again.text
    assert "Please enter an amount in US dollars" not in again.text


def test_a_kept_refusal_is_never_shown_on_another_page(make_bot):
    bot = make_bot(platform="link")
    page = _walk_to(bot, "choice")
    # Refused, but the redirect is not followed (a closed tab): the refusal waits in the session.
    status, _, _ = bot.transport.request("POST", page.url, {**bot.answer(), "side": "middle"})
    assert status == 303
    bot.reload()
    bot.step()  # answered properly from a fresh view
    assert bot.page.kind == "wtp" and not bot.page.invalid


# -- a finished participant gets their code again ------------------------------------
def test_a_finished_prolific_participant_reopening_the_link_gets_code_and_link(make_bot, study):
    bot = make_bot(platform="prolific")
    assert bot.run().outcome == "completed"
    page = make_bot(platform="prolific", external_id=bot.external_id).open()
    code = study.recruitment.completion_codes.completed
    assert page.status == 200 and page.kind == "completed"
    assert f'data-completion-code="{code}"' in page.text
    assert f'href="https://app.prolific.com/submissions/complete?cc={code}"' in page.text


def test_a_screened_out_participant_reopening_the_link_gets_the_screening_code(make_bot, study):
    bot = make_bot(platform="prolific", fail_quiz=True)
    assert bot.run().outcome == "screened_out"
    page = make_bot(platform="prolific", external_id=bot.external_id).open()
    code = study.recruitment.completion_codes.screened_out
    assert page.status == 200 and page.kind == "screened_out"
    assert f'data-completion-code="{code}"' in page.text and "?cc=" + code in page.text


# -- the error summary and the fields' ARIA ------------------------------------------
def test_errors_are_summarised_at_the_top_and_marked_on_the_fields(make_bot):
    bot = make_bot(platform="link")
    _walk_to(bot, "wtp")
    page = bot.must_fail({"premium": "-3"}, expect_invalid=True)
    summary = page.text.index("data-error-summary")
    assert summary < page.text.index("<h1>")  # first thing in <main>
    assert re.search(
        r'<div class="error-summary" id="error-summary" tabindex="-1" autofocus', page.text
    )
    assert '<a href="#premium">Please enter an amount of $0.00 or more.</a>' in page.text
    field = re.search(r"<input [^>]*id=\"premium\"[^>]*>", page.text).group(0)
    assert 'aria-invalid="true"' in field
    assert 'aria-describedby="premium-hint premium-error"' in field
    assert 'id="premium-error"' in page.text and "<title>Error: " in page.text


def test_radio_errors_link_to_the_first_option(make_bot):
    bot = make_bot(platform="link")
    _walk_to(bot, "choice")
    page = bot.must_fail({"side": None}, expect_invalid=True)
    assert '<a href="#side-0">Please choose one of the two products.</a>' in page.text
    assert 'id="side-0"' in page.text and 'aria-describedby="side-error"' in page.text
    assert page.text.count('aria-invalid="true"') == 2


def test_several_errors_in_the_summary_say_which_question_each_is_about(make_bot):
    # Found by the outside walkthrough: an empty quiz listed "Please choose an answer." three
    # times (the qualification twenty times), so the summary did not say where to look.
    bot = make_bot(platform="link")
    _walk_to(bot, "quiz")
    empty = {f"q_{q}": None for q in ("how_many", "what_choose", "price_question")}
    page = bot.must_fail(empty, expect_invalid=True)
    links = re.findall(r'<li><a href="#(q_[a-z_]+)-0">(.*?)</a></li>', page.text, re.S)
    assert [name for name, _ in links] == ["q_how_many", "q_what_choose", "q_price_question"]
    assert unescape(links[0][1]) == (
        "Please choose an answer. (How many times will you choose between two products?)"
    )
    assert len({text for _, text in links}) == 3


def test_an_empty_rating_grid_names_each_summary_and_point_in_the_summary(app, bot_for):  # noqa: F811
    from tests.webapp.evaluation.conftest import RATING_DEMO
    from tests.webapp.sentiment.conftest import load

    bot = bot_for(load(app, RATING_DEMO), "grid-1")
    page = _walk_to(bot, "summary_rating")
    empty = {name: None for name in re.findall(r'name="(r\d+_[a-z_]+)"', page.text)}
    page = bot.must_fail(empty, expect_invalid=True)
    links = [unescape(t) for t in re.findall(r'<li><a href="#r\d+_[a-z_]+-0">(.*?)</a>', page.text)]
    assert len(links) == len(set(links)) == len(empty) > 1
    assert "Please rate every summary on this point. (Summary 2, Stance)" in links


# -- a real progress bar, even steps, never full before the end ----------------------
def test_progress_bar_moves_one_page_at_a_time_and_is_never_full(make_bot):
    bot = make_bot(platform="link")
    page = bot.open()
    seen = []
    while page.kind not in {"completed", "external"}:
        if page.kind != "consent":
            m = PROGRESS.search(page.text)
            assert m, f"no progress bar on {page.kind}"
            seen.append((int(m.group(1)), int(m.group(2)), page.kind))
        page = bot.step()
    totals = {t for t, _, _ in seen}
    assert len(totals) == 1
    total = totals.pop()
    values = [v for _, v, _ in seen]
    assert values == list(range(len(values)))  # one step per page, trials counted
    assert values[-1] == total - 1 < total and seen[-1][2] == "debrief"
    # The 10 products are 20 of the pages: the bar does not jump over them.
    assert sum(k in {"choice", "wtp"} for _, _, k in seen) == 20


# -- the qualification is shuffled per participant, from the recorded seed -----------
def test_qualification_items_are_shuffled_per_participant_and_reproducible(app, bot_for):  # noqa: F811  (the imported fixture)
    from tests.webapp.sentiment.conftest import DEMO, load
    from webapp.tasks.base import PageContext
    from webapp.tasks.sentiment import SentimentQualificationTask

    definition = load(app, DEMO)
    block = next(b for b in definition.tasks if b.type == "sentiment_qualification")
    file_order = [it["item_id"] for it in block.params["items"]]
    shown = {}
    for who in ("q-one", "q-two"):
        bot = bot_for(definition, who)
        page = _walk_to(bot, "sentiment_qualification")
        names = re.findall(r'name="q_([^"]+)"', page.text)
        shown[who] = list(dict.fromkeys(names))
        assert sorted(shown[who]) == sorted(file_order)
        assert re.findall(r'name="q_([^"]+)"', bot.reload().text) == names  # stable on reload
        bot.step()
    assert shown["q-one"] != shown["q-two"] and file_order not in shown.values()
    with app.app_context():
        for who in ("q-one", "q-two"):
            p = _participant(who)
            ctx = PageContext(p.study, definition, p, block, p.block_index, 0, p.started_at)
            # Re-derived from the stored seed alone, and recorded with the answers.
            assert [it["item_id"] for it in SentimentQualificationTask().item_order(ctx)] == (
                shown[who]
            )
            saved = db.session.scalars(
                select(TaskResponse).where(
                    TaskResponse.participant_id == p.id,
                    TaskResponse.task_type == "sentiment_qualification",
                )
            ).one()
            assert saved.payload["order"] == shown[who]


def _participant(external_id: str) -> Participant:
    from webapp.models import PlatformIdentity

    return db.session.scalars(
        select(Participant)
        .join(PlatformIdentity, PlatformIdentity.participant_id == Participant.id)
        .where(PlatformIdentity.external_id == external_id)
    ).one()


def test_the_qualification_screen_out_page_names_the_qualification(app, bot_for):  # noqa: F811  (the imported fixture)
    from tests.webapp.sentiment.conftest import DEMO, load

    definition = load(app, DEMO)
    result = bot_for(definition, "q-fail", fail_quiz=True).run()
    assert result.outcome == "screened_out"
    page = bot_for(definition, "q-fail").open()
    assert page.kind == "screened_out" and "qualification task" in page.text
    assert "comprehension questions" not in page.text


# -- the smaller items ---------------------------------------------------------------
def test_product_names_keep_their_capitals_and_the_prompt_appears_once(make_bot):
    bot = make_bot(platform="link")
    page = bot.open()
    headings = []
    while page.kind not in {"completed", "external"}:
        if page.kind == "choice":
            headings.append(_h1(page))
            assert page.text.count("Which product would you buy?") == 1
        page = bot.step()
    assert "LED desk lamp" in headings and "Led desk lamp" not in headings
    assert "Wireless headphones" in headings  # a first lower-case letter still goes up


def test_amounts_get_a_decimal_keyboard_and_commas_a_clear_message(make_bot):
    bot = make_bot(platform="link")
    page = _walk_to(bot, "wtp")
    field = re.search(r"<input [^>]*id=\"premium\"[^>]*>", page.text).group(0)
    assert 'inputmode="decimal"' in field
    refused = bot.must_fail({"premium": "1,000"}, expect_invalid=True)
    assert "without commas" in refused.text


def test_a_decimal_comma_is_saved_as_the_amount_it_means(app, make_bot):
    from webapp.extensions import db
    from webapp.models import ChoiceResponse

    bot = make_bot(platform="link")
    _walk_to(bot, "wtp")
    page = bot.post({**bot.answer(), "premium": "12,50"})
    assert page.kind != "wtp" and not page.invalid
    with app.app_context():
        saved = db.session.scalars(
            db.select(ChoiceResponse.wtp_premium_usd).where(
                ChoiceResponse.wtp_premium_usd.is_not(None)
            )
        ).all()
    assert saved == [12.5]


def test_a_decimal_age_gets_a_whole_number_message(make_bot):
    bot = make_bot(platform="link")
    page = _walk_to(bot, "demographics")
    assert re.search(r'<input [^>]*id="q_age"[^>]*inputmode="numeric"', page.text)
    refused = bot.must_fail({"q_age": "25.5"}, expect_invalid=True)
    assert "whole number without a decimal point" in refused.text
    assert "Not a valid integer" not in refused.text


def test_a_mistyped_number_reaches_the_server_and_gets_a_message(make_bot):
    # Found by the outside walkthrough: `type="number"` with `novalidate` made Chromium send ""
    # for "25e" (and Firefox for "twenty"), so the optional age was saved as no answer unseen.
    bot = make_bot(platform="link")
    page = _walk_to(bot, "demographics")
    field = re.search(r'<input [^>]*id="q_age"[^>]*>', page.text).group(0)
    assert 'type="text"' in field and 'inputmode="numeric"' in field
    for typed in ("25e", "twenty"):
        refused = bot.must_fail({"q_age": typed}, expect_invalid=True)
        assert "Please type the number with the digits 0 to 9" in refused.text
        assert "Not a valid integer" not in refused.text
    # All digits but out of range (or too long for int()) get the range message alone.
    refused = bot.must_fail({"q_age": "1" * 5000}, expect_invalid=True)
    assert "whole number from 18 to 100" in refused.text and "Not a valid" not in refused.text


def test_a_paste_into_a_number_or_amount_is_capped_so_its_refusal_still_redirects(make_bot):
    # Found by the outside walkthrough: 10,000 pasted characters in the amount made the refusal
    # too large for the session, so it was shown in place and Back then hit the POST.
    bot = make_bot(platform="link")
    page = _walk_to(bot, "wtp")
    field = re.search(r'<input [^>]*id="premium"[^>]*>', page.text).group(0)
    cap = int(re.search(r'maxlength="(\d+)"', field).group(1))
    status, location, _ = bot.transport.request(
        "POST", page.url, {**bot.answer(), "premium": "9" * cap}
    )
    assert status == 303 and location.endswith(page.url)
    assert "Please enter at most $500.00" in bot.reload().text
    bot.post({**bot.answer(), "premium": "2"})
    page = _walk_to(bot, "demographics")
    field = re.search(r'<input [^>]*id="q_age"[^>]*>', page.text).group(0)
    assert 0 < int(re.search(r'maxlength="(\d+)"', field).group(1)) <= cap


def test_quiz_retry_message_uses_proper_plurals(make_bot):
    bot = make_bot(platform="link")
    page = _walk_to(bot, "quiz")
    block = next(b.params for b in bot.definition.tasks if b.id == "quiz")
    wrong = {
        f"q_{q['id']}": next(o for o in q["options"] if o != q["correct"])
        for q in block["questions"]
    }
    page = bot.post({**bot.answer(), **wrong})
    n = len(block["questions"])
    assert f"{n} answers were not correct" in page.text and "you have 1 more attempt." in page.text
    assert "(s)" not in page.text


def test_demo_sentiment_items_have_no_lower_case_i():
    from tests.webapp.sentiment.conftest import ROOT

    for path in (ROOT / "stimuli" / "studies" / "sentiment").glob("*.csv"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(^|[\s,\"])i([\s'’])", text), path.name


def test_the_free_text_reason_shows_its_limit(app, bot_for):  # noqa: F811  (the imported fixture)
    from tests.webapp.evaluation.conftest import PREFERENCE_DEMO
    from tests.webapp.sentiment.conftest import load

    definition = load(app, PREFERENCE_DEMO)
    page = _walk_to(bot_for(definition, "why-1"), "pairwise_preference")
    assert re.search(r"Up to \d[\d,]* characters\.", page.text)
    assert 'data-counter-for="reason"' in page.text


def test_a_refusal_too_large_for_the_session_cookie_is_shown_in_place(app, tmp_path):
    from tests.webapp.security.test_typed_input import _bot_at

    bot = _bot_at(app, tmp_path, "demographics", max_length=5000)
    long_text = "a long and careful comment " * 150  # about 4,000 characters
    page = bot.post({**bot.answer(), "q_age": "twelve", "q_comments": long_text})
    # Nothing typed is lost: the old in-place page (422) instead of an oversized cookie.
    assert page.status == 422 and page.invalid and page.kind == "demographics"
    assert long_text.strip() in unescape(page.text)
    assert '<a href="#q_age">' in page.text


def test_the_bare_address_says_who_the_server_is_for_and_names_no_study(app, client):
    resp = client.get("/")
    text = resp.get_data(as_text=True)
    assert resp.status_code == 200 and "E404" not in text
    assert "study link" in text and 'href="/researcher/login"' in text
    assert "product-choice-demo" not in text  # which studies run here is not public
    assert client.post("/").status_code == 405


def _consent(client, pid: str) -> tuple[str, dict[str, str]]:
    page = client.get(f"/s/product-choice-demo?PROLIFIC_PID={pid}&STUDY_ID=s1&SESSION_ID=x1")
    html = page.get_data(as_text=True)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html).group(1)
    data = {
        "csrf_token": token,
        "PROLIFIC_PID": pid,
        "STUDY_ID": "s1",
        "SESSION_ID": "x1",
        "agree": "y",
    }
    return "/s/product-choice-demo/start", data


def test_a_double_clicked_consent_sent_with_the_first_replys_cookie_resumes(app, study, client):
    from webapp.extensions import db
    from webapp.models import Participant

    pid = "a" * 24
    action, data = _consent(client, pid)
    first = client.post(action, data=data)
    # The test client keeps the cookie the first reply set, as the browser does before the
    # second click's POST leaves: the consent token is no longer in it.
    second = client.post(action, data=data)
    assert first.status_code == second.status_code == 302
    assert second.headers["Location"] == first.headers["Location"]
    assert "E400" not in client.get(second.headers["Location"]).get_data(as_text=True)
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(Participant)) == 1


def test_a_consent_without_a_usable_token_records_nothing_and_asks_again(app, study, client):
    from webapp.extensions import db
    from webapp.models import Participant

    pid = "b" * 24
    action, data = _consent(client, pid)
    stranger = app.test_client()  # no cookie: the token cannot be checked
    resp = stranger.post(action, data=data)
    assert resp.status_code == 302
    assert resp.headers["Location"].startswith(f"/s/product-choice-demo?PROLIFIC_PID={pid}")
    again = stranger.get(resp.headers["Location"]).get_data(as_text=True)
    assert "confirm once more" in again and 'name="csrf_token"' in again
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(Participant)) == 0
