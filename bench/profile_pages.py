"""Cost of one participant request inside the app: CPU time, SQL statements, hot spots.

Usage::

    .venv/bin/python bench/profile_pages.py                       # SQLite file, 30 bots
    .venv/bin/python bench/profile_pages.py --pg-url postgresql://postgres@127.0.0.1:5432/postgres
    .venv/bin/python bench/profile_pages.py --profile 25          # + the 25 costliest functions
    .venv/bin/python bench/profile_pages.py --code /tmp/old --json old.json   # another checkout

``--code`` imports ``webapp`` (and its migrations) from another checkout of the repository, so
two versions are measured by the same script; ``bench/profile_ab.py`` alternates them.

The bots run in-process through Flask's test client, one after another, on the product-choice
demo study, in a database made for the run (``--pg-url``: a fresh database on that PostgreSQL
server, dropped afterwards, as in the load test). The app is timed at its WSGI boundary with
the thread's CPU clock, so the bots' own HTML parsing is not counted; SQL statements are
counted with an engine event; the profile (``--profile``) is also taken on the thread's CPU
clock, so time spent waiting for the database is not among the hot spots. This is the
per-request figure that bounds the load test's throughput (``bench/loadtest.py``): requests/s
on one core is about 1000 / (CPU ms per request).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, add_pg_url, database_url, write_json  # noqa: E402

STUDY = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"


_KIND_RE = re.compile(rb'data-page="([a-z_]+)"')


class _Meter:
    """WSGI middleware: CPU ms and SQL statements per request, by method and status."""

    def __init__(self, app: Any, by_page: bool = False) -> None:
        self.app = app
        self.by_page = by_page  # key by the page's kind too (data-page of the page served)
        self.kind_at: dict[str, str] = {}  # path -> kind of the page last served there
        self.statements = 0
        self.samples: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.profiler: cProfile.Profile | None = None

    def count(self, *_: Any) -> None:
        self.statements += 1

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        status: list[str] = []

        def recording_start(code: str, headers: Any, exc_info: Any = None) -> Any:
            status.append(code.split()[0])
            return start_response(code, headers, exc_info)

        before, t0 = self.statements, time.thread_time()
        if self.profiler is not None:  # the bots run in a worker thread: profile here
            self.profiler.enable()
        body = list(self.app(environ, recording_start))  # render fully inside the timer
        if self.profiler is not None:
            self.profiler.disable()
        key = f"{environ['REQUEST_METHOD']} {status[0] if status else '?'}"
        if self.by_page:
            path = environ.get("PATH_INFO", "")
            found = _KIND_RE.search(b"".join(body)) if environ["REQUEST_METHOD"] == "GET" else None
            if found:
                self.kind_at[path] = found.group(1).decode()
            key += f" {self.kind_at.get(path, '-') if found or '/p/' in path else 'entry'}"
        self.samples[key].append(((time.thread_time() - t0) * 1000, self.statements - before))
        return body


def _build_database(app: Any) -> None:
    """Migrate the empty database and load the demo study."""
    from flask_migrate import upgrade

    from webapp.services.studies import load_study

    with app.app_context():
        upgrade()
        load_study(STUDY)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_pg_url(parser, default=None)
    parser.add_argument("--n", type=int, default=30, help="bots (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="bots before measuring")
    parser.add_argument("--profile", type=int, default=0, metavar="K", help="print top K")
    parser.add_argument(
        "--by-page",
        action="store_true",
        help="also split the figures by page kind (a POST counts for the page it answers)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument(
        "--code", type=Path, help="the checkout to import webapp from (default: this one)"
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="measure the peer benchmark's floor app (bench/peer/floor) instead, the same way",
    )
    args = parser.parse_args(argv)
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))
    with database_url(args.pg_url, "framelab_profile") as url:
        return (_measure_floor if args.floor else _measure)(url, args)


def _measure(url: str, args: argparse.Namespace) -> int:
    """Run the bots on a new database at ``url`` and print the per-request figures."""
    from sqlalchemy import event

    from webapp import create_app
    from webapp.bots import run_bots
    from webapp.extensions import db
    from webapp.studydef import load_study_file

    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "profile"})
    _build_database(app)
    definition = load_study_file(STUDY)
    meter = _Meter(app.wsgi_app, by_page=args.by_page)
    app.wsgi_app = meter  # type: ignore[method-assign]
    with app.app_context():  # every engine (older checkouts had a second one on PostgreSQL)
        engines = list(db.engines.values())  # (as db.engines, so that --code takes any checkout)
    for engine in engines:
        event.listen(engine, "before_cursor_execute", meter.count)

    with _driver_statements_counted(meter):
        run_bots(app, definition, n=args.warmup, seed=1)
        meter.samples.clear()
        # CPU clock: waits for PostgreSQL are not CPU and would otherwise top the list.
        profiler = meter.profiler = cProfile.Profile(time.thread_time) if args.profile else None
        t0 = time.perf_counter()
        summary = run_bots(app, definition, n=args.n, seed=2)
        wall = time.perf_counter() - t0
    if summary.errors:
        print("bot errors:", summary.errors[:3], file=sys.stderr)
        return 1

    _print(meter, url, args, wall, profiler)
    for engine in engines:
        engine.dispose()  # before the fresh database is dropped
    return 0


def _driver_statements_counted(meter: _Meter) -> contextlib.AbstractContextManager[Any]:
    """Count the statements the app sends through the driver directly too (the page lookup,
    ``webapp.services.driver_sql`` of older checkouts, measured with ``--code``)."""
    try:
        from webapp.services import driver_sql
    except ImportError:
        return contextlib.nullcontext()
    return driver_sql.observing(meter.count)


def _print(
    meter: _Meter,
    url: str,
    args: argparse.Namespace,
    wall: float,
    profiler: cProfile.Profile | None,
) -> None:
    """Print (and with ``--json`` write) the figures of a measured run."""
    figures = _figures(meter.samples, url, args.n)
    total = figures["all"]
    print(f"database: {figures['database']}; {args.n} bots, {total['n']} requests")
    print(f"{'request':<24} {'n':>6} {'cpu ms p50':>11} {'cpu ms mean':>12} {'SQL/request':>12}")
    for key, r in [*figures["by_request"].items(), ("all", total)]:
        print(
            f"{key:<24} {r['n']:>6} {r['cpu_ms_p50']:>11.2f} {r['cpu_ms_mean']:>12.2f} "
            f"{r['sql_per_request']:>12.1f}"
        )
    cpu_s = total["n"] * total["cpu_ms_mean"] / 1000
    print(f"app CPU share of wall time: {cpu_s / wall:.0%} (bots are the rest)")
    write_json(figures, args.json)
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)


def _measure_floor(url: str, args: argparse.Namespace) -> int:
    """The floor app (bench/peer/floor/app.py) behind the same meter, its pages in order.

    Each of ``--n`` people GETs and POSTs the floor's 26 pages (as the peer benchmark's floor
    bots do) through Flask's test client; the meter sees the same WSGI boundary as above.
    """
    import os

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    sys.path.insert(0, str(ROOT / "bench" / "peer"))
    from floor.app import PAGES, build, create_app

    build(url)
    os.environ["DATABASE_URL"] = url
    app = create_app()
    meter = _Meter(app.wsgi_app)
    app.wsgi_app = meter  # type: ignore[method-assign]
    event.listen(Engine, "before_cursor_execute", meter.count)
    client = app.test_client()

    def person(k: int) -> None:
        for n in range(1, PAGES + 1):
            assert client.get(f"/p/floor{k}/{n}").status_code == 200
            assert client.post(f"/p/floor{k}/{n}", data={"side": "left"}).status_code == 302

    for k in range(args.warmup):
        person(-1 - k)
    meter.samples.clear()
    profiler = meter.profiler = cProfile.Profile(time.thread_time) if args.profile else None
    t0 = time.perf_counter()
    for k in range(args.n):
        person(k)
    wall = time.perf_counter() - t0
    _print(meter, url, args, wall, profiler)
    event.remove(Engine, "before_cursor_execute", meter.count)
    return 0


def _figures(samples: dict[str, list[tuple[float, int]]], url: str, n: int) -> dict[str, Any]:
    """Per request kind and overall: count, CPU ms p50 and mean, SQL statements per request."""

    def row(rows: list[tuple[float, int]]) -> dict[str, float]:
        cpu = [c for c, _ in rows]
        return {
            "n": len(rows),
            "cpu_ms_p50": round(statistics.median(cpu), 3),
            "cpu_ms_mean": round(statistics.fmean(cpu), 3),
            "sql_per_request": round(statistics.fmean(s for _, s in rows), 2),
        }

    return {
        "database": url.split("://")[0],
        "bots": n,
        "by_request": {key: row(rows) for key, rows in sorted(samples.items())},
        "all": row([s for rows in samples.values() for s in rows]),
    }


if __name__ == "__main__":
    raise SystemExit(main())
