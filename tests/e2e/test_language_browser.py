"""The German demo study in Chromium at 375 px, with the keyboard alone: every page is German
(no text of the English catalogue, ``<html lang="de">``), passes axe-core, takes ``12,50`` as an
amount, and the researcher's export says ``de`` (docs/languages.md)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tests.e2e.conftest import serve
from tests.e2e.test_participant_pages import (
    AXE_RUN,
    BLOCKING,
    PHONE,
    _choose,
    _kind,
    _page,
    _submit,
    _tab_to,
)
from tests.webapp.conftest import ROOT, make_app
from tests.webapp.researcher.conftest import login
from tests.webapp.test_translations import english_found, english_fragments
from webapp.definition_cache import study_definition

pytestmark = pytest.mark.browser
GERMAN_DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo-de.yaml"


@pytest.fixture
def german_server(tmp_path: Path):
    """``(app, base_url, definition)``: the German demo served over real HTTP."""
    from webapp.services.studies import load_study

    app = make_app(f"sqlite:///{tmp_path / 'de.sqlite'}")
    with app.app_context():
        definition = study_definition(load_study(GERMAN_DEMO).study)
    with serve(app) as url:
        yield app, url, definition


@pytest.fixture
def browser(chromium_path: str):
    """A headless Chromium browser."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path, headless=True, args=["--no-sandbox"]
        )
        yield browser
        browser.close()


def test_the_german_demo_by_keyboard_at_375_px(german_server, browser, axe_source):
    app, base, definition = german_server
    blocks = {b.id: b.params for b in definition.tasks}
    fragments = english_fragments("de")
    page = _page(browser)
    problems: dict[str, list] = {}

    def check(name: str) -> None:
        assert page.evaluate("document.documentElement.lang") == "de", name
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], name
        english = english_found(" ".join(page.locator("body").inner_text().split()), fragments)
        page.add_script_tag(content=axe_source)
        serious = [v for v in page.evaluate(AXE_RUN) if v["impact"] in BLOCKING]
        if english or serious:
            problems[name] = english + serious

    page.goto(f"{base}/s/produktwahl-demo?participant=tastatur-1")
    check("consent")
    _tab_to(page, "button[name=agree]")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    seen = []
    refused = False
    for _ in range(40):
        kind = _kind(page)
        seen.append(kind)
        check(kind)
        if kind in {"instructions", "debrief"}:
            _submit(page)
            if kind == "debrief":
                break
        elif kind in {"quiz", "attention_check"}:
            for q in blocks["quiz" if kind == "quiz" else "attention"]["questions"]:
                _choose(page, f"q_{q['id']}", q["correct"])
            _submit(page)
        elif kind == "choice":
            _choose(page, "side", "left")
            _submit(page)
        elif kind == "wtp":
            _tab_to(page, "#premium")
            if not refused:  # a thousands separator first: the German message, then 12,50
                page.keyboard.type("1.000")
                _submit(page)
                assert page.evaluate("document.activeElement.id") == "error-summary"
                check("wtp (error)")
                assert "ohne Tausenderpunkte" in page.locator("#error-summary").inner_text()
                refused = True
                _tab_to(page, "#premium")
                page.keyboard.press("Control+A")
            page.keyboard.type("12,50")
            _submit(page)
        elif kind == "demographics":
            _tab_to(page, "#q_age")
            page.keyboard.type("41")
            _submit(page)
        else:
            raise AssertionError(f"unexpected page {kind}")
    assert _kind(page) == "completed"
    check("completed")
    assert {"quiz", "choice", "wtp", "attention_check", "demographics"} <= set(seen)
    assert not problems, problems

    from webapp.extensions import db
    from webapp.models import ChoiceResponse
    from webapp.services.researchers import set_researcher

    with app.app_context():
        choices = db.session.scalars(db.select(ChoiceResponse)).all()
        assert len(choices) == 4 and all(c.wtp_premium_usd == 12.5 for c in choices)
        set_researcher("ana", "correct horse battery", is_admin=True)
    client = app.test_client()
    assert login(client, "ana").status_code == 302
    export = client.get("/researcher/studies/produktwahl-demo/export/wide.csv")
    assert export.status_code == 200
    rows = list(csv.DictReader(io.StringIO(export.get_data(as_text=True))))
    assert [r["study_language"] for r in rows] == ["de"]
