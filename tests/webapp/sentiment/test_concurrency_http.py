"""Allocation under concurrency: 100 items x 5 annotators, batches of 10, 30 concurrent bots over
HTTP against gunicorn with several worker processes, 20% abandoning mid-batch, a short
reservation timeout; on a SQLite file and on PostgreSQL.

Bots keep arriving (30 at a time) until every item has its labels, as participants would:
one who finds the study full while abandoned reservations have not expired yet comes back
a moment later as a new participant. A few bots pause longer than the reservation timeout
mid-batch and then answer anyway, so late (surplus) labels occur and must be kept.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import func, select

from webapp.bots import Bot, BotBehaviour, BotResult, HttpTransport, Page
from webapp.extensions import db
from webapp.models import AnnotationItem, AnnotationState, utcnow

from .conftest import label_rows, load, write_study

ROOT = Path(__file__).resolve().parents[3]
N_ITEMS, K, BATCH, CONCURRENCY, ABANDON = 100, 5, 10, 30, 0.2
RESERVATION_S = 20.0
# Arrivals after which a run that has not labelled every item fails. About 50 bots complete
# the study; those who find it full while abandoned reservations run out come back every 2 s
# (30 at a time, so about 300 per reservation timeout).
MAX_ARRIVALS = 3000


@pytest.fixture
def gunicorn(tmp_path):
    """``gunicorn(database_url)`` starts the app under gunicorn (4 workers); returns its URL."""
    procs: list[subprocess.Popen] = []
    logs = []

    def start(database_url: str) -> str:
        import httpx

        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "SECRET_KEY": "concurrency-test",
            "FRAMELAB_ENV": "testing",
        }
        log = (tmp_path / "gunicorn.log").open("w")
        logs.append(log)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--workers",
                "4",
                "--threads",
                "4",
                "--bind",
                "127.0.0.1:0",  # the system picks a free port, bound from then on
                "--timeout",
                "120",
                "webapp:create_app()",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        # It names the port once it listens; until a worker is up, requests wait in the queue.
        # Only gunicorn's exit ends either wait otherwise.
        listening = None
        while listening is None:
            if proc.poll() is not None:
                raise RuntimeError((tmp_path / "gunicorn.log").read_text())
            text = (tmp_path / "gunicorn.log").read_text()
            listening = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", text)
            time.sleep(0.05)
        url = listening.group(1)
        while True:
            try:
                httpx.get(f"{url}/s/none?participant=x", timeout=None)
                return url
            except httpx.TransportError:
                if proc.poll() is not None:
                    raise RuntimeError((tmp_path / "gunicorn.log").read_text()) from None
                time.sleep(0.2)

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=20)
    for log in logs:
        log.close()


class _TimedTransport(HttpTransport):
    """Times the request that reserves a batch (the GET answered by the first label page)
    apart from every other label-page GET, which does the same work minus the allocation."""

    def __init__(self, base_url: str, latencies: list[float], others: list[float]) -> None:
        super().__init__(base_url, timeout=60)
        self.latencies, self.others = latencies, others

    def request(self, method, url, data):
        t0 = time.perf_counter()
        status, location, text = super().request(method, url, data)
        ms = (time.perf_counter() - t0) * 1000
        if method == "GET" and 'data-page="sentiment"' in text:
            (self.latencies if "Statement 1 of" in text else self.others).append(ms)
        return status, location, text


class _Bot(Bot):
    """A bot that may pause (longer than the reservation) before one of its labels.

    On the "busy" page (503: SQLite locked past its timeout on this shared 2-core machine, or
    a dropped database connection) it waits and reloads, as the page asks a person to do;
    the refused answer was not saved and is given again.
    """

    pause_before_label: int | None = None
    busy = 0

    def run(self, max_pages: int = 500) -> BotResult:
        page = self.open()
        for _ in range(max_pages):
            if page.error_code == "E503-BUSY":
                self.busy += 1
                time.sleep(1.0)
                # The consent form posts to /start, which has no page: use the link again.
                page = self.open() if page.url.endswith("/start") else self.reload()
                continue
            result = self.verdict(page)
            if result is not None:
                result.labels = list(self.labels)
                return result
            page = self.step()
        return BotResult(self.external_id, "error", page.url, self.submitted, error="too long")

    def step(self) -> Page:
        if (
            self.pause_before_label is not None
            and self.page is not None
            and self.page.kind == "sentiment"
            and len(self.labels) == self.pause_before_label
        ):
            self.pause_before_label = None
            time.sleep(RESERVATION_S + 1)
        return super().step()


def _needed(app, slug: str) -> int:
    from webapp.services.slot_report import item_status
    from webapp.services.studies import get_study

    with app.app_context():
        return sum(s.needed for s in item_status(get_study(slug), utcnow()))


def _drive(app, url: str, definition: dict) -> tuple[list[BotResult], list[float], float]:
    latencies: list[float] = []
    others: list[float] = []
    results: list[BotResult] = []
    busy: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()
    counter = itertools.count()
    t0 = time.monotonic()  # reported, not checked

    def worker(w: int) -> None:
        rng = random.Random(1000 + w)
        while not stop.is_set():
            i = next(counter)
            if i >= MAX_ARRIVALS:
                return
            # Submissions: consent 1, qualification 2, labels 3..12. Stopping after 4..11
            # leaves 2..9 of the 10 labels given: abandoned mid-batch.
            abandon_at = rng.randint(4, 11) if rng.random() < ABANDON else None
            transport = _TimedTransport(url, latencies, others)
            bot = _Bot(
                transport,
                definition,
                BotBehaviour(platform="link", abandon_at=abandon_at, p_shift=0.3),
                rng=random.Random(i),
                external_id=f"conc{i:05d}",
            )
            if abandon_at is None and rng.random() < 0.04:
                bot.pause_before_label = rng.randint(2, 8)
            try:
                result = bot.run()
            except Exception as exc:  # keep the others going; reported below
                result = BotResult(bot.external_id, "error", "", bot.submitted, error=repr(exc))
                result.labels = list(bot.labels)
            finally:
                transport.close()
            with lock:
                results.append(result)
                busy.append(bot.busy)
            if result.outcome == "study_full":
                if _needed(app, definition.slug) == 0:
                    stop.set()
                else:  # abandoned reservations still live: come back a little later
                    time.sleep(2.0)

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(worker, range(CONCURRENCY)))
    q = statistics.quantiles(others, n=100, method="inclusive")
    print(
        f"\nbusy pages reloaded: {sum(busy)}; other label pages (no allocation): "
        f"p50 {q[49]:.0f} ms, p99 {q[98]:.0f} ms over {len(others)}"
    )
    return results, latencies, time.monotonic() - t0


def _check(app, definition: dict, results: list[BotResult], latencies, wall_s, label: str, log):
    errors = [f"{r.external_id}: {r.error}" for r in results if r.outcome == "error"]
    # With the server's own account of the run: a worker that died or logged an error.
    server = [line for line in log.read_text().splitlines() if "[INFO]" not in line]
    assert errors == [], "\n".join(["server log, other than INFO:", *server[-40:]])
    rows = label_rows(app)
    with app.app_context():
        n_items = db.session.scalar(select(func.count()).select_from(AnnotationItem))
    assert n_items == N_ITEMS
    confirmed: dict[str, set[int]] = {}
    n_confirmed = Counter()
    for item_id, pid, state, _, _ in rows:
        if state is AnnotationState.confirmed:
            confirmed.setdefault(item_id, set()).add(pid)
            n_confirmed[item_id] += 1
    # Exactly K confirmed labels per item, from K distinct participants.
    assert len(confirmed) == N_ITEMS
    assert set(n_confirmed.values()) == {K}
    assert {len(pids) for pids in confirmed.values()} == {K}
    # Nobody has two rows for one item.
    pairs = [(item_id, pid) for item_id, pid, *_ in rows]
    assert len(pairs) == len(set(pairs))
    # No label lost and none invented: the database holds exactly what the server accepted.
    stored = Counter((ext, item_id, lab) for item_id, _, _, lab, ext in rows if lab is not None)
    sent = Counter((r.external_id, item_id, lab) for r in results for item_id, lab in r.labels)
    assert stored == sent
    labelled_states = Counter(state for _, _, state, lab, _ in rows if lab is not None)
    assert set(labelled_states) <= {AnnotationState.confirmed, AnnotationState.surplus}
    assert labelled_states[AnnotationState.confirmed] == N_ITEMS * K
    outcomes = Counter(r.outcome for r in results)
    assert outcomes["abandoned"] > 0 and outcomes["completed"] > 0
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    print(
        f"\n[{label}] {len(results)} bots {dict(outcomes)}; "
        f"{labelled_states[AnnotationState.surplus]} surplus labels kept; "
        f"allocation latency p50 {q[49]:.0f} ms, p99 {q[98]:.0f} ms "
        f"over {len(latencies)} reservations; {wall_s:.1f} s"
    )


def _run(app, gunicorn, tmp_path, label: str) -> None:
    path = write_study(
        tmp_path / "conc",
        slug="sent-conc",
        n_items=N_ITEMS,
        k=K,
        batch=BATCH,
        reservation_minutes=RESERVATION_S / 60,
        qualification="conc-pool",
    )
    definition = load(app, path)
    url = gunicorn(app.config["SQLALCHEMY_DATABASE_URI"])
    results, latencies, wall_s = _drive(app, url, definition)
    assert _needed(app, "sent-conc") == 0, f"not finished after {MAX_ARRIVALS} arrivals"
    _check(app, definition, results, latencies, wall_s, label, tmp_path / "gunicorn.log")


@pytest.mark.slow
def test_exactly_five_distinct_labels_per_item_under_concurrency_on_sqlite(app, gunicorn, tmp_path):
    _run(app, gunicorn, tmp_path, "sqlite")


@pytest.mark.slow
@pytest.mark.postgres
def test_exactly_five_distinct_labels_per_item_under_concurrency_on_postgres(
    pg_app, gunicorn, tmp_path
):
    _run(pg_app, gunicorn, tmp_path, "postgres")
