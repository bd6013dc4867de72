"""The console's study page of a three-format study with interim looks fits a 375 px screen:
nothing makes the page wider than the screen (wide tables scroll inside their own box)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.e2e.conftest import serve, without_time_limit
from tests.webapp.conftest import ROOT, make_app
from webapp.definition_cache import study_definition

pytestmark = [pytest.mark.browser]
PASSWORD = "correct horse battery"
FORMATS_DEMO = ROOT / "stimuli" / "studies" / "product-choice-formats-demo.yaml"
LOOKS = """  looks:
    at: [0.5, 1.0]
"""


def _study(tmp_path: Path) -> Path:
    """The three-format demo with two interim looks."""
    import shutil

    folder = tmp_path / "bundle"
    shutil.copytree(FORMATS_DEMO.parent / "product_pairs", folder / "product_pairs")
    text = FORMATS_DEMO.read_text().replace(
        "    drop_duplicates: true\n", "    drop_duplicates: true\n" + LOOKS, 1
    )
    path = folder / FORMATS_DEMO.name
    path.write_text(text)
    return path


def test_the_study_page_of_a_three_format_study_fits_375_px(tmp_path, chromium_path):
    from playwright.sync_api import sync_playwright

    from webapp.bots import Bot, BotBehaviour, FlaskTransport
    from webapp.extensions import db
    from webapp.services.researchers import set_researcher
    from webapp.services.studies import load_study

    app = make_app(f"sqlite:///{tmp_path / 'narrow.sqlite'}")
    with app.app_context():
        alice = set_researcher("alice", PASSWORD)
        study = load_study(_study(tmp_path)).study
        study.owner_id = alice.id
        definition = study_definition(study)
        db.session.commit()
    for i in range(3):
        bot = Bot(
            FlaskTransport(app),
            definition,
            BotBehaviour(platform="link"),
            rng=random.Random(i),
            external_id=f"NARROW{i}",
        )
        assert bot.run().outcome == "completed"
    with serve(app) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": 375, "height": 800})
        without_time_limit(page)
        page.goto(f"{base}/researcher/login")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        for path in ("/researcher/", f"/researcher/studies/{definition.slug}"):
            page.goto(base + path)
            wide = page.evaluate(
                """() => [...document.querySelectorAll('body *')]
                    .filter(e => e.getBoundingClientRect().right > 376
                                 && !e.closest('.table-wrap'))
                    .map(e => e.tagName + (e.className ? '.' + e.className : '') + ' '
                              + Math.round(e.getBoundingClientRect().right))
                    .slice(0, 15)"""
            )
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 375 and not wide, (path, width, wide)
        browser.close()
