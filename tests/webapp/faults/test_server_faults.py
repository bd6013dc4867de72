"""Faults under gunicorn on PostgreSQL: a worker SIGKILLed and PostgreSQL restarted mid-run.

Both tests run bots over real HTTP against gunicorn, strike once enough submissions were
acknowledged, and then require that every bot completed and that the integrity audit (database
vs the bots' log of acknowledged submissions) finds nothing lost or duplicated.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import secrets
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from webapp import create_app
from webapp.definition_cache import study_definition

from ..conftest import disposing

N_BOTS = 16
N_ANNOTATORS = 8

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def served(pg_url, loadtest, tmp_path) -> Iterator[tuple]:
    """A fresh database with the demo studies, served by gunicorn (2 workers x 2 threads)."""
    from webapp.services.studies import get_study

    env = {"SECRET_KEY": secrets.token_hex(16), "FRAMELAB_ENV": "development"}
    with loadtest.fresh_database(pg_url) as db_url:
        loadtest.prepare_database(db_url, env)
        app = create_app({"SQLALCHEMY_DATABASE_URI": db_url, "SECRET_KEY": env["SECRET_KEY"]})
        with disposing(app):
            with app.app_context():
                # Product-choice bots, plus sentiment-annotation bots (reserved slots) if available.
                groups = [(study_definition(get_study("product-choice-demo")), N_BOTS)]
                sentiment = get_study("sentiment-demo")
                if sentiment is not None:
                    groups.append((study_definition(sentiment), N_ANNOTATORS))
            with loadtest.Gunicorn({**env, "DATABASE_URL": db_url}, 2, 2, tmp_path) as server:
                yield app, server, groups


def _strike_mid_run(loadtest, url: str, groups, strike: Callable[[], None]):
    """Run the bots; call ``strike`` (in a thread) from the 150th acknowledged submission. That
    bot awaits the strike, so the run is under way while it lands; the other bots go on."""
    run = loadtest.BotRun()
    n = sum(k for _, k in groups)
    struck: list[bool] = []

    async def on_ack(_ack) -> None:
        if not struck and sum(len(b.acks) for b in run.bots) >= 150:
            struck.append(True)
            await asyncio.to_thread(strike)

    asyncio.run(
        loadtest.run_async_bots(
            url, groups, concurrency=n, seed=21, timeout_s=400, run=run, on_ack=on_ack
        )
    )
    assert struck, "the run ended before 150 submissions were acknowledged"
    return run


def _tracebacks(server) -> str:
    log = server.error_log()
    return "\n".join(part[:3000] for part in log.split("Traceback")[1:4])


def _check(loadtest, app, server, run) -> Counter:
    statuses = Counter(t.status for b in run.bots for t in b.timings)
    outcomes = [r.outcome for r in run.results]
    errors = [r.error for r in run.results if r.error]
    assert outcomes == ["completed"] * len(run.bots), f"{errors}\n{_tracebacks(server)}"
    assert 500 not in statuses, f"{statuses}\n{_tracebacks(server)}"
    report = loadtest.audit(app, run)
    assert report["ok"], report["problems"]
    assert report["lost"] == 0 and report["duplicated"] == 0
    annotation = report["annotation"]
    if annotation.get("checked"):  # every label acknowledged is stored, no item over quota
        (block,) = annotation["blocks"]
        assert block["labels"] >= 10 * N_ANNOTATORS and not annotation["violations"]
    # For docs/reliability.md (visible with -s): what the bots saw and how often they recovered.
    print(f"statuses {dict(statuses)}, recoveries {report['recoveries']}")
    return statuses


def test_sigkill_of_a_worker_mid_run_loses_nothing(served, loadtest):
    app, server, groups = served
    before = server.worker_pids()
    killed: list[int] = []
    cut: list[str] = []

    def kill() -> None:
        # A request is known to be on a killed worker: it goes on a connection a worker has
        # answered before (kept alive), once every worker is stopped and so cannot answer it.
        probe = http.client.HTTPConnection(urlsplit(server.url).netloc)
        probe.request("GET", "/healthz")
        probe.getresponse().read()
        for pid in before:
            os.kill(pid, signal.SIGSTOP)
        probe.request("GET", "/healthz")
        for pid in before:  # both workers, while bots' requests wait on them too
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        try:
            cut.append(f"answered {probe.getresponse().status}")
        except (http.client.HTTPException, OSError) as exc:
            cut.append(type(exc).__name__)
        probe.close()

    run = _strike_mid_run(loadtest, server.url, groups, kill)
    _check(loadtest, app, server, run)
    after = server.worker_pids()
    assert len(after) == 2 and not set(after) & set(killed)  # gunicorn replaced both
    # The kills were felt: the request in flight on a killed worker lost its connection.
    assert cut and not cut[0].startswith("answered"), cut


def _cluster() -> str:
    return sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]


def test_postgres_restart_mid_run_shows_the_retry_page_then_completes(served, loadtest):
    app, server, groups = served
    if not Path("/etc/postgresql").is_dir():
        pytest.skip("no Debian PostgreSQL cluster to restart (pg_ctlcluster)")

    def restart() -> None:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", _cluster(), "main", "restart"],
            check=True,
            capture_output=True,
            timeout=120,
        )

    run = _strike_mid_run(loadtest, server.url, groups, restart)
    statuses = _check(loadtest, app, server, run)
    retry_pages = [
        t for b in run.bots for t in b.timings if t.status == 503
    ]  # the friendly E503-BUSY page, not a 500
    assert retry_pages or statuses.get(0, 0) > 0, statuses
    assert sum(b.recoveries for b in run.bots) > 0
