"""The runnable examples in the platform's docstrings are true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "webapp.bots",
    "webapp.config",
    "webapp.models",
    "webapp.recruit.errors",
    "webapp.services.authenticity",
    "webapp.services.design",
    "webapp.services.entry",
    "webapp.services.testmark",
    "webapp.tasks.base",
    "webapp.tasks.product_choice",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_parse_premium_accepts_plain_amounts_and_a_decimal_comma_only():
    from webapp.tasks.product_choice import parse_premium

    assert parse_premium("0", 10) == 0.0
    assert parse_premium(".5", 10) == 0.5
    assert parse_premium("$ 10", 10) == 10.0
    for other_script in ("١٢", "１２", "²"):  # typed as 12 or 2 nowhere else: refused
        with pytest.raises(ValueError, match="digits 0 to 9"):
            parse_premium(other_script, 100)
    assert parse_premium("10,5", 100) == 10.5  # a decimal comma
    assert parse_premium("$0,75", 100) == 0.75
    for bad in ("1e3", "nan", "inf", ",", "1,2,3", "1,234,5", "--1", "1.2.3", "0x10"):
        with pytest.raises(ValueError, match="amount in US dollars"):
            parse_premium(bad, 1000)
    with pytest.raises(ValueError, match="at most"):
        parse_premium("10.01", 10)


def test_parse_entry_recognises_each_platform():
    from webapp.models import Platform
    from webapp.services.entry import EntryError, parse_entry

    pid = "5f1e2d3c4b5a69788796a5b4"
    e = parse_entry({"PROLIFIC_PID": pid.upper(), "STUDY_ID": "s1", "SESSION_ID": "x1"})
    assert (e.platform, e.external_id, e.external_study_id, e.external_session_id) == (
        Platform.prolific,
        pid,
        "s1",
        "x1",
    )
    e = parse_entry(
        {
            "workerId": "AW",
            "hitId": "H",
            "assignmentId": "A",
            "turkSubmitTo": "https://www.mturk.com/",
        }
    )
    assert (e.platform, e.return_url, e.sandbox) == (Platform.mturk, "https://www.mturk.com", False)
    e = parse_entry(
        {
            "workerId": "AW",
            "hitId": "H",
            "assignmentId": "A",
            "turkSubmitTo": "https://workersandbox.mturk.com",
        }
    )
    assert e.sandbox and parse_entry(e.params()) == e
    assert parse_entry({"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"}).preview
    for bad in (
        {},
        {"participant": ""},
        {"participant": "a b"},
        {
            "workerId": "AW",
            "hitId": "H",
            "assignmentId": "A",
            "turkSubmitTo": "http://www.mturk.com",
        },
    ):
        with pytest.raises(EntryError) as info:
            parse_entry(bad)
        assert info.value.code == "E400-PARAMS"
