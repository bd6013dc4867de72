"""Study YAML and stimulus files fuzzed: every bad file is refused with a
:class:`StudyDefinitionError` whose message names the file, the place in it and the reason;
nothing else escapes (no KeyError, TypeError, UnicodeDecodeError, ...)."""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webapp.studydef import load_study_file
from webapp.validation import StudyDefinitionError, StudyDefinitionErrors

from ..conftest import DEMO, ROOT

PAIRS = ROOT / "stimuli" / "studies" / "product_pairs" / "demo.yaml"
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
    studies, pairs = tmp_path / "studies", tmp_path / "studies" / "product_pairs"
    pairs.mkdir(parents=True, exist_ok=True)
    shutil.copy(PAIRS, pairs / "demo.yaml")
    return studies / "fuzzed.yaml", pairs / "demo.yaml"


def _each(exc: StudyDefinitionError) -> list[StudyDefinitionError]:
    """The errors ``exc`` reports: itself, or each of several found together."""
    return exc.errors if isinstance(exc, StudyDefinitionErrors) else [exc]


def _load_or_refuse(path: Path, culprit: Path) -> None:
    try:
        load_study_file(path)
    except StudyDefinitionError as exc:
        for one in _each(exc):
            message = str(one)
            assert message.startswith(f"{culprit.name}: "), message
            assert one.reason and len(message) < 2_000, message
            assert "Traceback" not in message


def _edit(doc: Any, data: Any) -> Any:
    paths = _paths(doc)
    path = paths[data.draw(st.integers(0, len(paths) - 1))]
    op = data.draw(st.sampled_from(["replace", "replace", "delete", "add"]))
    return _mutate(doc, path, op, data.draw(NODES))


@pytest.mark.slow
@SETTINGS
@given(data=st.data())
def test_mutated_study_definitions_load_or_are_refused_with_a_located_reason(tmp_path, data):
    study, _ = _setup(tmp_path)
    doc = yaml.safe_load(DEMO.read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _edit(doc, data)
    study.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False))
    _load_or_refuse(study, study)


@pytest.mark.slow
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
        for one in _each(exc):
            assert str(one).startswith(("product_pairs/demo.yaml: ", "fuzzed.yaml: ")), str(one)


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
    pairs.write_text(pairs_text.replace("price: ", "price: -", 1))
    line = next(i for i, t in enumerate(pairs_text.splitlines(), 1) if "price: " in t)
    try:
        load_study_file(study)
    except StudyDefinitionError as exc:
        assert exc.file == "product_pairs/demo.yaml" and exc.line == line, str(exc)
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
    shutil.copytree(SENTIMENT.parent / "sentiment", studies / "sentiment", dirs_exist_ok=True)
    shutil.copy(SENTIMENT, studies / SENTIMENT.name)
    target = studies / "sentiment" / name
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
        for one in _each(exc):
            assert str(one).startswith((f"sentiment/{name}: ", f"{SENTIMENT.name}: ")), str(one)
            assert one.reason


# -- Every refusal carries a line --------------------------------------------------------------
# Each demo study and the stimulus files it references are mutated (structure: drop, rename or
# retype a key at any depth, top level included; text: truncate, insert a junk line; CSV: a
# cell spanning several lines). The study either loads or is refused naming a file, a line
# that lies within that file and a reason; no other exception escapes.

STIMULI = ROOT / "stimuli" / "studies"
STUDIES = sorted(STIMULI.glob("*.yaml"))
REFERENCED = {  # the stimulus files each demo study reads (its bundle: relative to studies/)
    "product-choice-demo.yaml": ["product_pairs/demo.yaml"],
    "product-choice-demo-de.yaml": ["product_pairs/demo-de.yaml"],
    "product-choice-formats-demo.yaml": ["product_pairs/formats-demo.yaml"],
    "sentiment-demo.yaml": [
        "sentiment/qualification.csv",
        "sentiment/demo_items.csv",
        "sentiment/demo_gold.csv",
    ],
    "rating-demo.yaml": ["evaluation/rating-demo.jsonl"],
    "preference-demo.yaml": ["evaluation/preference-demo.jsonl"],
}
JUNK_LINES = st.one_of(
    st.sampled_from(
        ["", ":", "- [", "{", '"', "key: value", "  - type: consent", "\t", 'a,b,"c', "\x00", "é"]
    ),
    st.text(max_size=40).map(lambda t: t.replace("\n", " ").replace("\r", " ")),
)
MULTILINE = st.sampled_from(["two\nlines", "three\r\nlines\nhere", "\n", "x\n\n\ny", 'a,"b"\nc'])
FAST = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def test_every_demo_study_references_the_files_the_fuzzer_mutates():
    assert {p.name for p in STUDIES} == set(REFERENCED)
    for rel in (r for refs in REFERENCED.values() for r in refs):
        assert (STIMULI / rel).is_file(), rel


