"""The suite's own rules in tests/conftest.py: resource tests are marked by the fixtures they
ask for, and every run ends by naming the groups of tests that did not run, and why."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

CONFTEST = Path(__file__).with_name("conftest.py")
MARKERS = """
[pytest]
markers =
    postgres: needs PostgreSQL
    browser: drives Chromium
    slow: slow
    gpu: needs CUDA
"""
TESTS = """
import pytest

def test_unmarked_but_needs_postgres(pg_url):
    pass

@pytest.mark.browser
def test_browser(chromium_path):
    pass

@pytest.mark.slow
def test_slow():
    pass

def test_plain():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("TEST_DATABASE_URL", raising=False)
    monkeypatch.delenv("FRAMELAB_REQUIRE_ALL", raising=False)
    monkeypatch.setenv("FRAMELAB_CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("PATH", "/nonexistent")  # no `chromium` to find either
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makeini(MARKERS)
    pytester.makepyfile(test_groups=TESTS)
    return pytester


def test_a_run_names_each_skipped_group_and_its_reason(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, skipped=2)
    lines = result.outlines[result.outlines.index(_sep(result, "SKIPPED GROUPS")) :]
    assert "browser: 1 skipped (Chromium (Debian package `chromium`) not available)" in lines
    # Marked `postgres` by the fixture it asks for, though the test says nothing.
    assert "postgres: 1 skipped (PostgreSQL (TEST_DATABASE_URL) not available)" in lines


def test_deselected_groups_are_named_with_the_expression(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess("-p", "no:cacheprovider", "-m", "not postgres and not slow")
    # The unmarked PostgreSQL test is left out like the marked ones.
    result.assert_outcomes(passed=1, skipped=1, deselected=2)
    tail = "\n".join(result.outlines[result.outlines.index(_sep(result, "SKIPPED GROUPS")) :])
    assert "not selected by -m 'not postgres and not slow': postgres (1), slow (1)" in tail


def test_a_run_that_skips_nothing_says_so(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess("-p", "no:cacheprovider", "test_groups.py::test_plain")
    result.assert_outcomes(passed=1)
    assert _sep(result, "SKIPPED GROUPS").strip("= ") == "SKIPPED GROUPS: none"


def _sep(result: pytest.RunResult, title: str) -> str:
    return next(line for line in result.outlines if title in line and line.startswith("="))
