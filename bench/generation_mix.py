"""Generation throughput on a realistic length mix: static batches vs continuous batching.

A corpus of reviews or transcripts differs in length by 10× and more, and so do the outputs: a
static batch pads every prompt to its longest and keeps stepping until its longest output ends,
while continuous batching (``transformers``' ``ContinuousBatchingManager``, paged attention)
admits a new request whenever one finishes. This script sends the same prompts through

- ``static:B`` — the engine's batches of ``B`` (``TransformersBackend``: length-sorted, left-padded,
  one ``generate()`` each, dynamic KV cache);
- ``static-cache:B`` — the same with ``static_cache=True`` (compiled decode step on CUDA);
- ``continuous`` — every prompt added to one continuous-batching manager at once, as the
  engine's continuous path does (its default on CUDA), with a ``max_new_tokens`` per request;

and reports useful output tokens per second. Prompt lengths come from a corpus
(``--lengths-from``: a JSONL file with a ``text`` field, each text's tokens counted with the
model's tokenizer) or, where none is at hand, from a log-normal of stated median and spread
(``--prompts reviews`` or ``transcripts``). Each item stops at its own length drawn from a
log-normal of outputs (``--output-median``, capped at ``--max-new-tokens``) or taken from the
``n_output_tokens`` of an earlier run's results (``--output-lengths-from``): random weights never
produce EOS at a meaningful point, so the stop is forced (EOS in static batches, a per-request
``max_new_tokens`` in continuous batching); EOS stays honoured in both.

``--sample-batches K`` times only K static batches spread evenly over the length order and
scales their time to all batches (each batch's cost is independent of the others); the rows say
``projected``. A full run of a static engine on an 8B model takes many minutes of GPU time.

CPU smoke run (tiny random model): ``python bench/generation_mix.py``. GPU run: see
docs/benchmarks.md ("Generation on a realistic length mix").
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import read_jsonl, write_json  # noqa: E402
from generation import WORDS, copy_bandwidth_tbs, header, load, model_arguments, sync  # noqa: E402

# Log-normal (median tokens, sigma of the log) of prompt lengths, clipped to [lo, hi] tokens.
# Assumed shapes, not fitted to a corpus here: product reviews are short with a long tail
# (5 % under ~20 tokens, 1 % over ~650), interview transcripts are long and capped at the
# primacy study's 4,000-token budget. ``--lengths-from`` replaces them with a real corpus.
PROMPT_MIXES = {
    "reviews": (80, 0.9, 8, 4000),
    "transcripts": (1500, 0.6, 200, 4000),
}


def lognormal_lengths(
    n: int, median: float, sigma: float, lo: int, hi: int, rng: random.Random
) -> list[int]:
    """``n`` integer lengths from a log-normal of the given median and log-sigma, clipped."""
    return [min(hi, max(lo, round(math.exp(rng.gauss(math.log(median), sigma))))) for _ in range(n)]


def corpus_lengths(path: str, tokenizer, n: int, rng: random.Random) -> list[int]:
    """Token counts of ``n`` texts drawn (with replacement when short) from a JSONL corpus."""
    texts = [r["text"] for r in read_jsonl(Path(path))]
    counts = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    return [rng.choice(counts) for _ in range(n)]


def result_lengths(path: str, n: int, rng: random.Random) -> list[int]:
    """``n_output_tokens`` of an earlier run's results JSONL, drawn with replacement."""
    counts = [int(r["n_output_tokens"]) for r in read_jsonl(Path(path)) if r.get("n_output_tokens")]
    if not counts:
        raise SystemExit(f"{path}: no n_output_tokens in it")
    return [rng.choice(counts) for _ in range(n)]


def texts_of_lengths(tokenizer, lengths: list[int], rng: random.Random) -> list[str]:
    """Texts that tokenize to about the given lengths (windows of a long random word stream)."""
    stream = " ".join(rng.choice(WORDS) for _ in range(max(lengths) * 2 + 100))
    ids = tokenizer(stream, add_special_tokens=False)["input_ids"]
    out = []
    for length in lengths:
        start = rng.randrange(0, max(1, len(ids) - length))
        out.append(tokenizer.decode(ids[start : start + length]).strip())
    return out