def _lines(text: str) -> int:
    return max(1, len(text.splitlines()))


def _assert_located(exc: StudyDefinitionError, files: dict[str, str]) -> None:
    """The error names one of ``files`` (name → text), a line within it and a reason."""
    message = str(exc)
    assert exc.file in files, message
    assert message.startswith(f"{exc.file}: "), message
    assert exc.reason.strip(), message
    assert exc.line is not None and message.endswith(f"(line {exc.line})"), message
    assert 1 <= exc.line <= _lines(files[exc.file]), (message, _lines(files[exc.file]))
    assert "Traceback" not in message and len(message) < 2_000, message


def _csv_text(rows: list[list[str]]) -> tuple[str, list[int]]:
    """Write rows as CSV; return the text and the line on which each row starts."""
    out, starts, line = io.StringIO(), [], 1
    for row in rows:
        one = io.StringIO()
        csv.writer(one).writerow(row)
        starts.append(line)
        line += len(io.StringIO(one.getvalue(), newline="").readlines())
        out.write(one.getvalue())
    return out.getvalue(), starts


def _mutate_text(text: str, data: Any) -> str:
    lines = text.splitlines(keepends=True)
    if data.draw(st.booleans()):  # truncate anywhere
        return text[: data.draw(st.integers(0, len(text)))]
    at = data.draw(st.integers(0, len(lines)))
    lines.insert(at, data.draw(JUNK_LINES) + "\n")
    return "".join(lines)


def _mutate_structure(doc: Any, data: Any) -> Any:
    paths = _paths(doc)
    path = paths[data.draw(st.integers(0, len(paths) - 1))]
    op = data.draw(st.sampled_from(["delete", "rename", "retype", "add"]))
    if op == "rename" and path:
        doc = copy.deepcopy(doc)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict):
            parent[data.draw(st.sampled_from(["", "x", "Slug", "tasks ", "1", "id_"]))] = (
                parent.pop(path[-1])
            )
            return doc
    return _mutate(doc, path, {"retype": "replace"}.get(op, op), data.draw(NODES))


def _mutate_file(target: Path, data: Any) -> list[int] | None:
    """Mutate one file in place; for a CSV edited cell-wise, return its rows' start lines."""
    text = target.read_text(encoding="utf-8")
    kind = data.draw(st.sampled_from(["structure", "structure", "text"]))
    if kind == "text":
        target.write_text(_mutate_text(text, data), encoding="utf-8")
        return None
    if target.suffix == ".csv":
        rows = list(csv.reader(io.StringIO(text, newline="")))
        for _ in range(data.draw(st.integers(1, 3))):
            r = rows[data.draw(st.integers(0, len(rows) - 1))]
            op = data.draw(st.sampled_from(["multiline", "multiline", "value", "drop"]))
            i = data.draw(st.integers(0, len(r) - 1))
            if op == "drop" and len(r) > 1:
                del r[i]
            else:
                r[i] = data.draw(MULTILINE if op == "multiline" else SCALARS.map(str))
        out, starts = _csv_text(rows)
        target.write_text(out, encoding="utf-8")
        return starts
    if target.suffix == ".jsonl":
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        i = data.draw(st.integers(0, len(records) - 1))
        records[i] = _mutate_structure(records[i], data)
        target.write_text(
            "".join(json.dumps(r, default=str) + "\n" for r in records), encoding="utf-8"
        )
        return None
    doc = _mutate_structure(yaml.safe_load(text), data)
    target.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return None


