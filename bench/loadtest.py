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
6. prints a summary and writes ``bench/results/loadtest-<timestamp>.json``.

Exit status 0 only when the audit passes and no request ended in an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The audit lives beside this script; bench/ is a folder of scripts, not a package, and the
# fault tests import this file by path, so make the folder importable either way.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadtest_audit import SENTIMENT_TYPE, audit  # noqa: E402
from loadtest_bots import (  # noqa: E402,F401  (the fault tests use them as loadtest.*)
    BotRun,
    pages_per_participant,
    profile_bound,
    run_async_bots,
)
from loadtest_cpu import CpuSnapshot, cpu_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
GUNICORN_CONF = ROOT / "gunicorn.conf.py"  # the settings FrameLab ships
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
PRODUCT_FILE = "product-choice-demo.yaml"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# -- databases ----------------------------------------------------------------------------------
def _admin_conninfo(pg_url: str) -> str:
    """A libpq URL of the maintenance database on the server of ``pg_url``."""
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(drivername="postgresql", database="postgres")
    return url.render_as_string(hide_password=False)


def _db_url(pg_url: str, name: str) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(drivername="postgresql+psycopg", database=name)
    return url.render_as_string(hide_password=False)


@contextlib.contextmanager
def fresh_database(pg_url: str, prefix: str = "framelab_load") -> Iterator[str]:
    """Create an empty database on the server of ``pg_url``; drop it afterwards.

    Yields
    ------
    str
        Its SQLAlchemy URL (psycopg 3).
    """
    import psycopg

    name = f"{prefix}_{secrets.token_hex(4)}"
    admin = _admin_conninfo(pg_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _db_url(pg_url, name)
    finally:
        # The server may just have been restarted by a fault test: retry for a while.
        for attempt in range(30):
            try:
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                break
            except psycopg.OperationalError:
                time.sleep(min(0.2 * 2**attempt, 2.0))


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
        cmd = [
            "pgbench",
            "-b",
            "simple-update",
            "-n",
            "-c",
            str(clients),
            "-j",
            str(min(clients, os.cpu_count() or 1)),
            "-T",
            str(seconds),
            *conn,
            u.database or "",
        ]
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
def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        cmd = [
            sys.executable,
            "-m",
            "gunicorn",
            # FrameLab's own settings (the GC freeze), named so every server started here gets
            # them, whatever its working directory (the peer benchmark's floor app too).
            "--config",
            str(GUNICORN_CONF),
            "--bind",
            f"127.0.0.1:{self.port}",
            "--worker-class",
            "gthread",
            "--workers",
            str(self.workers),
            "--threads",
            str(self.threads),
            "--timeout",
            "120",
            "--graceful-timeout",
            "5",
            # Well above the bots' client-side keep-alive (1.5 s), as behind a proxy (nginx
            # keeps 75 s). With 5 s, a bot whose event loop lagged under overload read its
            # response late and reused the connection just as gunicorn closed it (ReadError).
            "--keep-alive",
            "30",
            "--backlog",
            "4096",
            "--access-logfile",
            str(self.log_dir / "access.log"),
            "--access-logformat",
            "%(m)s %(U)s %(s)s %(D)s",
            "--error-logfile",
            str(self.log_dir / "error.log"),
            self.app,
        ]
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

    def __exit__(self, *exc: object) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)


def server_latencies(access_log: Path) -> dict[str, dict[str, float]]:
    """Server-side request times per route from gunicorn's access log (``%(D)s`` in µs)."""
    from bots_async import route_class

    times: dict[str, list[float]] = defaultdict(list)
    if access_log.exists():
        for line in access_log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[3].isdigit():
                times[route_class(parts[0], parts[1])].append(int(parts[3]) / 1000)
    return {route: _summary(ms) for route, ms in sorted(times.items())}


