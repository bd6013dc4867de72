"""A tour of every participant page type in a real browser, for the axe test and screenshots.

In-process bots (:mod:`webapp.bots`) move participants through the four demo studies; each new
page type is then opened in the browser by its URL (participant URLs carry their session, so
no cookie is needed) and handed to ``visit``. Error states are produced in the browser itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webapp.definition_cache import study_definition

ROOT = Path(__file__).resolve().parents[2]
DEMOS = (
    "product-choice-demo.yaml",
    "sentiment-demo.yaml",
    "rating-demo.yaml",
    "preference-demo.yaml",
)
END = {"completed", "screened_out", "study_full", "external"}


def load_demos(app) -> dict[str, dict[str, Any]]:
    """Load the demo studies into ``app``; return their definitions by slug."""
    from webapp.services.studies import load_study

    out = {}
    with app.app_context():
        for name in DEMOS:
            definition = study_definition(load_study(ROOT / "stimuli" / "studies" / name).study)
            out[definition.slug] = definition
    return out


def _bot(app, definition: dict[str, Any], external_id: str, **behaviour: Any):
    from webapp.bots import Bot, BotBehaviour, FlaskTransport

    return Bot(
        FlaskTransport(app),
        definition,
        BotBehaviour(platform="link", **behaviour),
        rng=random.Random(external_id),
        external_id=external_id,
    )


def tour(app, base: str, page, visit: Callable[[str], None]) -> list[str]:
    """Show every participant page type in ``page`` and call ``visit(name)`` on each.

    Returns the names visited, in order.
    """
    demos = load_demos(app)
    seen: list[str] = []

    def show(name: str, url: str | None = None) -> None:
        if url is not None:
            page.goto(base + url)
        seen.append(name)
        visit(name)

    wtp_url = choice_url = None
    for slug, definition in demos.items():
        bot = _bot(app, definition, f"tour-{slug}")
        p = bot.open()
        while True:
            if p.kind == "wtp" and wtp_url is None:
                wtp_url = p.url
            if p.kind == "choice" and choice_url is None:
                choice_url = p.url
            if p.kind not in seen:
                show(p.kind, p.url)
            if p.kind in END:
                break
            p = bot.step()
        if slug == "product-choice-demo":
            # A finished participant back through their link: the code again.
            show("completed (returning)", bot.entry_url())
    product = demos["product-choice-demo"]
    # Error states, made in the browser: an empty choice and a bad amount.
    bot = _bot(app, product, "tour-errors")
    p = bot.open()
    while p.kind != "choice":
        p = bot.step()
    page.goto(base + p.url)
    page.get_by_role("button", name="Continue").click()
    page.wait_for_load_state()
    show("choice (error)")
    p = bot.step()
    page.goto(base + p.url)
    page.locator("#premium").fill("twelve")
    page.get_by_role("button", name="Continue").click()
    page.wait_for_load_state()
    show("wtp (error)")
    failed = _bot(app, product, "tour-screened", fail_quiz=True)
    result = failed.run()
    assert result.outcome == "screened_out", result
    show("screened_out", failed.page.url)
    page.goto(base + _bot(app, product, "tour-declines").entry_url())
    page.locator("button[name=decline]").click()
    page.wait_for_load_state()
    show("declined")
    show("error", "/s/no-such-study?participant=x")
    return seen