@pytest.fixture
def stimuli_copy(tmp_path: Path) -> Path:
    """A private copy of ``stimuli/studies/`` (studies and the files they reference)."""
    shutil.copytree(STIMULI, tmp_path / "studies")
    return tmp_path / "studies"


@FAST
@given(data=st.data())
def test_mutated_studies_and_stimulus_files_are_refused_with_file_line_and_reason(
    stimuli_copy, data
):
    study = data.draw(st.sampled_from([p.name for p in STUDIES]))
    rel = data.draw(st.sampled_from([study, *REFERENCED[study]]))
    target = stimuli_copy / rel
    original = target.read_bytes()
    try:
        starts = _mutate_file(target, data)
        files = {
            p.relative_to(stimuli_copy).as_posix(): p.read_bytes().decode("utf-8", errors="replace")
            for p in stimuli_copy.rglob("*")
            if p.is_file()
        }
        try:
            load_study_file(stimuli_copy / study)
        except StudyDefinitionError as found:
            for exc in _each(found):
                _assert_located(exc, files)
                row = re.match(r"row (\d+)", exc.path)
                if starts is not None and exc.file == rel and row:
                    # header = row 1; the line is where the row starts, not where it ends
                    assert exc.line == starts[int(row.group(1)) - 1], str(exc)
    finally:
        target.write_bytes(original)


# -- Examples: one per gap fixed -----------------------------------------------------------------


def _refusal(path: Path) -> StudyDefinitionError:
    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(path)
    return info.value


def _line_of(text: str, needle: str) -> int:
    return next(i for i, t in enumerate(text.splitlines(), 1) if needle in t)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "the file is empty"),
        ("# only a comment\n", "the file is empty"),
        ("- a list\n- not a mapping\n", "expected a mapping, got list"),
        ("just a sentence\n", "expected a mapping, got str"),
    ],
)
def test_an_empty_or_non_mapping_study_file_is_refused_at_line_1(tmp_path, text, reason):
    study, _ = _setup(tmp_path)
    study.write_text(text)
    exc = _refusal(study)
    assert reason in exc.reason and exc.line == 1 and str(exc).endswith("(line 1)"), str(exc)


@pytest.mark.parametrize("key", ["slug", "title", "tasks"])
def test_a_missing_top_level_key_is_refused_at_the_line_where_the_mapping_starts(tmp_path, key):
    study, _ = _setup(tmp_path)
    text = "\n".join(t for t in DEMO.read_text().splitlines() if not t.startswith(f"{key}:"))
    if key == "tasks":  # drop the list under it too
        text = text.split("\ntasks:")[0].split("\n  - type:")[0] + "\n"
        text = "\n".join(t for t in text.splitlines() if not t.startswith("  - "))
    study.write_text(text + "\n")
    first_key = next(
        i for i, t in enumerate(text.splitlines(), 1) if t.strip() and not t.startswith("#")
    )
    exc = _refusal(study)
    assert exc.path == key and exc.line == first_key, str(exc)


def test_an_unknown_top_level_key_is_refused_at_its_own_line(tmp_path):
    study, _ = _setup(tmp_path)
    text = DEMO.read_text().replace("\nrecruitment:", "\ncolour: red\nrecruitment:", 1)
    study.write_text(text)
    exc = _refusal(study)
    assert "unknown key(s) ['colour']" in exc.reason and exc.path == "", str(exc)
    assert exc.line == _line_of(text, "colour: red"), str(exc)


def test_unknown_keys_that_are_not_strings_are_refused_not_a_type_error(tmp_path):
    study, _ = _setup(tmp_path)
    study.write_text(DEMO.read_text() + "1: one\nnull: nothing\n")
    exc = _refusal(study)
    assert "unknown key(s)" in exc.reason and exc.line is not None, str(exc)


def test_a_missing_nested_key_is_refused_at_the_line_where_its_mapping_starts(tmp_path):
    study, _ = _setup(tmp_path)
    text = DEMO.read_text().replace("    completed: C7F3D2A1\n", "", 1)
    study.write_text(text)
    exc = _refusal(study)
    assert exc.path == "recruitment.completion_codes.completed", str(exc)
    assert exc.line == _line_of(text, "screened_out: SCRN0QZ1"), str(exc)


