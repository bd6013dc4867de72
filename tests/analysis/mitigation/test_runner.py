"""All 18 methods (and the baselines) run end to end on the tiny model through the store."""

from __future__ import annotations

import json

import pytest

from analysis.mitigation.registry import METHODS
from analysis.mitigation.runner import passes_path, run_method

DOCS = [
    {
        "item_id": "d1",
        "dataset": "reviews",
        "text": "The headphones are wonderful and the sound is great.\n\n"
        "The battery lasts a long time. Support answered quickly.\n\n"
        "The price was fair. I love them and would buy again.",
    },
    {
        "item_id": "d2",
        "dataset": "reviews",
        "text": "Sadly, the hotel was dirty. The staff were rude. The flight was on time. "
        "The price was fair and shipping fast. I would not go back.",
    },
]
FACTS = [
    {
        "item_id": "f1",
        "text": "The flight was on time.",
        "pair_id": "p1",
        "truth": True,
        "date": "2023-01-05",
    },
    {
        "item_id": "f2",
        "text": "The flight was not on time.",
        "pair_id": "p1",
        "truth": False,
        "date": "2023-01-05",
    },
]


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    from analysis.llm.backends import GenerationSettings, make_backend

    settings = GenerationSettings(max_new_tokens=6, batch_size=4)
    return make_backend("transformers", str(tiny_model_dir), settings, device="cpu")


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("name", ["baseline", *METHODS])
def test_method_runs_and_resumes(backend, tmp_path, name):
    spec = METHODS.get(name)
    task = spec.task if spec else "summarize"
    items = FACTS if task == "fact-check" else DOCS
    params = {"cutoff": "2023-06-30"} if name == "knowledge-boundary" else None
    out = tmp_path / "out.jsonl"
    run = run_method(name, items, backend, out, params=params, progress=False)
    assert run.n_generated == len(items) and run.n_failed == 0
    assert run.n_calls == len(items) * (spec.passes if spec else 1)
    records = _lines(out)
    assert [r["item_id"] for r in records] == [i["item_id"] for i in items]
    for r in records:
        assert r["method"] == name and r["task"] == task
        assert r["model"] == str(backend.model_id)
        assert r["input"]["text"] in {i["text"] for i in items}
        assert isinstance(r["output"], str)
        if task == "fact-check":
            assert r["label"] in {"true", "false", "other"}
    again = run_method(name, items, backend, out, params=params, progress=False)
    assert again.n_generated == 0 and again.n_calls == 0
    assert len(_lines(out)) == len(items)


def test_interrupted_multi_pass_method_reuses_finished_passes(backend, tmp_path):
    out = tmp_path / "out.jsonl"
    run_method("self-help-debias", DOCS, backend, out, progress=False)
    out.unlink()  # the final records are lost; the passes survive
    run = run_method("self-help-debias", DOCS, backend, out, progress=False)
    assert run.n_calls == 0 and run.n_calls_reused == 2 * len(DOCS)
    assert len(_lines(out)) == len(DOCS)
    assert len(_lines(passes_path(out))) == 2 * len(DOCS)


def test_hyperparameters_change_the_hash(backend, tmp_path):
    out = tmp_path / "out.jsonl"
    run_method("position-shuffle", DOCS, backend, out, progress=False)
    run = run_method(
        "position-shuffle", DOCS, backend, out, params={"shuffle_seed": 7}, progress=False
    )
    assert run.n_generated == len(DOCS)
    hashes = {r["template_hash"] for r in _lines(out)}
    assert len(hashes) == 2
    assert {tuple(r["hyperparameters"].items()) for r in _lines(out)} == {
        (("shuffle_seed", 42), ("seed_scope", "text"), ("sentence_split", "sentences")),
        (("shuffle_seed", 7), ("seed_scope", "text"), ("sentence_split", "sentences")),
    }


def test_decoding_method_needs_transformers(tmp_path):
    class Fake:
        name = "openai"
        model_id = "x"

    with pytest.raises(ValueError, match="needs the transformers backend"):
        run_method("mirostat", DOCS, Fake(), tmp_path / "o.jsonl", progress=False)


