"""Load test of the participant platform: gunicorn on PostgreSQL, async bots, integrity audit.

Usage::

    make loadtest N=50                      # CI size
    make loadtest N=1000                    # the published figure
    .venv/bin/python bench/loadtest.py --n 200 --workers 3 --threads 4 --think-ms 0

What one run does (everything on 127.0.0.1, everything it creates is removed at the end):

1. creates a fresh PostgreSQL database, builds it with ``flask db upgrade`` and loads the demo
   studies (``stimuli/studies/*.yaml``);
2. measures the database's own ceiling with ``pgbench`` (built-in ``simple-update`` script, as
   many clients as the app has request threads) in a second fresh database;
3. starts gunicorn (``gthread`` workers) on a free loopback port;
4. runs N product-choice participants (and M sentiment-annotation participants when that task
   type and a study using it exist) concurrently as :class:`bots_async.AsyncBot` over real
   HTTP; each bot logs every submission the server acknowledged;
5. audits the database against the bots' log: every acknowledged answer stored exactly once
   with the submitted value, every completed participant with every response, no participant
   or answer the bots did not send, annotation quotas met;
6. prints the tables of ``bench/loadtest_report.py`` and writes
   ``bench/results/loadtest-<timestamp>.json``.

Exit status 0 only when the audit passes and no request ended in an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

# The shared helpers and the audit live beside this script; bench/ is a folder of scripts, not a
# package, and the fault tests import this file by path, so make the folder importable either way.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402,F401  (the fault tests use fresh_database as loadtest.*)
    DEFAULT_PG,
    RESULTS,
    ROOT,
    add_pg_url,
    free_port,
    fresh_database,
    interrupt_on_sigterm,
    latency,
    run_header,
    stop_group,
    timings_summary,
    write_result,
)
from loadtest_audit import SENTIMENT_TYPE, audit  # noqa: E402
from loadtest_bots import (  # noqa: E402,F401  (the fault tests use them as loadtest.*)
    BotRun,
    pages_per_participant,
    profile_bound,
    run_async_bots,
)
from loadtest_cpu import CpuSnapshot, cpu_report  # noqa: E402
from loadtest_report import route_table, summary_table  # noqa: E402

GUNICORN_CONF = ROOT / "gunicorn.conf.py"  # the settings FrameLab ships
PRODUCT_FILE = "product-choice-demo.yaml"


# -- databases ----------------------------------------------------------------------------------
def _flask(args: list[str], env: Mapping[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "webapp", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"flask {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def study_files() -> list[Path]:
    """The demo study definitions loaded by every run."""
    return sorted((ROOT / "stimuli" / "studies").glob("*.yaml"))


def prepare_database(db_url: str, env: Mapping[str, str]) -> list[str]:
    """Build the schema with the migrations and load the demo studies.

    The product-choice demo must load; another study that does not load is skipped (its
    error returned), so a study being written elsewhere does not stop the load test.
    """
    env = {**env, "DATABASE_URL": db_url}
    _flask(["db", "upgrade"], env)
    skipped = []
    for path in study_files():
        try:
            _flask(["study", "load", str(path)], env)
        except RuntimeError as exc:
            if path.name == PRODUCT_FILE:
                raise
            skipped.append(str(exc).strip().splitlines()[-1])
    return skipped


@contextlib.contextmanager
def demo_app(
    pg_url: str, prefix: str, env: Mapping[str, str]
) -> Iterator[tuple[str, Any, list[str]]]:
    """A fresh database built with the demo studies, and an app on it for reading it back.

    Yields
    ------
    tuple
        The database URL, the app and the studies that did not load (:func:`prepare_database`);
        the app's connections are closed before the database is dropped.
    """
    from webapp import create_app
    from webapp.extensions import dispose_engines

    with fresh_database(pg_url, prefix) as db_url:
        skipped = prepare_database(db_url, env)
        app = create_app(
            {"SQLALCHEMY_DATABASE_URI": db_url, "SECRET_KEY": env["SECRET_KEY"],
             "ENV_NAME": "development"}
        )  # fmt: skip
        try:
            yield db_url, app, skipped
        finally:
            with app.app_context():
                dispose_engines()


def demo_definition(app: Any, slug: str = "product-choice-demo") -> Any:
    """The definition of a loaded demo study (a ``webapp.definition.StudyDefinition``)."""
    from webapp.definition_cache import study_definition
    from webapp.services.studies import get_study

    with app.app_context():
        study = get_study(slug)
        assert study is not None, f"the demo study {slug} did not load"
        return study_definition(study)


# -- pgbench ------------------------------------------------------------------------------------
def pgbench_tps(pg_url: str, *, clients: int, seconds: int, scale: int = 10) -> dict[str, Any]:
    """Run pgbench's built-in ``simple-update`` script on a fresh database.

    Returns
    -------
    dict
        ``tps`` (without initial connection time), ``clients``, ``seconds``, ``scale`` and
        the command line.
    """
    from sqlalchemy.engine import make_url

    with fresh_database(pg_url, "framelab_pgbench") as url:
        u = make_url(url)
        conn = ["-h", u.host or "127.0.0.1", "-p", str(u.port or 5432), "-U", u.username or ""]
        env = {**os.environ, **({"PGPASSWORD": u.password} if u.password else {})}
        subprocess.run(
            ["pgbench", "-i", "-q", "-s", str(scale), *conn, u.database or ""],
            env=env,
            capture_output=True,
            check=True,
        )
        jobs = min(clients, os.cpu_count() or 1)
        cmd = ["pgbench", *f"-b simple-update -n -c {clients} -j {jobs} -T {seconds}".split()]
        cmd += [*conn, u.database or ""]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    match = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
    if match is None:
        raise RuntimeError(f"cannot read pgbench output:\n{out}")
    return {
        "tps": float(match.group(1)),
        "clients": clients,
        "seconds": seconds,
        "scale": scale,
        "command": " ".join(cmd[:-1] + ["<fresh database>"]),
    }


# -- gunicorn -----------------------------------------------------------------------------------
class Gunicorn:
    """gunicorn serving ``webapp:create_app()`` on 127.0.0.1 (a context manager).

    Parameters
    ----------
    env : Mapping
        Environment for the app (``DATABASE_URL``, ``SECRET_KEY``, ...).
    workers, threads : int
        ``gthread`` worker processes and threads per worker.
    log_dir : Path
        Receives ``access.log`` (method, path, status, microseconds) and ``error.log``.
    app : str
        The WSGI app (the peer benchmark serves its floor app with the same settings).
    cwd : Path
        Where gunicorn imports ``app`` from.
    """

    def __init__(
        self,
        env: Mapping[str, str],
        workers: int,
        threads: int,
        log_dir: Path,
        app: str = "webapp:create_app()",
        cwd: Path = ROOT,
        ready_path: str = "/researcher/login",
    ) -> None:
        self.env, self.workers, self.threads, self.log_dir = dict(env), workers, threads, log_dir
        self.app, self.cwd, self.ready_path = app, cwd, ready_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Gunicorn:
        # FrameLab's own settings (the GC freeze) are named, so every server started here gets
        # them, whatever its working directory (the peer benchmark's floor app too). The
        # keep-alive is well above the bots' client-side one (1.5 s), as behind a proxy (nginx
        # keeps 75 s): with 5 s, a bot whose event loop lagged under overload read its response
        # late and reused the connection just as gunicorn closed it (ReadError).
        cmd = [sys.executable, "-m", "gunicorn", "--config", str(GUNICORN_CONF)]
        cmd += f"--bind 127.0.0.1:{self.port} --worker-class gthread --timeout 120".split()
        cmd += f"--workers {self.workers} --threads {self.threads} --graceful-timeout 5".split()
        cmd += ["--keep-alive", "30", "--backlog", "4096"]
        cmd += ["--access-logfile", str(self.log_dir / "access.log")]
        cmd += ["--access-logformat", "%(m)s %(U)s %(s)s %(D)s"]
        cmd += ["--error-logfile", str(self.log_dir / "error.log"), self.app]
        self.proc = subprocess.Popen(
            cmd, cwd=self.cwd, env={**os.environ, **self.env}, start_new_session=True
        )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 60.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.error_log()[-2000:]}")
            try:
                ready = httpx.get(f"{self.url}{self.ready_path}", timeout=2).status_code == 200
                if ready and len(self.worker_pids()) == self.workers:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"gunicorn did not start in {timeout} s: {self.error_log()[-2000:]}")

    def worker_pids(self) -> list[int]:
        """PIDs of the live worker processes (children of the master)."""
        assert self.proc is not None
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            return [int(p) for p in path.read_text().split()]
        except OSError:
            return []

    def error_log(self) -> str:
        """The error log so far."""
        path = self.log_dir / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def pids(self) -> list[int]:
        """The master and its workers (whose CPU the benchmarks count as the app's)."""
        assert self.proc is not None
        return [self.proc.pid, *self.worker_pids()]

    def __exit__(self, *exc: object) -> None:
        stop_group(self.proc)


def server_latencies(access_log: Path) -> dict[str, dict[str, float]]:
    """Server-side request times per route from gunicorn's access log (``%(D)s`` in µs)."""
    from bots_async import route_class

    times: dict[str, list[float]] = {}
    if access_log.exists():
        for line in access_log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[3].isdigit():
                times.setdefault(route_class(parts[0], parts[1]), []).append(int(parts[3]) / 1000)
    return {route: latency(ms) for route, ms in sorted(times.items())}


def sentiment_available() -> bool:
    """True when the sentiment task type is installed and a demo study uses it."""
    from webapp.tasks import get_task_type

    if get_task_type(SENTIMENT_TYPE) is None:
        return False
    return any(SENTIMENT_TYPE in p.read_text(encoding="utf-8") for p in study_files())


def main(argv: list[str] | None = None) -> int:
    """Run the load test; return the exit status."""
    cores = os.cpu_count() or 2
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="product-choice participants")
    parser.add_argument("--m", type=int, default=0, help="sentiment participants (if available)")
    parser.add_argument("--workers", type=int, default=cores + 1, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker")
    parser.add_argument("--concurrency", type=int, default=0, help="bots at once (0: all)")
    parser.add_argument("--think-ms", type=float, default=0.0, help="mean think time (0: none)")
    parser.add_argument("--ramp-s", type=float, default=0.0, help="spread arrivals over seconds")
    parser.add_argument("--timeout-s", type=float, default=0.0, help="0: see profile_bound")
    parser.add_argument("--pgbench-s", type=int, default=15, help="pgbench duration (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    add_pg_url(parser)
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the JSON result")
    args = parser.parse_args(argv)

    interrupt_on_sigterm()
    header = run_header(argv)
    secret = secrets.token_hex(32)
    env = {"SECRET_KEY": secret, "FRAMELAB_ENV": "development", "FLASK_DEBUG": "0"}
    clients = args.workers * args.threads
    pgbench = (
        pgbench_tps(args.pg_url, clients=clients, seconds=args.pgbench_s)
        if args.pgbench_s > 0
        else None
    )
    with (
        demo_app(args.pg_url, "framelab_load", env) as (db_url, app, skipped),
        tempfile.TemporaryDirectory() as logs,
    ):
        groups = [(demo_definition(app), args.n)]
        m_run = args.m if args.m > 0 and sentiment_available() else 0
        if m_run:
            groups.append((demo_definition(app, "sentiment-demo"), m_run))
        pages = max(pages_per_participant(d) for d, _ in groups)
        bound_s = args.timeout_s or profile_bound(
            pages, args.think_ms / 1000.0, args.ramp_s, n=args.n + m_run
        )
        with Gunicorn({**env, "DATABASE_URL": db_url}, args.workers, args.threads, Path(logs)) as g:
            cpu_before = CpuSnapshot.take(g.pids())
            run = asyncio.run(
                run_async_bots(
                    g.url,
                    groups,
                    concurrency=args.concurrency or (args.n + m_run),
                    think_ms=args.think_ms,
                    ramp_s=args.ramp_s,
                    timeout_s=bound_s,
                    seed=args.seed,
                )
            )
            cpu_after = CpuSnapshot.take(g.pids())
        server = server_latencies(Path(logs) / "access.log")
        result_audit = audit(app, run)

    timings = [t for b in run.bots for t in b.timings]
    errors = [r for r in run.results if r.outcome == "error"]
    summary = timings_summary(timings, run.wall_s)
    submissions = sum(1 for b in run.bots for a in b.acks if a.kind != "consent")
    responses_per_s = submissions / run.wall_s if run.wall_s else 0.0
    report: dict[str, Any] = {
        **header,
        "config": {
            "workers": args.workers,
            "threads": args.threads,
            "worker_class": "gthread",
            "concurrency": args.concurrency or (args.n + m_run),
            "think_ms": args.think_ms,
            "ramp_s": args.ramp_s,
            "seed": args.seed,
        },
        "participants": args.n + m_run,
        "participants_product_choice": args.n,
        "participants_sentiment": m_run,
        "sentiment": (
            "ran" if m_run else ("not available in this tree" if args.m else "not requested")
        ),
        "studies_not_loaded": skipped,
        "completed": sum(1 for r in run.results if r.outcome == "completed"),
        "outcomes": dict(Counter(r.outcome for r in run.results)),
        **summary,
        "errors": len(errors) + summary["errors"],
        "error_samples": [f"{r.external_id}: {r.error}" for r in errors[:10]],
        "transport_errors": dict(Counter(f"{t.route}: {t.error}" for t in timings if t.error)),
        "lost": result_audit["lost"],
        "duplicated": result_audit["duplicated"],
        "wall_s": round(run.wall_s, 2),
        "bound_s": round(bound_s, 1),
        "bound_reached": run.timed_out,
        "cut_by_bound": len(run.bots) - len(run.results),
        "responses_per_s": round(responses_per_s, 1),
        "server_latency_by_route": server,
        "cpu": cpu_report(cpu_before, cpu_after, run.wall_s, len(timings)),
        "pgbench_tps": pgbench["tps"] if pgbench else None,
        "pgbench": pgbench,
        "ratio_responses_to_pgbench": (
            round(responses_per_s / pgbench["tps"], 3) if pgbench and pgbench["tps"] else None
        ),
        "audit": result_audit,
    }
    out = write_result(report, args.out, "loadtest")
    _print(report, out)
    if not result_audit["ok"] or report["errors"]:
        return 1
    return 2 if run.timed_out else 0


def _print(r: Mapping[str, Any], out: Path) -> None:
    print(summary_table(r) + "\n\n" + route_table(r))
    for what, n in r["transport_errors"].items():
        print(f"  no response {n}x: {what}")
    if r["bound_reached"]:
        print(
            f"BOUND REACHED after {r['bound_s']} s: {r['cut_by_bound']} participant(s) still "
            "reading were cut (not an integrity failure; raise --timeout-s or shorten the profile)"
        )
    for problem in r["audit"]["problems"][:10]:
        print(f"  {problem}")
    print(f"wrote {out}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("interrupted: gunicorn stopped, databases dropped, no result written")
