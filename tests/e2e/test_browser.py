"""Real headless Chromium completes the study from a Prolific link (JavaScript on)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from tests.e2e.conftest import without_time_limit

pytestmark = pytest.mark.browser


def _kind(page) -> str:
    return page.locator("main").get_attribute("data-page")


def _continue(page) -> None:
    page.get_by_role("button").first.click()
    page.wait_for_load_state()


def _answer_questions(page, block) -> None:
    for q in block["questions"]:
        if "correct" in q:
            page.get_by_label(q["correct"], exact=True).check()
    _continue(page)


def test_prolific_participant_completes_in_chromium(live, browser_page):
    from webapp.extensions import db
    from webapp.models import ChoiceResponse, Participant

    app, base, definition = live
    page = browser_page
    blocks = {b.id: b.params for b in definition.tasks}
    code = definition.recruitment.completion_codes.completed
    landed = []
    # No internet here: answer for Prolific and remember that the browser got there.
    page.route(
        "https://app.prolific.com/**",
        lambda route: (landed.append(route.request.url), route.fulfill(body="Prolific"))[1],
    )
    page.goto(
        f"{base}/s/product-choice-demo?PROLIFIC_PID=5f1e2d3c4b5a69788796a5b4"
        "&STUDY_ID=65aa00bb11cc22dd33ee44ff&SESSION_ID=sess123"
    )
    assert _kind(page) == "consent"
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    page.get_by_role("button", name="I agree, start the study").click()
    assert _kind(page) == "instructions"
    _continue(page)
    assert _kind(page) == "quiz"
    _answer_questions(page, blocks["quiz"])

    reloaded = back_checked = bad_wtp_checked = False
    for _ in range(60):
        kind = _kind(page)
        if kind == "choice":
            trial = int(page.locator("main").get_attribute("data-trial"))
            assert page.evaluate("document.documentElement.scrollWidth") <= 360
            if trial == 0:  # keyboard only: focus the first option, select it, submit
                page.locator("input[name=side]").first.focus()
                page.keyboard.press("Space")
                with page.expect_navigation():
                    page.keyboard.press("Enter")
            else:
                page.locator("input[name=side]").nth(trial % 2).check()
                _continue(page)
            assert _kind(page) == "wtp"
            if trial == 3 and not back_checked:
                # The back button shows where the participant is, not a stale form.
                page.go_back()
                page.wait_for_load_state()
                assert _kind(page) == "wtp"
                assert page.locator("main").get_attribute("data-trial") == "3"
                back_checked = True
        elif kind == "wtp":
            trial = int(page.locator("main").get_attribute("data-trial"))
            if trial == 4 and not reloaded:  # a reload in the middle resumes the same page
                page.reload()
                assert _kind(page) == "wtp"
                assert page.locator("main").get_attribute("data-trial") == "4"
                reloaded = True
            if trial == 2 and not bad_wtp_checked:
                page.get_by_label("Additional amount in US dollars").fill("twelve")
                _continue(page)
                assert _kind(page) == "wtp"
                error = page.locator("#premium-error").inner_text().split()
                assert (
                    " ".join(error)
                    == "Error: Please enter an amount in US dollars, for example 5 or 12.50."
                )
                assert page.get_by_label("Additional amount in US dollars").input_value() == (
                    "twelve"
                )
                bad_wtp_checked = True
            page.get_by_label("Additional amount in US dollars").fill(f"{trial + 1}.50")
            _continue(page)
        elif kind == "attention_check":
            _answer_questions(page, blocks["attention"])
        elif kind == "demographics":
            page.get_by_label("Your age in years").fill("34")
            _continue(page)
        elif kind == "debrief":
            page.get_by_role("button", name="Finish and submit").click()
            page.wait_for_url("https://app.prolific.com/**")
            break
        else:
            raise AssertionError(f"unexpected page {kind}: {page.content()[:500]}")
    assert reloaded and back_checked and bad_wtp_checked
    assert landed == [f"https://app.prolific.com/submissions/complete?cc={code}"]
    assert page.url == landed[0]

    with app.app_context():
        p = db.session.scalars(select(Participant)).one()
        assert p.status.value == "completed"
        choices = p.choices
        assert len(choices) == 10
        assert db.session.scalar(select(func.count()).select_from(ChoiceResponse)) == 10
        assert [c.wtp_premium_usd for c in choices] == [i + 1.5 for i in range(10)]
        assert all(c.rt_ms is not None and c.rt_ms > 0 for c in choices)  # rt.js ran


def _answer_until_debrief(page, blocks) -> None:
    """Answer every page plainly until the debrief page is showing."""
    for _ in range(60):
        kind = _kind(page)
        if kind == "debrief":
            return
        if kind == "consent":
            page.get_by_role("button", name="I agree, start the study").click()
        elif kind in {"instructions", "demographics"}:
            _continue(page)
        elif kind == "quiz":
            _answer_questions(page, blocks["quiz"])
        elif kind == "attention_check":
            _answer_questions(page, blocks["attention"])
        elif kind == "choice":
            page.locator("input[name=side]").first.check()
            _continue(page)
        elif kind == "wtp":
            page.get_by_label("Additional amount in US dollars").fill("0")
            _continue(page)
        else:
            raise AssertionError(f"unexpected page {kind}")
    raise AssertionError("never reached the debrief")


def test_mturk_completion_form_posts_to_the_sandbox(live, browser_page):
    _, base, definition = live
    page = browser_page
    blocks = {b.id: b.params for b in definition.tasks}
    posted = []

    def mturk(route):
        posted.append((route.request.url, route.request.post_data))
        route.fulfill(body="MTurk")

    page.route("https://workersandbox.mturk.com/**", mturk)
    page.goto(
        f"{base}/s/product-choice-demo?assignmentId=ASG1&hitId=HIT1&workerId=AW1"
        "&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com"
    )
    _answer_until_debrief(page, blocks)
    page.get_by_role("button", name="Finish and submit").click()
    page.wait_for_url("https://workersandbox.mturk.com/**")  # autosubmit.js sent the form
    code = definition.recruitment.completion_codes.completed
    assert posted == [
        (
            "https://workersandbox.mturk.com/mturk/externalSubmit",
            f"assignmentId=ASG1&completion_code={code}",
        )
    ]


def test_core_flow_works_without_javascript(live, chromium_path):
    from playwright.sync_api import sync_playwright

    from webapp.extensions import db
    from webapp.models import ChoiceResponse

    app, base, definition = live
    blocks = {b.id: b.params for b in definition.tasks}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path, headless=True, args=["--no-sandbox"]
        )
        context = browser.new_context(
            java_script_enabled=False, viewport={"width": 360, "height": 740}
        )
        page = context.new_page()
        without_time_limit(page)
        page.goto(f"{base}/s/product-choice-demo?participant=nojs-1")
        _answer_until_debrief(page, blocks)
        page.get_by_role("button", name="Finish and submit").click()
        assert _kind(page) == "completed"
        assert page.locator("[data-completion-code]").inner_text() == (
            definition.recruitment.completion_codes.completed
        )
        context.close()
        browser.close()
    with app.app_context():
        choices = db.session.scalars(db.select(ChoiceResponse)).all()
        assert len(choices) == 10
        assert all(c.rt_ms is None and c.server_rt_ms is not None for c in choices)


def test_error_pages_in_the_browser_lose_nothing(live, browser_page):
    from webapp.extensions import db
    from webapp.models import ChoiceResponse

    app, base, definition = live
    page = browser_page
    blocks = {b.id: b.params for b in definition.tasks}

    page.goto(f"{base}/s/no-such-study?participant=x")
    assert page.locator("main").get_attribute("data-error-code") == "E404-STUDY"
    page.goto(f"{base}/s/product-choice-demo?PROLIFIC_PID=5f1e2d3c4b5a69788796a5b4")
    assert page.locator("main").get_attribute("data-error-code") == "E400-PARAMS"
    assert "STUDY_ID" in page.inner_text("main")

    page.goto(f"{base}/s/product-choice-demo?participant=tamper-1")
    page.get_by_role("button", name="I agree, start the study").click()
    _continue(page)
    _answer_questions(page, blocks["quiz"])
    page.locator("input[name=side]").first.check()
    _continue(page)
    page.get_by_label("Additional amount in US dollars").fill("3")
    _continue(page)
    assert _kind(page) == "choice" and page.locator("main").get_attribute("data-trial") == "1"
    # Change the hidden page token in the browser, as a curious participant could.
    page.evaluate("document.querySelector('input[name=page]').value = '99.feedfacefeedfacefeed'")
    page.locator("input[name=side]").first.check()
    _continue(page)
    assert page.locator("main").get_attribute("data-error-code") == "E400-TAMPER"
    page.get_by_role("link", name="Continue where you were").click()
    assert _kind(page) == "choice" and page.locator("main").get_attribute("data-trial") == "1"
    with app.app_context():
        saved = db.session.scalars(db.select(ChoiceResponse)).all()
        assert [(c.trial_index, c.wtp_premium_usd) for c in saved] == [(0, 3.0)]
