"""Every mitigation carries the structure of the prompts printed in 000 A.8 (Table A7) and A.1.

Two sides of one table (:data:`A8`): each stage of each method receives what A.8 gives it (which
inputs, in which order, which output marker), first with FrameLab's defaults (our wording), then
with a prompts file written in neutral words that has only the printed structure, so any wording
a researcher types from the paper reaches the model the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from analysis.llm.backends.base import Completion
from analysis.mitigation.chunking import chunk_document
from analysis.mitigation.plans import plan_of
from analysis.mitigation.prompt_file import load_prompts
from analysis.mitigation.prompts import step_template
from analysis.mitigation.registry import METHODS
from analysis.mitigation.runner import run_method
from tests.analysis.mitigation.test_runner import DOCS, FACTS, EchoBackend

SOURCE = DOCS[0]["text"]
# What the scripted model answers per pass: a first counterfactual answer with both markers,
# every other pass a marked summary naming the pass.
SCRIPT = {"first": "DRAFT_SUMMARY: DRAFT-TEXT\nDEVIATIONS: DEVIATION-LIST"}


class ScriptBackend(EchoBackend):
    """Answers from :data:`SCRIPT` and keeps every request's full messages."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: dict[str, tuple[dict[str, str], ...]] = {}

    def generate(self, requests):
        for r in requests:
            key = r.key.split("\x1f")[1]
            self.seen.append((key, self.settings.max_new_tokens))
            self.messages[key] = r.messages
            self.prompts.append(r.messages[-1]["content"])
            yield r, Completion(SCRIPT.get(key, f"FINAL_SUMMARY: OUT-{key}"), 10, 3)


def _run(method: str, tmp_path: Path, templates=None) -> tuple[ScriptBackend, dict]:
    backend = ScriptBackend()
    fact = METHODS[method].task == "fact-check" if method in METHODS else method == "fact-check"
    out = tmp_path / f"{method}.jsonl"
    params = {"cutoff": "2023-04-30"} if method == "knowledge-boundary" else None
    name = "baseline" if method == "fact-check" else method
    run_method(
        name,
        FACTS[:1] if fact else DOCS[:1],
        backend,
        out,
        progress=False,
        params=params,
        templates=templates,
        task="fact-check" if fact else "summarize",
    )
    return backend, json.loads(out.read_text().splitlines()[0])  # fmt: skip


def _ends_with_marker(prompt: str) -> bool:
    return prompt.rstrip().endswith("FINAL_SUMMARY:")


# --- the printed structure, stage by stage (000 A.8, Table A7) ---


def check_self_awareness(b: ScriptBackend, record: dict) -> None:
    # The document, then the FINAL_SUMMARY: marker; the summary is read after it.
    [prompt] = b.prompts
    assert SOURCE in prompt and _ends_with_marker(prompt)
    assert record["output"] == "OUT-summary" and record["section_found"] is True


def check_chain_of_thought(b: ScriptBackend, record: dict) -> None:
    # One call: the four sections in order, then the document last.
    [prompt] = b.prompts
    marks = [prompt.index(m) for m in ("BEGIN_ANALYSIS:", "MIDDLE_ANALYSIS:", "END_ANALYSIS:",
                                       "FINAL_SUMMARY:")]  # fmt: skip
    assert marks == sorted(marks) and prompt.index(SOURCE) > marks[-1]
    assert prompt.rstrip().endswith(SOURCE) and record["output"] == "OUT-answer"


def check_cloze(b: ScriptBackend, record: dict) -> None:
    # Blanks for the three parts, then the document, then FINAL_SUMMARY: last.
    [prompt] = b.prompts
    marks = [prompt.index(m) for m in ("BEGIN:", "MIDDLE:", "END:")]
    assert marks == sorted(marks) and prompt.count("____") == 3
    assert marks[-1] < prompt.index(SOURCE) and _ends_with_marker(prompt)


def check_cognitive_counterfactual(b: ScriptBackend, record: dict) -> None:
    # Two passes (A.6); the final revision sees the text, the draft and the deviation list, in
    # that order, and ends with FINAL_SUMMARY:.
    assert [k for k, _ in b.seen] == ["first", "rewrite"] and METHODS[
        "cognitive-counterfactual"
    ].passes == 2
    final = b.prompts[1]
    order = [final.index(x) for x in (SOURCE, "DRAFT-TEXT", "DEVIATION-LIST")]
    assert order == sorted(order) and _ends_with_marker(final)
    assert "DEVIATIONS" not in final.split("DRAFT-TEXT")[1].split("DEVIATION-LIST")[0]
    assert record["passes"]["draft"] == "DRAFT-TEXT" and record["deviations_found"] is True


def check_self_help_debias(b: ScriptBackend, record: dict) -> None:
    # The rewrite stage receives the draft only (not the source), with a 300-token limit (A.6).
    assert b.seen == [("draft", 50), ("rewrite", 300)]
    rewrite = b.prompts[1]
    assert "OUT-draft" in rewrite and SOURCE not in rewrite and _ends_with_marker(rewrite)
    assert record["output"] == "OUT-rewrite"


