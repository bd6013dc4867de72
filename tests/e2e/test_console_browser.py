"""Headless Chromium drives the researcher console: log in, launch the demo, watch bots fill the
dashboard without a reload, export the long table and download the bonus CSV."""

from __future__ import annotations

import csv
import threading
from pathlib import Path

import pytest

from tests.e2e.conftest import serve, without_time_limit
from tests.webapp.conftest import make_app
from webapp.definition_cache import study_definition

pytestmark = pytest.mark.browser
PASSWORD = "correct horse battery"


@pytest.fixture
def console_server(tmp_path: Path):
    """``(app, base_url)``: an empty platform with one researcher, served over real HTTP."""
    from webapp.services.researchers import set_researcher

    app = make_app(f"sqlite:///{tmp_path / 'console.sqlite'}")
    with app.app_context():
        set_researcher("ana", PASSWORD)
    with serve(app) as url:
        yield app, url


@pytest.fixture
def desk_page(chromium_path: str):
    """A Playwright page in headless Chromium at desktop width, downloads allowed."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path, headless=True, args=["--no-sandbox"]
        )
        context = browser.new_context(
            viewport={"width": 1280, "height": 900}, accept_downloads=True
        )
        page = context.new_page()
        without_time_limit(page)
        yield page
        context.close()
        browser.close()


def test_console_launch_watch_export_and_pay(console_server, desk_page, tmp_path):
    from playwright.sync_api import expect

    from webapp.bots import run_bots
    from webapp.services.studies import get_study

    app, base = console_server
    page = desk_page
    page.goto(f"{base}/researcher/")
    assert page.url.endswith("/researcher/login")  # anonymous: sent to the login
    page.get_by_label("Username").fill("ana")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("main")).to_have_attribute("data-page", "researcher-index")

    # Launch the demo: load it as a draft, then go live.
    page.get_by_label("Study file").select_option("product-choice-demo.yaml")
    page.get_by_role("button", name="Load as a draft").click()
    expect(page.locator("[data-state]")).to_have_text("draft")
    page.get_by_role("button", name="Go live").click()
    expect(page.locator("[data-state]")).to_have_text("live")
    prolific = page.locator("[data-link=prolific]").input_value()
    assert prolific.endswith(
        "/s/product-choice-demo?PROLIFIC_PID={{%PROLIFIC_PID%}}"
        "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    expect(page.locator("[data-count=completed]")).to_have_text("0")

    # Bots arrive over HTTP while the page stays open; the polled JSON updates the counts.
    page.evaluate("window.__notReloaded = true")
    with app.app_context():
        definition = study_definition(get_study("product-choice-demo"))
    results = []
    runner = threading.Thread(
        target=lambda: results.append(run_bots(None, definition, n=4, url=base, seed=3))
    )
    runner.start()
    expect(page.locator("[data-count=completed]")).to_have_text("4")
    runner.join()
    assert results and results[0].counts == {"completed": 4}
    assert page.evaluate("window.__notReloaded") is True
    expect(page.locator("[data-count=arrivals]")).to_have_text("4")
    expect(page.locator("tbody[data-participants] tr")).to_have_count(4)

    # Export the long table.
    with page.expect_download() as info:
        page.locator("[data-export=long-csv]").click()
    long_path = tmp_path / "long.csv"
    info.value.save_as(long_path)
    with long_path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 40 and "platform_participant_id" not in rows[0]

    # Pay: issue the bonuses and download Prolific's bulk-bonus CSV.
    page.get_by_label("Platform").select_option("prolific")
    dialogs: list[str] = []  # issuing bonuses asks first, naming the consequence
    page.once("dialog", lambda d: (dialogs.append(d.message), d.accept()))
    with page.expect_download() as info:
        page.get_by_role("button", name="Issue bonuses and download the file").click()
    assert info.value.suggested_filename == "product-choice-demo-bonus-prolific.csv"
    assert dialogs and "never issued a bonus again" in dialogs[0]
    bonus_path = tmp_path / "bonus.csv"
    info.value.save_as(bonus_path)
    lines = bonus_path.read_text().splitlines()
    assert len(lines) == 4
    for line in lines:
        pid, amount = line.split(",")
        # Prolific IDs (24 hex digits) are paid in their canonical lower-case form.
        assert len(pid) == 24 and set(pid) <= set("0123456789abcdef")
        assert 0 < float(amount) <= 1.0 and len(amount) == 4