@pytest.mark.parametrize(
    ("value", "reason"),
    [("2001-02-30", "day is out of range"), ("1" * 5_000, "digits")],
)
def test_a_yaml_value_python_cannot_convert_is_refused_at_its_line(tmp_path, value, reason):
    study, _ = _setup(tmp_path)
    text = DEMO.read_text().replace("estimated_minutes: 12", f"estimated_minutes: {value}", 1)
    study.write_text(text)
    exc = _refusal(study)
    assert reason in exc.reason and exc.line == _line_of(text, "estimated_minutes"), str(exc)


@pytest.mark.parametrize(
    ("value", "reason"),
    [('""', "expected the path of a pairs file"), ('"."', "is a folder"), ('"a\\0b"', "NUL")],
)
def test_a_pairs_path_that_is_no_file_is_refused_at_the_study_line(tmp_path, value, reason):
    study, _ = _setup(tmp_path)
    text = DEMO.read_text().replace("pairs: product_pairs/demo.yaml", f"pairs: {value}", 1)
    study.write_text(text)
    exc = _refusal(study)
    assert exc.file == study.name and reason in exc.reason, str(exc)
    assert exc.line == _line_of(text, "pairs: "), str(exc)


def test_a_syntax_error_in_the_pairs_file_names_the_pairs_file_and_its_line(tmp_path):
    study, pairs = _setup(tmp_path)
    shutil.copy(DEMO, study)
    text = PAIRS.read_text()
    pairs.write_text(text.replace("price: ", "price: [", 1))
    exc = _refusal(study)
    assert exc.file == "product_pairs/demo.yaml" and "invalid YAML" in exc.reason, str(exc)
    assert _line_of(text, "price: ") <= exc.line <= _line_of(text, "price: ") + 2


def test_a_pairs_file_without_pairs_is_refused_at_a_line(tmp_path):
    study, pairs = _setup(tmp_path)
    shutil.copy(DEMO, study)
    pairs.write_text("# no pairs yet\nversion: 1\n")
    exc = _refusal(study)
    assert exc.file == "product_pairs/demo.yaml" and exc.path == "pairs" and exc.line == 2, str(exc)


def _sentiment(stimuli_copy: Path, items: str | bytes) -> StudyDefinitionError:
    target = stimuli_copy / "sentiment" / "demo_items.csv"
    if isinstance(items, bytes):
        target.write_bytes(items)
    else:
        target.write_text(items, encoding="utf-8")
    return _refusal(stimuli_copy / "sentiment-demo.yaml")


def test_a_csv_row_after_multi_line_cells_is_refused_at_its_physical_line(stimuli_copy):
    rows = [
        ["item_id", "text", "base_sentiment"],
        ["a1", "one\nline\nafter another", "positive"],
        ["a2", "two\r\nlines", "negative"],
        ["a3", "fine", "maybe"],
    ]
    text, starts = _csv_text(rows)
    assert starts == [1, 2, 5, 7]
    exc = _sentiment(stimuli_copy, text)
    # The fourth record (spreadsheet row 4) starts on line 7 of the file.
    assert exc.file == "sentiment/demo_items.csv" and exc.path == "row 4.base_sentiment", str(exc)
    assert exc.line == 7 and str(exc).endswith("(line 7)"), str(exc)


def test_a_multi_line_cell_that_is_itself_wrong_is_refused_at_the_line_it_starts(stimuli_copy):
    text = 'item_id,text,base_sentiment\n\na1,fine,positive\n"bad\nid",x,positive\n'
    exc = _sentiment(stimuli_copy, text)
    assert exc.path == "row 3.item_id" and exc.line == 4, str(exc)  # the blank line counts


def test_a_row_with_more_values_than_the_header_is_refused_at_its_line(stimuli_copy):
    # Found by the outside walkthrough: the values past the header were dropped unseen (an
    # unquoted comma at the end of a text, a stray column); empty ones (Excel's trailing
    # commas) still are.
    text = "item_id,text,base_sentiment\na1,fine,positive,,\na2,good,positive,but not\n"
    exc = _sentiment(stimuli_copy, text)
    assert exc.file == "sentiment/demo_items.csv" and exc.path == "row 3", str(exc)
    assert exc.line == 3 and "4 values but the header names 3 columns" in exc.reason, str(exc)
    assert "double quotes" in exc.reason