def check_partial_summaries(b: ScriptBackend, record: dict) -> None:
    # Chunks of floor(|D|/3) tokens summarised on their own; the merge lists the partial
    # summaries unlabelled and ends with FINAL_SUMMARY:.
    chunks = chunk_document(SOURCE)
    assert [p for p in b.prompts[:3] if any(c in p for c in chunks)] == b.prompts[:3]
    merge = b.prompts[3]
    order = [merge.index(f"OUT-chunk-{i}") for i in (1, 2, 3)]
    assert order == sorted(order) and "Part 1" not in merge and SOURCE not in merge
    assert _ends_with_marker(merge)


def check_weighted_summaries(b: ScriptBackend, record: dict) -> None:
    # Each portion with its token budget, then FINAL_SUMMARY:; read after the marker, joined.
    by_part = dict(zip([k for k, _ in b.seen], b.prompts, strict=True))
    for i, budget in enumerate(record["budgets"], start=1):
        prompt = by_part[f"part-{i}"]
        assert f"about {budget} tokens" in prompt and _ends_with_marker(prompt)
    assert record["output"] == "OUT-part-1 OUT-part-2 OUT-part-3"


def check_position_shuffle(b: ScriptBackend, record: dict) -> None:
    # The shuffled document, then FINAL_SUMMARY:; a seed of its own per text.
    [prompt] = b.prompts
    assert record["shuffled_text"] in prompt and _ends_with_marker(prompt)
    assert record["shuffle_seed_used"] == "42:d1"


def check_fact_check(b: ScriptBackend, record: dict) -> None:
    # The statement reaches the model; the answer is one word, parsed whole.
    [prompt] = b.prompts
    assert FACTS[0]["text"] in prompt


A8 = {
    "self-awareness": check_self_awareness,
    "chain-of-thought": check_chain_of_thought,
    "cloze": check_cloze,
    "cognitive-counterfactual": check_cognitive_counterfactual,
    "self-help-debias": check_self_help_debias,
    "partial-summaries": check_partial_summaries,
    "weighted-summaries": check_weighted_summaries,
    "position-shuffle": check_position_shuffle,
    "fact-check": check_fact_check,
    "prompt-calibration": check_fact_check,
    "knowledge-boundary": check_fact_check,
    "epistemic-tagging": check_fact_check,
}

# The printed structure in neutral words: placeholders and markers where A.8 has them, "SAY ..."
# where A.8 has an instruction. The hallucination prompts of A.8 print no statement field: their
# text is the system message and the statement the user message.
NEUTRAL = {
    "self-awareness": "SAY ROLE. SAY RULES. SAY TASK: {text}\nFINAL_SUMMARY:",
    "chain-of-thought": "SAY TASK.\nBEGIN_ANALYSIS: x\nMIDDLE_ANALYSIS: x\nEND_ANALYSIS: x\n"
    "FINAL_SUMMARY: x\nText: {text}",
    "cloze": "SAY TASK:\nBEGIN: ____ MIDDLE: ____ END: ____\nText: {text}\nSAY THEN:\n"
    "FINAL_SUMMARY:",
    "cognitive-counterfactual": {
        "ccs-draft": "SAY DRAFT AND DEVIATIONS: {text}\nDRAFT_SUMMARY:",
        "ccs-rewrite": "Original: {text}\nDraft: {draft}\nList: {counterfactuals}\nSAY TASK.\n"
        "FINAL_SUMMARY:",
    },
    "self-help-debias": {"self-help-rewrite": "SAY TASK: {draft}\nFINAL_SUMMARY:"},
    "partial-summaries": {"chunk-merge": "SAY TASK:\n{partials}\nFINAL_SUMMARY:"},
    "weighted-summaries": "SAY TASK about {tokens} tokens:\n{text}\nFINAL_SUMMARY:",
    "attention-sort": "CONTEXT:\n{segments}\nTASK: SAY TASK:\nFINAL_SUMMARY:",
    "position-shuffle": "SAY ORDER AND TASK: {text}\nFINAL_SUMMARY:",
    "fact-check": {"system": "SAY ROLE. SAY ONE WORD.", "user": "{text}"},
    "prompt-calibration": {"system": "SAY ROLE. SAY RULES. SAY ONE WORD.", "user": "{text}"},
    "knowledge-boundary": {
        "system": "SAY ROLE UP TO {cutoff}. SAY AFTER {cutoff}. SAY ONE WORD.",
        "user": "{text}",
    },
    "epistemic-tagging": {"system": "SAY ROLE. SAY FOUR OPTIONS. SAY TAGS.", "user": "{text}"},
    "judge-framing": "{text}\nSAY CLASSES.",
}


