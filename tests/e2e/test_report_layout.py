"""The analysis reports in real headless Chromium: nothing is cut off at 1280 or 375 px.

Each report (choice with every model, pre-registered, annotation, ratings, preferences) is
rendered at a desktop width (1280 px) and a phone width (375 px) and photographed. At both
widths the page never scrolls sideways (``document.scrollingElement.scrollWidth <=
innerWidth``). At 1280 px every table is shown whole: none is wider than the box it sits in, as
the GEE, GLMM-details and WTP-model tables were. At 375 px a table may be wider than the screen,
and then scrolls inside its own box, which itself stays on the screen.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from analysis.simulate import simulate_choice_study
from framelab.cli import main
from tests.analysis.annotation_data import simulate_annotation_study
from tests.e2e.conftest import without_time_limit

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDTHS = (1280, 375)
# Every table's width, the width of the box it scrolls in, and that box's right edge.
_TABLES = """() => Array.from(document.querySelectorAll('table')).map(t => {
    const box = t.closest('.report-table') || t.parentElement;
    const scroller = t.parentElement;
    return {
        id: t.id || (t.closest('[id]') || {}).id || '',
        table: Math.ceil(t.getBoundingClientRect().width),
        box: Math.floor(box.getBoundingClientRect().width),
        right: Math.ceil(box.getBoundingClientRect().right),
        scrolls: getComputedStyle(scroller).overflowX,
    };
})"""


def _choice_reports(tmp_path) -> list:
    from analysis.plan.prereg import freeze, render_markdown
    from analysis.plan.spec import read_study
    from tests.analysis.plan.test_cli import DEMO

    runner = CliRunner()
    export = tmp_path / "choice.csv"
    simulate_choice_study(40, 10, seed=8, study_slug="product-choice-demo").to_csv(
        export, index=False
    )
    full = tmp_path / "choice"
    args = ["analyze", "choice", str(export), "--wtp-slopes", "--out", str(full)]
    result = runner.invoke(main, [*args, "--study", DEMO])
    assert result.exit_code == 0, result.output
    doc = tmp_path / "prereg.md"
    record = freeze(read_study(DEMO, ["product_pairs/demo.yaml"]))
    doc.write_text(render_markdown(record), encoding="utf-8")
    pre = tmp_path / "prereg-report"
    args = ["analyze", "choice", str(export), "--prereg", str(doc), "--no-figures"]
    # Never the developer's own database: the console's record is "not compared" here.
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'no-console.sqlite'}"}
    result = runner.invoke(main, [*args, "--out", str(pre)], env=env)
    assert result.exit_code == 0, result.output
    # Four formats (five contrasts per model) in two blocks, with the random slopes of one.
    import pandas as pd

    r_data = Path(__file__).resolve().parents[1] / "analysis" / "r" / "data"
    a = pd.read_csv(r_data / "kformat_4x80x12.csv").assign(block="b1")
    b = pd.read_csv(r_data / "kformat_3x60x9_missing.csv").assign(block="b2")
    b["pair_id"] = "r" + b["pair_id"]
    pd.concat([a, b]).to_csv(tmp_path / "kformat.csv", index=False)
    k = tmp_path / "kformat"
    args = ["analyze", "choice", str(tmp_path / "kformat.csv"), "--no-figures", "--out", str(k)]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    return [full / "report.html", pre / "report.html", k / "report.html"]


def _other_reports(tmp_path) -> list:
    from tests.analysis.ratings.test_cli import preference_exports, rating_export

    runner = CliRunner()
    labels, preds = simulate_annotation_study(n_items=40, seed=4)
    labels.to_csv(tmp_path / "labels.csv", index=False)
    preds.to_csv(tmp_path / "preds.csv", index=False)
    rating_export().to_csv(tmp_path / "ratings.csv", index=False)
    verdicts, pairs = preference_exports()
    verdicts.to_csv(tmp_path / "verdicts.csv", index=False)
    pairs.to_csv(tmp_path / "pairs.csv", index=False)
    commands = {
        "annotations": ["--export", "labels.csv", "--predictions", "preds.csv"],
        "ratings": ["ratings.csv"],
        "preferences": ["verdicts.csv", "--pairs", "pairs.csv"],
    }
    pages = []
    for kind, args in commands.items():
        paths = [str(tmp_path / a) if a.endswith(".csv") else a for a in args]
        out = tmp_path / kind
        result = runner.invoke(main, ["analyze", kind, *paths, "--no-figures", "--out", str(out)])
        assert result.exit_code == 0, result.output
        pages.append(out / "report.html")
    return pages


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> list:
    tmp_path = tmp_path_factory.mktemp("reports")
    return _choice_reports(tmp_path) + _other_reports(tmp_path)


def test_reports_are_not_cut_at_desktop_or_phone_width(reports, chromium_path, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path, headless=True, args=["--no-sandbox"]
        )
        for width in WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": 900})
            page = context.new_page()
            without_time_limit(page)
            for report in reports:
                page.goto(report.as_uri())
                name = f"{report.parent.name}-{width}"
                page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
                scroll = page.evaluate("document.scrollingElement.scrollWidth")
                assert scroll <= page.evaluate("innerWidth"), name
                tables = page.evaluate(_TABLES)
                assert len(tables) >= 4, name
                for t in tables:
                    where = f"{name}: {json.dumps(t)}"
                    if width == 1280:
                        assert t["table"] <= t["box"], where  # shown whole, nothing cut
                    else:
                        assert t["right"] <= width, where  # its box stays on the screen
                        assert t["table"] <= t["box"] or t["scrolls"] == "auto", where
            context.close()
        browser.close()
