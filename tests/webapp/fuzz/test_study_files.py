"""Study YAML and stimulus files fuzzed: every bad file is refused with a
:class:`StudyDefinitionError` whose message names the file, the place in it and the reason;
nothing else escapes (no KeyError, TypeError, UnicodeDecodeError, ...)."""

from __future__ import annotations

import copy
import math
import shutil
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webapp.studydef import StudyDefinitionError, load_study_file

from ..conftest import DEMO, ROOT

PAIRS = ROOT / "stimuli" / "product_pairs" / "demo.yaml"
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, -1, 0, -0.0, 1e308, "", " ", "x" * 10_000, "é😀\u202e", "1234"]),
    st.text(max_size=30),
)
NODES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: Any, path: tuple, op: str, value: Any) -> Any:
    if not path:
        return value
    doc = copy.deepcopy(doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "add" and isinstance(parent, dict):
        parent[f"extra_{last}"] = value
    elif op == "add" and isinstance(parent, list):
        parent.append(value)
    else:
        parent[last] = value
    return doc


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    studies, pairs = tmp_path / "studies", tmp_path / "product_pairs"
    studies.mkdir(exist_ok=True)
    pairs.mkdir(exist_ok=True)
    shutil.copy(PAIRS, pairs / "demo.yaml")
    return studies / "fuzzed.yaml", pairs / "demo.yaml"


def _load_or_refuse(path: Path, culprit: Path) -> None:
    try:
        load_study_file(path)
    except StudyDefinitionError as exc:
        message = str(exc)
        assert message.startswith(f"{culprit.name}: "), message
        assert exc.reason and len(message) < 2_000, message
        assert "Traceback" not in message


def _edit(doc: Any, data: Any) -> Any:
    paths = _paths(doc)
    path = paths[data.draw(st.integers(0, len(paths) - 1))]
    op = data.draw(st.sampled_from(["replace", "replace", "delete", "add"]))
    return _mutate(doc, path, op, data.draw(NODES))


@SETTINGS
@given(data=st.data())
def test_mutated_study_definitions_load_or_are_refused_with_a_located_reason(tmp_path, data):
    study, _ = _setup(tmp_path)
    doc = yaml.safe_load(DEMO.read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _edit(doc, data)
    study.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False))
    _load_or_refuse(study, study)


@SETTINGS
@given(data=st.data())
def test_mutated_stimulus_files_are_refused_naming_the_stimulus_file(tmp_path, data):
    study, pairs = _setup(tmp_path)
    shutil.copy(DEMO, study)
    doc = _edit(yaml.safe_load(PAIRS.read_text()), data)
    pairs.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False))
    try:
        load_study_file(study)
    except StudyDefinitionError as exc:
        assert str(exc).startswith(("demo.yaml: ", "fuzzed.yaml: ")), str(exc)


@SETTINGS
@given(raw=st.one_of(st.binary(max_size=400), st.text(max_size=400).map(str.encode)))
def test_arbitrary_bytes_are_refused_naming_the_file(tmp_path, raw):
    study, _ = _setup(tmp_path)
    study.write_bytes(raw)
    _load_or_refuse(study, study)


def test_syntax_errors_name_the_line(tmp_path):
    study, _ = _setup(tmp_path)
    text = DEMO.read_text().replace("title: ", "title: [unclosed", 1)
    study.write_text(text)
    try:
        load_study_file(study)
    except StudyDefinitionError as exc:
        line = next(i for i, t in enumerate(text.splitlines(), 1) if "[unclosed" in t)
        assert f"line {line + 1}" in str(exc) or f"line {line}" in str(exc), str(exc)
    else:
        raise AssertionError("an unclosed bracket was accepted")


def test_a_non_utf8_file_is_refused_naming_the_file(tmp_path):
    study, _ = _setup(tmp_path)
    study.write_bytes(DEMO.read_bytes().replace(b"Choosing", b"Choos\xffing"))
    _load_or_refuse(study, study)


def test_validation_errors_name_the_line_in_the_study_and_in_the_stimulus_file(tmp_path):
    study, pairs = _setup(tmp_path)
    text = DEMO.read_text()
    study.write_text(text.replace('correct: "10"', 'correct: "11"', 1))
    line = next(i for i, t in enumerate(text.splitlines(), 1) if 'correct: "10"' in t)
    try:
        load_study_file(study)
    except StudyDefinitionError as exc:
        assert exc.line == line and str(exc).endswith(f"(line {line})"), str(exc)
    else:
        raise AssertionError("a wrong quiz answer was accepted")
    study.write_text(text)
    pairs_text = PAIRS.read_text()
    pairs.write_text(pairs_text.replace("price_usd: ", "price_usd: -", 1))
    line = next(i for i, t in enumerate(pairs_text.splitlines(), 1) if "price_usd: " in t)
    try:
        load_study_file(study)
    except StudyDefinitionError as exc:
        assert exc.file == "demo.yaml" and exc.line == line, str(exc)
    else:
        raise AssertionError("a negative price was accepted")


SENTIMENT = ROOT / "stimuli" / "studies" / "sentiment-demo.yaml"
CSV_FILES = ("demo_items.csv", "demo_gold.csv", "qualification.csv")


@SETTINGS
@given(
    name=st.sampled_from(CSV_FILES),
    row=st.integers(0, 80),
    column=st.integers(0, 7),
    value=st.one_of(SCALARS.map(str), st.just(""), st.just('"unclosed')),
    raw=st.one_of(st.none(), st.binary(max_size=200)),
)
def test_mutated_annotation_item_files_are_refused_naming_the_csv(
    tmp_path, name, row, column, value, raw
):
    import csv
    import io

    studies = tmp_path / "studies"
    shutil.copytree(ROOT / "stimuli" / "sentiment", tmp_path / "sentiment", dirs_exist_ok=True)
    studies.mkdir(exist_ok=True)
    shutil.copy(SENTIMENT, studies / SENTIMENT.name)
    target = tmp_path / "sentiment" / name
    if raw is not None:
        target.write_bytes(raw)
    else:
        rows = list(csv.reader(io.StringIO(target.read_text(encoding="utf-8"))))
        r = rows[row % len(rows)]
        if column < len(r):
            r[column] = value
        else:
            r.append(value)
        out = io.StringIO()
        csv.writer(out).writerows(rows)
        target.write_text(out.getvalue(), encoding="utf-8")
    try:
        load_study_file(studies / SENTIMENT.name)
    except StudyDefinitionError as exc:
        assert str(exc).startswith((f"{name}: ", f"{SENTIMENT.name}: ")), str(exc)
        assert exc.reason
