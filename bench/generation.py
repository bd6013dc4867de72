"""Generation throughput: one ``generate()`` call per item vs the batched transformers backend.

The same model and the same inputs go through (a) the backend with batch size 1 — one
``model.generate`` call per item, the way the seed experiments ran — and (b) the backend with
larger, length-sorted, left-padded batches. Every generation is forced to the same length
(``min_new_tokens = max_new_tokens``) so both sides produce the same number of tokens.

CPU smoke run (CI; the tiny model is built in memory):

    python bench/generation.py

GPU run on a Llama-3-8B-shaped model with random weights (throughput depends on the shape and
dtype, not on the weights; nothing is downloaded):

    python bench/generation.py --arch llama3-8b --random-weights --dtype bfloat16 \
        --n-items 64 --max-new-tokens 128 --batch-sizes 1,8,16,32,64

At batch 1 each decode step streams all weights from memory once, so the memory-bandwidth bound
on decode steps per second is bandwidth / weight bytes. ``--measure-bandwidth`` measures the
device-to-device copy bandwidth of the machine it runs on (bytes read plus bytes written) and uses
that instead of ``--bandwidth-tbs``. The script reports the measured fraction of that bound.

``--static-cache`` runs the backend with a static KV cache (transformers then compiles the decode
step on CUDA); ``--per-item-items K`` runs batch 1 on the first K items only (its throughput per
item does not depend on how many there are, and it is by far the slowest row); ``--diagnose``
also times bare decode steps (``model(...)`` with a cache, no ``generate``) at batch 1, which
separates the model's own cost from ``generate``'s.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_json  # noqa: E402

_VOCAB = (
    "the sound is clear and the battery lasts but support never answered my mails while the "
    "price was fair shipping fast and the case feels flimsy after two weeks of daily use"
)
WORDS = _VOCAB.split()


def make_inputs(n: int, seed: int) -> list[str]:
    """Review-like texts of 20 to 120 words (so length sorting and padding matter)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120))) for _ in range(n)]


def load(args: argparse.Namespace):
    """Return (model, tokenizer) as asked: a checkpoint, or random weights of a named shape,
    with ``--threads`` torch CPU threads."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from analysis.llm.tiny import random_model, train_tiny_tokenizer

    torch.set_num_threads(args.threads)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.model and not args.random_weights:
        tok = AutoTokenizer.from_pretrained(args.model)
        model = AutoModelForCausalLM.from_pretrained(
            args.model, dtype=getattr(torch, args.dtype), attn_implementation="sdpa"
        ).to(device)
        return model.eval(), tok
    tok = AutoTokenizer.from_pretrained(args.model) if args.model else train_tiny_tokenizer()
    model = random_model(args.arch, tok, dtype=args.dtype, device=device, seed=args.seed)
    model.set_attn_implementation("sdpa")
    return model, tok


def run_once(backend, texts: list[str]) -> tuple[float, int]:
    """Generate for every text; return (seconds, output tokens)."""
    from analysis.llm.backends.base import Request
    from analysis.llm.templates import get_template

    tpl = get_template("summarize", "baseline")
    reqs = [Request(str(i), tpl.messages(text=t), t) for i, t in enumerate(texts)]
    sync()
    start = time.perf_counter()
    tokens = sum(c.n_output_tokens or 0 for _, c in backend.generate(reqs))
    sync()
    return time.perf_counter() - start, tokens


def copy_bandwidth_tbs(gib: float = 4.0, repeats: int = 20) -> float:
    """Device-to-device copy bandwidth in TB/s, counting the bytes read and the bytes written."""
    import torch

    n = int(gib * 2**30)
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        dst.copy_(src)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    times.sort()
    return 2 * n / times[len(times) // 2] / 1e12


def bare_decode_ms(model, prompt_tokens: int = 64, steps: int = 64) -> float:
    """Milliseconds per decode step of ``model(...)`` itself at batch 1 (no ``generate``)."""
    import torch
    from transformers import DynamicCache

    device = next(model.parameters()).device
    ids = torch.randint(10, 200, (1, prompt_tokens), device=device)
    seconds = []
    with torch.inference_mode():
        for _ in range(2):  # the first pass warms up kernels and the allocator
            out = model(input_ids=ids, past_key_values=DynamicCache(), use_cache=True)
            token = out.logits[:, -1:].argmax(-1)
            sync()
            start = time.perf_counter()
            for _ in range(steps):
                out = model(input_ids=token, past_key_values=out.past_key_values, use_cache=True)
                token = out.logits[:, -1:].argmax(-1)
            sync()
            seconds.append(time.perf_counter() - start)
    return seconds[-1] / steps * 1e3


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def model_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every generation benchmark reads: the model :func:`load` loads, its
    threads, the seed and the JSON result (:func:`header`)."""
    parser.add_argument("--arch", default="tiny", help="tiny | llama3-8b (random weights)")
    parser.add_argument("--model", help="checkpoint directory (its tokenizer is used)")
    parser.add_argument("--random-weights", action="store_true", help="random weights of --arch")
    parser.add_argument("--dtype", default="float32", help="float32 | bfloat16 | float16")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the results as JSON here")


