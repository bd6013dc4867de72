"""What the benchmark scripts share: the checkout on the import path, the machine a figure was
measured on, timing, latency percentiles, result files, Markdown tables and server processes.

``bench/`` is a folder of scripts, not a package: a script puts its own folder on ``sys.path``
and imports this module; importing it puts the checkout first on the path, so the scripts
measure the code beside them, not whichever checkout the virtualenv was installed from.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# -- the machine --------------------------------------------------------------------------------
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


def machine_line() -> str:
    """One printed line: architecture, CPUs, Python, load average and the date."""
    return (
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f}; "
        + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    )


# -- timing -------------------------------------------------------------------------------------
def best_of(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Best wall and best CPU seconds of ``repeats`` calls after one warm-up call (imports,
    caches), and the last call's result."""
    out = fn()
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best_wall, best_cpu, out


def analyze_choice(
    export: Path,
    out: Path,
    *,
    tree: Path = ROOT,
    options: Sequence[str] = (),
    prefix: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> tuple[float, float, dict[str, Any], str]:
    """``framelab analyze choice EXPORT --out OUT`` of the checkout ``tree`` in a subprocess
    (``prefix`` before the command, ``env`` added to the environment); exits when it fails.

    Returns
    -------
    tuple
        Wall seconds; CPU seconds, user + system (on a shared machine the wall time mostly
        measures the neighbours); the ``meta`` of the report's ``results.json`` (per-step
        timings, the models that ran); the command's output.
    """
    framelab = Path(sys.executable).with_name("framelab")
    cmd = [*prefix, str(framelab), "analyze", "choice", str(export), "--out", str(out), *options]
    environ = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(tree), **(env or {})}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=environ, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads((out / "results.json").read_text())["meta"], proc.stdout


# -- latency ------------------------------------------------------------------------------------
def percentile(sorted_ms: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: a reported p99 is a real request)."""
    if not sorted_ms:
        return float("nan")
    k = max(0, min(len(sorted_ms) - 1, int(-(-q * len(sorted_ms) // 100)) - 1))
    return sorted_ms[k]


def latency(ms: Iterable[float]) -> dict[str, float]:
    """Count, p50, p95, p99, maximum and mean of request times in milliseconds."""
    s = sorted(ms)
    return {
        "n": len(s),
        "p50_ms": round(percentile(s, 50), 1),
        "p95_ms": round(percentile(s, 95), 1),
        "p99_ms": round(percentile(s, 99), 1),
        "max_ms": round(s[-1], 1) if s else float("nan"),
        "mean_ms": round(statistics.fmean(s), 1) if s else float("nan"),
    }


def timings_summary(timings: Sequence[Any], wall_s: float) -> dict[str, Any]:
    """Requests, requests/s, percentiles, errors and statuses of the bots' request timings
    (each with ``route``, ``status`` and ``ms``), overall and per route."""
    by_route: dict[str, list[float]] = defaultdict(list)
    for t in timings:
        by_route[t.route].append(t.ms)
    overall = latency(t.ms for t in timings)
    return {
        "requests": len(timings),
        "requests_per_s": round(len(timings) / wall_s, 1) if wall_s else 0.0,
        **{k: overall[k] for k in ("p50_ms", "p95_ms", "p99_ms")},
        "errors": sum(1 for t in timings if t.status >= 500 or t.status == 0),
        "http_statuses": {str(k): v for k, v in sorted(Counter(t.status for t in timings).items())},
        "latency_by_route": {r: latency(ms) for r, ms in sorted(by_route.items())},
    }


# -- options and results ------------------------------------------------------------------------
def add_pg_url(parser: argparse.ArgumentParser, default: str | None = DEFAULT_PG) -> None:
    """``--pg-url``: a PostgreSQL server where databases may be created (``TEST_DATABASE_URL``
    first); with ``default=None`` the option is optional and the script runs on SQLite."""
    if default is not None:
        default = os.environ.get("TEST_DATABASE_URL") or default
    parser.add_argument(
        "--pg-url",
        default=default,
        help="a PostgreSQL server to make fresh databases on"
        + (" (default: a SQLite file)" if default is None else ""),
    )


def run_header(argv: Sequence[str] | None, script: str | None = None) -> dict[str, Any]:
    """The date, command line and machine that open every result file."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([script or Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
        "machine": machine(),
    }


def write_result(report: Mapping[str, Any], folder: Path, name: str) -> Path:
    """Write ``report`` (opened by :func:`run_header`) as ``folder/name-<its date>.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromisoformat(report["date"]).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"{name}-{stamp}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def write_json(result: Any, path: Path | str | None) -> None:
    """Write ``result`` as JSON to ``path`` (nothing without one)."""
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(result, indent=2, default=str) + "\n")


def emit_json(result: Any, path: Path | None = None) -> None:
    """Print ``result`` as JSON and, given a path, write it there too."""
    print(json.dumps(result, indent=2, default=str))
    write_json(result, path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file (none when it is missing); a line cut by a kill is
    skipped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table of a header and rows of cells."""
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# -- databases ----------------------------------------------------------------------------------
@contextlib.contextmanager
def fresh_database(pg_url: str, prefix: str = "framelab_load") -> Iterator[str]:
    """Create an empty database on the server of ``pg_url``; drop it afterwards.

    Yields
    ------
    str
        Its SQLAlchemy URL (psycopg 3).
    """
    import secrets

    import psycopg
    from sqlalchemy.engine import make_url

    name = f"{prefix}_{secrets.token_hex(4)}"
    server = make_url(pg_url)
    admin = server.set(drivername="postgresql", database="postgres")
    admin_url = admin.render_as_string(hide_password=False)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.set(drivername="postgresql+psycopg", database=name).render_as_string(
            hide_password=False
        )
    finally:
        # The server may just have been restarted by a fault test: retry for a while.
        for attempt in range(30):
            try:
                with psycopg.connect(admin_url, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                break
            except psycopg.OperationalError:
                time.sleep(min(0.2 * 2**attempt, 2.0))


@contextlib.contextmanager
def database_url(pg_url: str | None, prefix: str) -> Iterator[str]:
    """A fresh database on the PostgreSQL server of ``pg_url``, or else a SQLite file in a
    temporary folder; removed afterwards."""
    if pg_url:
        with fresh_database(pg_url, prefix) as url:
            yield url
    else:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp) / (prefix + '.sqlite')}"


# -- server processes ---------------------------------------------------------------------------
def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen[bytes] | None, timeout: float = 15) -> None:
    """SIGTERM the process group a server was started in (``start_new_session``); SIGKILL it
    when it has not ended within ``timeout`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)


def interrupt_on_sigterm() -> None:
    """Make a SIGTERM (a CI timeout) unwind like Ctrl-C, so context managers stop servers and
    drop databases."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
