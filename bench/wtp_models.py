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
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def end_to_end(data, tmp: Path) -> tuple[float, dict]:
    export = tmp / "choice_long.csv"
    data.to_csv(export, index=False)
    out = tmp / "report"
    framelab = Path(sys.executable).with_name("framelab")
    cmd = [str(framelab), "analyze", "choice", str(export), "--out", str(out)]
    # The checkout this script lives in, not whichever one the venv was installed from.
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"command failed:\n{proc.stdout}\n{proc.stderr}")
    # CPU seconds as well as wall: on a shared VM the wall time mostly measures the neighbours.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads((out / "results.json").read_text())["meta"]


def timed_fit(fn, data, model: str, repeats: int) -> tuple[float, object]:
    fn(data, model=model)  # warm-up: imports, caches
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        row = fn(data, model=model).iloc[0]
        best = min(best, time.perf_counter() - start)
    return best, row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", nargs="+", default=["70x10", "3000x20"])
    parser.add_argument("--dense-max-rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from analysis.exclusions import exclude_choice
    from analysis.simulate import simulate_choice_study
    from analysis.stats.wtp import wtp_mixed

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(time.strftime("date: %Y-%m-%d %H:%M UTC", time.gmtime()))
    for design in args.designs:
        n_part, n_pair = (int(v) for v in design.split("x"))
        data = simulate_choice_study(n_participants=n_part, n_pairs=n_pair, seed=args.seed)
        with tempfile.TemporaryDirectory() as tmp:
            wall, cpu, meta = end_to_end(data, Path(tmp))
        kept, _ = exclude_choice(data)
        kept = kept[kept["wtp_premium_pct"].notna()]
        sparse_s, sparse = timed_fit(wtp_mixed, kept, "crossed_sparse", args.repeats)
        print(f"\n{design}: {len(data)} rows")
        print(
            f"  end to end (framelab analyze choice, figures included): {wall:.2f} s wall, "
            f"{cpu:.2f} s CPU; load average {os.getloadavg()[0]:.1f}"
        )
        steps = ", ".join(f"{k} {v:.2f}" for k, v in meta["timings_s"].items())
        print(f"  steps (s): {steps}")
        print(f"  of which WTP model: {meta['timings_s'].get('wtp_model', float('nan')):.2f} s")
        print(f"  crossed_sparse fit: {sparse_s:.3f} s  (df {sparse['df']:.1f})")
        if len(kept) <= args.dense_max_rows:
            dense_s, dense = timed_fit(wtp_mixed, kept, "crossed", 1)
            print(
                f"  statsmodels dense fit: {dense_s:.3f} s ({dense['optimizer']}); "
                f"ratio dense / sparse = {dense_s / sparse_s:.1f}x; "
                f"|estimate difference| = {abs(dense['estimate'] - sparse['estimate']):.2e}"
            )
        else:
            print(f"  statsmodels dense fit: skipped ({len(kept)} rows > --dense-max-rows)")


if __name__ == "__main__":
    main()
