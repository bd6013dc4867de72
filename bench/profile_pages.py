"""Cost of one participant request inside the app: CPU time, SQL statements, hot spots.

Usage::

    .venv/bin/python bench/profile_pages.py                       # SQLite file, 30 bots
    .venv/bin/python bench/profile_pages.py --pg-url postgresql://postgres@127.0.0.1:5432/postgres
    .venv/bin/python bench/profile_pages.py --profile 25          # + the 25 costliest functions

The bots run in-process through Flask's test client, one after another, on the product-choice
demo study, in a database made for the run (``--pg-url``: a fresh database on that PostgreSQL
server, dropped afterwards, as in the load test). The app is timed at its WSGI boundary with
the thread's CPU clock, so the bots' own HTML parsing is not counted; SQL statements are
counted with an engine event. This is the
per-request figure that bounds the load test's throughput (``bench/loadtest.py``): requests/s
on one core is about 1000 / (CPU ms per request).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

STUDY = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"


class _Meter:
    """WSGI middleware: CPU ms and SQL statements per request, by method and status."""

    def __init__(self, app: Any) -> None:
        self.app = app
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
    parser.add_argument(
        "--pg-url", help="a PostgreSQL server to make a fresh database on (default: SQLite file)"
    )
    parser.add_argument("--n", type=int, default=30, help="bots (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="bots before measuring")
    parser.add_argument("--profile", type=int, default=0, metavar="K", help="print top K")
    parser.add_argument("--dump", help="write the profile here (pstats format)")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        if args.pg_url:
            from loadtest import fresh_database  # bench/ is a folder of scripts

            url = stack.enter_context(fresh_database(args.pg_url, prefix="framelab_profile"))
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            url = f"sqlite:///{Path(tmp) / 'profile.sqlite'}"
        return _measure(url, args)


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
    meter = _Meter(app.wsgi_app)
    app.wsgi_app = meter  # type: ignore[method-assign]
    with app.app_context():
        event.listen(db.engine, "before_cursor_execute", meter.count)

    run_bots(app, definition, n=args.warmup, seed=1)
    meter.samples.clear()
    profiler = meter.profiler = cProfile.Profile() if args.profile else None
    t0 = time.perf_counter()
    summary = run_bots(app, definition, n=args.n, seed=2)
    wall = time.perf_counter() - t0
    if summary.errors:
        print("bot errors:", summary.errors[:3], file=sys.stderr)
        return 1

    all_samples = [s for v in meter.samples.values() for s in v]
    print(f"database: {url.split('://')[0]}; {args.n} bots, {len(all_samples)} requests")
    print(f"{'request':<10} {'n':>6} {'cpu ms p50':>11} {'cpu ms mean':>12} {'SQL/request':>12}")
    for key in sorted(meter.samples):
        cpu = [c for c, _ in meter.samples[key]]
        sql = [s for _, s in meter.samples[key]]
        print(
            f"{key:<10} {len(cpu):>6} {statistics.median(cpu):>11.2f} "
            f"{statistics.fmean(cpu):>12.2f} {statistics.fmean(sql):>12.1f}"
        )
    cpu_all = [c for c, _ in all_samples]
    print(
        f"{'all':<10} {len(cpu_all):>6} {statistics.median(cpu_all):>11.2f} "
        f"{statistics.fmean(cpu_all):>12.2f} "
        f"{statistics.fmean(s for _, s in all_samples):>12.1f}"
    )
    print(f"app CPU share of wall time: {sum(cpu_all) / 1000 / wall:.0%} (bots are the rest)")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)
        if args.dump:
            profiler.dump_stats(args.dump)
    with app.app_context():
        db.engine.dispose()  # before the fresh database is dropped
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
