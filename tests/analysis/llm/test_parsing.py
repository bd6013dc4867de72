"""Label parsers: robust to casing, JSON and extra words; never guess on ambiguity."""

from __future__ import annotations

import pytest

from analysis.llm.parsing import (
    clean_reframing,
    parse_choice,
    parse_fact_check,
    parse_framing,
)


@pytest.mark.parametrize(
    ("answer", "label"),
    [
        ("Positive", "positive"),
        ("negative.", "negative"),
        ("  NEUTRAL\n", "neutral"),
        ("**Positive**", "positive"),
        ('{"label": "Negative"}', "negative"),
        ('```json\n{"framing": "neutral", "confidence": 0.9}\n```', "neutral"),
        ("The framing of the text is positive.", "positive"),
        ("Negative. The text is not positive at all.", "negative"),
        ("It is not negative, rather positive", "other"),
        ("I cannot tell.", "other"),
        ("", "other"),
        ("Positively framed", "other"),
    ],
)
def test_parse_framing(answer: str, label: str) -> None:
    assert parse_framing(answer) == label


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("True", ("true", None)),
        ("false.", ("false", None)),
        ("True [High Confidence]", ("true", "high")),
        ("False [Low Confidence]", ("false", "low")),
        ("Answer: FALSE (confidence: high)", ("false", "high")),
        ('{"answer": true}', ("true", None)),
        ("The statement is true.", ("true", None)),
        ("Partly true, partly false", ("other", None)),
        ("Maybe", ("other", None)),
    ],
)
def test_parse_fact_check(answer: str, expected: tuple) -> None:
    assert parse_fact_check(answer) == expected


NAMES = {"Summary A": "gt", "Summary B": "generated"}


@pytest.mark.parametrize(
    ("answer", "label"),
    [
        ("Summary A", "gt"),
        ("summary b.", "generated"),
        ("B", "generated"),
        ("**A**", "gt"),
        ("Summary B is better than Summary A.", "generated"),
        ("I think Summary A is better than Summary B.", "other"),
        ("Both are good.", "other"),
        ("Summary AB", "other"),
    ],
)
def test_parse_choice(answer: str, label: str) -> None:
    assert parse_choice(answer, NAMES) == label


def test_parse_choice_with_system_names() -> None:
    names = {"System X": "generated", "System Y": "gt"}
    assert parse_choice("system y", names) == "gt"
    assert parse_choice("Y", names) == "gt"


def test_clean_reframing() -> None:
    assert clean_reframing('Answer: "Sadly, the food was great."') == "Sadly, the food was great."
    assert clean_reframing("Sadly, it rained.") == "Sadly, it rained."