def stop_processor_factory(stops: dict[str, int], eos: int):
    """A logits-processor factory forcing EOS at each request's own output length."""
    import torch
    from transformers import LogitsProcessor

    def factory(ctx):
        want = torch.tensor([stops[r.key] for r in ctx.requests], device=ctx.input_ids.device)
        prompt_len = ctx.input_ids.shape[1]

        class _Stop(LogitsProcessor):
            def __call__(self, input_ids, scores):
                step = input_ids.shape[1] - prompt_len  # tokens generated so far
                # Rows at their length get EOS; the others are left alone (an EOS the model
                # writes earlier ends them there, as in continuous batching).
                last = (want - 1 == step).unsqueeze(1)
                only_eos = torch.full_like(scores, float("-inf"))
                only_eos[:, eos] = 0.0
                return torch.where(last, only_eos, scores)

        return _Stop()

    factory.__qualname__ = "forced_stop"
    return factory


def run_static(model, tok, reqs, stops, args, batch: int, static_cache: bool) -> dict:
    """Time the engine's static batches (all, or ``--sample-batches`` of them, projected)."""
    from analysis.llm.backends.base import GenerationSettings
    from analysis.llm.backends.hf import TransformersBackend

    eos = tok.eos_token_id
    settings = GenerationSettings(
        max_new_tokens=args.max_new_tokens,
        batch_size=batch,
        seed=args.seed,
        logits_processors=(stop_processor_factory(stops, eos),),
    )
    backend = TransformersBackend.from_loaded(
        model, tok, settings, static_cache=static_cache, batching="static"
    )
    prompts = [backend.format_prompt(r.messages) for r in reqs]
    lengths = [len(ids) for ids in tok(prompts, add_special_tokens=False)["input_ids"]]
    order = sorted(range(len(reqs)), key=lambda i: -lengths[i])  # the engine's own order
    batches = [order[i : i + batch] for i in range(0, len(order), batch)]
    k = args.sample_batches if 0 < args.sample_batches < len(batches) else len(batches)
    step = len(batches) / k
    chosen = [batches[int(step * j + step / 2)] for j in range(k)]
    # Warm-up on the two shortest batches (kernels, allocator; with a static cache, the
    # compilation, which turns dynamic in the shapes that changed at the second). A timed batch
    # of a new length may still record a CUDA graph, as each batch of a real run does.
    warm = time.perf_counter()
    for idx in batches[-2:]:
        list(backend.generate([reqs[i] for i in idx]))
    sync()
    warm = time.perf_counter() - warm
    seconds, tokens, padded_steps = 0.0, 0, 0
    for idx in chosen:
        sync()
        start = time.perf_counter()
        done = list(backend.generate([reqs[i] for i in idx]))
        sync()
        seconds += time.perf_counter() - start
        tokens += sum(c.n_output_tokens or 0 for _, c in done)
        padded_steps += len(idx) * max(c.n_output_tokens or 0 for _, c in done)
    scale = len(batches) / k
    return {
        "engine": f"{'static-cache' if static_cache else 'static'}:{batch}",
        "batches": len(batches),
        "timed_batches": k,
        "projected": k < len(batches),
        "warmup_seconds": round(warm, 1),
        "seconds": round(seconds * scale, 1),
        "output_tokens": round(tokens * scale),
        "tokens_per_s": round(tokens / seconds, 1),
        "decode_slots_used": round(tokens / padded_steps, 3),
    }


def cache_config(model, prompt_ids: list[list[int]], max_new_tokens: int, rows: int = 16):
    """The engine's continuous-batching cache sizing on the model's device."""
    from analysis.llm.backends.hf import continuous_cache_config

    device = str(next(model.parameters()).device)
    return continuous_cache_config(device, prompt_ids, max_new_tokens, rows)


