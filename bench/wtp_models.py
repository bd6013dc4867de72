"""Time the WTP mixed model: the default sparse fit against statsmodels' dense fit.

Usage::

    .venv/bin/python bench/wtp_models.py [--designs 70x10 3000x20] [--dense-max-rows 20000]

For each design (participants x pairs, simulated with ``analysis.simulate``):

1. the whole report end to end: ``framelab analyze choice`` in a subprocess (imports, loading,
   exclusions, every test and model, figures, report), wall time;
2. in this process, the same data: ``wtp_mixed(model="crossed_sparse")`` (the default) and
   ``wtp_mixed(model="crossed")`` (statsmodels ``MixedLM``, dense), each timed after one warm-up
   call, and their ratio. The dense fit is skipped above ``--dense-max-rows`` (its design is
   ``n_obs x (participants + pairs)`` doubles: 60,000 x 3,020 is 1.4 GB and minutes).

Goals: 70 x 10 end to end under 3 s, 3,000 x 20 under 10 s on the 2-core VM.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import analyze_choice, best_of, machine_line  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", nargs="+", default=["70x10", "3000x20"])
    parser.add_argument("--dense-max-rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from analysis.exclusions import exclude_choice
    from analysis.simulate import simulate_choice_study
    from analysis.stats.wtp import wtp_mixed

    print(machine_line())
    for design in args.designs:
        n_part, n_pair = (int(v) for v in design.split("x"))
        data = simulate_choice_study(n_participants=n_part, n_pairs=n_pair, seed=args.seed)
        with tempfile.TemporaryDirectory() as tmp:
            data.to_csv(Path(tmp) / "choice_long.csv", index=False)
            wall, cpu, meta, _ = analyze_choice(Path(tmp) / "choice_long.csv", Path(tmp) / "out")
        kept, _ = exclude_choice(data)
        kept = kept[kept["wtp_premium_pct"].notna()]
        sparse_s, _, sparse = best_of(
            partial(wtp_mixed, kept, model="crossed_sparse"), args.repeats
        )
        sparse = sparse.iloc[0]
        print(f"\n{design}: {len(data)} rows")
        print(
            f"  end to end (framelab analyze choice, figures included): {wall:.2f} s wall, "
            f"{cpu:.2f} s CPU"
        )
        steps = ", ".join(f"{k} {v:.2f}" for k, v in meta["timings_s"].items())
        print(f"  steps (s): {steps}")
        print(f"  crossed_sparse fit: {sparse_s:.3f} s  (df {sparse['df']:.1f})")
        if len(kept) <= args.dense_max_rows:
            dense_s, _, dense = best_of(partial(wtp_mixed, kept, model="crossed"), 1)
            dense = dense.iloc[0]
            print(
                f"  statsmodels dense fit: {dense_s:.3f} s ({dense['optimizer']}); "
                f"ratio dense / sparse = {dense_s / sparse_s:.1f}x; "
                f"|estimate difference| = {abs(dense['estimate'] - sparse['estimate']):.2e}"
            )
        else:
            print(f"  statsmodels dense fit: skipped ({len(kept)} rows > --dense-max-rows)")


if __name__ == "__main__":
    main()
