"""Tasks end to end with a scripted backend: prompts, variants, parsing, resume, manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.llm.store import read_records
from analysis.llm.tasks import TaskInputError, TaskOptions, mix_passages, run_task
from analysis.llm.templates import get_template

REQUIRED = {
    "item_id",
    "dataset",
    "model",
    "backend",
    "task",
    "method",
    "template",
    "template_hash",
    "input",
    "output",
    "label",
    "confidence",
    "n_prompt_tokens",
    "n_output_tokens",
    "created_at",
}

REVIEWS = [
    {"item_id": "r1", "text": "The sound is clear and the price was fair."},
    {"item_id": "r2", "text": "The battery died and support never answered."},
]


def test_summarize_records_follow_the_contract_and_resume(tmp_path: Path, fake_backend) -> None:
    backend = fake_backend(lambda r: "A short summary.")
    out = tmp_path / "s.jsonl"
    first = run_task("summarize", REVIEWS, backend, out, progress=False, argv=["x"])
    assert (first.n_generated, first.n_done_before) == (2, 0)
    records = list(read_records(out))
    assert len(records) == 2
    for rec in records:
        assert set(rec) >= REQUIRED
        assert rec["output"] == "A short summary."
        assert rec["task"] == "summarize" and rec["backend"] == "fake"
        assert rec["template_hash"] == get_template("summarize", "baseline").hash(
            backend.settings.hash_fields()
        )
        assert rec["created_at"].endswith("Z")
    assert "Summarize the following text" in backend.seen[0].messages[-1]["content"]

    second = run_task("summarize", REVIEWS, backend, out, progress=False)
    assert second.n_generated == 0 and second.n_done_before == 2
    assert "nothing to generate" in second.describe()
    assert len(backend.seen) == 2  # the backend was not asked again

    # A new item is generated; the done ones are not.
    third = run_task(
        "summarize", [*REVIEWS, {"item_id": "r3", "text": "Fine."}], backend, out, progress=False
    )
    assert third.n_generated == 1
    manifest = json.loads((tmp_path / "s.jsonl.manifest.json").read_text())
    assert [r["counts"]["generated"] for r in manifest["runs"]] == [2, 0, 1]
    assert manifest["runs"][0]["seed"] == 0 and manifest["runs"][0]["template"] == "baseline"


def test_other_template_or_method_is_a_new_key(tmp_path: Path, fake_backend) -> None:
    backend = fake_backend(lambda r: "x")
    out = tmp_path / "s.jsonl"
    run_task("summarize", REVIEWS, backend, out, progress=False)
    again = run_task("summarize", REVIEWS, backend, out, template="words-100", progress=False)
    assert again.n_generated == 2
    mitigated = run_task("summarize", REVIEWS, backend, out, method="weighted", progress=False)
    assert mitigated.n_generated == 2
    assert "100 words" in backend.seen[-3].messages[-1]["content"]


def test_judge_framing_labels_and_keeps_unparsable(tmp_path: Path, fake_backend) -> None:
    answers = {"r1": '{"label": "Positive"}', "r2": "Hmm, hard to say."}
    backend = fake_backend(lambda r: answers["r1" if "clear" in r.text else "r2"])
    out = tmp_path / "j.jsonl"
    run_task("judge-framing", REVIEWS, backend, out, progress=False)
    by_id = {r["item_id"]: r for r in read_records(out)}
    assert by_id["r1"]["label"] == "positive"
    assert by_id["r2"]["label"] == "other"
    assert by_id["r2"]["output"] == "Hmm, hard to say."  # raw answer kept
    prompt = backend.seen[0].messages[-1]["content"]
    # 000 A.1: the text first, then the instruction.
    assert prompt.startswith(REVIEWS[0]["text"])
    assert prompt.endswith("Positive, Negative, or Neutral? Answer with the label alone.")


def test_judge_framing_of_summaries_reads_nested_field(tmp_path: Path, fake_backend) -> None:
    summarizer = fake_backend(lambda r: "Great value, clear sound.")
    run_task("summarize", REVIEWS, summarizer, tmp_path / "s.jsonl", progress=False)
    summaries = list(read_records(tmp_path / "s.jsonl"))
    judge = fake_backend(lambda r: "Positive" if r.text.startswith("Great") else "Negative")
    opts = TaskOptions(text_field="output")
    run_task("judge-framing", summaries, judge, tmp_path / "js.jsonl", options=opts, progress=False)
    judged = list(read_records(tmp_path / "js.jsonl"))
    assert {r["label"] for r in judged} == {"positive"}
    assert judged[0]["input"]["task"] == "summarize"  # the whole summarize record is the input
    source = TaskOptions(text_field="input.text")
    run_task(
        "judge-framing", summaries, judge, tmp_path / "jt.jsonl", options=source, progress=False
    )
    assert {r["label"] for r in read_records(tmp_path / "jt.jsonl")} == {"negative"}


def test_judging_sources_and_summaries_into_one_file_keeps_both(
    tmp_path: Path, fake_backend
) -> None:
    summarizer = fake_backend(lambda r: "Great value, clear sound.")
    run_task("summarize", REVIEWS, summarizer, tmp_path / "s.jsonl", progress=False)
    summaries = list(read_records(tmp_path / "s.jsonl"))
    judge = fake_backend(lambda r: "Positive" if r.text.startswith("Great") else "Negative")
    out = tmp_path / "judged.jsonl"
    run_task("judge-framing", REVIEWS, judge, out, progress=False)
    second = run_task(
        "judge-framing",
        summaries,
        judge,
        out,
        options=TaskOptions(text_field="output"),
        progress=False,
    )
    assert second.n_generated == 2 and second.n_done_before == 0
    assert len(list(read_records(out))) == 4


def test_vader_baseline_labels_framing(tmp_path: Path) -> None:
    from analysis.llm.backends import make_backend

    items = [
        {"item_id": "p", "text": "I love it, wonderful and great!"},
        {"item_id": "n", "text": "Terrible, awful, I hate it."},
        {"item_id": "z", "text": "The box is brown."},
    ]
    out = tmp_path / "v.jsonl"
    run_task("judge-framing", items, make_backend("vader", None), out, progress=False)
    by_id = {r["item_id"]: r for r in read_records(out)}
    assert {k: v["label"] for k, v in by_id.items()} == {
        "p": "positive",
        "n": "negative",
        "z": "neutral",
    }
    assert by_id["p"]["vader_compound"] >= 0.05 and by_id["p"]["backend"] == "vader"
    with pytest.raises(ValueError, match="only answers judge-framing"):
        run_task("summarize", items, make_backend("vader", None), tmp_path / "x.jsonl")


def test_fact_check_confidence(tmp_path: Path, fake_backend) -> None:
    backend = fake_backend(lambda r: "False [Low Confidence]")
    items = [{"item_id": "f1", "text": "The moon is made of cheese.", "is_true": 0}]
    run_task(
        "fact-check", items, backend, tmp_path / "f.jsonl", template="confidence", progress=False
    )
    [rec] = read_records(tmp_path / "f.jsonl")
    assert (rec["label"], rec["confidence"]) == ("false", "low")
    assert rec["input"]["is_true"] == 0


def test_reframe_prefix_and_suffix_variants(tmp_path: Path, fake_backend) -> None:
    def answer(r):
        return f'Answer: "Sadly, {r.text}"'

    backend = fake_backend(answer)
    items = [{"item_id": "s1", "text": "The food was great.", "base_sentiment": "Positive"}]
    run_task("reframe", items, backend, tmp_path / "r.jsonl", progress=False)
    records = sorted(read_records(tmp_path / "r.jsonl"), key=lambda r: r["frame_position"])
    assert [r["frame_position"] for r in records] == ["prefix", "suffix"]
    assert [r["variant"] for r in records] == ["frame_position=prefix", "frame_position=suffix"]
    assert records[0]["output"] == "Sadly, The food was great."
    assert records[0]["statement_kept"] is True
    prompt = backend.seen[0].messages[-1]["content"]
    assert "negative prefix" in prompt and "positive sentiment" in prompt
    assert "bright screen" in prompt  # the one-shot example for positive statements
    with pytest.raises(TaskInputError, match="base_sentiment"):
        run_task("reframe", [{"item_id": "x", "text": "t"}], backend, tmp_path / "e.jsonl")


def test_perspective_summary_both_orders_first_sentence(tmp_path: Path, fake_backend) -> None:
    backend = fake_backend(lambda r: "Workers gain. And more text.")
    items = [{"item_id": "p1", "left": "L1. L2.", "right": "R1. R2."}]
    run_task("perspective-summary", items, backend, tmp_path / "p.jsonl", progress=False)
    records = list(read_records(tmp_path / "p.jsonl"))
    assert {(r["perspective"], r["order"]) for r in records} == {
        ("left", "left_first"),
        ("right", "left_first"),
        ("left", "right_first"),
        ("right", "right_first"),
    }
    assert {r["output"] for r in records} == {"Workers gain."}
    assert records[0]["raw_output"] == "Workers gain. And more text."
    passages = {r.text for r in backend.seen}
    assert passages == {"L1.\n\nR1.\n\nL2.\n\nR2.", "R1.\n\nL1.\n\nR2.\n\nL2."}


def test_mix_passages_keeps_single_newline_passages_whole() -> None:
    # PoliSum separates passages by single newlines; they were interleaved sentence by sentence.
    left = "Taxes hurt jobs. Cut them.\nThe U.S. economy needs growth."
    right = "Schools need money. Fund them.\nHealth care is a right."
    assert mix_passages(left, right).split("\n\n") == [
        "Taxes hurt jobs. Cut them.",
        "Schools need money. Fund them.",
        "The U.S. economy needs growth.",
        "Health care is a right.",
    ]


def test_mix_passages_uneven_paragraphs() -> None:
    assert mix_passages("A\n\nB\n\nC", "X") == "A\n\nX\n\nB\n\nC"


def test_judge_pair_both_orders_maps_names_to_systems(tmp_path: Path, fake_backend) -> None:
    backend = fake_backend(lambda r: "summary_1")  # always the first shown: a position bias
    items = [
        {
            "item_id": "a1",
            "text": "Source article.",
            "human_summary": "Human wrote this.",
            "generated_summary": "Model wrote this.",
        }
    ]
    run_task("judge-pair", items, backend, tmp_path / "jp.jsonl", progress=False)
    by_order = {r["order"]: r["label"] for r in read_records(tmp_path / "jp.jsonl")}
    assert by_order == {"gt_first": "gt", "generated_first": "generated"}
    contents = [r.messages[-1]["content"] for r in backend.seen]
    human_first = sorted(c.index("Human wrote") < c.index("Model wrote") for c in contents)
    assert human_first == [False, True]


def test_missing_text_field_names_item_and_fields(tmp_path: Path, fake_backend) -> None:
    with pytest.raises(TaskInputError, match=r"item 'x' has no field 'text'.*body"):
        run_task(
            "summarize", [{"item_id": "x", "body": "b"}], fake_backend(str), tmp_path / "o.jsonl"
        )


def test_duplicate_ids_are_rejected(tmp_path: Path, fake_backend) -> None:
    items = [{"item_id": "x", "text": "a"}, {"item_id": "x", "text": "b"}]
    with pytest.raises(TaskInputError, match="duplicate"):
        run_task("summarize", items, fake_backend(str), tmp_path / "o.jsonl")


def test_failed_completions_are_not_stored_and_retried(tmp_path: Path) -> None:
    from analysis.llm.backends.base import Completion, GenerationSettings

    class FailsUntilFixed:
        """Answers every request with an HTTP 500 until ``fail`` is switched off."""

        name, model_id, settings = "fails_until_fixed", "m", GenerationSettings()

        def __init__(self) -> None:
            self.fail = True

        def generate(self, requests):
            for r in requests:
                yield r, Completion("", error="HTTP 500") if self.fail else Completion("ok")

        def info(self):
            return {}

    backend = FailsUntilFixed()
    out = tmp_path / "o.jsonl"
    summary = run_task("summarize", REVIEWS, backend, out, progress=False)
    assert summary.n_failed == 2
    assert list(read_records(out)) == []
    assert "failed" in summary.describe()
    backend.fail = False
    assert run_task("summarize", REVIEWS, backend, out, progress=False).n_generated == 2


def test_crash_mid_run_keeps_results_and_resumes(tmp_path: Path) -> None:
    from analysis.llm.backends.base import Completion, GenerationSettings

    class Crashing:
        name, model_id, settings = "crashing", "m", GenerationSettings()

        def __init__(self, crash_after: int | None) -> None:
            self.crash_after = crash_after
            self.asked: list[str] = []

        def generate(self, requests):
            for i, r in enumerate(requests):
                if self.crash_after is not None and i == self.crash_after:
                    raise RuntimeError("GPU fell off the bus")
                self.asked.append(r.key)
                yield r, Completion("ok", 1, 1)

        def info(self):
            return {"backend": self.name}

    items = [{"item_id": str(i), "text": f"t{i}"} for i in range(5)]
    out = tmp_path / "o.jsonl"
    with pytest.raises(RuntimeError, match="bus"):
        run_task("summarize", items, Crashing(crash_after=2), out, progress=False)
    assert len(list(read_records(out))) == 2
    manifest = json.loads((tmp_path / "o.jsonl.manifest.json").read_text())
    assert manifest["runs"][0]["status"] == "interrupted: RuntimeError"
    assert manifest["runs"][0]["counts"]["generated"] == 2
    backend = Crashing(crash_after=None)
    again = run_task("summarize", items, backend, out, progress=False)
    assert (again.n_done_before, again.n_generated) == (2, 3)
    assert len(backend.asked) == 3
    assert sorted(r["item_id"] for r in read_records(out)) == ["0", "1", "2", "3", "4"]


FACTS = [
    {"item_id": "f1", "text": "The bridge opened in 2020.", "pair_id": "p1", "truth": True},
    {"item_id": "f2", "text": "The bridge did not open in 2020.", "pair_id": "p1", "truth": False},
]


def test_changed_item_is_generated_again_and_its_old_record_kept_aside(
    tmp_path: Path, fake_backend
) -> None:
    """Regression: a re-run into the same output treated an item whose input changed as done."""
    backend = fake_backend(lambda r: "true")
    out = tmp_path / "f.jsonl"
    run_task("fact-check", FACTS, backend, out, progress=False)
    assert all(r["input_hash"] for r in read_records(out))
    # The truth of f2 is corrected; its prompt is the same, but its record must carry the fix.
    fixed = [FACTS[0], {**FACTS[1], "truth": True, "date": "2021-01-01"}]
    again = run_task("fact-check", fixed, backend, out, progress=False)
    assert (again.n_generated, again.n_done_before, again.n_changed) == (1, 1, 1)
    assert "1 generated again because their input changed" in again.describe()
    assert len(backend.seen) == 3 and backend.seen[-1].key.startswith("f2")
    records = {r["item_id"]: r for r in read_records(out)}
    assert len(list(read_records(out))) == 2  # one record per key, never two
    assert records["f2"]["input"]["truth"] is True and records["f2"]["input"]["date"]
    [old] = read_records(tmp_path / "f.stale.jsonl")
    assert old["item_id"] == "f2" and old["input"]["truth"] is False
    # Nothing changed now: nothing to do.
    assert run_task("fact-check", fixed, backend, out, progress=False).n_generated == 0


def test_records_without_an_input_hash_still_resume(tmp_path: Path, fake_backend) -> None:
    backend = fake_backend(lambda r: "true")
    out = tmp_path / "f.jsonl"
    run_task("fact-check", FACTS, backend, out, progress=False)
    old = [{k: v for k, v in r.items() if k != "input_hash"} for r in read_records(out)]
    out.write_text("".join(json.dumps(r) + "\n" for r in old))
    changed = [{**f, "date": "2021-01-01"} for f in FACTS]
    again = run_task("fact-check", changed, backend, out, progress=False)
    assert (again.n_generated, again.n_done_before) == (0, 2)
    assert not (tmp_path / "f.stale.jsonl").exists()
