"""Researcher-supplied strings: checked at validation for length (against the model column
they land in) and characters (NUL, control characters, unpaired surrogates), with the usual
located error. Before, a title over ``Study.title``'s length or a qualification name over
``QualificationResult.qualification``'s was a 500 on PostgreSQL, and NUL anywhere in a
definition reached the database or the participant's page."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from webapp.studydef import load_study_file
from webapp.validation import ID_MAX, LINE_MAX, SLUG_RE, StudyDefinitionError, column_length

ROOT = Path(__file__).resolve().parents[3]
STIMULI = ROOT / "stimuli"


@pytest.fixture
def stimuli_copy(tmp_path: Path) -> Path:
    """A private copy of ``stimuli/`` (studies and the files they reference)."""
    shutil.copytree(STIMULI, tmp_path / "stimuli")
    return tmp_path / "stimuli"


def _block(raw: dict[str, Any], type_name: str) -> dict[str, Any]:
    return next(b for b in raw["tasks"] if b["type"] == type_name)


def _index(raw: dict[str, Any], type_name: str) -> int:
    return next(i for i, b in enumerate(raw["tasks"]) if b["type"] == type_name)


def _mutate_yaml(root: Path, study: str, mutate: Callable[[dict[str, Any]], None]) -> Path:
    path = root / "studies" / f"{study}.yaml"
    raw = yaml.safe_load(path.read_text())
    mutate(raw)
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    return path


def _refused(path: Path) -> StudyDefinitionError:
    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(path)
    return info.value


def _columns():
    from webapp import models

    return models


# -- the limits come from the model ------------------------------------------------------------


def test_ids_fit_every_column_that_stores_them():
    m = _columns()
    for column in (
        m.ChoiceResponse.block_id,
        m.ChoiceResponse.pair_id,
        m.QuizAttempt.block_id,
        m.TaskResponse.block_id,
        m.AnnotationItem.block_id,
        m.AnnotationItem.item_id,
    ):
        assert column_length(column) >= ID_MAX, column
    # The longest slug the pattern allows fits Study.slug.
    assert SLUG_RE.match("a" * column_length(m.Study.slug))
    assert not SLUG_RE.match("a" * (column_length(m.Study.slug) + 1))
    # The longest page name (block id / trial / kind) fits PageVisit.page.
    from webapp.definition import TaskBlock
    from webapp.tasks import get_task_type

    block = TaskBlock.of("b" * ID_MAX, "product_choice", {})
    longest = get_task_type("product_choice").page_name(block, 2 * 10**6 + 1)
    assert len(longest) <= column_length(m.PageVisit.page)


# -- lengths against columns -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("study", "mutate", "path", "column"),
    [
        (
            "product-choice-demo",
            lambda r, n: r.update(title="T" * n),
            "title",
            "Study.title",
        ),
        (
            "sentiment-demo",
            lambda r, n: _block(r, "sentiment_qualification").update(qualification="q" * n),
            "tasks[2].qualification",
            "QualificationResult.qualification",
        ),
        (
            "product-choice-demo",
            lambda r, n: r["recruitment"].update(exclude_ids=["ok", "W" * n]),
            "recruitment.exclude_ids[1]",
            "PlatformIdentity.external_id",
        ),
    ],
)
def test_a_string_one_longer_than_its_column_is_refused_and_one_that_fits_loads(
    stimuli_copy, study, mutate, path, column
):
    table, attr = column.split(".")
    limit = column_length(getattr(getattr(_columns(), table), attr))
    ok = _mutate_yaml(stimuli_copy, study, lambda r: mutate(r, limit))
    load_study_file(ok)
    err = _refused(_mutate_yaml(stimuli_copy, study, lambda r: mutate(r, limit + 1)))
    assert err.path == path
    assert f"at most {limit:,}" in err.reason
    assert err.line is not None


def test_one_line_labels_and_texts_have_a_bound(stimuli_copy):
    err = _refused(
        _mutate_yaml(
            stimuli_copy, "product-choice-demo", lambda r: r["tasks"][0].update(button="B" * 501)
        )
    )
    assert err.path == "tasks[0].button" and f"at most {LINE_MAX}" in err.reason
    err = _refused(
        _mutate_yaml(
            stimuli_copy, "product-choice-demo", lambda r: r["tasks"][0].update(text="x" * 10**6)
        )
    )
    assert err.path == "tasks[0].text" and "1,000,000 characters" in err.reason


# -- characters, key by key --------------------------------------------------------------------

_PC = "product-choice-demo"
_YAML_CASES = [
    (_PC, lambda r: r.update(title="A\x00B"), "title", "NUL"),
    (_PC, lambda r: r.update(title="two\nlines"), "title", "line break"),
    (_PC, lambda r: r.update(description="bell\x07"), "description", "U+0007"),
    (
        _PC,
        lambda r: r["recruitment"]["completion_codes"].update(completed="C7F\x003"),
        "recruitment.completion_codes.completed",
        "NUL",
    ),
    (
        _PC,
        lambda r: r["recruitment"]["completion_codes"].update(completed="A&B=1#x"),
        "recruitment.completion_codes.completed",
        "completion code",
    ),
    (
        _PC,
        lambda r: r["recruitment"].update(exclude_ids=["a\x00b"]),
        "recruitment.exclude_ids[0]",
        "NUL",
    ),
    (_PC, lambda r: r["tasks"][0].update(heading="Con\x1bsent"), "tasks[0].heading", "U+001B"),
    (_PC, lambda r: r["tasks"][0].update(text="I agree\x00"), "tasks[0].text", "NUL"),
    (
        _PC,
        lambda r: r["tasks"][0].update(decline_button="No\tway"),
        "tasks[0].decline_button",
        "tab",
    ),
    (
        _PC,
        lambda r: _block(r, "quiz")["questions"][0].update(text="Q\x00?"),
        "tasks[2].questions[0].text",
        "NUL",
    ),
    (
        _PC,
        lambda r: _block(r, "quiz")["questions"][0]["options"].append("opt\x00"),
        "tasks[2].questions[0].options[",
        "NUL",
    ),
    (
        _PC,
        lambda r: _block(r, "demographics")["questions"][1].update(options=["a", "b\x9f"]),
        "tasks[5].questions[1].options[1]",
        "U+009F",
    ),
    (
        _PC,
        lambda r: _block(r, "product_choice").update(prompt="Buy\x00?"),
        "tasks[3].prompt",
        "NUL",
    ),
    (
        _PC,
        lambda r: _block(r, "product_choice").update(labels={"original": "Rev\x00iew"}),
        "tasks[3].labels.original",
        "NUL",
    ),
    (
        _PC,
        lambda r: _block(r, "product_choice")["wtp"].update(question="{price}\x00"),
        "tasks[3].wtp.question",
        "NUL",
    ),
    (
        "sentiment-demo",
        lambda r: _block(r, "sentiment_qualification").update(qualification="q\x00v1"),
        "tasks[2].qualification",
        "NUL",
    ),
    (
        "sentiment-demo",
        lambda r: _block(r, "sentiment_annotation").update(prompt="Label\x00"),
        "tasks[3].prompt",
        "NUL",
    ),
    (
        "rating-demo",
        lambda r: _block(r, "summary_rating").update(
            dimensions=[{"id": "stance", "name": "St\x00ance"}]
        ),
        "tasks[2].dimensions[0].name",
        "NUL",
    ),
    (
        "rating-demo",
        lambda r: _block(r, "summary_rating").update(
            scale={"min": 1, "max": 2, "labels": ["a", "\x00"]}
        ),
        "tasks[2].scale.labels[1]",
        "NUL",
    ),
    (
        "preference-demo",
        lambda r: _block(r, "pairwise_preference").update(question="Which\x00?"),
        "tasks[2].question",
        "NUL",
    ),
]


@pytest.mark.parametrize(("study", "mutate", "path", "reason"), _YAML_CASES)
def test_a_forbidden_character_in_any_researcher_string_is_refused_where_it_is(
    stimuli_copy, study, mutate, path, reason
):
    err = _refused(_mutate_yaml(stimuli_copy, study, mutate))
    assert err.file == f"{study}.yaml"
    assert err.path.startswith(path), (err.path, path)
    assert reason in err.reason, err.reason
    assert err.line is not None


def test_an_unpaired_surrogate_escape_in_yaml_is_refused_at_its_line(stimuli_copy):
    # A YAML text cannot hold one: its parser refuses the escape "\ud800" at its line.
    path = _mutate_yaml(stimuli_copy, _PC, lambda r: r.update(title="half \ud800 a pair"))
    err = _refused(path)
    title_line = next(
        i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("title:")
    )
    assert err.file == f"{_PC}.yaml" and err.line == title_line
    assert "invalid Unicode character escape code" in err.reason, err.reason


def test_the_product_pairs_file_is_checked_too(stimuli_copy):
    pairs = stimuli_copy / "studies" / "product_pairs" / "demo.yaml"
    raw = yaml.safe_load(pairs.read_text())
    raw["pairs"][1]["target"]["manufacturer"] = "Acme\x00"
    raw["pairs"][2]["control"]["review"] = "Great\x00"
    pairs.write_text(yaml.safe_dump(raw, allow_unicode=True))
    err = _refused(stimuli_copy / "studies" / "product-choice-demo.yaml")
    assert err.file == "product_pairs/demo.yaml" and err.path == "pairs[1].target.manufacturer"
    assert "NUL" in err.reason and err.line is not None


# -- characters in stimulus files --------------------------------------------------------------


def _edit_csv(path: Path, row: int, column: str, value: str) -> None:
    import csv
    import io

    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    rows[row - 1][rows[0].index(column)] = value
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [("text", "bad \x00 value", "NUL"), ("frame_text", "bad \x1b value", "U+001B")],
)
def test_a_forbidden_character_in_an_item_csv_is_refused_at_its_row(
    stimuli_copy, column, value, reason
):
    items = stimuli_copy / "studies" / "sentiment" / "demo_items.csv"
    _edit_csv(items, 3, column, value)
    err = _refused(stimuli_copy / "studies" / "sentiment-demo.yaml")
    assert err.file == "sentiment/demo_items.csv" and err.path == f"row 3.{column}"
    assert reason in err.reason and err.line == 3


def test_a_forbidden_character_in_an_item_csv_header_is_refused(stimuli_copy):
    items = stimuli_copy / "studies" / "sentiment" / "demo_items.csv"
    items.write_text(items.read_text().replace("frame_text", "frame\x01text", 1))
    err = _refused(stimuli_copy / "studies" / "sentiment-demo.yaml")
    assert err.file == "sentiment/demo_items.csv" and "U+0001" in err.reason


@pytest.mark.parametrize(
    ("fname", "study", "edit", "path", "reason"),
    [
        ("rating-demo.jsonl", "rating-demo", lambda r: r.update(topic="t\x00"), "topic", "NUL"),
        (
            "rating-demo.jsonl",
            "rating-demo",
            lambda r: r["summaries"][0].update(text="s\ud800"),
            "summaries[0].text",
            "surrogate",
        ),
        (
            "rating-demo.jsonl",
            "rating-demo",
            lambda r: r["passages"][0].update(label="P\x00"),
            "passages[0].label",
            "NUL",
        ),
        (
            "preference-demo.jsonl",
            "preference-demo",
            lambda r: r.update(source="src\x00"),
            "source",
            "NUL",
        ),
        (
            "preference-demo.jsonl",
            "preference-demo",
            lambda r: r["a"].update(system="sys\x00"),
            "a.system",
            "NUL",
        ),
    ],
)
def test_a_forbidden_character_in_a_jsonl_record_is_refused_at_its_line(
    stimuli_copy, fname, study, edit, path, reason
):
    jsonl = stimuli_copy / "studies" / "evaluation" / fname
    lines = jsonl.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1])
    edit(record)
    lines[1] = json.dumps(record)  # \u0000 and \ud800 escapes: valid JSON, not valid text
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = _refused(stimuli_copy / "studies" / f"{study}.yaml")
    assert err.file == f"evaluation/{fname}" and err.path == f"line 2.{path}"
    assert reason in err.reason and err.line == 2


# -- the safety net: whatever a task type returns ----------------------------------------------


def test_a_task_type_that_passes_a_string_through_unchecked_is_caught_before_storage(tmp_path):
    from webapp.tasks import register, unregister
    from webapp.tasks.base import TaskType

    class Careless(TaskType):
        name = "careless_test_type"
        template = "tasks/text.html"

        def validate(self, body, where):
            return {"notes": [str(n) for n in body.get("notes", [])]}

    register(Careless())
    try:
        raw = yaml.safe_load((STIMULI / "studies" / "product-choice-demo.yaml").read_text())
        raw["tasks"][3] = {"type": "careless_test_type", "notes": ["fine", "not\x00fine"]}
        raw["payment"]["bonus"]["rule"] = "none"
        raw.pop("analysis")  # its choice test needs the product-choice block replaced above
        path = tmp_path / "careless.yaml"
        path.write_text(yaml.safe_dump(raw))
        err = _refused(path)
        assert err.path == "tasks[3].notes[1]" and "NUL" in err.reason
        assert err.line is not None
    finally:
        unregister("careless_test_type")


# -- on PostgreSQL, where these were 500s ------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("study", "mutate"),
    [
        ("product-choice-demo", lambda r: r.update(title="T" * 201)),
        (
            "sentiment-demo",
            lambda r: _block(r, "sentiment_qualification").update(qualification="q" * 65),
        ),
        ("product-choice-demo", lambda r: r["tasks"][0].update(text="NUL \x00 in consent")),
    ],
)
def test_on_postgres_an_oversized_or_nul_string_is_a_definition_error_not_a_500(
    pg_app, stimuli_copy, study, mutate
):
    from webapp.services.studies import load_study

    path = _mutate_yaml(stimuli_copy, study, mutate)
    with pg_app.app_context(), pytest.raises(StudyDefinitionError):
        load_study(path)


# -- console forms: their length limits agree with the columns ---------------------------------


@pytest.mark.parametrize(
    ("form", "field", "column"),
    [
        ("LoginForm", "username", "Researcher.username"),
        # a pseudonym or a recruiter ID (matched through the pseudonym): the identity column
        ("ParticipantActionForm", "participant", "PlatformIdentity.external_id"),
        ("ParticipantActionForm", "reason", "Participant.exclusion_reason"),
    ],
)
def test_console_form_limits_fit_the_columns_they_are_stored_in_or_compared_with(
    form, field, column
):
    from wtforms.validators import Length

    from webapp.researcher import forms

    unbound = getattr(getattr(forms, form), field)
    limits = [v.max for v in unbound.kwargs.get("validators", []) if isinstance(v, Length)]
    table, attr = column.split(".")
    assert limits and max(limits) <= column_length(getattr(getattr(_columns(), table), attr))