def test_knowledge_boundary_needs_a_cutoff(backend, tmp_path):
    with pytest.raises(ValueError, match="cutoff"):
        run_method("knowledge-boundary", FACTS, backend, tmp_path / "o.jsonl", progress=False)


class EchoBackend:
    """An ``openai``-like backend without a model: answers with the prompt's length and settings.

    It records the settings in force for each request, so a test sees which pass ran with which
    token limit.
    """

    name = "openai"

    def __init__(self) -> None:
        from analysis.llm.backends.base import GenerationSettings

        self.model_id = "echo"
        self.model = "echo"
        self.settings = GenerationSettings(max_new_tokens=50)
        self.seen: list[tuple[str, int]] = []
        self.prompts: list[str] = []

    def generate(self, requests):
        from analysis.llm.backends.base import Completion

        for r in requests:
            self.seen.append((r.key.split("\x1f")[1], self.settings.max_new_tokens))
            prompt = r.messages[-1]["content"]
            self.prompts.append(prompt)
            yield r, Completion(f"FINAL_SUMMARY: {len(prompt)} chars", 10, 3)

    def info(self):
        return {"backend": self.name, "model": self.model_id}


def test_self_help_rewrite_pass_runs_with_300_tokens(tmp_path):
    backend = EchoBackend()
    run_method("self-help-debias", DOCS[:1], backend, tmp_path / "o.jsonl", progress=False)
    assert backend.seen == [("draft", 50), ("rewrite", 300)]
    assert backend.settings.max_new_tokens == 50  # restored afterwards


def test_prompt_and_chunk_methods_run_on_a_server_backend(tmp_path):
    from analysis.mitigation.chunking import chunk_document

    out = tmp_path / "o.jsonl"
    for name in ("chain-of-thought", "partial-summaries", "weighted-summaries", "cloze"):
        run_method(name, DOCS, EchoBackend(), out, progress=False)
    records = {(r["method"], r["item_id"]): r for r in _lines(out)}
    cot = records[("chain-of-thought", "d1")]
    assert cot["section_found"] is True and cot["output"].endswith("chars")
    partial = records[("partial-summaries", "d1")]
    chunks = chunk_document(DOCS[0]["text"])
    # Each chunk is summarised on its own, with the plain summarisation request.
    assert [partial["passes"][f"chunk-{i}"] for i in (1, 2, 3)] == [
        f"FINAL_SUMMARY: {len(f'Summarize the following text:{chr(10) * 2}{c}')} chars"
        for c in chunks
    ]
    weighted = records[("weighted-summaries", "d2")]
    assert weighted["budgets"] == [33, 34, 33]
    # Three part summaries, each read after its FINAL_SUMMARY: marker, joined.
    assert weighted["section_found"] is True and weighted["output"].count("chars") == 3


def test_weighted_summaries_ask_for_about_the_budget_under_a_generous_cap(tmp_path):
    """The prompt asks for about 33/34/33 of 100 model tokens; the hard limit is 3x that, so a
    part summary is not cut mid-sentence at its budget."""
    backend = EchoBackend()
    run_method("weighted-summaries", DOCS[:1], backend, tmp_path / "o.jsonl", progress=False)
    assert sorted(backend.seen) == [("part-1", 99), ("part-2", 102), ("part-3", 99)]
    [record] = _lines(tmp_path / "o.jsonl")
    assert record["hyperparameters"]["target_tokens"] == 100
    assert record["budgets"] == [33, 34, 33]
    assert sum("in about 34 tokens" in p for p in backend.prompts) == 1
    assert not any("at most" in p for p in backend.prompts)
    backend = EchoBackend()
    run_method(
        "weighted-summaries",
        DOCS[:1],
        backend,
        tmp_path / "o2.jsonl",
        params={"target_tokens": 10, "cap_factor": 1.5},
        progress=False,
    )
    assert sorted(backend.seen) == [("part-1", 5), ("part-2", 6), ("part-3", 5)]