def test_an_unclosed_quote_is_refused_at_the_line_it_opens(stimuli_copy):
    # Found by the outside walkthrough: the rest of the file became one cell and the error was
    # about the next column ("row 3.base_sentiment: '' is not one of …", at the last line).
    text = 'item_id,text,base_sentiment\na1,fine,positive\na2,"unclosed,positive\na3,x,negative\n'
    exc = _sentiment(stimuli_copy, text)
    assert exc.file == "sentiment/demo_items.csv" and exc.line == 3, str(exc)
    assert "quoted cell opened on line 3 is never closed" in exc.reason, str(exc)


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        (b"item_id,text,base_sentiment\na1,ok,positive\na2,caf\xe9,positive\n", 3, "UTF-8"),
        ('item_id,text,base_sentiment\na1,"' + "x" * 200_000 + '",positive\n', 2, "field limit"),
        ("item_id,text\na1,ok\n", 1, "missing column(s) ['base_sentiment']"),
        ("item_id,text,base_sentiment\n\n", 1, "has no items"),
        ("", 1, "missing column(s)"),
    ],
)
def test_an_unreadable_or_incomplete_csv_is_refused_with_its_line(
    stimuli_copy, content, line, reason
):
    exc = _sentiment(stimuli_copy, content)
    assert exc.file == "sentiment/demo_items.csv" and reason in exc.reason, str(exc)
    assert exc.line == line, str(exc)


def test_a_csv_path_that_is_a_folder_is_refused_at_the_study_line(stimuli_copy):
    study = stimuli_copy / "sentiment-demo.yaml"
    text = study.read_text().replace("items: sentiment/demo_items.csv", "items: sentiment")
    study.write_text(text)
    exc = _refusal(study)
    assert exc.file == study.name and "is a folder" in exc.reason, str(exc)
    assert exc.line == next(
        i for i, t in enumerate(text.splitlines(), 1) if t.endswith("items: sentiment")
    ), str(exc)


@pytest.mark.parametrize(
    ("second_line", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"item_id": ' + "9" * 5_000 + "}", "not JSON this program can read"),
        ("[" * 50_000, "not JSON"),
        ('{"item_id": "x"}', "expected a list"),
    ],
)
def test_a_bad_jsonl_record_is_refused_at_its_line(stimuli_copy, second_line, reason):
    target = stimuli_copy / "evaluation" / "rating-demo.jsonl"
    first = target.read_text().splitlines()[0]
    target.write_text(f"{first}\n\n{second_line}\n")
    exc = _refusal(stimuli_copy / "rating-demo.yaml")
    assert exc.file == "evaluation/rating-demo.jsonl" and reason in exc.reason, str(exc)
    assert exc.line == 3 and str(exc).endswith("(line 3)"), str(exc)


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [(b"\n\n", 1, "has no items"), (b'{"pair_id": "p"}\n{"a": "\xff"}\n', 2, "UTF-8")],
)
def test_an_empty_or_non_utf8_jsonl_file_is_refused_naming_it(stimuli_copy, content, line, reason):
    (stimuli_copy / "evaluation" / "preference-demo.jsonl").write_bytes(content)
    exc = _refusal(stimuli_copy / "preference-demo.yaml")
    assert exc.file == "evaluation/preference-demo.jsonl" and reason in exc.reason, str(exc)
    assert exc.line == line, str(exc)


def test_a_huge_value_is_quoted_shortened_and_the_reason_kept(tmp_path):
    study, _ = _setup(tmp_path)
    text = DEMO.read_text().replace("slug: product-choice-demo", "slug: " + "x" * 10_000, 1)
    study.write_text(text)
    exc = _refusal(study)
    assert len(str(exc)) < 600 and "must be lower-case letters" in exc.reason, str(exc)[:700]
    assert exc.line == _line_of(text, "slug: "), str(exc)[:700]
