"""Suite-wide settings: quiet BLAS threads, Agg plots, and the rule that CI skips nothing.

Tests that need PostgreSQL or Chromium ask for the ``pg_url`` / ``chromium_path`` fixtures. Locally
they skip when the resource is missing; with ``FRAMELAB_REQUIRE_ALL=1`` (set by ``.ci/run``) a
missing resource is a failure, so CI can never go green by skipping them. Every run ends with a
"SKIPPED GROUPS" block naming the marker groups (postgres, browser, gpu, slow) that did not run,
and why.
"""

from __future__ import annotations

import gc
import os
import re
import shutil

import pytest
from hypothesis import HealthCheck, settings

# Before anything imports numpy/torch: this 2-core machine is shared and oversubscribes.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REQUIRE_ALL = os.environ.get("FRAMELAB_REQUIRE_ALL") == "1"

# Property tests draw the same examples on every run (from each test's name): a failure is a
# regression to fix, never the luck of one run's draw. How long an example takes depends on the
# machine's load, so neither a per-example deadline nor the too-slow health check may fail a run.
settings.register_profile(
    "framelab", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("framelab")


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
# Marker groups the summary names, most specific first: a test in several is counted once.
_GROUPS = ("postgres", "browser", "gpu", "slow")
# Tests that ask for a resource's fixture belong to its group whether or not they say so, so
# `-m "not postgres"` leaves out every test that would need PostgreSQL.
_FIXTURE_MARKERS = {"pg_url": "postgres", "chromium_path": "browser"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):  # noqa: ARG001
    """Mark each test that requests a PostgreSQL or Chromium fixture with that resource's marker."""
    for item in items:
        for fixture, marker in _FIXTURE_MARKERS.items():
            if fixture in item.fixturenames and item.get_closest_marker(marker) is None:
                item.add_marker(marker)


_FROZEN_AT: list[str] = []

# Rarer young collections, as `framelab analyze` runs (analysis.cli.analyze): the suite allocates
# mostly short-lived objects (DataFrames, ASTs, requests), which then die before a collection
# promotes them, and the older generations are walked less often; about 8 % of the CPU time.
gc.set_threshold(50_000, 20, 100)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the first test of each module, collect and then freeze what is alive.

    What the imports and the session's fixtures made lives until the end, yet every full
    collection of the garbage collector walked it again: about a tenth of the suite's CPU time.
    Frozen objects are left out of the collector's walks; what a module's tests leave behind
    is still collected, as it is collected before the next freeze.
    """
    module = getattr(item.module, "__name__", "") if hasattr(item, "module") else ""
    if _FROZEN_AT[-1:] != [module]:
        _FROZEN_AT[:] = [module]
        gc.collect()
        gc.freeze()


def _group(keywords) -> str:
    return next((g for g in _GROUPS if g in keywords), "other")


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    """Say loudly which groups of tests did not run and why; count the resource tests that did.

    A green run that skipped every PostgreSQL test is not the run CI makes, so the skipped and
    deselected groups are listed with their reasons at the very end of the output.
    """
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

    skipped: dict[tuple[str, str], int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        key = (_group(getattr(report, "keywords", {})), _skip_reason(report))
        skipped[key] = skipped.get(key, 0) + 1
    deselected: dict[str, int] = {}
    for item in terminalreporter.stats.get("deselected", []):
        group = _group(item.keywords)
        deselected[group] = deselected.get(group, 0) + 1
    expr = config.getoption("markexpr")
    # Under pytest-xdist the workers deselect, so only the expression itself is known here.
    left_out = [g for g in _GROUPS if re.search(rf"\bnot\s+{g}\b", expr or "")]
    if not skipped and not deselected and not left_out:
        terminalreporter.write_sep("=", "SKIPPED GROUPS: none", green=True)
        return
    terminalreporter.write_sep("=", "SKIPPED GROUPS", yellow=True, bold=True)
    for (group, reason), n in sorted(skipped.items()):
        terminalreporter.write_line(f"{group}: {n} skipped ({reason})", yellow=True, bold=True)
    if deselected or left_out:
        counts = {g: deselected.get(g) for g in left_out} | deselected
        listed = ", ".join(g if n is None else f"{g} ({n})" for g, n in counts.items())
        how = f"-m {expr!r}" if expr else "-k or --deselect"
        terminalreporter.write_line(f"not selected by {how}: {listed}", yellow=True, bold=True)
