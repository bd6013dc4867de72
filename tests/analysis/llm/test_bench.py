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


def _bench_module(name: str):
    import sys

    sys.path.insert(0, str(BENCH.parent))  # the scripts import bench/generation.py
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH.parent / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH.parent))
    return module


@pytest.mark.slow
def test_bench_generation_mix_smoke(tmp_path: Path) -> None:
    """Static batches and continuous batching generate the same tokens on the same length mix."""
    module = _bench_module("generation_mix")
    out = tmp_path / "mix.json"
    args = ["--n-items", "12", "--max-new-tokens", "16", "--output-median", "6", "--out", str(out)]
    result = module.main([*args, "--engines", "continuous,static:4,static:4"])
    assert json.loads(out.read_text()) == result
    continuous, static, _ = result["rows"]
    assert "error" not in continuous and "error" not in static
    # Each item stops at its own drawn length (or an earlier EOS), whichever engine runs it.
    assert continuous["output_tokens"] == static["output_tokens"]
    assert continuous["output_tokens"] <= result["lengths"]["output_tokens"]["total"]
    assert static["batches"] == static["timed_batches"] == 3 and not static["projected"]
    assert 0 < static["decode_slots_used"] <= 1
    sampled = module.main([*args, "--engines", "static:4", "--sample-batches", "1"])["rows"][0]
    assert sampled["projected"] and sampled["timed_batches"] == 1


@pytest.mark.slow
def test_bench_decode_profile_smoke(tmp_path: Path) -> None:
    module = _bench_module("decode_profile")
    profile = tmp_path / "profile.txt"
    result = module.main(
        ["--new-tokens", "8", "--no-compile", "--profile-out", str(profile), "--out",
         str(tmp_path / "decode.json")]
    )  # fmt: skip
    rates = {row["path"]: row.get("tokens_per_s") for row in result["rows"]}
    assert set(rates) == {
        "generate, static cache",
        "bare step, static cache",
        "continuous batching, 1 request",
        "profile of generate, static cache",
    }
    assert all(rate > 0 for path, rate in rates.items() if not path.startswith("profile"))
    assert "aten::" in profile.read_text()
