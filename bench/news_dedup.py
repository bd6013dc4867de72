"""Time the near-duplicate title join of NewsLens (prefix filtering vs all pairs).

    .venv/bin/python bench/news_dedup.py --sizes 2000,5000 --big 36500

Titles are seeded Zipf word salad shaped like headlines: 6 to 14 words from a 20,000-word
vocabulary whose most frequent words ("the", "to", "of", … as w0, w1, …) appear in most
titles, as in real news; 10 % are near copies of an earlier title (an outlet suffix added or
one word swapped). Both methods are timed in the same run on the same titles and must drop the
same indices; the all-pairs reference is skipped for ``--big`` (a year of daily pulls), where
only the prefix-filtered join runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_line, markdown_table  # noqa: E402


def make_titles(n: int, seed: int = 0) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(seed)
    ranks = np.arange(1, 20001)
    p = 1.0 / ranks
    p /= p.sum()
    titles: list[str] = []
    for i in range(n):
        if i > 10 and rng.random() < 0.1:
            base = titles[int(rng.integers(0, i))].split()
            if rng.random() < 0.5:
                base = [*base, "-", "Reuters"]
            else:
                base[int(rng.integers(0, len(base)))] = f"w{int(rng.integers(0, 20000))}"
            titles.append(" ".join(base))
        else:
            words = rng.choice(20000, size=int(rng.integers(6, 15)), p=p)
            titles.append(" ".join(f"w{w}" for w in words))
    return titles


def all_pairs(titles: list[str], threshold: float) -> list[int]:
    from analysis.news.store import title_tokens

    kept, dropped = [], []
    for i, title in enumerate(titles):
        tokens = title_tokens(title)
        if tokens and any(len(tokens & o) >= threshold * len(tokens | o) - 1e-9 for o in kept):
            dropped.append(i)
        elif tokens:
            kept.append(tokens)
    return dropped


def main() -> None:
    from analysis.news.store import near_duplicate_titles

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,5000")
    parser.add_argument("--big", type=int, default=36500)
    parser.add_argument("--threshold", type=float, default=0.8)
    args = parser.parse_args()
    print(machine_line())
    rows = []
    for n in [int(s) for s in args.sizes.split(",") if s]:
        titles = make_titles(n)
        t0 = time.perf_counter()
        fast = near_duplicate_titles(titles, args.threshold)
        t1 = time.perf_counter()
        slow = all_pairs(titles, args.threshold)
        t2 = time.perf_counter()
        assert fast == slow, "prefix filtering must drop exactly what all pairs drops"
        ratio = (t2 - t1) / (t1 - t0)
        rows.append([f"{n:,}", f"{t1 - t0:.3f}", f"{t2 - t1:.2f}", f"{ratio:.0f}x", len(fast)])
    if args.big:
        titles = make_titles(args.big)
        t0 = time.perf_counter()
        fast = near_duplicate_titles(titles, args.threshold)
        rows.append([f"{args.big:,}", f"{time.perf_counter() - t0:.3f}", "–", "–", len(fast)])
    header = ["titles", "prefix filter s", "all pairs s", "ratio", "dropped"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
