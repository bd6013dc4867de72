"""The decoding processors and Attention-Sort on a CUDA device in bfloat16 (skipped without one)."""

from __future__ import annotations

import pytest
import torch

from analysis.mitigation import decoding as dec
from tests.analysis.mitigation.conftest import SOURCE

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    # torch 2.11 captures the tiny model's compiled decode step in CUDA-graph partitions, some of
    # which hold no kernel; it says so, harmlessly, for each (seen on an H100, 2026-11-24).
    pytest.mark.filterwarnings("ignore:The CUDA Graph is empty:UserWarning"),
]


@pytest.fixture(scope="module", params=[False, True], ids=["dynamic-cache", "static-cache"])
def cuda_backend(request, tiny_model_dir):
    """The engine on CUDA, with the default cache and with ``--static-cache`` (compiled)."""
    from analysis.llm.backends import GenerationSettings, make_backend

    settings = GenerationSettings(max_new_tokens=8, batch_size=4)
    return make_backend(
        "transformers", str(tiny_model_dir), settings, device="cuda", static_cache=request.param
    )


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


def test_static_cache_compiles_and_keeps_the_outputs(tiny_model_dir):
    """``--static-cache`` compiles the decode step and gives the default cache's greedy texts.

    In float32 (bf16 rounding could flip a near-tie of the random tiny model's logits).
    """
    from analysis.llm.backends import GenerationSettings, make_backend
    from analysis.llm.backends.base import Request

    texts = [SOURCE, SOURCE + " kilo lima", "alpha bravo", SOURCE[:40]]
    reqs = [Request(str(i), [{"role": "user", "content": t}], t) for i, t in enumerate(texts)]
    outputs = {}
    for static in (False, True):
        settings = GenerationSettings(max_new_tokens=12, min_new_tokens=12, batch_size=2)
        backend = make_backend(
            "transformers", str(tiny_model_dir), settings, device="cuda", dtype="float32",
            static_cache=static,
        )  # fmt: skip
        outputs[static] = {r.key: c.text for r, c in backend.generate(reqs)}
        assert hasattr(backend.model, "_compiled_call") == static
        assert backend.info()["static_cache"] is static
    assert outputs[True] == outputs[False]


def test_continuous_batching_is_the_default_on_cuda_and_keeps_the_outputs(tiny_model_dir):
    """Plain greedy generation on CUDA takes continuous batching, with the static path's texts.

    In float32, as the static-cache check above; a mitigation's logits processors keep the
    static path (tests/analysis/llm/test_transformers_backend.py).
    """
    from analysis.llm.backends import GenerationSettings, make_backend
    from analysis.llm.backends.base import Request

    texts = [SOURCE, SOURCE + " kilo lima", "alpha bravo", SOURCE[:40], "x " * 90]
    reqs = [Request(str(i), [{"role": "user", "content": t}], t) for i, t in enumerate(texts)]
    outputs = {}
    settings = GenerationSettings(max_new_tokens=12, batch_size=2)
    for batching in ("auto", "static"):
        backend = make_backend(
            "transformers", str(tiny_model_dir), settings, device="cuda", dtype="float32",
            batching=batching,
        )  # fmt: skip
        outputs[batching] = {
            r.key: (c.text, c.n_prompt_tokens, c.n_output_tokens) for r, c in backend.generate(reqs)
        }
        assert backend.info()["batching"] == ("continuous" if batching == "auto" else "static")
    assert outputs["auto"] == outputs["static"]


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
