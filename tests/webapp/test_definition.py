"""The typed study definition: what validation returns, what is stored, and how it is read."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.webapp.conftest import ROOT
from webapp.definition import SCHEMA_VERSION, DefinitionVersionError, StudyDefinition
from webapp.studydef import load_study_file

STUDIES = sorted((ROOT / "stimuli" / "studies").glob("*.yaml"))


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_every_shipped_study_reads_back_as_it_was_validated(path: Path):
    definition = load_study_file(path)
    stored = json.loads(json.dumps(definition.to_json()))  # what the JSON column gives back
    assert stored["schema_version"] == SCHEMA_VERSION
    assert StudyDefinition.from_json(stored) == definition
    assert StudyDefinition.from_json(stored).to_json() == stored


def test_a_definition_and_its_parts_are_frozen():
    definition = load_study_file(STUDIES[0])
    for obj, field in [
        (definition, "slug"),
        (definition.recruitment, "platforms"),
        (definition.recruitment.completion_codes, "completed"),
        (definition.payment.bonus, "amount"),
        (definition.authenticity, "canary"),
        (definition.tasks[0], "id"),
    ]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, None)
    with pytest.raises(TypeError):
        definition.tasks[0].params["heading"] = "changed"  # a block's body is read-only


def test_every_key_is_written_with_its_default_when_the_file_leaves_it_out():
    stored = load_study_file(ROOT / "stimuli" / "studies" / "product-choice-demo.yaml").to_json()
    assert stored["language"] == "en" and stored["recruiter"] is None
    assert stored["authenticity"] == {"canary": False, "reading_wpm": 1000.0}
    assert stored["recruitment"]["completion_codes"]["study_full"] is None
    assert stored["recruitment"]["verified_entry"] is False
    assert stored["payment"]["bonus"]["max"] is None


def test_a_definition_stored_in_another_schema_version_is_refused_with_the_remedy():
    stored = load_study_file(STUDIES[0]).to_json()
    for version in (None, 1, SCHEMA_VERSION + 1):
        other = {k: v for k, v in stored.items() if k != "schema_version"}
        if version is not None:
            other["schema_version"] = version
        with pytest.raises(DefinitionVersionError, match=r"run `flask db upgrade`") as info:
            StudyDefinition.from_json(other)
        assert f"schema version {version or 1}" in str(info.value)
