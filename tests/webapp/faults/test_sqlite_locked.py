"""SQLite "database is locked": the friendly retry page (503), never a 500, nothing lost."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter

import pytest
from sqlalchemy import func, select

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.extensions import db
from webapp.models import ChoiceResponse

from ..conftest import load_demo, make_app


def _app(tmp_path, busy_ms: int):
    return make_app(f"sqlite:///{tmp_path / 'locked.sqlite'}", SQLITE_BUSY_TIMEOUT_MS=busy_ms)


def _count(app) -> int:
    with app.app_context():
        return db.session.scalar(select(func.count()).select_from(ChoiceResponse))


def test_a_held_write_lock_gives_the_retry_page_and_the_participant_goes_on(tmp_path):
    app = _app(tmp_path, busy_ms=50)
    definition = load_demo(app)
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="lk1")
    page = bot.open()
    while page.kind != "choice":
        page = bot.step()
    pair = page.main["data-pair"]
    before = _count(app)

    holder = sqlite3.connect(tmp_path / "locked.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the busy timeout
    try:
        answer = bot.answer()
        refused = bot.post(answer)
        assert refused.status == 503 and refused.error_code == "E503-BUSY"
        assert "Traceback" not in refused.text and "OperationalError" not in refused.text
        assert "reload" in refused.text.lower()
        reloaded = bot.reload()  # a GET records the visit: also the retry page, not a 500
        assert reloaded.status == 503 and reloaded.error_code == "E503-BUSY"
    finally:
        holder.rollback()
        holder.close()

    assert _count(app) == before  # nothing half-saved
    page = bot.open(refused.url)
    assert page.kind == "choice" and page.main["data-pair"] == pair
    result = bot.run()
    assert result.outcome == "completed", result
    assert _count(app) == 10


@pytest.mark.slow
def test_contention_with_a_tiny_busy_timeout_never_gives_a_500(tmp_path, serve_app, loadtest):
    app = _app(tmp_path, busy_ms=5)
    definition = load_demo(app)
    run = asyncio.run(
        loadtest.run_async_bots(
            serve_app(app), [(definition, 12)], concurrency=12, seed=4, timeout_s=300
        )
    )
    statuses = Counter(t.status for b in run.bots for t in b.timings)
    assert not [s for s in statuses if s >= 500 and s != 503], statuses
    assert [r.outcome for r in run.results] == ["completed"] * 12, [r.error for r in run.results]
    report = loadtest.audit(app, run)
    assert report["ok"], report["problems"]
