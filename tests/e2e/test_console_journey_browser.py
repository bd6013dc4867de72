"""The console in Chromium: a researcher created as the README says loads the demo under a slug
of their own, watches bots fill the funnel and the per-pair shares live, finds a participant by
Prolific ID, closes through a confirmation and reopens, previews with the banner and page list;
axe-core checks every console page.

axe-core is the npm package, pinned and installed by the shared ``axe_source`` fixture
(tests/e2e/conftest.py, or ``make axe``).
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest

from tests.e2e.conftest import serve, without_time_limit
from tests.webapp.conftest import DEMO, make_app
from webapp.definition_cache import study_definition

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PASSWORD = "correct horse battery"


def check_axe(page, axe_source: str, name: str, include: list[str] | None = None) -> None:
    """Run axe-core on the page (or the given parts); print the result; fail on serious ones."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=axe_source)
    context = {"include": [[sel] for sel in include]} if include else "document"
    result = page.evaluate(
        "async (ctx) => { const ctxArg = ctx === 'document' ? document : ctx;"
        " const r = await axe.run(ctxArg, {resultTypes: ['violations']});"
        " return r.violations.map(v => ({id: v.id, impact: v.impact, n: v.nodes.length,"
        " target: v.nodes[0].target.join(' ')})); }",
        context,
    )
    bad = [v for v in result if v["impact"] in ("serious", "critical")]
    summary = ", ".join(f"{v['id']}({v['impact']}, {v['n']})" for v in result) or "none"
    print(f"axe {name}: {len(bad)} serious/critical; all violations: {summary}")
    assert not bad, f"{name}: {bad}"


@pytest.fixture
def platform(tmp_path: Path):
    """``(app, base_url)``: the demos loaded from the command line (as `make run` does) and
    a researcher made with `framelab create-researcher alice` (no admin), over real HTTP."""
    from webapp.services.researchers import set_researcher
    from webapp.services.studies import load_study

    app = make_app(f"sqlite:///{tmp_path / 'console.sqlite'}")
    with app.app_context():
        load_study(DEMO)
        set_researcher("alice", PASSWORD)
    with serve(app) as url:
        yield app, url


@pytest.fixture
def desk(chromium_path: str):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path, headless=True, args=["--no-sandbox"]
        )
        # bypass_csp: axe-core is injected as an inline script, which the CSP rightly refuses.
        context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
        page = context.new_page()
        without_time_limit(page)
        yield page
        context.close()
        browser.close()


