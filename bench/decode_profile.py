"""Batch-1 decode against the memory-bandwidth bound, and where the rest of a step goes.

At batch 1 each decode step reads every weight once, so bandwidth / weight bytes bounds the
steps per second. This script measures, on one model and one prompt:

1. ``generate`` with the engine's static KV cache (transformers compiles the decode step and
   replays it as a CUDA graph): tokens per second and the share of the bound;
2. the same decode step without ``generate``: the model called with a ``StaticCache`` under
   ``torch.compile(mode="reduce-overhead")``, greedy argmax in a plain loop (what the step
   itself costs);
3. continuous batching (``ContinuousBatchingManager``) with the one request;
4. a ``torch.profiler`` trace of (1): GPU kernel time per step against the step's wall time,
   and the host-side operations that take the rest (written as a table to ``--profile-out``).

CPU smoke run: ``python bench/decode_profile.py --new-tokens 16`` (tiny model, no compile).
GPU run: docs/benchmarks.md ("Batch-1 decode").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_json  # noqa: E402
from generation import copy_bandwidth_tbs, header, load, model_arguments, sync  # noqa: E402
from generation_mix import cache_config  # noqa: E402


def timed(fn) -> float:
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def static_config(tok, new_tokens: int, static: bool = True):
    """Greedy, exactly ``new_tokens`` tokens (EOS suppressed until then)."""
    from transformers import GenerationConfig

    return GenerationConfig(
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=False,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        cache_implementation="static" if static else None,
    )


def generate_rate(model, tok, ids, new_tokens: int, static: bool) -> tuple[float, float]:
    """(warm-up seconds, decode tokens/s) of ``generate`` at batch 1, prefill subtracted.

    The prefill-only run stops through a stopping criterion rather than a smaller
    ``max_new_tokens``: the static cache's length, and so the compiled graph, stay the same.
    """
    import torch
    from transformers import MaxLengthCriteria, StoppingCriteriaList

    config = static_config(tok, new_tokens, static)

    def run(n: int) -> None:
        stop = StoppingCriteriaList([MaxLengthCriteria(max_length=ids.shape[1] + n)])
        with torch.inference_mode():
            model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                generation_config=config,
                stopping_criteria=stop,
            )

    warm = timed(lambda: run(new_tokens)) + timed(lambda: run(1))
    one = min(timed(lambda: run(1)) for _ in range(3))  # prefill + first token
    full = min(timed(lambda: run(new_tokens)) for _ in range(2))
    return warm, (new_tokens - 1) / (full - one)


def bare_step_rate(model, ids, new_tokens: int, compile_step: bool) -> tuple[float, float]:
    """(warm-up seconds, steps/s) of the model's own decode step with a static cache."""
    import torch
    from transformers import StaticCache

    device = ids.device
    cache = StaticCache(config=model.config, max_cache_len=ids.shape[1] + new_tokens + 8)
    forward = model.forward
    if compile_step:
        forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)

    def decode(steps: int) -> None:
        with torch.inference_mode():
            cache.reset()
            pos = torch.arange(ids.shape[1], device=device)
            out = model(input_ids=ids, cache=cache, cache_position=pos, use_cache=True)
            token = out.logits[:, -1:].argmax(-1)
            for i in range(steps):
                pos = torch.tensor([ids.shape[1] + i], device=device)
                out = forward(input_ids=token, cache=cache, cache_position=pos, use_cache=True)
                token = out.logits[:, -1:].argmax(-1).clone()

    warm = timed(lambda: decode(8)) + timed(lambda: decode(8))
    short = min(timed(lambda: decode(1)) for _ in range(3))
    full = min(timed(lambda: decode(new_tokens)) for _ in range(2))
    return warm, (new_tokens - 1) / (full - short)


