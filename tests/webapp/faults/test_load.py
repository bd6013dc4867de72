"""The load test's integrity audit: it passes on a real run and catches what it must catch."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from sqlalchemy import delete, select

from webapp.extensions import db
from webapp.models import ChoiceResponse, Participant, QuizAttempt

from ..conftest import ROOT


def _run(loadtest, app, url, definition, n: int, seed: int = 1):
    return asyncio.run(
        loadtest.run_async_bots(url, [(definition, n)], concurrency=n, seed=seed, timeout_s=300)
    )


def test_audit_passes_then_catches_a_lost_and_a_duplicated_answer(app, study, serve_app, loadtest):
    run = _run(loadtest, app, serve_app(app), study, 3)
    assert [r.outcome for r in run.results] == ["completed"] * 3
    report = loadtest.audit(app, run)
    assert report["ok"], report["problems"]
    assert report["acknowledged"] == 3 * (1 + 1 + 1 + 20 + 1 + 1 + 1)  # consent … debrief

    with app.app_context():  # lose one acknowledged WTP answer
        row = db.session.scalars(select(ChoiceResponse).limit(1)).one()
        row.wtp_premium_usd = None
        row_id = row.id
        db.session.commit()
    report = loadtest.audit(app, run)
    assert not report["ok"] and report["lost"] == 1 and report["incomplete"] == 1

    with app.app_context():  # a save no bot made: one quiz attempt too many
        attempt = db.session.scalars(select(QuizAttempt).limit(1)).one()
        db.session.add(
            QuizAttempt(
                participant_id=attempt.participant_id,
                block_id=attempt.block_id,
                attempt=attempt.attempt + 1,
                answers={},
                n_correct=0,
                passed=False,
            )
        )
        db.session.execute(delete(ChoiceResponse).where(ChoiceResponse.id == row_id))
        db.session.get(Participant, attempt.participant_id).page_seq += 1
        db.session.commit()
    report = loadtest.audit(app, run)
    assert report["duplicated"] == 1 and report["lost"] >= 2


@pytest.mark.postgres
@pytest.mark.slow
def test_loadtest_50_plus_10_participants_passes_its_audit(pg_url, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "loadtest.py"),
            "--n",
            "50",
            "--m",
            "10",
            "--pgbench-s",
            "3",
            "--timeout-s",
            "400",
            "--pg-url",
            pg_url,
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result,) = tmp_path.glob("loadtest-*.json")
    report = json.loads(result.read_text())
    assert report["participants"] == 60 and report["completed"] == 60
    assert report["sentiment"] == "ran"
    assert report["errors"] == 0 and report["lost"] == 0 and report["duplicated"] == 0
    assert report["audit"]["ok"] and report["audit"]["db_completed"] == 60
    (block,) = report["audit"]["annotation"]["blocks"]
    assert block["labels"] == 10 * 10 and block["quota"] == 5
    assert report["requests"] >= 50 * 50 and report["pgbench_tps"] > 0
    for key in ("p50_ms", "p95_ms", "p99_ms", "responses_per_s"):
        assert report[key] > 0
    assert "POST page:choice" in report["latency_by_route"]
