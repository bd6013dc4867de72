"""The report's rounding rule on its edge cases (docs/analysis.md, "How the report rounds")."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pandas as pd
import pytest

from analysis.report import apa
from analysis.report.numbers import (
    DASH,
    MINUS,
    fmt_bounded,
    fmt_count,
    fmt_df,
    fmt_number,
    fmt_p,
    format_value,
)


@pytest.mark.parametrize(
    ("p", "shown"),
    [
        (1.0, "> .999"),  # not "1" nor "1.000": no test gives certainty
        (0.9996, "> .999"),
        (0.9994, ".999"),
        (0.05, ".050"),  # exactly .05 keeps its three decimals
        (0.0321, ".032"),
        (0.001, ".001"),
        (0.000999, "< .001"),
        (0.0004, "< .001"),
        (0.0, "< .001"),  # a p that underflowed
        (float("nan"), DASH),
        (None, DASH),
        (pd.NA, DASH),
    ],
)
def test_p_values_as_apa_writes_them(p, shown):
    assert fmt_p(p) == shown
    assert format_value(p, "p") == shown


def test_p_in_a_sentence_and_an_impossible_p():
    assert [apa.p_apa(p) for p in (1.0, 0.0004, 0.05, float("nan"))] == [
        "p > .999",
        "p < .001",
        "p = .050",
        "p = NA",
    ]
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        fmt_p(1.2)


def test_estimates_two_decimals_with_the_minus_sign_and_thousands():
    assert fmt_number(0.5333) == "0.53"
    assert fmt_number(-0.5333) == f"{MINUS}0.53"
    assert fmt_number(1234.567) == "1,234.57"
    assert fmt_number(-211.2033) == f"{MINUS}211.20"
    assert fmt_number(-0.0) == "0.00" and fmt_number(-0.001) == f"{MINUS}0.001"
    # A nonzero value that two decimals would print as zero keeps two significant digits.
    assert fmt_number(0.03553) == "0.04" and fmt_number(0.0031) == "0.0031"
    assert fmt_number(2e-8) == f"2.0e{MINUS}08"
    assert fmt_number(float("nan")) == DASH and fmt_number(None, missing="NA") == "NA"


def test_bounded_quantities_lose_the_leading_zero():
    assert fmt_bounded(0.5333) == ".53" and fmt_bounded(-0.05) == f"{MINUS}.05"
    assert fmt_bounded(1.0) == "1.00" and fmt_bounded(-1.0) == f"{MINUS}1.00"
    assert fmt_bounded(0.0048) == ".0048" and fmt_bounded(np.float64(0.17)) == ".17"
    assert fmt_bounded(0.025, 3) == ".025"  # a significance level as pre-registered


def test_counts_degrees_of_freedom_flags_and_text():
    assert fmt_count(1234) == "1,234" and fmt_count(np.int64(7)) == "7"
    assert fmt_df(1.0) == "1" and fmt_df(37.94) == "37.9"
    assert format_value(True, "number") == "yes" and format_value(False, "p") == "no"
    assert format_value("fisher_exact", "number") == "fisher_exact"
    assert format_value(12, "text") == "12"  # an id stays as it is
    assert format_value(0.025, "level") == ".025"
    with pytest.raises(ValueError, match="unknown kind"):
        format_value(1.0, "percent")


@pytest.mark.parametrize("name", ["numbers", "apa", "tables", "console"])
def test_examples(name):
    module = importlib.import_module(f"analysis.report.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