def continuous_rate(model, tok, ids, new_tokens: int) -> tuple[float, float]:
    """(warm-up seconds, tokens/s) of one request through continuous batching."""
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=new_tokens,
        do_sample=False,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    prompt = ids[0].tolist()
    start = time.perf_counter()
    with model.continuous_batching_context_manager(
        generation_config=config,
        continuous_batching_config=cache_config(model, [prompt], new_tokens, rows=1),
        block=True,
        timeout=30,
    ) as manager:
        warm = time.perf_counter() - start
        best = 0.0
        for n in range(3):
            sync()
            begin = time.perf_counter()
            manager.add_request(prompt, request_id=f"r{n}", max_new_tokens=new_tokens)
            while True:
                result = manager.get_result(request_id=f"r{n}", timeout=1)
                if result is not None and result.is_finished():
                    break
                if result is None and not manager.is_running():
                    raise RuntimeError("the continuous-batching manager stopped")
            sync()
            best = max(best, len(result.generated_tokens) / (time.perf_counter() - begin))
    return warm, best


def profile_generate(model, tok, ids, new_tokens: int, out: str | None) -> dict:
    """GPU kernel time per decode step vs wall time, from a profile of a static-cache run."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    config = static_config(tok, new_tokens)  # the generate step's shape: no recompilation
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof, torch.inference_mode():
        sync()
        start = time.perf_counter()
        model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
        sync()
        wall = time.perf_counter() - start
    events = prof.key_averages()
    gpu_us = sum(e.self_device_time_total for e in events)
    table = events.table(sort_by="self_cpu_time_total", row_limit=30)
    if torch.cuda.is_available():
        table += "\n\n" + events.table(sort_by="self_cuda_time_total", row_limit=20)
    if out:
        Path(out).write_text(table + "\n")
    return {
        "profiled_tokens": new_tokens,
        "wall_ms_per_token": round(wall / new_tokens * 1e3, 3),
        "gpu_kernel_ms_per_token": round(gpu_us / 1e3 / new_tokens, 3),
        "gpu_busy_share": round(gpu_us / 1e6 / wall, 3),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    model_arguments(parser)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--steps", default="generate,bare,continuous,profile")
    parser.add_argument("--no-compile", action="store_true", help="bare step uncompiled")
    parser.add_argument("--bandwidth-tbs", type=float, default=3.35)
    parser.add_argument("--profile-out", help="write the profiler tables here")
    args = parser.parse_args(argv)

    import torch

    model, tok = load(args)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    device = next(model.parameters()).device
    on_cuda = device.type == "cuda"
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    bandwidth = copy_bandwidth_tbs() if on_cuda else args.bandwidth_tbs
    bound = bandwidth * 1e12 / weight_bytes
    gen = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(10, min(len(tok), 5000), (1, args.prompt_tokens), generator=gen)
    ids = ids.to(device)
    result = {
        **header("decode_profile.py", argv, model),
        "weight_gb": round(weight_bytes / 1e9, 3),
        "bandwidth_tbs": round(bandwidth, 3),
        "bound_steps_per_s": round(bound, 1),
        "rows": [],
    }
    print(
        json.dumps({k: result[k] for k in ("weight_gb", "bandwidth_tbs", "bound_steps_per_s")}),
        flush=True,
    )

    def record(name: str, warm: float | None, rate: float | None, **extra) -> None:
        row = {"path": name, **extra}
        if rate is not None:
            row.update(
                warmup_seconds=round(warm, 1),
                tokens_per_s=round(rate, 1),
                share_of_bound=round(rate / bound, 3),
            )
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
        write_json(result, args.out)

    for step in args.steps.split(","):
        try:
            if step == "generate":
                record(
                    "generate, static cache", *generate_rate(model, tok, ids, args.new_tokens, True)
                )
            elif step == "bare":
                record(
                    "bare step, static cache" + ("" if args.no_compile else ", compiled"),
                    *bare_step_rate(model, ids, args.new_tokens, not args.no_compile),
                )
            elif step == "continuous":
                record(
                    "continuous batching, 1 request",
                    *continuous_rate(model, tok, ids, args.new_tokens),
                )
            elif step == "profile":
                record(
                    "profile of generate, static cache",
                    None,
                    None,
                    **profile_generate(model, tok, ids, args.new_tokens, args.profile_out),
                )
            else:
                raise SystemExit(f"unknown step {step!r}")
        except (RuntimeError, ValueError, NotImplementedError, TypeError) as exc:
            record(step, None, None, error=f"{type(exc).__name__}: {exc}"[:500])
        if on_cuda:
            torch.cuda.empty_cache()
    return result


if __name__ == "__main__":
    main()
