"""A console action's message is on screen where the researcher is looking, at 1280 and 375 px.

A refused upload re-renders the studies page at its top, far above the "Add a study" form;
"Create the listing" returns to the recruiter section further down the study page. In both the
message must be inside the viewport right after the action, never a flash out of view.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import serve, without_time_limit
from tests.webapp.conftest import DEMO, make_app
from tests.webapp.recruit.conftest import PROLIFIC_BLOCK, study_with

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PASSWORD = "correct horse battery"
WIDTHS = (1280, 375)


@pytest.fixture
def console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``(app, base_url)``: a researcher "alice" owning the demo with a Prolific recruiter
    block, and no PROLIFIC_TOKEN in the environment (a first-time researcher's state)."""
    from webapp.extensions import db
    from webapp.services.researchers import set_researcher
    from webapp.services.studies import load_study

    monkeypatch.delenv("PROLIFIC_TOKEN", raising=False)
    app = make_app(f"sqlite:///{tmp_path / 'console.sqlite'}")
    with app.app_context():
        alice = set_researcher("alice", PASSWORD)
        study = load_study(study_with(tmp_path, PROLIFIC_BLOCK)).study
        study.owner_id = alice.id
        db.session.commit()
    with serve(app) as url:
        yield app, url


def _open(chromium_path: str, width: int):
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    browser = pw.chromium.launch(
        executable_path=chromium_path, headless=True, args=["--no-sandbox"]
    )
    page = browser.new_page(viewport={"width": width, "height": 800})
    without_time_limit(page)
    return pw, browser, page


def _login(page, base: str) -> None:
    page.goto(f"{base}/researcher/login")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def _assert_in_view(page, selector: str) -> str:
    """The element is visible and its box lies (at least its first line) inside the viewport."""
    element = page.locator(selector).first
    element.wait_for(state="visible")
    box = element.bounding_box()
    view = page.viewport_size
    assert box is not None
    assert box["y"] >= 0 and box["y"] + min(box["height"], 40) <= view["height"], (selector, box)
    assert box["x"] >= 0 and box["x"] + box["width"] <= view["width"] + 1, (selector, box)
    return element.inner_text()


def _broken_bundle(tmp_path: Path) -> Path:
    """The demo with the same mistake in two pairs and an unknown key at the top."""
    raw = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    pairs = yaml.safe_load((DEMO.parent / "product_pairs" / "demo.yaml").read_text())["pairs"]
    for pair in pairs[:2]:
        pair["target"]["price"] = "cheap"
    raw["tasks"][3]["pairs"] = pairs
    raw["colour"] = "blue"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.parametrize("width", WIDTHS)
def test_a_refused_upload_shows_every_error_at_the_top_of_the_page(
    console, chromium_path, tmp_path, width
):
    _, base = console
    pw, browser, page = _open(chromium_path, width)
    try:
        _login(page, base)
        page.set_input_files("#file", str(_broken_bundle(tmp_path)))
        page.get_by_role("button", name="Upload").click()
        text = _assert_in_view(page, "[data-upload-errors]")
        assert "colour" in text
        assert "pairs[0].target.price" in text and "pairs[1].target.price" in text
    finally:
        browser.close()
        pw.stop()


@pytest.mark.parametrize("width", WIDTHS)
def test_creating_a_listing_without_a_token_says_so_inside_the_recruiter_section(
    console, chromium_path, width
):
    _, base = console
    pw, browser, page = _open(chromium_path, width)
    try:
        _login(page, base)
        page.goto(f"{base}/researcher/studies/product-choice-demo")
        page.locator('[data-recruit="create"]').click()
        # The costs are shown first (nothing is sent before "Yes"), or the refusal at once. Wait
        # for the page the click leads to: on a loaded machine it is still loading here.
        page.wait_for_url(lambda url: url.endswith(("/recruit/create", "#recruit")))
        if page.url.endswith("/recruit/create"):
            page.locator('[data-recruit-confirm="create"]').click()
            page.wait_for_url(lambda url: url.endswith("#recruit"))
        assert page.url.endswith("#recruit")
        text = _assert_in_view(page, '[data-flash="recruit"]')
        assert "PROLIFIC_TOKEN" in text
    finally:
        browser.close()
        pw.stop()
