"""Time position bias for N synthetic articles (gold and two systems, K segments).

    .venv/bin/python bench/metrics_position.py --n 10000 --k 5

Articles are seeded word-salad sentences; summaries copy three sentences each (gold and system
``lead`` from the front, system ``spread`` anywhere). Timed separately: sentence mapping and
segments (``summary_positions``), the Wasserstein distances, and ROUGE-1/2/L.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit_json  # noqa: E402


def make_data(n: int, sentences: int, seed: int = 0):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(20000)])
    rows = []
    for i in range(n):
        sents = [
            " ".join(vocab[rng.integers(0, len(vocab), size=20)]).capitalize() + "."
            for _ in range(sentences)
        ]
        front = rng.choice(max(sentences // 3, 3), size=3, replace=False)
        anywhere = rng.choice(sentences, size=3, replace=False)
        rows.append(
            {
                "id": str(i),
                "article": " ".join(sents),
                "gold": " ".join(sents[j] for j in sorted(front)),
                "summaries": {
                    "lead": " ".join(sents[j] for j in sorted(front[::-1])),
                    "spread": " ".join(sents[j] for j in sorted(anywhere)),
                },
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--sentences", type=int, default=30, help="sentences per article")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--mapping", default="tfidf", choices=["tfidf", "rouge1"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from analysis.metrics.position import (
        position_bias,
        positional_distribution,
        summary_positions,
        summary_rouge,
        systems_long,
    )

    t0 = time.perf_counter()
    long = systems_long(make_data(args.n, args.sentences))
    t_data = time.perf_counter() - t0
    t0 = time.perf_counter()
    positions = summary_positions(long, k=args.k, method=args.mapping, progress=True)
    t_map = time.perf_counter() - t0
    t0 = time.perf_counter()
    bias = position_bias(positions)
    positional_distribution(positions, k=args.k)
    t_w = time.perf_counter() - t0
    t0 = time.perf_counter()
    rouge = summary_rouge(long)
    t_rouge = time.perf_counter() - t0

    result = {
        "benchmark": "metrics_position",
        "n_articles": args.n,
        "sentences_per_article": args.sentences,
        "k": args.k,
        "mapping": args.mapping,
        "n_summary_sentences": int(len(positions)),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "seconds_data": round(t_data, 2),
        "seconds_mapping": round(t_map, 2),
        "seconds_wasserstein": round(t_w, 3),
        "seconds_rouge": round(t_rouge, 2),
        "seconds_total": round(t_map + t_w + t_rouge, 2),
        "articles_per_second_mapping": round(args.n / t_map, 1),
        "wasserstein": dict(zip(bias["system"], bias["wasserstein"].round(4), strict=True)),
        "rouge1": dict(zip(rouge["system"], rouge["rouge1"].round(4), strict=True)),
    }
    emit_json(result, args.json)


if __name__ == "__main__":
    main()
