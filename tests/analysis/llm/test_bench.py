"""The generation benchmark runs end to end on CPU with the tiny model (figures not asserted)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "generation.py"


@pytest.mark.slow
def test_bench_generation_smoke(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_generation", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "bench.json"
    result = module.main(
        ["--n-items", "3", "--max-new-tokens", "3", "--batch-sizes", "1,3", "--out", str(out)]
    )
    assert json.loads(out.read_text()) == result
    per_item, batched = result["rows"]
    assert (per_item["batch_size"], batched["batch_size"]) == (1, 3)
    # Forced lengths: both modes produce exactly n_items * max_new_tokens tokens.
    assert per_item["output_tokens"] == batched["output_tokens"] == 9
    assert result["ratio_best_vs_per_item"] > 0
    import torch

    # The bandwidth bound is only meaningful (and only reported) on a GPU.
    assert ("batch1_fraction_of_bound" in result) == torch.cuda.is_available()
