"""Chunk, shuffle, attention-sort, prompt templates and the registry."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from analysis.mitigation import chunking, prompts, registry
from analysis.mitigation.rerank import attention_sort, paragraph_attention


def test_chunks_have_floor_of_a_third_of_the_tokens():
    text = " ".join(f"w{i}" for i in range(11))
    chunks = chunking.chunk_document(text)
    sizes = [len(c.split()) for c in chunks]
    assert sizes == [3, 3, 5]  # floor(11 / 3) = 3; the last chunk keeps the remainder
    assert " ".join(chunks) == text


def test_chunking_refuses_a_too_short_document():
    with pytest.raises(ValueError, match="fewer than 3 chunks"):
        chunking.chunk_document("one two")


@pytest.mark.parametrize("target", [0, 1, 2, 10, 50, 99, 100, 101, 250, 333])
def test_weighted_budgets_sum_to_the_target(target):
    budgets = chunking.weighted_budgets(target)
    assert sum(budgets) == target
    assert max(abs(b - target * w) for b, w in zip(budgets, chunking.WEIGHTS, strict=True)) < 1


def test_weighted_budgets_of_100_words_are_33_34_33():
    assert chunking.weighted_budgets(100) == [33, 34, 33]


def test_each_text_gets_its_own_permutation_from_the_seed_and_its_id(tmp_path):
    """Seed 42 alone gives every text with the same sentence count the same permutation; the
    default combines it with the item id, recorded in each record."""
    from analysis.mitigation.runner import run_method
    from tests.analysis.mitigation.test_runner import EchoBackend

    words = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel"]
    docs = [
        {"item_id": f"t{n}", "text": " ".join(f"{w} comes in text {n}." for w in words)}
        for n in range(4)
    ]

    def positions(record):  # the original position of each sentence, in shuffled order
        return [words.index(w.split()[0]) for w in record["shuffled_text"].split(". ")]

    out = tmp_path / "own.jsonl"
    run_method("position-shuffle", docs, EchoBackend(), out, progress=False)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["shuffle_seed_used"] for r in records] == ["42:t0", "42:t1", "42:t2", "42:t3"]
    assert len({tuple(positions(r)) for r in records}) == 4
    for r in records:
        text = next(d["text"] for d in docs if d["item_id"] == r["item_id"])
        assert r["shuffled_text"] == chunking.shuffle_sentences(text, f"42:{r['item_id']}")
    fixed = tmp_path / "fixed.jsonl"
    run_method("position-shuffle", docs, EchoBackend(), fixed, progress=False,
               params={"seed_scope": "fixed"})  # fmt: skip
    same = [json.loads(line) for line in fixed.read_text().splitlines()]
    assert len({tuple(positions(r)) for r in same}) == 1
    with pytest.raises(ValueError, match="seed_scope must be one of"):
        chunking.text_seed(42, "t0", "global")


def test_shuffle_is_deterministic_with_seed_42():
    text = "One. Two. Three. Four. Five. Six. Seven. Eight."
    first = chunking.shuffle_sentences(text)
    assert first == chunking.shuffle_sentences(text, seed=42)
    assert sorted(first.split()) == sorted(text.split())  # a permutation of the sentences
    assert first != text
    # The permutation is the one random.Random(42) applies to eight positions.
    order = list(range(8))
    random.Random(42).shuffle(order)
    sentences = text.split(" ")
    assert first == " ".join(sentences[i] for i in order)
    assert chunking.shuffle_sentences(text, seed=7) != first


def test_paragraphs_fall_back_to_sentences():
    assert chunking.paragraphs("A b.\n\nC d.") == ["A b.", "C d."]
    assert chunking.paragraphs("A b. C d.") == ["A b.", "C d."]
    assert chunking.paragraphs("The U.S. Senate met. Mr. Li left.") == [
        "The U.S. Senate met.",
        "Mr. Li left.",
    ]


def test_shuffle_keeps_abbreviations_whole_and_periods_is_the_literal_option():
    text = "The U.S. Senate met. Mr. Li left. Dr. Ng stayed. It rained."
    units = ["The U.S. Senate met.", "Mr. Li left.", "Dr. Ng stayed.", "It rained."]
    shuffled = chunking.shuffle_sentences(text)
    order = list(range(4))
    random.Random(42).shuffle(order)
    assert shuffled == " ".join(units[i] for i in order)
    # The seed description taken literally cuts "U.S." and "Mr." apart.
    literal = chunking.shuffle_sentences(text, split="periods")
    assert "The U.S. Senate met." in shuffled and "The U.S. Senate met." not in literal
    with pytest.raises(ValueError, match="split must be one of"):
        chunking.shuffle_sentences(text, split="words")


def test_extract_section_handles_decorated_and_missing_markers():
    assert prompts.extract_section("x\n**FINAL_SUMMARY**: the end") == ("the end", True)
    assert prompts.extract_section("Reasoning.\nAnswer: False", "Answer") == ("False", True)
    assert prompts.extract_section("plain") == ("plain", False)


def test_templates_are_registered_with_the_engine():
    from analysis.llm.templates import get_template

    tpl = get_template("fact-check", "mitigate-knowledge-boundary")
    text = tpl.messages(text="S.", cutoff="2023-04-30")[-1]["content"]
    assert "2023-04-30" in text and "S." in text
    cloze = prompts.step_template("cloze")
    assert prompts.template("summarize", "cloze") is cloze
    for name in ("BEGIN", "MIDDLE", "END", "FINAL_SUMMARY"):
        assert name in cloze.user


def test_registry_has_the_18_methods_of_the_seed_study():
    methods = registry.METHODS
    assert len(methods) == 18
    families = [m.family for m in methods.values()]
    assert {f: families.count(f) for f in registry.FAMILIES} == {
        "prompt": 5,
        "fact-checking": 3,
        "chunk": 2,
        "re-rank": 2,
        "decoding": 6,
    }
    assert sum(m.task == "summarize" for m in methods.values()) == 15
    for m in methods.values():
        if m.family == "decoding" or m.name == "attention-sort":
            assert m.backends == ("transformers",)
        else:
            assert set(m.backends) == {"transformers", "openai"}
    defaults = {n: m.defaults() for n, m in methods.items()}
    assert defaults["balanced-coverage"] == {"gamma": 1.5, "tolerance": 0.05}
    assert defaults["weighted-tokens"]["negative"] == 0.3
    assert defaults["weighted-tokens"]["middle"] == 2.0
    assert defaults["mirostat"] == {"target": 2.0, "eta": 0.1, "variant": "temperature"}
    assert defaults["rejection-sampling"] == {"top_k": 5}
    assert defaults["self-debias"] == {"decay": 10.0, "refresh_every": 4}
    assert defaults["explanation-guard"]["check_every"] == 5
    assert defaults["position-shuffle"] == {
        "shuffle_seed": 42,
        "seed_scope": "text",
        "sentence_split": "sentences",
    }
    assert defaults["attention-sort"] == {"iterations": 2}
    assert defaults["self-help-debias"] == {"rewrite_max_new_tokens": 300}
    assert defaults["partial-summaries"] == {"n_chunks": 3}


def test_mirostat_targets_primacy_as_the_paper_lists_it():
    assert registry.get_method("mirostat").target_bias == "primacy"


def test_resolve_params_converts_and_rejects_unknown_names():
    spec = registry.get_method("mirostat")
    assert registry.resolve_params(spec, {"target": "3"}) == {
        "target": 3.0,
        "eta": 0.1,
        "variant": "temperature",
    }
    with pytest.raises(ValueError, match="has no hyperparameter 'mu'"):
        registry.resolve_params(spec, {"mu": 1})
    with pytest.raises(KeyError, match="unknown mitigation method"):
        registry.get_method("nope")


def test_method_table_lists_every_method():
    table = registry.method_table()
    assert len(table) == 18
    assert list(table.columns[:6]) == [
        "method",
        "family",
        "task",
        "target_bias",
        "hyperparameters",
        "backends",
    ]
    row = table.set_index("method").loc["mirostat"]
    assert row["hyperparameters"] == "target=2.0, eta=0.1, variant=temperature"


def test_paragraph_attention_sums_to_the_attention_on_the_units(tiny):
    model, tok = tiny
    units = ["The battery lasts a long time.", "The price was fair."]
    prompt = "Summarize:\n" + "\n\n".join(units) + "\nSummary:"
    scores = paragraph_attention(model, tok, prompt, units)
    assert scores.shape == (2,) and np.all(scores > 0) and np.all(scores < 1)


def test_paragraph_attention_equals_the_models_attention_outputs(tiny, tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    model, tok = tiny
    units = ["Alpha bravo charlie.", "The battery lasts a long time.", "I love them."]
    prompt = "Summarize:\n" + "\n\n".join(units) + "\nSummary:"
    enc = tok(prompt, return_tensors="pt", add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc.pop("offset_mapping")[0].tolist()
    with torch.inference_mode():
        att = model(**enc, output_attentions=True).attentions
    last = torch.stack([a[0, :, -1, :] for a in att]).mean(dim=(0, 1)).numpy()
    expected = []
    for unit in units:
        a = prompt.index(unit)
        b = a + len(unit)
        expected.append(last[[i for i, (s, e) in enumerate(offsets) if s < b and e > a]].mean())
    assert np.allclose(paragraph_attention(model, tok, prompt, units), expected, atol=1e-6)
    # An SDPA model is switched to eager attention for the measurement, then back.
    sdpa = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa")
    assert np.allclose(paragraph_attention(sdpa, tok, prompt, units), expected, atol=1e-5)
    assert sdpa.config._attn_implementation == "sdpa"


def test_attention_sort_orders_units_from_least_to_most_attended(tiny):
    model, tok = tiny
    text = "Alpha bravo charlie.\n\nThe battery lasts a long time.\n\nI love them.\n\nKilo lima."

    def render(parts, joiner: str) -> str:
        return "Summarize:\n" + joiner.join(parts) + "\nSummary:"

    final, joiner, history = attention_sort(model, tok, text, render, iterations=2)
    reordered = joiner.join(final)
    units = chunking.paragraphs(text)
    assert sorted(final) == sorted(units) and joiner == "\n\n"
    first = history[0]
    expected = [units[i] for i in np.argsort(first, kind="stable")]
    second_order = [expected[i] for i in np.argsort(history[1], kind="stable")]
    assert chunking.paragraphs(reordered) == second_order
    assert len(history) == 2
