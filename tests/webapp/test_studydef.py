"""Study definitions: the demo loads; invalid files fail with file, path and reason."""

from __future__ import annotations

import copy
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from webapp.definition import Bonus
from webapp.studydef import load_study_file
from webapp.validation import StudyDefinitionError

from .conftest import DEMO


def test_demo_study_is_valid_and_has_ten_pairs():
    d = load_study_file(DEMO)
    assert d.slug == "product-choice-demo"
    types = [b.type for b in d.tasks]
    assert types == [
        "consent",
        "instructions",
        "quiz",
        "product_choice",
        "attention_check",
        "demographics",
        "debrief",
    ]
    pairs = d.tasks[3].params["pairs"]
    assert len(pairs) == 10 and len({p["id"] for p in pairs}) == 10
    for p in pairs:
        assert p["target"]["manufacturer"] != p["control"]["manufacturer"]
        assert p["target"]["review"] != p["target"]["summary"]
        assert p["target"]["price"] > 0 and p["control"]["price"] > 0
    assert d.recruitment.completion_codes.completed
    assert d.tasks[2].params["attempts"] == 2


def _write(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load(DEMO.read_text())
    # The study's bundle is its folder: give the copy its own pairs file.
    shutil.copytree(DEMO.parent / "product_pairs", tmp_path / "product_pairs", dirs_exist_ok=True)
    mutate(raw)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    ("mutate", "path", "reason"),
    [
        (lambda r: r.pop("title"), "title", "is required"),
        (lambda r: r.update(slug="Bad Slug"), "slug", "lower-case"),
        (
            lambda r: r["tasks"][2]["questions"][0].update(correct="7"),
            "tasks[2].questions[0].correct",
            "not one of the options",
        ),
        (lambda r: r["tasks"][1].update(type="dance"), "tasks[1].type", "unknown task type"),
        (lambda r: r["tasks"][3].update(pairs="nowhere.yaml"), "tasks[3].pairs", "not found"),
        (
            lambda r: r["tasks"][3]["wtp"].update(max_premium=-1),
            "tasks[3].wtp.max_premium",
            "at least",
        ),
        (
            lambda r: r["recruitment"]["completion_codes"].pop("completed"),
            "recruitment.completion_codes.completed",
            "is required",
        ),
        (lambda r: r["tasks"].pop(0), "tasks[0]", "consent"),
        (lambda r: r["tasks"][2].update(attemps=3), "tasks[2]", "unknown key"),
        (lambda r: r["payment"].update(base="two"), "payment.base", "expected a number"),
        (  # would round to $0.00: refused, not paid as nothing
            lambda r: r["payment"]["bonus"].update(amount=0.004),
            "payment.bonus.amount",
            "whole number of cents",
        ),
        (  # 10 choices x $1.50 = $15.00 per person, above the default bound of $10.00
            lambda r: r["payment"]["bonus"].update(amount=1.5),
            "payment.bonus",
            "above max $10.00",
        ),
        (  # a second product_choice block with the same pairs: answers are analysed by pair
            lambda r: r["tasks"].insert(4, {**copy.deepcopy(r["tasks"][3]), "id": "more"}),
            "tasks[4].pairs",
            "only one 'product_choice' block",
        ),
    ],
)
def test_errors_name_file_path_and_reason(tmp_path, mutate, path, reason):
    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(_write(tmp_path, mutate))
    err = info.value
    assert err.file == "broken.yaml"
    assert err.path == path
    assert reason in err.reason
    assert str(err).startswith(f"broken.yaml: {path}: ")


def test_pairs_file_errors_name_the_pairs_file(tmp_path):
    pairs = tmp_path / "pairs.yaml"
    pairs.write_text(
        textwrap.dedent("""
        pairs:
          - {id: a, product_type: x, target: {manufacturer: M, price: 1, review: r,
             summary: s}, control: {manufacturer: M, price: 1, review: r, summary: s}}
          - {id: b, product_type: x}
    """)
    )
    path = _write(tmp_path, lambda r: r["tasks"][3].update(pairs=pairs.name))
    with pytest.raises(StudyDefinitionError, match=r"pairs.yaml: pairs\[0\]: .*different"):
        load_study_file(path)


def test_invalid_yaml_reports_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("slug: x\ntitle: [unclosed\n")
    with pytest.raises(StudyDefinitionError, match=r"bad.yaml: .*invalid YAML at line"):
        load_study_file(path)


def _pairs_with_bad_prices(tmp_path: Path, n_bad: int) -> Path:
    """The demo's pairs, repeated to 30, with the target price of the first ``n_bad`` made text."""
    pairs = yaml.safe_load((DEMO.parent / "product_pairs" / "demo.yaml").read_text())["pairs"]
    pairs = [{**copy.deepcopy(pairs[i % len(pairs)]), "id": f"p{i}"} for i in range(30)]
    for pair in pairs[:n_bad]:
        pair["target"]["price"] = "cheap"
    return _write(tmp_path, lambda r: r["tasks"][3].update(pairs=pairs))


