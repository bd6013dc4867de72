"""Exports of the sentiment study (the docs/export.md contract) and the Done-when checks."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from webapp.definition_cache import study_definition

from .conftest import DEMO, ROOT

EXPORT_DOC = ROOT / "docs" / "export.md"


def _definition(runner) -> dict:
    from webapp.services.studies import get_study

    with runner.app.app_context():
        return study_definition(get_study("sentiment-demo"))


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _doc_columns(heading: str) -> list[str]:
    """The column names of one table of docs/export.md, in order."""
    text = EXPORT_DOC.read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M)


def test_export_columns_are_those_of_the_contract():
    from webapp.tasks.sentiment.export import ANNOTATION_LONG_COLUMNS, ITEM_COLUMNS

    long_doc = _doc_columns("## `long` for a sentiment-annotation study")
    items_doc = _doc_columns("## `items` for a sentiment-annotation study")
    assert list(ANNOTATION_LONG_COLUMNS) == long_doc
    assert list(ITEM_COLUMNS) == items_doc


@pytest.mark.slow
def test_done_when_bots_then_items_export_shows_five_labels_per_item(runner, tmp_path):
    """`framelab export sentiment-demo --format items` after a bot run: n_labels = 5 everywhere."""
    from webapp.bots import run_bots

    result = runner.invoke(args=["study", "load", str(DEMO)])
    assert result.exit_code == 0
    # Bots standing in for real participants: `framelab bots` makes test participants, who
    # hold no slots.
    definition = _definition(runner)
    counts = run_bots(runner.app, definition, n=36, concurrency=3, seed=4).counts
    # Items are reserved two at a time, so the last people in may finish with a partial batch:
    # everyone who got an item completes, the others see "study full".
    assert counts["completed"] >= 30
    assert counts["completed"] + counts.get("study_full", 0) == 36
    items = tmp_path / "items.csv"
    result = runner.invoke(
        args=["export", "sentiment-demo", "--format", "items", "--out", str(items)]
    )
    assert result.exit_code == 0 and "wrote 60 rows" in result.output
    rows = _read(items)
    assert [r["n_labels"] for r in rows] == ["5"] * 60
    assert {r["needed"] for r in rows} == {"0"} and {r["n_reserved"] for r in rows} == {"0"}
    assert all(0 <= int(r["shift_count"]) <= 5 for r in rows)
    assert list(rows[0])[-3:] == ["item_base_text", "item_frame_position", "item_frame_text"]

    long = tmp_path / "long.csv"
    result = runner.invoke(
        args=["export", "sentiment-demo", "--format", "long", "--out", str(long)]
    )
    assert result.exit_code == 0
    labels = _read(long)
    counted = [r for r in labels if r["is_gold"] == "0" and r["surplus"] == "0"]
    gold = [r for r in labels if r["is_gold"] == "1"]
    assert len(counted) == 300
    # One gold item planned in each batch of ten: everyone with a full batch met it; a partial
    # batch (the last arrivals, items reserved two at a time) may end before its gold position.
    per_person: dict[str, list[int]] = {}
    for r in labels:
        n = per_person.setdefault(r["participant_id"], [0, 0])
        n[r["is_gold"] == "1"] += 1
    assert all(n_gold <= 1 for _, n_gold in per_person.values())
    assert all(n_gold == 1 for n_items, n_gold in per_person.values() if n_items == 10)
    assert len(gold) == sum(n_gold for _, n_gold in per_person.values())
    assert {r["gold_correct"] for r in gold} == {"1"}
    assert {r["gold_correct"] for r in counted} == {""}
    # The items table's shift count is the long table's, recomputed.
    shifts: dict[str, int] = {}
    for r in counted:
        opposite = {"positive": "negative", "negative": "positive"}[r["base_sentiment"]]
        shifts[r["item_id"]] = shifts.get(r["item_id"], 0) + (r["label"] == opposite)
    assert {r["item_id"]: int(r["shift_count"]) for r in rows} == shifts
    for r in labels:
        assert r["participant_id"].startswith("p_") and r["platform"] == "prolific"
        assert r["label"] in {"positive", "negative"} and r["status"] == "completed"
        assert r["answered_at"].endswith("Z") and int(r["rt_ms"]) > 0


def test_exports_load_with_the_analysis_reader(runner, tmp_path):
    """The analysis side validates both tables (analysis.io.load_export)."""
    pytest.importorskip("pandas")
    from analysis.io import load_export
    from webapp.bots import run_bots

    assert runner.invoke(args=["study", "load", str(DEMO)]).exit_code == 0
    assert run_bots(runner.app, _definition(runner), n=3, seed=1).counts == {"completed": 3}
    for fmt in ("long", "items"):
        out = tmp_path / f"{fmt}.csv"
        assert (
            runner.invoke(
                args=["export", "sentiment-demo", "--format", fmt, "--out", str(out)]
            ).exit_code
            == 0
        )
        df = load_export(out)
        assert len(df) == (33 if fmt == "long" else 60)


def test_items_export_refuses_a_choice_study(runner, tmp_path):
    from tests.webapp.conftest import DEMO as CHOICE_DEMO

    assert runner.invoke(args=["study", "load", str(CHOICE_DEMO)]).exit_code == 0
    result = runner.invoke(
        args=["export", "product-choice-demo", "--format", "items", "--out", str(tmp_path / "x")]
    )
    assert result.exit_code != 0 and "sentiment_annotation" in result.output


def test_researcher_sees_confirmed_reserved_needed_per_item(app, client, demo, bot_for):
    from webapp.services.researchers import set_researcher

    from .conftest import to_first_label

    assert bot_for(demo, "done").run().outcome == "completed"
    to_first_label(bot_for(demo, "busy"))
    with app.app_context():
        set_researcher("ann", "password123", is_admin=True)
    page = client.get("/researcher/login")
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page.text)
    token = token or re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    client.post(
        "/researcher/login",
        data={"username": "ann", "password": "password123", "csrf_token": token.group(1)},
    )
    resp = client.get("/researcher/studies/sentiment-demo/items")
    assert resp.status_code == 200
    rows = re.findall(
        r'<tr data-item="([^"]+)"><td>[^<]*</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td>',
        resp.text,
    )
    assert len(rows) == 60
    totals = [sum(int(r[i]) for r in rows) for i in (1, 2, 3)]
    # "busy" holds only the first part of a batch, and has labelled nothing yet.
    from webapp.services.allocation import RESERVE_AHEAD

    assert totals == [10, RESERVE_AHEAD, 300 - 10]
    assert f'data-idle-holds="{RESERVE_AHEAD}"' in resp.text