def run_continuous(model, tok, prompt_ids, stops, keys, args) -> dict:
    """Time one continuous-batching manager over every prompt (warm-up timed apart)."""
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=args.max_new_tokens,
        do_sample=False,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    warm = time.perf_counter()
    tokens = 0
    with model.continuous_batching_context_manager(
        generation_config=config,
        continuous_batching_config=cache_config(model, prompt_ids, args.max_new_tokens),
        block=True,
        timeout=30,
    ) as manager:
        sync()
        warm = time.perf_counter() - warm
        start = time.perf_counter()
        for key, ids in zip(keys, prompt_ids, strict=True):
            manager.add_request(ids, request_id=key, max_new_tokens=stops[key])
        finished = 0
        while finished < len(keys):
            result = manager.get_result(timeout=1)
            if result is None:
                if not manager.is_running():
                    raise RuntimeError("the continuous-batching manager stopped")
                continue
            if result.is_finished():
                finished += 1
                tokens += len(result.generated_tokens)
        sync()
        seconds = time.perf_counter() - start
    return {
        "engine": "continuous",
        "items": len(keys),
        "warmup_seconds": round(warm, 1),
        "seconds": round(seconds, 1),
        "output_tokens": tokens,
        "tokens_per_s": round(tokens / seconds, 1),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    model_arguments(parser)
    parser.add_argument("--n-items", type=int, default=48)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--prompts", default="reviews", choices=sorted(PROMPT_MIXES))
    parser.add_argument("--lengths-from", help="JSONL corpus with 'text': its token counts")
    parser.add_argument("--output-median", type=float, default=90.0, help="output tokens")
    parser.add_argument("--output-sigma", type=float, default=0.5)
    parser.add_argument("--output-lengths-from", help="results JSONL with n_output_tokens")
    parser.add_argument("--engines", default="continuous,static:8,static:16")
    parser.add_argument("--sample-batches", type=int, default=0, help="time K static batches")
    parser.add_argument("--measure-bandwidth", action="store_true")
    args = parser.parse_args(argv)

    import torch

    from analysis.llm.backends.base import Request
    from analysis.llm.backends.hf import TransformersBackend
    from analysis.llm.templates import get_template

    rng = random.Random(args.seed)
    model, tok = load(args)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    device = str(next(model.parameters()).device)
    if args.lengths_from:
        lengths = corpus_lengths(args.lengths_from, tok, args.n_items, rng)
    else:
        lengths = lognormal_lengths(args.n_items, *PROMPT_MIXES[args.prompts], rng)
    if args.output_lengths_from:
        outs = result_lengths(args.output_lengths_from, args.n_items, rng)
    else:
        outs = lognormal_lengths(
            args.n_items, args.output_median, args.output_sigma, 1, args.max_new_tokens, rng
        )
    outs = [min(o, args.max_new_tokens) for o in outs]
    texts = texts_of_lengths(tok, lengths, rng)
    tpl = get_template("summarize", "baseline")
    reqs = [Request(f"i{i}", tpl.messages(text=t), t) for i, t in enumerate(texts)]
    stops = {r.key: o for r, o in zip(reqs, outs, strict=True)}
    formatter = TransformersBackend.from_loaded(model, tok)
    prompt_ids = [
        tok(formatter.format_prompt(r.messages), add_special_tokens=False)["input_ids"]
        for r in reqs
    ]
    plen = sorted(len(p) for p in prompt_ids)
    olen = sorted(outs)

    def q(xs, p):
        return xs[min(len(xs) - 1, int(p * len(xs)))]

    summary = {
        "prompt_tokens": {
            "p5": q(plen, 0.05),
            "median": q(plen, 0.5),
            "p95": q(plen, 0.95),
            "max": plen[-1],
            "mean": round(sum(plen) / len(plen), 1),
        },
        "output_tokens": {
            "p5": q(olen, 0.05),
            "median": q(olen, 0.5),
            "p95": q(olen, 0.95),
            "max": olen[-1],
            "total": sum(olen),
        },
    }
    print(json.dumps(summary), flush=True)
    result = {
        **header("generation_mix.py", argv, model),
        "arch": args.arch,
        "dtype": args.dtype,
        "n_items": args.n_items,
        "max_new_tokens": args.max_new_tokens,
        "lengths": summary,
        "rows": [],
    }
    if args.measure_bandwidth and device.startswith("cuda"):
        result["bandwidth_tbs"] = round(copy_bandwidth_tbs(), 3)
    keys = [r.key for r in reqs]
    for engine in args.engines.split(","):
        name, _, size = engine.partition(":")
        try:
            if name == "continuous":
                row = run_continuous(model, tok, prompt_ids, stops, keys, args)
            elif name in ("static", "static-cache"):
                row = run_static(model, tok, reqs, stops, args, int(size), name == "static-cache")
            else:
                raise SystemExit(f"unknown engine {engine!r}")
        except (RuntimeError, ValueError, NotImplementedError) as exc:
            row = {"engine": engine, "error": f"{type(exc).__name__}: {exc}"[:500]}
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        write_json(result, args.out)  # after every row, so a run cut short keeps what it measured
    return result


if __name__ == "__main__":
    main()