def test_a_mistake_repeated_in_eight_pairs_is_reported_eight_times_each_with_its_line(tmp_path):
    from webapp.validation import StudyDefinitionErrors, error_lines

    path = _pairs_with_bad_prices(tmp_path, 8)
    with pytest.raises(StudyDefinitionErrors) as info:
        load_study_file(path)
    err = info.value
    assert [e.path for e in err.errors] == [f"tasks[3].pairs[{i}].target.price" for i in range(8)]
    lines = [e.line for e in err.errors]
    assert len(set(lines)) == 8 and lines == sorted(lines)
    text = path.read_text().splitlines()
    assert all("cheap" in text[line - 1] for line in lines)
    # The first error is the exception's own, so code that shows one error still works.
    assert err.path == "tasks[3].pairs[0].target.price" and "expected a number" in err.reason
    assert len(error_lines(err)) == 8 and str(err).startswith("8 errors:\n")


def test_errors_of_blocks_and_sections_come_together_and_are_bounded(tmp_path):
    from webapp.validation import ERRORS_MAX, StudyDefinitionErrors, error_lines

    def mutate(raw):
        raw["colour"] = "blue"
        raw["tasks"][2]["questions"][0]["correct"] = "7"
        raw["payment"]["base"] = "two"

    with pytest.raises(StudyDefinitionErrors) as info:
        load_study_file(_write(tmp_path, mutate))
    assert [e.path for e in info.value.errors] == [
        "",
        "tasks[2].questions[0].correct",
        "payment.base",
    ]

    with pytest.raises(StudyDefinitionErrors) as info:
        load_study_file(_pairs_with_bad_prices(tmp_path, 30))
    assert len(info.value.errors) == ERRORS_MAX and info.value.more == 30 - ERRORS_MAX
    assert error_lines(info.value)[-1] == f"… and {30 - ERRORS_MAX} more error(s)"


def test_an_unquoted_question_mark_gets_a_hint_to_quote_the_text(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text("slug: q-study\ntitle: Would you buy it? Yes: maybe\n")
    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(path)
    assert "line 2" in str(info.value) and "put the whole text in double quotes" in str(info.value)


def test_a_bonus_above_the_default_bound_loads_when_max_says_so(tmp_path):
    def mutate(raw):
        raw["payment"]["bonus"].update(amount=1.5, max=15)

    definition = load_study_file(_write(tmp_path, mutate))
    assert definition.payment.bonus == Bonus(amount=1.5, rule="majority_choice", max=15)


def _with_payment(tmp_path: Path, payment: str, recruiter: str = "") -> Path:
    """The demo study with its ``payment:`` block replaced by ``payment`` (YAML text)."""
    text = DEMO.read_text()
    start = text.index("payment:\n")
    end = text.index("\n\n", start)
    shutil.copytree(DEMO.parent / "product_pairs", tmp_path / "product_pairs", dirs_exist_ok=True)
    path = tmp_path / "money.yaml"
    path.write_text(text[:start] + payment.strip() + text[end:] + recruiter)
    return path


@pytest.mark.parametrize(
    ("payment", "path", "reason"),
    [
        # 1.005 as a float is 1.00499999999999989...: rounding it would pay 1.00, as written
        # it is half a cent; refused, not paid as either.
        ("payment: {base: 1.005}", "payment.base", "whole number of cents"),
        ("payment: {base: 3.00, bonus: {amount: 0.1000000000000000001, rule: none}}",
         "payment.bonus.amount", "whole number of cents"),
        ("payment: {base: 3, bonus: {amount: 0.10, rule: none, max: 2.505}}",
         "payment.bonus.max", "whole number of cents"),
        ("payment: {base: 100000.01}", "payment.base", "at most 100000"),
        ("payment: {base: 1.0e+6}", "payment.base", "at most 100000"),
        ("payment: {base: .inf}", "payment.base", "finite"),
        ("payment: {base: 3.00}", "recruiter.reward", "whole number of cents"),
    ],
)  # fmt: skip
def test_amounts_are_whole_cents_read_as_written(tmp_path, payment, path, reason):
    recruiter = "\nrecruiter: {platform: prolific, places: 2, reward: 2.999}\n"
    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(_with_payment(tmp_path, payment, recruiter if "recruiter" in path else ""))
    assert (info.value.path, info.value.file) == (path, "money.yaml")
    assert reason in info.value.reason


def test_amounts_written_with_cents_are_exact(tmp_path):
    payment = "payment: {base: 100000, bonus: {amount: 0.1, rule: majority_choice, max: 1.1}}"
    recruiter = "\nrecruiter: {platform: prolific, places: 2, reward: 0.29}\n"
    d = load_study_file(_with_payment(tmp_path, payment, recruiter))
    assert d.payment.base == 100000 and d.payment.bonus.amount == 0.1
    assert d.payment.bonus.max == 1.1 and d.recruiter.reward_cents == 29
