"""Study YAML and stimulus-set validation of the rating and preference task types."""

from __future__ import annotations

import json

import pytest

from webapp.studydef import load_study_file
from webapp.validation import StudyDefinitionError

from .conftest import PREFERENCE_DEMO, RATING_DEMO

HEAD = """slug: eval-small
title: Small
recruitment:
  completion_codes: {completed: DONE1, screened_out: SCR1, study_full: FULL1}
payment: {base: 1}
tasks:
  - type: consent
    text: Consent.
"""
TAIL = """  - type: debrief
    text: Thanks.
"""


def study(tmp_path, block: str, lines: list[object]) -> object:
    (tmp_path / "set.jsonl").write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + block + TAIL)
    return path


SOURCE = {
    "item_id": "s1",
    "passages": [{"text": "P."}],
    "summaries": [{"system": "x", "text": "A."}, {"system": "y", "text": "B."}],
}
PAIR = {"pair_id": "p1", "a": {"system": "human", "text": "A."}, "b": {"system": "m", "text": "B."}}


def test_demo_studies_normalise_with_defaults():
    rating = load_study_file(RATING_DEMO).tasks[2].params
    assert [d["id"] for d in rating["dimensions"]] == [
        "stance",
        "object",
        "intensity",
        "consensus",
        "reasoning",
    ]
    assert rating["scale"] == {
        "min": 1,
        "max": 4,
        "labels": ["Not at all", "Slightly", "Mostly", "Completely"],
    }
    assert rating["annotators_per_item"] == 3 and len(rating["items"]) == 4
    prefer = load_study_file(PREFERENCE_DEMO).tasks[2].params
    assert prefer["annotators_per_item"] == 4 and prefer["labels"] == ["a", "b"]
    assert prefer["items"][0]["a"]["system"] == "human"


@pytest.mark.parametrize(
    ("block", "lines", "message"),
    [
        (
            "  - type: summary_rating\n    items: set.jsonl\n    colour: red\n",
            [SOURCE],
            "unknown key(s) ['colour']",
        ),
        ("  - type: summary_rating\n    items: set.jsonl\n", ["{not json"], "line 1: not JSON"),
        (
            "  - type: summary_rating\n    items: set.jsonl\n",
            [{**SOURCE, "summaries": SOURCE["summaries"][:1]}],
            "line 1.summaries: ",
        ),
        (
            "  - type: summary_rating\n    items: set.jsonl\n",
            [{**SOURCE, "summaries": [SOURCE["summaries"][0]] * 2}],
            "system 'x' has two summaries",
        ),
        (
            "  - type: summary_rating\n    items: set.jsonl\n"
            "    scale: {min: 1, max: 5, labels: [a, b]}\n",
            [SOURCE],
            "scale.labels: needs 5 labels",
        ),
        (
            "  - type: summary_rating\n    items: set.jsonl\n    items_per_participant: 2\n",
            [SOURCE],
            "must be between 1 and 1",
        ),
        (
            "  - type: pairwise_preference\n    items: set.jsonl\n",
            [{**PAIR, "b": {"system": "human", "text": "B."}}],
            "need different system names",
        ),
        (
            "  - type: pairwise_preference\n    items: set.jsonl\n",
            [PAIR, PAIR],
            "duplicate id 'p1'",
        ),
        ("  - type: pairwise_preference\n    items: missing.jsonl\n", [PAIR], "file not found"),
    ],
)
def test_invalid_definitions_name_the_place(tmp_path, block, lines, message):
    with pytest.raises(StudyDefinitionError) as err:
        load_study_file(study(tmp_path, block, lines))
    assert message in str(err.value)


def test_study_full_code_is_required(tmp_path):
    path = study(tmp_path, "  - type: pairwise_preference\n    items: set.jsonl\n", [PAIR])
    path.write_text(path.read_text().replace(", study_full: FULL1", ""))
    with pytest.raises(StudyDefinitionError, match="study_full"):
        load_study_file(path)
