"""The numpydoc examples of the planning modules run and hold."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

MODULES = ["power", "prereg", "sequential", "spec"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name the demo study by its repository path
    module = importlib.import_module(f"analysis.plan.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
