"""The web app's loader and the research package's reader both read the ``analysis:`` block with
its one schema (``framelab_schema.analysis_block``, tested on its own beside it): they accept the
same blocks, normalise them alike and refuse the same ones with the same located messages (file,
key path, reason, line), every mistake at once."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from analysis.plan.spec import PlanError, read_study
from webapp.studydef import load_study_file
from webapp.validation import StudyDefinitionError, error_lines

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"
FORMATS_DEMO = ROOT / "stimuli" / "studies" / "product-choice-formats-demo.yaml"
BLOCK = re.compile(r"^analysis:\n(?:(?:  .*)?\n)+", re.MULTILINE)


def study_with(tmp_path: Path, block: str, demo: Path = DEMO) -> Path:
    """The demo bundle in ``tmp_path`` with its analysis block replaced by ``block``."""
    folder = tmp_path / "bundle"
    shutil.copytree(demo.parent / "product_pairs", folder / "product_pairs")
    if (demo.parent / "images").is_dir():
        shutil.copytree(demo.parent / "images", folder / "images")
    text = demo.read_text(encoding="utf-8")
    assert BLOCK.search(text), "the demo has an analysis block"
    path = folder / demo.name
    path.write_text(BLOCK.sub(lambda _: block, text, count=1), encoding="utf-8")
    return path


VALID = """analysis:
  hypothesis: Summaries raise the premium.
  test: wtp_lmm
  levels: [summary, original]
  direction: two-sided
  alpha: 0.05
  planned_n: 120
  transform: log
  exclusions: {require_quiz: false, min_duration_s: 120, min_duration_frac_median: null}
  looks:
    at: [0.25, 0.5, 0.75, 1.0]
    spending: pocock
  notes: WTP answers above $500 are capped by the page.
"""


def test_both_readers_normalise_the_demo_and_a_full_block_alike(tmp_path):
    for path in (DEMO, study_with(tmp_path, VALID)):
        web = load_study_file(path).analysis
        assert read_study(path).plan.as_dict() == web.as_dict()
    assert web.as_dict()["looks"] == {
        "at": [0.25, 0.5, 0.75, 1.0],
        "spending": "pocock",
        "futility": None,
    }


BASE = """analysis:
  hypothesis: Summaries make the target more attractive.
  test: choice_glmm
  direction: greater
  alpha: 0.025
  planned_n: 80
"""
# Mistakes the schema's own tests cover reason by reason; here each side locates them alike.
BAD = {
    "unknown key": (
        BASE + "  alhpa: 0.05\n",
        ["analysis.alhpa: unknown key; did you mean 'alpha'?"],
    ),
    "level": (
        BASE + "  levels: [original, mitigated]\n",
        ["analysis.levels[1]: 'mitigated' is not one of"],
    ),
    "authenticity key": (
        BASE + "  exclusions: {authenticity: {max_scor: 2}}\n",
        [
            "analysis.exclusions.authenticity.max_scor: unknown key; did you mean 'max_score'?",
            "analysis.exclusions.authenticity: give max_score, canary: true, or both",
        ],
    ),
    "several": (
        BASE.replace("choice_glmm", "choice_glm").replace("0.025", "0.7")
        + "  looks: {at: [0.5, 0.9], futility: {z: [x]}}\n",
        [
            "analysis.test: 'choice_glm' is not one of ['choice_glmm', 'wtp_lmm']; did you mean "
            "'choice_glmm'?",
            "analysis.alpha: must be above 0 and at most 0.5, got 0.7",
            "analysis.looks.at[1]: the last look must be at 1 (the planned N), got 0.9",
            "analysis.looks.futility.z[0]: expected a number, got 'x'",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_both_readers_refuse_with_the_same_located_messages(tmp_path, name):
    block, expected = BAD[name]
    path = study_with(tmp_path, block)
    with pytest.raises(StudyDefinitionError) as web:
        load_study_file(path)
    with pytest.raises(PlanError) as own:
        read_study(path)
    assert str(web.value) == str(own.value)
    found = error_lines(web.value)
    assert len(found) == len(expected)
    for line, start in zip(found, expected, strict=True):
        assert line.startswith(f"{DEMO.name}: {start}") and re.search(r"\(line \d+\)$", line)


def test_a_study_without_product_choice_cannot_preregister_a_test(tmp_path):
    path = tmp_path / "rating.yaml"
    source = ROOT / "stimuli" / "studies" / "rating-demo.yaml"
    shutil.copytree(source.parent / "evaluation", tmp_path / "evaluation")
    path.write_text(source.read_text(encoding="utf-8") + BASE, encoding="utf-8")
    with pytest.raises(StudyDefinitionError) as web:
        load_study_file(path)
    with pytest.raises(PlanError) as own:
        read_study(path)
    assert "the study has none" in str(web.value) and str(web.value) == str(own.value)


def test_levels_name_the_formats_of_a_k_format_block(tmp_path):
    web = load_study_file(FORMATS_DEMO).analysis
    assert web.levels == ("summary", "mitigated:self-debias")
    assert read_study(FORMATS_DEMO).plan.as_dict() == web.as_dict()


K_BASE = BASE.replace("  planned_n: 80\n", "  planned_n: 90\n")
K_BAD = {
    "not a format of the block": (
        K_BASE + "  levels: [summary, 'mitigated:cot']\n",
        "analysis.levels[1]: 'mitigated:cot' is not one of ['original', 'summary', "
        "'mitigated:self-debias']",
    ),
    "levels required without original and summary": (
        K_BASE,
        "analysis.levels: is required: name two of the study's formats ['summary', "
        "'mitigated:self-debias'] as [reference, treatment]",
    ),
}


@pytest.mark.parametrize("name", sorted(K_BAD))
def test_both_readers_refuse_levels_outside_the_blocks_formats_alike(tmp_path, name):
    block, expected = K_BAD[name]
    path = study_with(tmp_path, block, FORMATS_DEMO)
    if name.startswith("levels required"):
        # A two-format block without the default levels: the test must name its own.
        text = path.read_text(encoding="utf-8")
        text = text.replace(
            'formats: [original, summary, "mitigated:self-debias"]',
            ('formats: [summary, "mitigated:self-debias"]'),
        ).replace("      original: Customer review\n", "")
        path.write_text(text, encoding="utf-8")
    with pytest.raises(StudyDefinitionError) as web:
        load_study_file(path)
    with pytest.raises(PlanError) as own:
        read_study(path)
    assert str(web.value) == str(own.value)
    assert str(own.value).startswith(f"{FORMATS_DEMO.name}: {expected}")


def test_both_readers_normalise_the_authenticity_rule_alike_and_only_when_given(tmp_path):
    path = study_with(tmp_path, BASE + "  exclusions: {authenticity: {max_score: 2}}\n")
    web = load_study_file(path).analysis
    assert read_study(path).plan.as_dict() == web.as_dict()
    assert web.as_dict()["exclusions"]["authenticity"] == {"max_score": 2.0, "canary": False}
    # Without the rule the block is what it was before the rule existed (its hash too).
    assert "authenticity" not in load_study_file(DEMO).analysis.as_dict()["exclusions"]
