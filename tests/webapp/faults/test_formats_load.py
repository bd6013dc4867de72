"""Bots through the three-format demo under gunicorn on PostgreSQL (``bench/formats_balance.py``):
the integrity audit finds nothing lost or duplicated, and every pair is shown in every format
equally often (±1). The bench's 300-participant figure is in docs/benchmarks.md."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from .conftest import ROOT, load_bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _bench() -> ModuleType:
    load_bench()  # bench/ on the import path, and its loadtest module
    name = "framelab_bench_formats_balance"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "formats_balance.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_bots_stay_balanced_per_pair_and_format_with_nothing_lost(pg_url):
    n = 45
    summary = _bench().run(pg_url, n=n, concurrency=15, workers=2, threads=4, seed=3)
    assert summary["ok"], summary
    assert summary["outcomes"] == {"completed": n}
    assert summary["audit"]["lost"] == 0 and summary["audit"]["duplicated"] == 0
    assert summary["sequences"] == {"A": 15, "B": 15, "C": 15}
    assert summary["cell_min"] == summary["cell_max"] == 15  # 45 bots, 3 formats: exactly 15
