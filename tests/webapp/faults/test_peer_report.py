"""The peer benchmark's verdict and table (bench/peer/run.py): a platform that finishes nobody
fails the run, and the table reports each server's CPU share and requests per CPU-second."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def peer():
    name = "framelab_bench_peer_run"
    path = list(sys.path)  # the script puts bench/ and bench/peer/ on it
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "peer" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(name, None)
    sys.path[:] = path


def _side(platform: str, completed: int, requests: int, app_s: float, wall_s: float) -> dict:
    from loadtest_cpu import cpu_report

    class Snapshot:
        def __init__(self, app_s: float) -> None:
            self.app_s, self.bots_s, self.postgres, self.machine = app_s, 0.0, {1: app_s}, None

    return {
        "platform": platform,
        "completed": completed,
        "wall_s": wall_s,
        "bound_reached": completed == 0,
        "requests_per_s": round(requests / wall_s, 1),
        "p50_ms": 10,
        "p95_ms": 20,
        "p99_ms": 30,
        "errors": 0,
        "cpu": cpu_report(Snapshot(0.0), Snapshot(app_s / 2), wall_s, requests),
        "audit": {"ok": True, "lost": 0, "duplicated": 0},
    }


def test_a_platform_that_finishes_nobody_fails_and_cpu_share_is_reported(peer):
    framelab = _side("FrameLab", 200, 5200, app_s=20.0, wall_s=40.0)
    otree = _side("oTree", 0, 900, app_s=10.0, wall_s=40.0)
    assert peer.verdict(framelab) == "passed"
    assert peer.verdict(otree) == "FAILED (finished nobody)"
    # 5200 requests on 20 s of server CPU (app and PostgreSQL) against 900 on 10 s.
    assert framelab["cpu"]["requests_per_server_cpu_s"] == 260.0
    ratios = peer.ratios(framelab, otree)
    assert ratios["requests_per_server_cpu_s"] == pytest.approx(260 / 90, abs=0.01)
    report = {
        "date": "2025-01-06",
        "n": 200,
        "machine": {"cpus": 2, "cpu": "test"},
        "config": {"server_cpus": [0], "bot_cpus": [1]},
        "profiles": {"burst": {"framelab": framelab, "otree": otree, "ratios": ratios}},
    }
    table = peer.markdown(report)
    assert "| burst | oTree | 0/200 |" in table and "FAILED (finished nobody)" in table
    assert "requests per server CPU-s" in table and "| 260.0 |" in table
