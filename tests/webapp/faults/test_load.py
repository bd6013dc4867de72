"""The load test's integrity audit: it passes on a real run and catches what it must catch."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from sqlalchemy import delete, select

from webapp.extensions import db
from webapp.models import ChoiceResponse, Participant, PlatformIdentity, QuizAttempt

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


def test_a_run_cut_by_its_bound_is_not_an_integrity_failure(app, study, serve_app, loadtest):
    """A run bound that cuts slow readers is reported as reached, not as a failed audit.

    Two bots think 30 s on average per page and a 3 s bound cuts them mid-study; one bot with
    no think time finishes. The run says the bound was reached; the audit of what the server
    acknowledged passes, counting the cut bots apart.
    """
    url = serve_app(app)
    fast, slow = [(study, 1)], [(study, 2)]
    run = asyncio.run(loadtest.run_async_bots(url, fast, concurrency=1, seed=3, timeout_s=120))
    cut = asyncio.run(
        loadtest.run_async_bots(
            url, slow, concurrency=2, seed=4, think_ms=30_000, timeout_s=3, prefix="SLOW"
        )
    )
    assert cut.timed_out and cut.results == [] and len(cut.bots) == 2
    merged = loadtest.BotRun(
        bots=run.bots + cut.bots, results=run.results, wall_s=run.wall_s, timed_out=True
    )
    report = loadtest.audit(app, merged)
    assert report["ok"], report["problems"]
    assert report["cut"] == 2 and report["lost"] == 0 and report["db_completed"] == 1


def test_the_bound_follows_the_profile(loadtest):
    from types import SimpleNamespace

    from webapp.definition import TaskBlock

    blocks = (TaskBlock.of("c", "consent", {}), TaskBlock.of("d", "debrief", {}))
    pages = loadtest.pages_per_participant(SimpleNamespace(tasks=blocks))
    assert pages == 2
    # Ramped N = 1,000 with 26 pages and 5 s mean think time: the old fixed 900 s bound sat
    # below the slowest readers' 60 + 26 * 5 + 8 * sqrt(26) * 5 s.
    bound = loadtest.profile_bound(26, 5.0, 60.0)
    assert bound > 60 + 26 * 5.0 + 8 * 26**0.5 * 5.0
    assert loadtest.profile_bound(26, 0.0, 0.0) < loadtest.profile_bound(26, 1.0, 0.0)


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


def test_a_partial_sentiment_batch_is_not_a_duplicated_save(app, serve_app, loadtest, tmp_path):
    """A batch that ends early moves the page on without a submission: not a duplicate.

    Three items, one label each, batches of two: the first bot labels two, the second finds
    one item left and its next page's entry ends the block (the server's own step, which no
    bot acknowledged). Counting that step as an unacknowledged save failed correct runs.
    """
    from ..sentiment.conftest import load, write_study

    definition = load(app, write_study(tmp_path / "study", n_items=3, k=1, batch=2))
    run = asyncio.run(
        loadtest.run_async_bots(
            serve_app(app), [(definition, 2)], concurrency=1, seed=5, timeout_s=120
        )
    )
    assert [r.outcome for r in run.results] == ["completed"] * 2
    labels = sorted(sum(a.kind == "sentiment" for a in b.acks) for b in run.bots)
    assert labels == [1, 2]  # one partial batch
    report = loadtest.audit(app, run)
    assert report["ok"], report["problems"]
    assert report["duplicated"] == 0 and report["lost"] == 0
    (block,) = report["annotation"]["blocks"]
    assert block["items_at_quota"] == 3

    with app.app_context():  # a save no bot made is still caught on the partial batch's bot
        short = next(b for b in run.bots if sum(a.kind == "sentiment" for a in b.acks) == 1)
        ident = db.session.scalars(
            select(PlatformIdentity).where(PlatformIdentity.external_id == short.external_id)
        ).one()
        db.session.get(Participant, ident.participant_id).page_seq += 1
        db.session.commit()
    report = loadtest.audit(app, run)
    assert not report["ok"] and report["duplicated"] == 1
