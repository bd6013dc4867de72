"""Every mitigation's default prompt carries the instructions that define it in the seed paper,
and every method makes the model calls the paper describes (one prompt, or passes kept apart).

The wording is ours; what is checked is that no defining instruction is missing.
"""

from __future__ import annotations

import json

import pytest

from analysis.mitigation.plans import plan_of
from analysis.mitigation.prompts import step_template
from analysis.mitigation.registry import METHODS
from analysis.mitigation.runner import run_method
from tests.analysis.mitigation.test_runner import DOCS, FACTS, EchoBackend


def _sent(method: str, tmp_path) -> tuple[list[str], list[str], dict]:
    backend = EchoBackend()
    items = FACTS if METHODS[method].task == "fact-check" else DOCS[:1]
    out = tmp_path / f"{method}.jsonl"
    params = {"cutoff": "2023-04-30"} if method == "knowledge-boundary" else None
    run_method(method, items, backend, out, progress=False, params=params)
    record = json.loads(out.read_text().splitlines()[0])
    return backend.prompts, [key for key, _ in backend.seen], record


def _one_of(prompts: list[str]) -> str:
    return "\n".join(prompts).lower()


def test_prompt_calibration_answers_false_when_in_doubt(tmp_path):
    prompts, _, _ = _sent("prompt-calibration", tmp_path)
    text = _one_of(prompts)
    assert "in any doubt, answer false" in text
    assert "answer: true" in text and "step by step" in text


def test_knowledge_boundary_asks_for_a_best_prediction_after_the_cutoff(tmp_path):
    prompts, _, _ = _sent("knowledge-boundary", tmp_path)
    text = _one_of(prompts)
    assert "2023-04-30" in text and "best prediction" in text
    assert "unknown to you" not in text  # it must not tell the model to give up


def test_chain_of_thought_is_one_prompt_with_three_analysis_sections_and_a_summary(tmp_path):
    prompts, keys, record = _sent("chain-of-thought", tmp_path)
    assert keys == ["answer"] and METHODS["chain-of-thought"].passes == 1
    [prompt] = prompts
    for section in ("BEGIN_ANALYSIS", "MIDDLE_ANALYSIS", "END_ANALYSIS", "FINAL_SUMMARY"):
        assert section in prompt
    assert prompt.index("END_ANALYSIS") < prompt.index("FINAL_SUMMARY")
    assert DOCS[0]["text"] in prompt
    assert record["section_found"] is True


def test_weighted_summaries_ask_for_about_n_tokens(tmp_path):
    prompts, keys, record = _sent("weighted-summaries", tmp_path)
    by_part = dict(zip(keys, prompts, strict=True))
    for i, budget in enumerate(record["budgets"], start=1):
        assert f"in about {budget} tokens" in by_part[f"part-{i}"]


def test_cognitive_counterfactual_keeps_draft_simulation_and_correction_apart(tmp_path):
    prompts, keys, _ = _sent("cognitive-counterfactual", tmp_path)
    assert keys == ["draft", "counterfactuals", "rewrite"]
    draft, simulate, rewrite = prompts
    assert "PRIMACY" in simulate and "RECENCY" in simulate and "FRAMING" in simulate
    # The simulation pass only imagines the distortions; correcting is the third pass's job.
    assert "FINAL_SUMMARY" not in simulate.split("Imagine")[1]
    # The comparison pass sees the simulated summaries the second pass wrote.
    assert "FINAL_SUMMARY" in rewrite and "Distorted summaries" in rewrite
    assert "chars" in rewrite.split("Distorted summaries:")[1]


@pytest.mark.parametrize(("method", "step"), [("position-shuffle", "position-shuffle"),
                                              ("attention-sort", "attention-sort")])  # fmt: skip
def test_reordering_methods_carry_their_own_prompt(method, step):
    plan = plan_of(method)
    assert [t.name for t in plan.templates] == [f"mitigate-{step}"]
    assert plan.templates[0] is step_template(step)


@pytest.mark.parametrize(
    ("method", "needles"),
    [
        ("self-awareness", ("beginning", "middle", "end", "framing", "equal weight")),
        ("cloze", ("BEGIN:", "MIDDLE:", "END:", "FINAL_SUMMARY:")),
        ("self-help-debias", ("beginning", "middle", "end", "sentiment", "critique")),
        ("partial-summaries", ("part (1 of 3)", "equal weight")),
        ("epistemic-tagging", ("[High Confidence]", "[Low Confidence]")),
    ],
)
def test_other_prompt_methods_keep_their_defining_instructions(method, needles, tmp_path):
    prompts, _, _ = _sent(method, tmp_path)
    text = "\n".join(prompts)
    for needle in needles:
        assert needle in text, (method, needle)


def test_choices_of_our_own_are_stated_as_ours():
    for method in ("balanced-coverage", "explanation-guard", "weighted-summaries"):
        assert "FrameLab's choice" in (
            METHODS[method].definition + " ".join(p.help for p in METHODS[method].params)
        ), method
