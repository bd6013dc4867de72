"""Time the whole choice report (``framelab analyze choice``) on a large simulated study.

Usage::

    .venv/bin/python bench/choice_report.py [--participants 10000] [--pairs 10] [--seed 0]

Simulates a study in the platform's long export format (``analysis.simulate``), writes it as CSV,
then runs the real command in a subprocess (imports, loading, validation, exclusions, every test
and model, figures, report) and prints the wall time, plus the per-step timings the report records.
Goal: under 30 s for 10,000 participants x 10 pairs on the 2-core VM.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import analyze_choice, machine_line  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from analysis.simulate import simulate_choice_study

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        data = simulate_choice_study(
            n_participants=args.participants,
            n_pairs=args.pairs,
            seed=args.seed,
            share_incomplete=0.02,
            share_failed_quiz=0.02,
            share_fast=0.01,
        )
        export = Path(tmp) / "choice_long.csv"
        data.to_csv(export, index=False)
        simulate_s = time.perf_counter() - start
        wall, cpu, meta, output = analyze_choice(export, Path(tmp) / "report")

    print(machine_line())
    print(f"study: {args.participants} participants x {args.pairs} pairs = {len(data)} rows")
    print(f"simulate + write CSV: {simulate_s:.1f} s (not part of the report)")
    print("command: framelab analyze choice choice_long.csv --out report")
    print(output.strip())
    print(f"WALL TIME of the command: {wall:.1f} s ({cpu:.1f} s CPU)")
    print("per step (inside the command):")
    for step, seconds in meta["timings_s"].items():
        print(f"  {step:16s} {seconds:6.2f} s")
    ran = meta["wtp_model_ran"]
    print(f"WTP model that ran: {ran['model']} ({ran['optimizer']})")


if __name__ == "__main__":
    main()