def test_method_runs_write_a_manifest_like_generate(tmp_path):
    out = tmp_path / "o.jsonl"
    run = run_method("chain-of-thought", DOCS, EchoBackend(), out, progress=False, argv=["x"])
    again = run_method("chain-of-thought", DOCS, EchoBackend(), out, progress=False)
    manifest = json.loads((tmp_path / "o.jsonl.manifest.json").read_text())
    assert run.manifest == again.manifest == tmp_path / "o.jsonl.manifest.json"
    first, second = manifest["runs"]
    [record] = _lines(out)[:1]
    assert first["status"] == "completed" and first["method"] == "chain-of-thought"
    assert first["template_hash"] == record["template_hash"]
    assert set(first["templates"]) == {"mitigate-cot"}
    assert first["settings"]["max_new_tokens"] == 50
    assert first["backend"] == {"backend": "openai", "model": "echo"}
    assert first["counts"]["generated"] == 2 and first["counts"]["model_calls"] == 2  # one prompt
    assert first["argv"] == ["x"]
    assert second["counts"]["already_done"] == 2 and second["counts"]["generated"] == 0


def test_own_summarize_prompt_file_reaches_the_methods_built_on_it(tmp_path):
    from analysis.llm.templates import load_template_file

    own = tmp_path / "paper.txt"
    own.write_text("Condense this article: {text}\n")
    templates = {"summarize": load_template_file(own, "summarize")}
    out = tmp_path / "o.jsonl"
    for name in ("baseline", "position-shuffle"):
        backend = EchoBackend()
        run_method(name, DOCS[:1], backend, out, progress=False, templates=templates)
        # The shuffle keeps its own prompt (it tells the model the text is out of order).
        assert backend.prompts[0].startswith("Condense this article: ") is (name == "baseline")
    run_method("baseline", DOCS[:1], EchoBackend(), out, progress=False)
    hashes = {(r["method"], r["template_hash"]) for r in _lines(out)}
    assert len(hashes) == 3  # the own prompt is another key than the default's
    runs = json.loads((tmp_path / "o.jsonl.manifest.json").read_text())["runs"]
    assert runs[0]["template_files"] == {"paper": str(own)}


def test_part_based_methods_refuse_too_short_sources(backend, tmp_path):
    short = [{"item_id": "s1", "text": "Too short"}]
    with pytest.raises(ValueError, match="item 's1' has fewer than 3 words"):
        run_method("balanced-coverage", short, backend, tmp_path / "o.jsonl", progress=False)


def test_duplicate_item_ids_are_refused(backend, tmp_path):
    with pytest.raises(ValueError, match=r"duplicate item IDs \['d1'\]"):
        run_method("cloze", [DOCS[0], DOCS[0]], backend, tmp_path / "o.jsonl", progress=False)


def test_changed_item_is_run_again_by_a_method(tmp_path):
    """Regression: the resume key alone treated an item with a corrected input as done."""
    facts = [
        {"item_id": "f1", "text": "The bridge opened in 2020.", "pair_id": "p1", "truth": True},
        {"item_id": "f2", "text": "The bridge did not open.", "pair_id": "p1", "truth": False},
    ]
    out = tmp_path / "o.jsonl"
    for name in ("baseline", "epistemic-tagging"):
        run_method(name, facts, EchoBackend(), out, task="fact-check", progress=False)
    fixed = [facts[0], {**facts[1], "text": "The bridge never opened."}]
    backend = EchoBackend()
    run = run_method("epistemic-tagging", fixed, backend, out, task="fact-check", progress=False)
    assert (run.n_generated, run.n_done_before, run.n_changed) == (1, 1, 1)
    assert "1 run again because their input changed" in run.describe()
    manifest = json.loads((tmp_path / "o.jsonl.manifest.json").read_text())
    assert manifest["runs"][-1]["counts"]["input_changed"] == 1
    assert any("The bridge never opened." in p for p in backend.prompts)
    records = _lines(out)
    assert len(records) == 4  # baseline f1, f2 and epistemic-tagging f1, f2: one per key
    tagged = {r["item_id"]: r for r in records if r["method"] == "epistemic-tagging"}
    assert tagged["f2"]["input"]["text"] == "The bridge never opened."
    assert [(r["method"], r["item_id"]) for r in _lines(tmp_path / "o.stale.jsonl")] == [
        ("epistemic-tagging", "f2")
    ]
    # The baseline records of the same file are another key: the baseline re-runs f2 on its own.
    again = run_method("baseline", fixed, EchoBackend(), out, task="fact-check", progress=False)
    assert (again.n_generated, again.n_done_before) == (1, 1)
