"""The decoding processors and Attention-Sort on a CUDA device in bfloat16 (skipped without one)."""

from __future__ import annotations

import pytest
import torch

from analysis.mitigation import decoding as dec
from tests.analysis.mitigation.conftest import SOURCE

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
def cuda_backend(tiny_model_dir):
    from analysis.llm.backends import GenerationSettings, make_backend

    settings = GenerationSettings(max_new_tokens=8, batch_size=4)
    return make_backend("transformers", str(tiny_model_dir), settings, device="cuda")


@pytest.mark.parametrize(
    "name",
    ["balanced-coverage", "weighted-tokens", "mirostat", "rejection-sampling", "self-debias",
     "explanation-guard", "attention-sort"],
)  # fmt: skip
def test_method_runs_on_cuda_in_bf16(cuda_backend, tmp_path, name):
    from analysis.mitigation.runner import run_method

    items = [{"item_id": "a", "text": SOURCE}, {"item_id": "b", "text": SOURCE + " kilo lima"}]
    run = run_method(name, items, cuda_backend, tmp_path / "o.jsonl", progress=False)
    assert run.n_generated == 2 and run.n_failed == 0
    assert next(cuda_backend.model.parameters()).dtype == torch.bfloat16


def test_mirostat_on_cuda_tracks_the_target():
    logits = -1.1 * torch.log(torch.arange(1, 1001, device="cuda", dtype=torch.float32))[None]
    proc = dec.Mirostat(1, variant="v2")
    gen = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.zeros(1, 1, dtype=torch.long, device="cuda")
    for _ in range(1000):
        out = proc(ids, logits.clone())
        token = torch.multinomial(torch.softmax(out, -1), 1, generator=gen)
        ids = torch.cat([ids, token], dim=1)
    import numpy as np

    assert np.concatenate(proc.observed)[200:].mean() == pytest.approx(2.0, abs=0.15)
