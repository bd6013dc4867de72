"""Where the CPU went during a load test: app (gunicorn), PostgreSQL, the bots, the machine.

Read from ``/proc`` (Linux only; elsewhere the CPU seconds read 0 and ``machine_busy`` is
``None``). The per-request figures
say what the throughput of this machine is bounded by: with the bots on the same cores, the
app gets what the bots and the database leave over.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def postgres_pids() -> list[int]:
    """PIDs of the local PostgreSQL server's processes (postmaster and backends)."""
    pids: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return pids
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in {"postgres", "postmaster"}:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def machine_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs since boot, from ``/proc/stat``."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


def self_cpu_s() -> float:
    """User + system CPU seconds of this process (the bots)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class CpuSnapshot:
    """CPU counters at one moment."""

    app_s: float
    postgres: dict[int, float]
    bots_s: float
    machine: tuple[int, int] | None

    @classmethod
    def take(cls, app_pids: Iterable[int]) -> CpuSnapshot:
        """Read every counter now."""
        return cls(
            app_s=sum(process_cpu_s(p) for p in app_pids),
            postgres={p: process_cpu_s(p) for p in postgres_pids()},
            bots_s=self_cpu_s(),
            machine=machine_ticks(),
        )


def cpu_report(before: CpuSnapshot, after: CpuSnapshot, wall_s: float, requests: int) -> dict:
    """CPU seconds, shares of the machine and milliseconds per request, by consumer.

    PostgreSQL backends that ended during the run are missing from ``after`` and so are not
    counted (the app's pooled connections live as long as gunicorn, so few are lost).
    """
    postgres_s = sum(cpu - before.postgres.get(pid, 0.0) for pid, cpu in after.postgres.items())
    used = {
        "app": after.app_s - before.app_s,
        "postgres": postgres_s,
        "bots": after.bots_s - before.bots_s,
    }
    cores = os.cpu_count() or 1
    server_s = used["app"] + used["postgres"]
    report: dict[str, Any] = {
        "cpu_s": {k: round(v, 1) for k, v in used.items()},
        "share_of_machine": {k: round(v / (wall_s * cores), 3) for k, v in used.items()},
        "ms_per_request": {k: round(1000 * v / requests, 2) for k, v in used.items()}
        if requests
        else {},
        # Requests per CPU-second of the server (app and database): unlike requests/s, it
        # does not follow the share of a shared machine's CPU the server happened to get.
        "requests_per_server_cpu_s": round(requests / server_s, 1) if server_s > 0 else None,
        "machine_busy": None,
    }
    if before.machine and after.machine:
        busy = after.machine[0] - before.machine[0]
        total = after.machine[1] - before.machine[1]
        report["machine_busy"] = round(busy / total, 3) if total else None
    return report
