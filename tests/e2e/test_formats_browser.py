"""Real headless Chromium runs the three-format demo study end to end (product images too)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.e2e.conftest import serve
from tests.webapp.conftest import ROOT, make_app
from webapp.definition_cache import study_definition

pytestmark = pytest.mark.browser

FORMATS_DEMO = ROOT / "stimuli" / "studies" / "product-choice-formats-demo.yaml"


def _kind(page) -> str:
    return page.locator("main").get_attribute("data-page")


def _continue(page) -> None:
    page.get_by_role("button").first.click()
    page.wait_for_load_state()


def test_a_participant_completes_the_three_format_study(tmp_path: Path, browser_page):
    from webapp.extensions import db
    from webapp.models import ChoiceResponse, Participant
    from webapp.services.studies import load_study

    app = make_app(f"sqlite:///{tmp_path / 'formats.sqlite'}")
    with app.app_context():
        definition = study_definition(load_study(FORMATS_DEMO).study)
    block = next(b.params for b in definition.tasks if b.type == "product_choice")
    code = definition.recruitment.completion_codes.completed
    page = browser_page
    landed: list[str] = []
    page.route(
        "https://app.prolific.com/**",
        lambda route: (landed.append(route.request.url), route.fulfill(body="Prolific"))[1],
    )
    seen_formats: list[str] = []
    images_checked = False
    with serve(app) as base:
        page.goto(
            f"{base}/s/product-choice-formats-demo?PROLIFIC_PID=5f1e2d3c4b5a69788796a5c7"
            "&STUDY_ID=65aa00bb11cc22dd33ee44ff&SESSION_ID=sess456"
        )
        assert _kind(page) == "consent"
        page.get_by_role("button", name="I agree, start the study").click()
        for _ in range(40):
            kind = _kind(page)
            if kind == "instructions":
                _continue(page)
            elif kind == "choice":
                main = page.locator("main")
                fmt = main.get_attribute("data-format")
                seen_formats.append(fmt)
                labels = page.locator(".product .label").all_text_contents()
                assert labels == [block["labels"][fmt]] * 2
                if main.get_attribute("data-pair") == "kettle":
                    images = page.locator("img.product-image")
                    assert images.count() == 2
                    for i in range(2):
                        img = images.nth(i)
                        img.scroll_into_view_if_needed()
                        page.wait_for_function(
                            "el => el.complete && el.naturalWidth > 0", arg=img.element_handle()
                        )
                        assert img.get_attribute("alt")
                    assert page.evaluate("document.documentElement.scrollWidth") <= 360
                    images_checked = True
                page.locator("input[name=side]").first.check()
                _continue(page)
                assert _kind(page) == "wtp"
            elif kind == "wtp":
                page.get_by_label("Additional amount in US dollars").fill("4.25")
                _continue(page)
            elif kind == "debrief":
                page.get_by_role("button", name="Finish and submit").click()
                page.wait_for_url("https://app.prolific.com/**")
                break
            else:
                raise AssertionError(f"unexpected page {kind}: {page.content()[:500]}")
    assert images_checked
    assert landed == [f"https://app.prolific.com/submissions/complete?cc={code}"]
    assert Counter(seen_formats) == {f: 2 for f in block["formats"]}
    with app.app_context():
        p = db.session.scalars(select(Participant)).one()
        assert p.status.value == "completed" and p.sequence in {"A", "B", "C"}
        rows = db.session.scalars(select(ChoiceResponse)).all()
        assert [r.format for r in rows] == seen_formats
        assert {r.block_id for r in rows} == {"choices"}
        assert all(r.wtp_premium_usd == 4.25 and r.rt_ms for r in rows)
        from webapp.extensions import dispose_engines

        dispose_engines()