def header(script: str, argv: list[str] | None, model: Any) -> dict[str, Any]:
    """The command, date, device and library versions that open a generation result."""
    import torch
    import transformers

    on_cuda = next(model.parameters()).device.type == "cuda"
    return {
        "command": " ".join([f"python bench/{script}", *(argv or sys.argv[1:])]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "device": torch.cuda.get_device_name()
        if on_cuda
        else platform.processor() or platform.machine(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    model_arguments(parser)
    parser.add_argument("--n-items", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-sizes", default="1,4,16", help="comma-separated")
    parser.add_argument("--per-item-items", type=int, help="batch 1 on the first K items only")
    parser.add_argument("--bandwidth-tbs", type=float, default=3.35, help="GPU memory TB/s")
    parser.add_argument("--measure-bandwidth", action="store_true", help="measure it (CUDA)")
    parser.add_argument("--static-cache", action="store_true", help="static KV cache (+compile)")
    parser.add_argument("--diagnose", action="store_true", help="time bare decode steps too")
    args = parser.parse_args(argv)

    import torch

    from analysis.llm.backends.base import GenerationSettings
    from analysis.llm.backends.hf import TransformersBackend

    model, tok = load(args)
    device = str(next(model.parameters()).device)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    texts = make_inputs(args.n_items, args.seed)

    def backend(batch_size: int) -> TransformersBackend:
        settings = GenerationSettings(
            max_new_tokens=args.max_new_tokens,
            min_new_tokens=args.max_new_tokens,
            batch_size=batch_size,
            seed=args.seed,
        )
        return TransformersBackend.from_loaded(model, tok, settings, static_cache=args.static_cache)

    on_cuda = device.startswith("cuda")
    bandwidth = args.bandwidth_tbs
    measured_bandwidth = None
    if args.measure_bandwidth and on_cuda:
        measured_bandwidth = bandwidth = copy_bandwidth_tbs()
        print(f"copy bandwidth: {bandwidth:.2f} TB/s (read + written)", flush=True)
    bare_ms = bare_decode_ms(model) if args.diagnose else None
    if bare_ms is not None:
        print(f"bare decode step at batch 1: {bare_ms:.2f} ms", flush=True)
    rows = []
    for bs in [int(b) for b in args.batch_sizes.split(",")]:
        items = texts[: args.per_item_items] if bs == 1 and args.per_item_items else texts
        # Warm-up at this batch size: kernels, allocator and, with a static cache, compilation
        # (over all the items, so the cache already has the length the timed run needs).
        warm = time.perf_counter()
        run_once(backend(bs), items if args.static_cache else items[:bs])
        warm = time.perf_counter() - warm
        seconds, tokens = run_once(backend(bs), items)
        rows.append(
            {
                "batch_size": bs,
                "mode": "per-item generate()" if bs == 1 else "batched backend",
                "items": len(items),
                "warmup_seconds": round(warm, 2),
                "seconds": round(seconds, 3),
                "items_per_s": round(len(items) / seconds, 3),
                "output_tokens": tokens,
                "tokens_per_s": round(tokens / seconds, 1),
            }
        )
        print(
            f"batch {bs:>4}: {rows[-1]['items_per_s']:>9.2f} items/s "
            f"{rows[-1]['tokens_per_s']:>10.1f} tokens/s ({seconds:.1f} s, {tokens} tokens)",
            flush=True,
        )
    per_item = next((r for r in rows if r["batch_size"] == 1), None)
    best = max(rows, key=lambda r: r["tokens_per_s"])
    result = {
        **header("generation.py", argv, model),
        "torch_threads": torch.get_num_threads(),
        "arch": args.arch,
        "static_cache": args.static_cache,
        "dtype": args.dtype,
        "parameters": sum(p.numel() for p in model.parameters()),
        "weight_gb": round(weight_bytes / 1e9, 3),
        "n_items": len(texts),
        "max_new_tokens": args.max_new_tokens,
        "rows": rows,
        "best_batch_size": best["batch_size"],
    }
    if per_item:
        result["ratio_best_vs_per_item"] = round(best["tokens_per_s"] / per_item["tokens_per_s"], 2)
        print(f"best batch {best['batch_size']}: {result['ratio_best_vs_per_item']}x per-item")
    if bare_ms is not None:
        result["bare_decode_ms_batch1"] = round(bare_ms, 3)
    if per_item and on_cuda:
        # Batch 1: one decode step per output token; each step reads every weight once.
        bound = bandwidth * 1e12 / weight_bytes
        result["bandwidth_tbs"] = round(bandwidth, 3)
        result["bandwidth_measured"] = measured_bandwidth is not None
        result["bandwidth_bound_steps_per_s"] = round(bound, 1)
        result["batch1_fraction_of_bound"] = round(per_item["tokens_per_s"] / bound, 3)
        print(
            f"batch 1 at {result['batch1_fraction_of_bound']:.1%} of the "
            f"{bound:.0f} steps/s bandwidth bound ({bandwidth:.2f} TB/s, "
            f"{weight_bytes / 1e9:.2f} GB)"
        )
    write_json(result, args.out)
    return result


if __name__ == "__main__":
    main()
