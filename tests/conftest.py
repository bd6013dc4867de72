"""Suite-wide settings: quiet BLAS threads, Agg plots, and the rule that CI skips nothing.

Tests that need PostgreSQL or Chromium ask for the ``pg_url`` / ``chromium_path`` fixtures. Locally
they skip when the resource is missing; with ``FRAMELAB_REQUIRE_ALL=1`` (set by ``.ci/run``) a
missing resource is a failure, so CI can never go green by skipping them.
"""

from __future__ import annotations

import os
import shutil

import pytest

# Before anything imports numpy/torch: this 2-core machine is shared and oversubscribes.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REQUIRE_ALL = os.environ.get("FRAMELAB_REQUIRE_ALL") == "1"


def require(available: bool, what: str) -> None:
    """Skip when a resource is missing, or fail when CI demands that nothing skips."""
    if available:
        return
    if REQUIRE_ALL:
        pytest.fail(f"{what} is required here (FRAMELAB_REQUIRE_ALL=1) but not available")
    pytest.skip(f"{what} not available")


@pytest.fixture(scope="session")
def pg_url() -> str:
    """URL of a PostgreSQL database the tests may wipe (``TEST_DATABASE_URL``)."""
    url = os.environ.get("TEST_DATABASE_URL", "")
    require(url.startswith("postgresql"), "PostgreSQL (TEST_DATABASE_URL)")
    return url


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Path of Debian's headless Chromium (``FRAMELAB_CHROMIUM`` or ``chromium`` on PATH)."""
    path = os.environ.get("FRAMELAB_CHROMIUM") or shutil.which("chromium") or ""
    require(bool(path) and os.path.exists(path), "Chromium (Debian package `chromium`)")
    return path


_RESOURCE_MARKERS = ("postgres", "browser")


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    """Print how many PostgreSQL and browser tests actually ran, so CI logs prove it."""
    counts = {m: {"passed": 0, "failed": 0, "skipped": 0} for m in _RESOURCE_MARKERS}
    for outcome in ("passed", "failed", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            keywords = getattr(report, "keywords", {})
            for marker in _RESOURCE_MARKERS:
                if marker in keywords and (report.when == "call" or outcome == "skipped"):
                    counts[marker][outcome] += 1
    for marker, c in counts.items():
        terminalreporter.write_line(
            f"framelab: {marker} tests: {c['passed']} passed, {c['failed']} failed, "
            f"{c['skipped']} skipped"
        )
