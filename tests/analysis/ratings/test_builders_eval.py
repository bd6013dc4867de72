"""Stimulus sets for the evaluation tasks from generation records."""

from __future__ import annotations

import json

import pytest

from analysis.llm.builders import BuildError
from analysis.llm.builders_eval import preference_set, rating_set, summary_metrics, write_jsonl


def perspective_record(item, perspective, model, output, order="left_first"):
    return {
        "item_id": item,
        "task": "perspective-summary",
        "model": model,
        "perspective": perspective,
        "order": order,
        "variant": f"order={order},perspective={perspective}",
        "input": {"item_id": item, "left": f"{item} left passage.", "right": f"{item} right."},
        "output": output,
    }


def test_rating_set_groups_models_per_source_and_perspective(tmp_path):
    records = [
        perspective_record("a", "left", "org/Mistral-7B", "M left."),
        perspective_record("a", "left", "org/Mistral-7B", "ignored", order="right_first"),
        perspective_record("a", "left", "gpt-4o", "G left."),
        perspective_record("a", "right", "org/Mistral-7B", "M right."),
        perspective_record("a", "right", "gpt-4o", "G right (old)."),
        perspective_record("a", "right", "gpt-4o", "G right."),  # a rerun replaces
        {"item_id": "a", "task": "judge-pair", "model": "x"},  # other tasks are skipped
    ]
    refs = {("a", "left"): "Ref left.", ("a", "right"): "Ref right."}
    sources = rating_set(records, references=refs)
    assert [s["item_id"] for s in sources] == ["a.left", "a.right"]
    left = sources[0]
    assert left["passages"][0]["text"] == "a left passage."
    assert [(s["system"], s["text"]) for s in left["summaries"]] == [
        ("reference", "Ref left."),
        ("mistral-7b", "M left."),
        ("gpt-4o", "G left."),
    ]
    assert sources[1]["summaries"][-1]["text"] == "G right."
    assert left["summaries"][1]["summary_id"] == "a.left.mistral-7b"
    path = write_jsonl(sources, tmp_path / "set" / "rating.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["item_id"] for line in lines] == ["a.left", "a.right"]

    metrics = {m["summary_id"]: m for m in summary_metrics(sources)}
    assert set(metrics) == {
        "a.left.mistral-7b",
        "a.left.gpt-4o",
        "a.right.mistral-7b",
        "a.right.gpt-4o",
    }
    assert 0 <= metrics["a.left.gpt-4o"]["similarity"] <= 1


def test_rating_set_errors():
    with pytest.raises(BuildError, match="fewer than two"):
        rating_set([perspective_record("a", "left", "m", "x")])
    with pytest.raises(BuildError, match="both become system"):
        rating_set(
            [
                perspective_record("a", "left", "one/model", "x"),
                perspective_record("a", "left", "two/model", "y"),
            ]
        )
    with pytest.raises(BuildError, match="no perspective-summary"):
        rating_set([])


def test_preference_set_from_judge_records_and_items():
    item = {
        "item_id": "n1",
        "text": "Source.",
        "human_summary": "Human.",
        "generated_summary": "Generated.",
        "model": "org/Llama-3-8B",
    }
    records = [
        {"item_id": "n1", "task": "judge-pair", "order": o, "input": item, "label": "gt"}
        for o in ("gt_first", "generated_first")
    ]
    pairs = preference_set(records)
    assert pairs == [
        {
            "pair_id": "n1",
            "source_id": "n1",
            "source": "Source.",
            "a": {"system": "human", "text": "Human."},
            "b": {"system": "llama-3-8b", "text": "Generated."},
        }
    ]
    assert preference_set([item], generated_system="gen")[0]["b"]["system"] == "gen"
    with pytest.raises(BuildError, match="identical"):
        preference_set([{**item, "generated_summary": "Human."}])
