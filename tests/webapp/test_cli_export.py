"""The commands: study load/list, bots, export (the Done-when check), researcher accounts, serve."""

from __future__ import annotations

import csv
import shutil
from collections import Counter

import pytest
from sqlalchemy import select

from webapp.extensions import db
from webapp.models import Researcher

from .conftest import DEMO


def _read(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_study_load_and_list(runner, tmp_path):
    result = runner.invoke(args=["study", "load", str(DEMO)])
    assert result.exit_code == 0, result.output
    assert "created: product-choice-demo (version 1)" in result.output
    result = runner.invoke(args=["study", "load", str(DEMO)])
    assert "unchanged: product-choice-demo" in result.output
    result = runner.invoke(args=["study", "list"])
    assert result.output.startswith("product-choice-demo\tv1\tChoosing between products")
    assert result.output.rstrip().endswith("\tlive")
    result = runner.invoke(args=["study", "state", "product-choice-demo", "paused"])
    assert result.exit_code == 0 and "live -> paused" in result.output
    assert runner.invoke(args=["study", "state", "product-choice-demo", "closed"]).exit_code == 0
    assert runner.invoke(args=["study", "list"]).output.rstrip().endswith("\tclosed")
    result = runner.invoke(args=["study", "state", "product-choice-demo", "live"])  # reopen
    assert result.exit_code == 0 and "closed -> live" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("slug: Bad\n")
    result = runner.invoke(args=["study", "load", str(bad)])
    assert result.exit_code == 1
    assert "error: bad.yaml: slug:" in result.output


def test_changing_tasks_of_a_study_with_participants_needs_force(runner, make_bot, tmp_path):
    assert make_bot().run().outcome == "completed"
    changed = tmp_path / "changed.yaml"
    # A study names files of its own folder only: the changed copy gets its own pairs file.
    shutil.copytree(DEMO.parent / "product_pairs", tmp_path / "product_pairs")
    text = DEMO.read_text()
    changed.write_text(text.replace("attempts: 2", "attempts: 3"))
    result = runner.invoke(args=["study", "load", str(changed)])
    assert result.exit_code == 1 and "--force" in result.output
    result = runner.invoke(args=["study", "load", "--force", str(changed)])
    assert result.exit_code == 0 and "updated: product-choice-demo (version 2)" in result.output


@pytest.mark.slow
def test_done_when_40_bots_give_400_balanced_rows(runner, study, tmp_path):
    """40 bots → 400 rows, every pair 20x summary and 20x original, balanced among the bots.

    Bots are test participants: the default export leaves them out, ``--include-test`` brings
    them in, each row marked ``is_test = 1``.
    """
    result = runner.invoke(args=["bots", "product-choice-demo", "--n", "40"])
    assert result.exit_code == 0, result.output
    assert "completed 40" in result.output
    out = tmp_path / "x.csv"
    args = ["export", "product-choice-demo", "--format", "long", "--out", str(out)]
    result = runner.invoke(args=args)
    assert result.exit_code == 0 and "wrote 0 rows" in result.output
    result = runner.invoke(args=[*args, "--include-test"])
    assert result.exit_code == 0 and "wrote 400 rows" in result.output
    rows = _read(out)
    assert len(rows) == 400 and {r["is_test"] for r in rows} == {"1"}
    per_pair = Counter((r["pair_id"], r["format"]) for r in rows)
    assert len(per_pair) == 20 and set(per_pair.values()) == {20}
    assert len({(r["participant_id"], r["pair_id"]) for r in rows}) == 400
    assert all(r["wtp_premium"] != "" and float(r["wtp_premium"]) >= 0 for r in rows)
    assert Counter(r["sequence"] for r in rows) == {"A": 200, "B": 200}
    for r in rows:
        assert r["participant_id"].startswith("p_") and len(r["participant_id"]) == 18
        assert r["format"] in {"original", "summary"}
        assert r["target_side"] in {"left", "right"} and r["chose_target"] in {"0", "1"}
        assert r["status"] == "completed" and r["quiz_passed"] == "1"
        assert r["attention_passed"] == "1" and float(r["duration_s"]) > 0
        pct = 100 * float(r["wtp_premium"]) / float(r["other_price"])
        assert float(r["wtp_premium_pct"]) == pytest.approx(pct)


def test_export_columns_follow_the_contract_and_hide_platform_ids(runner, make_bot, tmp_path):
    from webapp.services.authenticity import EXPORT_COLUMNS
    from webapp.tasks.product_choice.export import LONG_CHOICE_COLUMNS

    bots = [make_bot(), make_bot(fail_quiz=True), make_bot(abandon_at=6)]
    outcomes = [b.run().outcome for b in bots]
    assert outcomes == ["completed", "screened_out", "abandoned"]
    out = tmp_path / "x.csv"
    runner.invoke(args=["export", "product-choice-demo", "--out", str(out)])
    text = out.read_text()
    header = text.splitlines()[0].split(",")
    assert header == [*LONG_CHOICE_COLUMNS, *EXPORT_COLUMNS]
    analysis_needs = {
        "participant_id",
        "pair_id",
        "format",
        "chose_target",
        "target_side",
        "wtp_premium",
        "wtp_premium_pct",
        "rt_ms",
        "trial_index",
        "status",
        "quiz_passed",
        "attention_passed",
        "duration_s",
    }
    assert analysis_needs <= set(header)
    for b in bots:
        assert b.external_id not in text
    rows = _read(out)
    by_status = Counter(r["status"] for r in rows)
    # abandon_at=6: consent, instructions, quiz, choice, wtp, choice → 2 choice rows
    assert by_status == {"completed": 10, "started": 2}
    started = [r for r in rows if r["status"] == "started"]
    assert started[1]["wtp_premium"] == "" and started[1]["duration_s"] == ""
    out2 = tmp_path / "ids.csv"
    runner.invoke(
        args=["export", "product-choice-demo", "--out", str(out2), "--include-platform-ids"]
    )
    assert {r["platform_participant_id"] for r in _read(out2)} == {
        bots[0].external_id,
        bots[2].external_id,
    }


def test_export_creates_the_folder_it_writes_into(runner, tmp_path):
    assert runner.invoke(args=["study", "load", str(DEMO)]).exit_code == 0
    out = tmp_path / "new" / "folder" / "codebook.csv"
    args = ["export", "product-choice-demo", "--format", "codebook", "--out", str(out)]
    result = runner.invoke(args=args)
    assert result.exit_code == 0, result.output
    assert _read(out) and f"to {out}" in result.output


def test_export_escapes_formula_cells():
    import io

    from webapp.services.export import write_csv

    buf = io.StringIO()
    write_csv([{"a": "=cmd()", "b": -1.5, "c": None}], ["a", "b", "c"], buf)
    assert buf.getvalue().splitlines()[1] == "'=cmd(),-1.5,"


def test_create_researcher_and_serve_prints_links(runner, app, study, monkeypatch):
    result = runner.invoke(
        args=["create-researcher", "alice"], input="longpassword\nlongpassword\n"
    )
    assert result.exit_code == 0, result.output
    monkeypatch.setenv("FRAMELAB_SERVE_DRY_RUN", "1")
    result = runner.invoke(args=["serve", "--port", "5123"])
    assert result.exit_code == 0, result.output
    assert "http://127.0.0.1:5123/researcher/login  (user demo, password " in result.output
    assert "http://127.0.0.1:5123/s/product-choice-demo?participant=demo-" in result.output
    monkeypatch.setenv("PORT", "5999")
    result = runner.invoke(args=["serve"])
    assert "http://127.0.0.1:5999/s/product-choice-demo" in result.output
    with app.app_context():
        names = set(db.session.scalars(select(Researcher.username)))
    assert names == {"alice", "demo"}


def test_framelab_console_script_lists_the_web_commands():
    from click.testing import CliRunner

    from framelab.cli import main

    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in ("study", "export", "bots", "serve", "create-researcher"):
        assert name in result.output


def test_long_export_says_when_each_participant_completed(runner, make_bot, query, tmp_path):
    # Interim looks count participants in completion order (docs/analysis.md).
    import csv

    from webapp.extensions import db
    from webapp.models import Participant

    for bot in (make_bot(), make_bot(abandon_at=6), make_bot()):
        bot.run()
    out = tmp_path / "x.csv"
    runner.invoke(args=["export", "product-choice-demo", "--out", str(out)])
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    finished = query(
        lambda: {
            p.code: p.finished_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if p.finished_at else ""
            for p in db.session.scalars(db.select(Participant))
        }
    )
    by_status = {(r["status"], r["finished_at"] == finished[r["participant_id"]]) for r in rows}
    assert by_status == {("completed", True), ("started", True)}
    assert {r["finished_at"] for r in rows if r["status"] == "started"} == {""}
    assert len({r["finished_at"] for r in rows if r["status"] == "completed"}) == 2