def test_console_researcher_journey_end_to_end(platform, desk, axe_source):
    from playwright.sync_api import expect

    from webapp.bots import BotBehaviour, run_bots
    from webapp.extensions import db
    from webapp.models import ChoiceResponse, Participant, Platform, PlatformIdentity
    from webapp.services.studies import get_study

    app, base = platform
    page = desk
    page.goto(f"{base}/researcher/login")
    check_axe(page, axe_source, "login")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    # The demo's slug is taken (loaded unowned by `make run`); the form offers one.
    page.get_by_label("Study file").select_option("product-choice-demo.yaml")
    page.get_by_role("button", name="Load as a draft").click()
    expect(page.locator("[data-upload-error]")).to_contain_text("taken by another researcher")
    slug_box = page.locator("#slug")
    expect(slug_box).to_have_value("product-choice-demo-alice")
    check_axe(page, axe_source, "studies (with an error)")
    page.get_by_role("button", name="Load as a draft").click()
    expect(page.locator("[data-state]")).to_have_text("draft")
    slug = "product-choice-demo-alice"
    assert page.url.endswith(f"/researcher/studies/{slug}")

    # Preview: the banner, a page list, and the way back.
    page.get_by_role("button", name="Preview as a participant").click()
    expect(page.locator("[data-preview-bar]")).to_contain_text("PREVIEW")
    page.locator("[data-preview-bar] [data-page-list]").click()
    page.locator("[data-preview-block=choices]").click()
    expect(page.locator("main")).to_have_attribute("data-page", "choice")
    expect(page.locator("[data-preview-bar]")).to_contain_text("PREVIEW")
    check_axe(page, axe_source, "preview bar", include=["[data-preview-bar]"])
    page.locator("[data-preview-bar] [data-back-to-console]").click()
    expect(page.locator("main")).to_have_attribute("data-page", "researcher-study")

    page.get_by_role("button", name="Go live").click()
    expect(page.locator("[data-state]")).to_have_text("live")
    page.locator("[data-copy=link-prolific]").click()
    expect(page.locator("[data-copied]")).not_to_be_empty()

    # Bots fill the study over HTTP while the page stays open: the funnel and the per-pair
    # target shares grow without a reload.
    page.evaluate("window.__notReloaded = true")
    with app.app_context():
        definition = study_definition(get_study(slug))
    results = []
    behaviour = BotBehaviour(p_target={"original": 0.3, "summary": 0.9})
    runner = threading.Thread(
        target=lambda: results.append(
            run_bots(
                None,
                definition,
                n=6,
                url=base,
                seed=17,
                behaviour=behaviour,
                fail_quiz_share=0.2,
            )
        )
    )
    runner.start()
    first = page.locator("tbody[data-funnel] tr").first
    expect(first.locator("th")).to_have_text("instructions/0")
    expect(first.locator("td").first).to_have_text("6")
    runner.join()
    assert results and sum(results[0].counts.values()) == 6
    expect(page.locator("tbody[data-shares] tr")).to_have_count(10)
    assert page.evaluate("window.__notReloaded") is True
    with app.app_context():
        study = get_study(slug)
        picks = db.session.execute(
            db.select(ChoiceResponse.pair_id, ChoiceResponse.format, ChoiceResponse.chose_target)
            .join(Participant)
            .where(Participant.study_id == study.id)
        ).all()
        a_pid = db.session.scalars(
            db.select(PlatformIdentity.external_id).where(
                PlatformIdentity.study_id == study.id,
                PlatformIdentity.platform == Platform.prolific,
            )
        ).first()
    # Every share cell matches the stored choices (waiting out a poll or two under load).
    for pair in sorted({p for p, _, _ in picks}):
        row = page.locator(f'tbody[data-shares] tr[data-pair="{pair}"]')
        for fmt in ("original", "summary"):
            mine = [t for p, f, t in picks if p == pair and f == fmt]
            # The page rounds like JavaScript's Math.round (half up) the 3-decimal share.
            pct = math.floor(100 * round(sum(mine) / len(mine), 3) + 0.5) if mine else None
            want = f"{pct}% of {len(mine)}" if mine else "–"
            expect(row.locator(f'[data-k="{fmt}"]')).to_have_text(want)
    check_axe(page, axe_source, "study overview")

    # The Prolific ID as the researcher has it, typed into the search box.
    page.get_by_label("Participant or Prolific/MTurk ID").first.fill(a_pid.upper())
    page.get_by_role("button", name="Show").click()
    rows = page.locator("tbody[data-participants] tr")
    expect(rows).to_have_count(1)
    rows.first.locator("a").click()
    expect(page.locator("[data-platform-id]")).to_have_text(a_pid)
    expect(page.locator("tbody[data-path] tr").first).to_contain_text("instructions/0")
    check_axe(page, axe_source, "participant page")
    page.get_by_role("link", name=f"← {definition.title}").click()

    # Closing asks first and names the consequence; a closed study reopens.
    expect(page.locator("form button[data-transition=closed]")).to_have_count(0)
    page.get_by_role("link", name="Close the study…").click()
    expect(page.locator("[data-consequence]")).to_contain_text("cannot finish")
    check_axe(page, axe_source, "close confirmation")
    page.get_by_role("button", name="Close the study now").click()
    expect(page.locator("[data-state]")).to_have_text("closed")
    page.get_by_role("button", name="Reopen (live)").click()
    expect(page.locator("[data-state]")).to_have_text("live")
    page.goto(f"{base}/researcher/audit")
    expect(page.locator("main")).to_contain_text("reopen")
    check_axe(page, axe_source, "audit log")