@pytest.fixture(scope="module")
def neutral(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("prompts") / "printed.yaml"
    path.write_text(yaml.safe_dump(NEUTRAL), encoding="utf-8")
    return load_prompts(path)


@pytest.mark.parametrize("method", sorted(A8))
def test_the_defaults_give_each_stage_what_a8_gives_it(method, tmp_path):
    backend, record = _run(method, tmp_path)
    A8[method](backend, record)


@pytest.mark.parametrize("method", sorted(A8))
def test_a_prompts_file_with_the_printed_structure_reaches_each_stage(method, neutral, tmp_path):
    backend, record = _run(method, tmp_path, neutral)
    A8[method](backend, record)
    if METHODS.get(method, METHODS["prompt-calibration"]).task == "fact-check" or (
        method == "fact-check"
    ):
        [messages] = backend.messages.values()
        assert messages[0]["role"] == "system" and messages[0]["content"].startswith("SAY ROLE")
        assert messages[1]["content"] == FACTS[0]["text"]  # the statement and nothing else
        if method == "knowledge-boundary":
            assert messages[0]["content"].count("2023-04-30") == 2
    else:
        assert all("SAY" in p or p.startswith("Summarize") for p in backend.prompts)


def test_attention_sort_gives_numbered_segments_before_the_task(tiny_model_dir, neutral):
    """A.8's final prompt of Attention-Sort: CONTEXT with "Segment N:" lines, then the task."""
    from analysis.llm.backends import GenerationSettings, make_backend
    from analysis.mitigation.plans import ItemState

    backend = make_backend(
        "transformers", str(tiny_model_dir), GenerationSettings(max_new_tokens=2), device="cpu"
    )
    for templates in (None, neutral):
        plan = plan_of("attention-sort", templates=templates)
        state = ItemState(DOCS[0])
        [call] = [c for stage in plan.stages for c in stage(state, {"iterations": 2}, backend)]
        prompt = call.messages()[-1]["content"]
        units = state.values["text"].split("\n\n")
        assert sorted(units) == sorted(SOURCE.split("\n\n"))
        for i, unit in enumerate(units, start=1):
            assert f"Segment {i}: {unit}" in prompt
        assert prompt.index("CONTEXT:") < prompt.index("Segment 1:") < prompt.index("TASK:")
        assert _ends_with_marker(prompt)


def test_the_framing_judge_reads_the_text_before_its_instruction(neutral):
    """000 A.1 prints the text first, then the instruction (default and prompts file alike)."""
    from analysis.llm.templates import get_template

    for tpl in (get_template("judge-framing", "baseline"), neutral["judge-framing"]):
        content = tpl.messages(text="THE TEXT ITSELF")[-1]["content"]
        assert content.startswith("THE TEXT ITSELF")
        assert len(content.strip()) > len("THE TEXT ITSELF")


# --- what the defaults say (our wording of A.8's instructions) ---


@pytest.mark.parametrize(
    ("step", "needles"),
    [
        ("self-awareness", ("no side", "framing bias", "middle", "sentiment")),
        ("cot", ("in detail", "final summary")),
        ("self-help-rewrite", ("bias", "sentiment", "beginning, the middle and the end")),
        ("position-shuffle", ("random order", "all of it")),
        ("weighted-part", ("do not go over",)),
        ("chunk-merge", ("single coherent summary",)),
        (
            "prompt-calibration",
            (
                "checks facts",
                "direct consequence",
                "any doubt",
                "misleading",
                "lack reliable information",
                "exactly one word",
                "no explanation",
            ),
        ),  # fmt: skip
        ("knowledge-boundary", ("checks facts", "best prediction", "exactly one word")),
        (
            "epistemic-tagging",
            (
                "checks facts",
                "True [High Confidence]",
                "False [Low Confidence]",
                "[Certain]",
                "[Uncertain]",
                "[Reasoning]",
                "[Conclusion]",
                "nothing else",
            ),
        ),  # fmt: skip
    ],
)
def test_the_defaults_carry_a8s_instructions_in_our_words(step, needles):
    text = step_template(step).user
    for needle in needles:
        assert needle in text, (step, needle)


def test_no_default_adds_instructions_a8_does_not_print():
    """The merge, cloze and chain-of-thought prompts of A.8 ask for no equal weighting and no
    sentiment; the defaults must not add them (they changed the measured effect)."""
    for step in ("chunk-merge", "cloze", "cot"):
        text = step_template(step).user.lower()
        assert "equal" not in text and "sentiment" not in text and "framing" not in text, step


def test_the_fact_check_baseline_asks_for_one_word_without_explanation():
    from analysis.llm.templates import get_template

    text = get_template("fact-check", "baseline").user
    assert "checks facts" in text and "no explanation" in text.lower()


def test_a6_hyperparameters_are_named_as_the_papers():
    """Self-Debias's refresh every 4 steps, the Guard's check every 5 steps and the 300-token
    rewrite are 000 A.6's; the Guard's detector rules and the weighted cap are ours."""
    helps = {m: " ".join(p.help for p in METHODS[m].params) for m in METHODS}
    assert "(000 A.6)" in helps["self-debias"] and "(000 A.6)" in helps["explanation-guard"]
    assert "(000 A.6)" in helps["self-help-debias"]
    for method in ("balanced-coverage", "explanation-guard", "weighted-summaries"):
        assert "FrameLab's choice" in METHODS[method].definition + helps[method], method
