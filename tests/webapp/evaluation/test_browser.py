"""Headless Chromium rates summaries and judges pairs on the demo studies (JavaScript on)."""

from __future__ import annotations

import pytest

from tests.webapp.evaluation.conftest import export

pytestmark = pytest.mark.browser


def _kind(page) -> str:
    return page.locator("main").get_attribute("data-page")


def _submit(page) -> None:
    with page.expect_navigation():
        page.get_by_role("button", name="Continue").click()


def _start(page, base: str, slug: str, who: str) -> None:
    page.goto(f"{base}/s/{slug}?participant={who}")
    assert _kind(page) == "consent"
    page.get_by_role("button", name="I agree, start the study").click()
    page.wait_for_load_state()
    assert _kind(page) == "instructions"
    _submit(page)


def test_rating_in_chromium(app, rating_demo, serve_app, browser_page):
    base = serve_app(app)
    page = browser_page
    _start(page, base, "rating-demo", "BROWSER01")
    assert _kind(page) == "summary_rating"
    # The passages fold away and open again; the definitions are one click away.
    details = page.locator("details.passages")
    assert details.get_attribute("open") is not None
    page.locator("details.passages > summary").click()
    assert details.get_attribute("open") is None
    page.locator("details.definitions > summary").click()
    assert page.get_by_text("Reasoning", exact=True).first.is_visible()
    n = int(page.locator("main").get_attribute("data-n-summaries"))
    assert n == 4 and page.locator("input[type=radio]").count() == 4 * 5 * 4
    # Submitting with one item unrated keeps the page and says what is missing.
    for pos in range(n):
        for dim in ("stance", "object", "intensity", "consensus", "reasoning"):
            if (pos, dim) != (3, "reasoning"):
                page.locator(f"input[name=r{pos}_{dim}][value='{1 + (pos % 4)}']").check()
    page.locator("form").evaluate("f => f.noValidate = true")
    _submit(page)
    assert _kind(page) == "summary_rating"
    # The error summary at the top links to the row.
    link = page.locator("[data-error-summary] a")
    assert link.count() == 1 and link.inner_text() == "Please rate every summary on this point."
    assert link.get_attribute("href") == "#r3_reasoning-0"
    # The earlier answers were kept: completing the missing one is enough.
    page.locator("input[name=r3_reasoning][value='4']").check()
    _submit(page)
    assert _kind(page) == "summary_rating"  # the second source of the batch
    for radio_group in page.locator("fieldset.likert-row").all():
        radio_group.locator("input[value='2']").check()
    _submit(page)
    assert _kind(page) == "debrief"
    rows, _ = export(app, "rating-demo")
    assert len(rows) == 2 * 4 * 5
    first_item = rows[0]["item_id"]
    first = {
        (r["position"], r["dimension"]): r["rating"] for r in rows if r["item_id"] == first_item
    }
    assert first[(3, "reasoning")] == 4 and first[(2, "stance")] == 3
    assert page.evaluate("document.documentElement.scrollWidth") <= 360


def test_preference_in_chromium(app, preference_demo, serve_app, browser_page):
    base = serve_app(app)
    page = browser_page
    _start(page, base, "preference-demo", "BROWSER02")
    chosen = []
    for i in range(3):
        assert _kind(page) == "pairwise_preference"
        assert page.get_by_text("Summary 1 is better").is_visible()
        position = "second" if i % 2 else "first"
        page.get_by_label(f"Summary {2 if i % 2 else 1} is better").check()
        if i == 0:
            page.get_by_label("Why? (optional)").fill("=more precise")
        chosen.append((position, page.locator("main").get_attribute("data-pair")))
        _submit(page)
    assert _kind(page) == "debrief"
    rows, _ = export(app, "preference-demo")
    got = {(r["pair_id"], r["chose_first"]) for r in rows}
    assert got == {(pair, int(pos == "first")) for pos, pair in chosen}
    # Stored as typed; the CSV writer neutralises the formula-like start.
    assert {r["reason"] for r in rows} == {"=more precise", None}
