"""The ``analysis:`` block's one schema: typed and frozen, normalised to the form the study
definition stores and the pre-registration hashes, every mistake at once at its key path, a
misspelling answered with the name meant; a leaf both halves import."""

from __future__ import annotations

import ast
import dataclasses
import doctest
import sys
from pathlib import Path

import pytest

from framelab_schema import analysis_block
from framelab_schema.analysis_block import (
    AnalysisBlock,
    AnalysisBlockError,
    ChoiceRules,
    Issue,
    LookPlan,
    parse_analysis_block,
)

BASE = {
    "hypothesis": "Summaries make the target more attractive.",
    "test": "choice_glmm",
    "direction": "greater",
    "alpha": 0.025,
    "planned_n": 80,
}


def issues(block: object, **kwargs: object) -> list[tuple[str, str]]:
    with pytest.raises(AnalysisBlockError) as info:
        parse_analysis_block(block, **kwargs)
    return [(i.path, i.reason) for i in info.value.issues]


def test_a_full_block_is_typed_frozen_and_normalised_to_the_hashed_form():
    block = parse_analysis_block(
        {
            **BASE,
            "test": "wtp_lmm",
            "levels": ["summary", "original"],
            "direction": "less",
            "alpha": 0.05,
            "planned_n": 120,
            "transform": "log",
            "exclusions": {
                "require_quiz": False,
                "min_duration_s": 120,
                "min_duration_frac_median": None,
                "authenticity": {"max_score": 2},
            },
            "looks": {"at": [0.5, 0.75, 1], "futility": {"z": [0, 0.5], "binding": True}},
            "notes": "  Capped at $500.  ",
        }
    )
    assert block == AnalysisBlock(
        hypothesis="Summaries make the target more attractive.",
        test="wtp_lmm",
        direction="less",
        alpha=0.05,
        planned_n=120,
        levels=("summary", "original"),
        exclusions=ChoiceRules(
            require_quiz=False,
            min_duration_s=120.0,
            min_duration_frac_median=None,
            authenticity_max_score=2.0,
        ),
        transform="log",
        looks=LookPlan(at=(0.5, 0.75, 1.0), futility_z=(0.0, 0.5), binding=True),
        notes="Capped at $500.",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        block.alpha = 0.5  # type: ignore[misc]
    assert block.look_sizes() == [60, 90, 120] and block.sided == 1
    assert block.as_dict() == {
        "hypothesis": "Summaries make the target more attractive.",
        "test": "wtp_lmm",
        "levels": ["summary", "original"],
        "direction": "less",
        "alpha": 0.05,
        "planned_n": 120,
        "exclusions": {
            "require_completed": True,
            "require_quiz": False,
            "require_attention": True,
            "drop_duplicates": True,
            "min_duration_s": 120.0,
            "min_duration_frac_median": None,
            "authenticity": {"max_score": 2.0, "canary": False},
        },
        "transform": "log",
        "looks": {
            "at": [0.5, 0.75, 1.0],
            "spending": "obrien-fleming",
            "futility": {"z": [0.0, 0.5], "binding": True},
        },
        "notes": "Capped at $500.",
    }
    # The normalised block reads back as itself (a pre-registration's block is read so).
    assert parse_analysis_block(block.as_dict(), formats=block.levels) == block


def test_a_minimal_block_takes_the_defaults_and_no_authenticity_key():
    block = parse_analysis_block(BASE)
    assert block.levels == ("original", "summary") and block.looks is None
    assert block.exclusions == ChoiceRules() and block.look_sizes() == [80]
    assert "authenticity" not in block.as_dict()["exclusions"]  # older blocks keep their hash
    beta = parse_analysis_block(
        {**BASE, "looks": {"at": [0.5, 1.0], "futility": {"spending": "pocock", "beta": 0.2}}}
    )
    assert beta.looks == LookPlan(at=(0.5, 1.0), beta_spending="pocock", beta=0.2)


def test_every_mistake_comes_at_once_each_at_its_key_path():
    block = {
        "hypothesis": " ",
        "test": "t_test",
        "direction": "bigger",
        "planned_n": 2.5,
        "exclusions": {"require_quiz": "yes", "authenticity": {"max_score": -1}},
        "looks": {"at": [0.5, 0.4, 1.0], "spending": "haybittle"},
        "alhpa": 0.05,
    }
    assert issues(block) == [
        ("analysis.alhpa", "unknown key; did you mean 'alpha'?"),
        ("analysis.hypothesis", "expected a non-empty text"),
        ("analysis.test", "'t_test' is not one of ['choice_glmm', 'wtp_lmm']"),
        ("analysis.direction", "'bigger' is not one of ['greater', 'less', 'two-sided']"),
        ("analysis.alpha", "is required"),
        (
            "analysis.planned_n",
            "expected a whole number of participants, at least 4 and at most 1,000,000, got 2.5",
        ),
        ("analysis.exclusions.require_quiz", "expected true or false, got 'yes'"),
        (
            "analysis.exclusions.authenticity.max_score",
            "must be at least 0 and at most 1000, got -1",
        ),
        ("analysis.looks.at[1]", "looks must increase: 0.4 after 0.5"),
        ("analysis.looks.spending", "'haybittle' is not one of ['obrien-fleming', 'pocock']"),
    ]


def test_a_misspelt_key_or_value_is_answered_with_the_name_meant():
    found = issues(
        {
            **BASE,
            "test": "choice_glm",
            "exclusions": {"require_atention": True, "zzz": 1},
            "looks": {
                "at": [0.5, 1.0],
                "spending": "pocok",
                "futility": {"spending": "pocock", "bta": 0.2},
            },
        }
    )
    assert found == [
        (
            "analysis.test",
            "'choice_glm' is not one of ['choice_glmm', 'wtp_lmm']; did you mean 'choice_glmm'?",
        ),
        ("analysis.exclusions.require_atention", "unknown key; did you mean 'require_attention'?"),
        (
            "analysis.exclusions.zzz",
            "unknown key; allowed: ['authenticity', 'drop_duplicates', 'min_duration_frac_median', "
            "'min_duration_s', 'require_attention', 'require_completed', 'require_quiz']",
        ),
        (
            "analysis.looks.spending",
            "'pocok' is not one of ['obrien-fleming', 'pocock']; did you mean 'pocock'?",
        ),
        ("analysis.looks.futility.bta", "unknown key; did you mean 'beta'?"),
        (
            "analysis.looks.futility",
            "give fixed bounds (z: [...]) or beta spending (spending and beta)",
        ),
    ]
    misspelt = issues({**BASE, "levels": ["original", "sumary"]}, formats=("original", "summary"))
    assert misspelt == [
        (
            "analysis.levels[1]",
            "'sumary' is not one of ['original', 'summary']; did you mean 'summary'?",
        )
    ]


# Each mistake alone: the first issue's path and the start of its reason.
BAD = {
    "not a mapping": ([1], ("analysis", "expected a mapping, got list")),
    "alpha too large": (
        {"alpha": 0.7},
        ("analysis.alpha", "must be above 0 and at most 0.5, got 0.7"),
    ),
    "same levels": (
        {"levels": ["summary", "summary"]},
        ("analysis.levels", "expected two different formats"),
    ),
    "transform": (
        {"transform": "log"},
        ("analysis.transform", "a transform applies to the WTP model"),
    ),
    "huge planned n": (
        {"planned_n": 10**30, "looks": {"at": [0.5, 1.0]}},
        ("analysis.planned_n", "expected a whole number of participants, at least 4 and at most"),
    ),
    "huge integer": (
        {"exclusions": {"min_duration_s": 10**400}},
        ("analysis.exclusions.min_duration_s", "must be at least 0 and at most 86400, got 1000"),
    ),
    "not finite": ({"alpha": float("nan")}, ("analysis.alpha", "expected a number, got nan")),
    "last look": (
        {"looks": {"at": [0.5, 0.9]}},
        ("analysis.looks.at[1]", "the last look must be at 1 (the planned N), got 0.9"),
    ),
    "tiny look": (
        {"looks": {"at": [0.01, 1.0]}},
        ("analysis.looks.at[0]", "look 1 would analyse 1 participants"),
    ),
    "too many looks": (
        {"looks": {"at": [0.1] * 11}},
        ("analysis.looks.at", "expected a list of 1 to 10"),
    ),
    "futility count": (
        {"looks": {"at": [0.5, 0.75, 1.0], "futility": {"z": [0]}}},
        ("analysis.looks.futility.z", "expected one z bound per interim look (2)"),
    ),
    "futility both": (
        {"looks": {"at": [0.5, 1.0], "futility": {"z": [0], "beta": 0.2}}},
        ("analysis.looks.futility", "give fixed bounds (z, binding) or beta spending"),
    ),
    "futility two-sided": (
        {"direction": "two-sided", "looks": {"at": [0.5, 1.0], "futility": {"z": [0]}}},
        ("analysis.looks.futility", "futility bounds need a one-sided hypothesis"),
    ),
    "beta binding": (
        {
            "looks": {
                "at": [0.5, 1.0],
                "futility": {"spending": "pocock", "beta": 0.2, "binding": True},
            }
        },
        ("analysis.looks.futility.binding", "beta-spending futility bounds are non-binding"),
    ),
    "authenticity empty": (
        {"exclusions": {"authenticity": {"canary": False}}},
        ("analysis.exclusions.authenticity", "give max_score, canary: true, or both"),
    ),
    "looks need completed": (
        {"exclusions": {"require_completed": False}, "looks": {"at": [0.5, 1.0]}},
        ("analysis.exclusions.require_completed", "interim looks count completed participants"),
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_mistake_is_refused_with_its_reason(name):
    change, (path, reason) = BAD[name]
    block = {**BASE, **change} if isinstance(change, dict) else change
    ((found_path, found_reason),) = issues(block)
    assert found_path == path and found_reason.startswith(reason)


def test_levels_name_the_studys_formats_and_a_study_without_any_has_no_test():
    formats = ("summary", "mitigated:self-debias")
    assert issues(BASE, formats=formats) == [
        (
            "analysis.levels",
            "is required: name two of the study's formats ['summary', 'mitigated:self-debias'] as "
            "[reference, treatment]",
        )
    ]
    block = parse_analysis_block({**BASE, "levels": list(formats)}, formats=formats)
    assert block.levels == formats
    assert issues(BASE, formats=(), path="study.analysis") == [
        (
            "study.analysis",
            "the pre-registered tests analyse a product_choice block; the study has none",
        )
    ]


def test_the_error_lists_every_issue_and_the_examples_hold():
    error = AnalysisBlockError([Issue("analysis.a", "one"), Issue("analysis.b", "two")])
    assert str(error) == "analysis.a: one\nanalysis.b: two"
    result = doctest.testmod(analysis_block)
    assert result.attempted > 0 and result.failed == 0


def test_the_schema_imports_the_standard_library_only():
    folder = Path(analysis_block.__file__).parent
    imported = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names) | {"__future__"}
