"""MTurk both ways: ExternalQuestion XML, the native batch files, and importing batch results."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET
from pathlib import Path

from sqlalchemy import select

from webapp.extensions import db
from webapp.models import Annotation, AnnotationState, Participant, Platform

from .conftest import DEMO

NS = "{http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd}"
STANDARD = ["HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "WorkTimeInSeconds"]


def _load(runner) -> None:
    assert runner.invoke(args=["study", "load", str(DEMO)]).exit_code == 0


def _write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def _items(n: int) -> list[tuple[str, str]]:
    with (DEMO.parent / "sentiment" / "demo_items.csv").open(encoding="utf-8") as fh:
        return [(r["item_id"], r["base_sentiment"]) for r in csv.DictReader(fh)][:n]


def test_external_question_points_at_the_study(runner):
    _load(runner)
    result = runner.invoke(
        args=["mturk", "external-question", "sentiment-demo", "--url", "https://lab.example.org/"]
    )
    assert result.exit_code == 0, result.output
    root = ET.fromstring(result.output)
    assert root.tag == f"{NS}ExternalQuestion"
    assert root.find(f"{NS}ExternalURL").text == "https://lab.example.org/s/sentiment-demo"
    assert root.find(f"{NS}FrameHeight").text == "0"
    refused = runner.invoke(
        args=["mturk", "external-question", "sentiment-demo", "--url", "http://lab.example.org"]
    )
    assert refused.exit_code != 0 and "https://" in refused.output
    # A query string would be dropped from the participant's URL: refused, not lost silently.
    query = runner.invoke(
        args=["mturk", "external-question", "sentiment-demo", "--url", "https://lab.org/?x=1"]
    )
    assert query.exit_code != 0 and "query string" in query.output


def test_an_external_question_hit_runs_the_study_and_submits_to_mturk(app, demo, bot_for):
    bot = bot_for(demo, "A1WORKER", platform="mturk")
    result = bot.run()
    assert result.outcome == "completed" and len(bot.labels) == 11
    assert bot.page.kind == "completed" and "mturk/externalSubmit" in bot.page.text


def test_batch_writes_a_crowd_html_layout_and_the_input_csv(runner, tmp_path):
    _load(runner)
    result = runner.invoke(args=["mturk", "batch", "sentiment-demo", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    layout = (tmp_path / "layout.html").read_text()
    assert "crowd-html-elements.js" in layout and "<crowd-form" in layout
    assert 'name="sentiment"' in layout and "'Positive', 'Negative'" in layout
    assert "${text}" in layout and 'Number of assignments per task" to 5' in layout
    with (tmp_path / "input.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 60
    assert list(rows[0])[:3] == ["item_id", "text", "base_sentiment"]
    assert rows[0]["item_id"] == "s001" and "although I lost all my friends" in rows[0]["text"]


def test_import_with_extra_columns_and_custom_field_names(app, runner, tmp_path):
    _load(runner)
    header = [*STANDARD, "Input.ID", "Input.text", "Input.answer", "Answer.feeling.label", "Extra"]
    rows = []
    for w in range(6):  # six workers label the first three items: five count, one is surplus
        for item_id, base in _items(3):
            label = "Negative" if w % 2 else "Positive"
            rows.append(
                [
                    f"H{item_id}",
                    f"A{w}{item_id}",
                    f"W{w}",
                    "Approved",
                    "12",
                    item_id,
                    "t",
                    base.title(),
                    label,
                    "x",
                ]
            )
    path = _write(tmp_path / "Batch_1_results.csv", header, rows)
    args = [
        "import-mturk",
        "sentiment-demo",
        str(path),
        "--item-col",
        "Input.ID",
        "--label-col",
        "Answer.feeling.label",
        "--base-col",
        "Input.answer",
    ]
    result = runner.invoke(args=args)
    assert result.exit_code == 0, result.output
    assert "imported 18 labels from Batch_1_results.csv (15 counted, 3 surplus" in result.output
    with app.app_context():
        workers = db.session.scalars(
            select(Participant).where(Participant.platform == Platform.mturk_batch)
        ).all()
        assert len(workers) == 6
        states = [a.state for a in db.session.scalars(select(Annotation))]
        assert states.count(AnnotationState.confirmed) == 15
        assert states.count(AnnotationState.surplus) == 3
    # Importing the same file again adds nothing.
    again = runner.invoke(args=args)
    assert again.exit_code == 0 and "imported 0 labels" in again.output
    assert "18 rows skipped" in again.output
    out = tmp_path / "items.csv"
    runner.invoke(args=["export", "sentiment-demo", "--format", "items", "--out", str(out)])
    with out.open(encoding="utf-8") as fh:
        first = {r["item_id"]: r for r in csv.DictReader(fh)}
    assert [first[i]["n_labels"] for i, _ in _items(3)] == ["5", "5", "5"]
    assert [first[i]["n_surplus"] for i, _ in _items(3)] == ["1", "1", "1"]
    # A web participant now never gets those three items.
    with app.app_context():
        from webapp.models import utcnow
        from webapp.services.allocation import study_is_full
        from webapp.services.studies import get_study

        assert not study_is_full(get_study("sentiment-demo"), utcnow())


def test_a_file_with_a_missing_column_is_refused_naming_it(app, runner, tmp_path):
    _load(runner)
    header = [
        "HITId",
        "AssignmentId",
        "WorkerId",
        "AssignmentStatus",
        "Input.item_id",
        "Answer.sentiment.label",
    ]
    path = _write(tmp_path / "b.csv", header, [["H", "A", "W", "Approved", "s001", "Positive"]])
    result = runner.invoke(args=["import-mturk", "sentiment-demo", str(path)])
    assert result.exit_code == 1
    assert "refused b.csv" in result.output and "Input.base_sentiment" in result.output
    with app.app_context():
        assert db.session.scalars(select(Annotation)).all() == []


def test_malformed_rows_refuse_the_whole_file_with_a_reason_per_row(app, runner, tmp_path):
    _load(runner)
    header = [*STANDARD, "Input.item_id", "Input.base_sentiment", "Answer.sentiment.label"]
    (i1, b1), (i2, b2) = _items(2)
    good = _write(
        tmp_path / "good.csv", header, [["H", "AG1", "W9", "Approved", "5", i1, b1, "Positive"]]
    )
    bad = _write(
        tmp_path / "bad.csv",
        header,
        [
            ["H", "A1", "W1", "Approved", "5", i1, b1, "Positive"],  # fine
            ["H", "A2", "W1", "Approved", "5", "nope", b1, "Positive"],  # unknown item
            ["H", "A3", "W2", "Approved", "5", i2, b2, "Maybe"],  # unknown label
            [
                "H",
                "A4",
                "",
                "Approved",
                "five",
                i2,
                "negative" if b2 == "positive" else "positive",
                "Negative",
            ],
            ["H", "A5", "W1", "Approved", "5", i1, b1, "Negative"],  # W1 labelled i1 twice
            ["H", "A6", "W3", "Rejected", "5", i1, b1, "Positive"],  # skipped, not an error
        ],
    )
    result = runner.invoke(args=["import-mturk", "sentiment-demo", str(bad), str(good)])
    assert result.exit_code == 1
    out = result.output
    assert "refused bad.csv: nothing imported" in out
    assert "row 3: Input.item_id 'nope' is not an item of this study" in out
    assert "row 4: Answer.sentiment.label 'maybe' is not one of ['positive', 'negative']" in out
    assert "row 5: WorkerId is empty" in out and "differs from the item's" in out
    assert "WorkTimeInSeconds 'five' is not a number" in out
    assert f"row 6: worker W1 labelled '{i1}' already in row 2" in out
    assert "row 7" not in out.split("imported")[0]
    assert "imported 1 labels from good.csv (1 counted, 0 surplus" in out
    with app.app_context():
        rows = db.session.scalars(select(Annotation)).all()
        assert [(a.external_ref, a.rt_ms) for a in rows] == [("AG1", 5000)]
