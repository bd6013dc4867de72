"""The numpydoc examples of the news modules run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["newsapi", "fetch", "outbound", "store", "falsify"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(f"analysis.news.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