# -- figures ------------------------------------------------------------------------------------
def _pct(sorted_ms: list[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: a reported p99 is a real request)."""
    if not sorted_ms:
        return float("nan")
    k = max(0, min(len(sorted_ms) - 1, int(-(-q * len(sorted_ms) // 100)) - 1))
    return sorted_ms[k]


def _summary(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {
        "n": len(s),
        "p50_ms": round(_pct(s, 50), 1),
        "p95_ms": round(_pct(s, 95), 1),
        "p99_ms": round(_pct(s, 99), 1),
        "max_ms": round(s[-1], 1) if s else float("nan"),
        "mean_ms": round(statistics.fmean(s), 1) if s else float("nan"),
    }


def machine() -> dict[str, Any]:
    """The machine the figures were measured on."""
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gb = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem_kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        mem_gb = round(mem_kb / 1024**2, 1)
    pg = subprocess.run(
        ["psql", "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "memory_gb": mem_gb,
        "os": platform.platform(),
        "python": platform.python_version(),
        "postgresql_client": pg,
        "load_average_at_start": os.getloadavg(),
    }


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
    parser.add_argument(
        "--m", type=int, default=0, help="sentiment participants (skipped if unavailable)"
    )
    parser.add_argument("--workers", type=int, default=cores + 1, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker")
    parser.add_argument(
        "--concurrency", type=int, default=0, help="bots in a session at once (0: all)"
    )
    parser.add_argument("--think-ms", type=float, default=0.0, help="mean think time (0: none)")
    parser.add_argument("--ramp-s", type=float, default=0.0, help="spread arrivals over seconds")
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=0.0,
        help="bound on the bot run (0: follow the profile, see profile_bound)",
    )
    parser.add_argument("--pgbench-s", type=int, default=15, help="pgbench duration (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("TEST_DATABASE_URL") or DEFAULT_PG,
        help="any database URL on the PostgreSQL server to use",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the JSON result")
    args = parser.parse_args(argv)

    from webapp import create_app
    from webapp.services.studies import get_study

    # A SIGTERM (e.g. a CI timeout) unwinds like Ctrl-C, so gunicorn is stopped and the
    # databases are dropped by the context managers below.
    signal.signal(signal.SIGTERM, _interrupt)
    started = datetime.now(UTC)
    info = machine()
    secret = secrets.token_hex(32)
    env = {"SECRET_KEY": secret, "FRAMELAB_ENV": "development", "FLASK_DEBUG": "0"}
    clients = args.workers * args.threads
    pgbench = (
        pgbench_tps(args.pg_url, clients=clients, seconds=args.pgbench_s)
        if args.pgbench_s > 0
        else None
    )
    with fresh_database(args.pg_url) as db_url, tempfile.TemporaryDirectory() as logs:
        skipped = prepare_database(db_url, env)
        app = create_app(
            {"SQLALCHEMY_DATABASE_URI": db_url, "SECRET_KEY": secret, "ENV_NAME": "development"}
        )
        with app.app_context():
            product = get_study("product-choice-demo")
            assert product is not None, "the demo study did not load"
            groups = [(product.definition, args.n)]
            sentiment = None
            if args.m > 0 and sentiment_available():
                from sqlalchemy import select

                from webapp.extensions import db
                from webapp.models import Study

                sentiment = next(
                    s
                    for s in db.session.scalars(select(Study))
                    if any(b["type"] == SENTIMENT_TYPE for b in s.definition["tasks"])
                )
                groups.append((sentiment.definition, args.m))
        m_run = args.m if sentiment is not None else 0
        pages = max(pages_per_participant(d) for d, _ in groups)
        bound_s = args.timeout_s or profile_bound(
            pages, args.think_ms / 1000.0, args.ramp_s, n=args.n + m_run
        )
        with Gunicorn({**env, "DATABASE_URL": db_url}, args.workers, args.threads, Path(logs)) as g:
            cpu_before = CpuSnapshot.take([g.proc.pid, *g.worker_pids()])
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
            cpu_after = CpuSnapshot.take([g.proc.pid, *g.worker_pids()])
        server = server_latencies(Path(logs) / "access.log")
        result_audit = audit(app, run)
        with app.app_context():
            from webapp.extensions import dispose_engines

            dispose_engines()

    timings = [t for b in run.bots for t in b.timings]
    errors = [r for r in run.results if r.outcome == "error"]
    by_route: dict[str, list[float]] = defaultdict(list)
    for t in timings:
        by_route[t.route].append(t.ms)
    statuses = Counter(t.status for t in timings)
    submissions = sum(1 for b in run.bots for a in b.acks if a.kind != "consent")
    responses_per_s = submissions / run.wall_s if run.wall_s else 0.0
    overall = _summary([t.ms for t in timings])
    report: dict[str, Any] = {
        "date": started.isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
        "machine": info,
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
        "requests": len(timings),
        "http_statuses": {str(k): v for k, v in sorted(statuses.items())},
        "errors": len(errors) + sum(1 for t in timings if t.status >= 500 or t.status == 0),
        "error_samples": [f"{r.external_id}: {r.error}" for r in errors[:10]],
        "transport_errors": dict(Counter(f"{t.route}: {t.error}" for t in timings if t.error)),
        "lost": result_audit["lost"],
        "duplicated": result_audit["duplicated"],
        "wall_s": round(run.wall_s, 2),
        "bound_s": round(bound_s, 1),
        "bound_reached": run.timed_out,
        "cut_by_bound": len(run.bots) - len(run.results),
        "requests_per_s": round(len(timings) / run.wall_s, 1) if run.wall_s else 0.0,
        "responses_per_s": round(responses_per_s, 1),
        "p50_ms": overall["p50_ms"],
        "p95_ms": overall["p95_ms"],
        "p99_ms": overall["p99_ms"],
        "latency_by_route": {r: _summary(ms) for r, ms in sorted(by_route.items())},
        "server_latency_by_route": server,
        "cpu": cpu_report(cpu_before, cpu_after, run.wall_s, len(timings)),
        "pgbench_tps": pgbench["tps"] if pgbench else None,
        "pgbench": pgbench,
        "ratio_responses_to_pgbench": (
            round(responses_per_s / pgbench["tps"], 3) if pgbench and pgbench["tps"] else None
        ),
        "audit": result_audit,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"loadtest-{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    _print(report, out)
    if not result_audit["ok"] or report["errors"]:
        return 1
    return 2 if run.timed_out else 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _print(r: Mapping[str, Any], out: Path) -> None:
    print(
        f"participants {r['participants']} (completed {r['completed']}), requests "
        f"{r['requests']} in {r['wall_s']} s ({r['requests_per_s']}/s), errors {r['errors']}"
    )
    print(
        f"latency p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms, p99 {r['p99_ms']} ms "
        "(client side, all requests)"
    )
    print(f"{'route':<26}{'n':>8}{'p50':>9}{'p95':>9}{'p99':>9}   server p99")
    server = r["server_latency_by_route"]
    for route, s in r["latency_by_route"].items():
        base = route.split(":")[0]
        sp99 = server.get(base, {}).get("p99_ms", float("nan"))
        print(f"{route:<26}{s['n']:>8}{s['p50_ms']:>9}{s['p95_ms']:>9}{s['p99_ms']:>9}   {sp99}")
    for what, n in r["transport_errors"].items():
        print(f"  no response {n}x: {what}")
    c = r["cpu"]
    if c["ms_per_request"]:
        per = ", ".join(f"{k} {v} ms" for k, v in c["ms_per_request"].items())
        share = ", ".join(f"{k} {v:.0%}" for k, v in c["share_of_machine"].items())
        print(f"CPU per request: {per}; share of the machine: {share}; busy {c['machine_busy']}")
    if r["pgbench_tps"]:
        print(
            f"committed responses {r['responses_per_s']}/s; pgbench simple-update "
            f"{r['pgbench_tps']:.0f} tps; ratio {r['ratio_responses_to_pgbench']}"
        )
    a = r["audit"]
    if r["bound_reached"]:
        print(
            f"BOUND REACHED after {r['bound_s']} s: {r['cut_by_bound']} participant(s) still "
            "reading were cut (not an integrity failure; raise --timeout-s or shorten the profile)"
        )
    verdict = "PASSED" if a["ok"] else "FAILED"
    print(
        f"integrity audit {verdict}: lost {a['lost']}, duplicated {a['duplicated']}, incomplete "
        f"{a['incomplete']}, acknowledged {a['acknowledged']}, recoveries {a['recoveries']}"
    )
    for problem in a["problems"][:10]:
        print(f"  {problem}")
    print(f"wrote {out}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("interrupted: gunicorn stopped, databases dropped, no result written")
