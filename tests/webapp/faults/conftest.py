"""Fixtures of the fault tests: the load-test module (``bench/loadtest.py``) and a PostgreSQL
database built by the migrations with the demo studies, served by gunicorn."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def load_bench() -> ModuleType:
    """Import ``bench/loadtest.py`` (``bench`` is a folder of scripts, not a package)."""
    name = "framelab_bench_loadtest"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "loadtest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def loadtest() -> ModuleType:
    """The load-test module: ``fresh_database``, ``Gunicorn``, ``run_async_bots``, ``audit``."""
    return load_bench()
