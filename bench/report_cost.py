"""Same-run wall time of ``framelab analyze choice`` from two source trees (what a change costs).

Usage::

    .venv/bin/python bench/report_cost.py --baseline /work/main --candidate . \
        [--participants 70] [--pairs 10] [--repeats 3] [--no-figures] [--check]

Simulates one study (``analysis.simulate``, seed 0), then runs the real command once per tree
per repeat, alternating (baseline, candidate, baseline, ...) so both see the same machine load;
each run is a fresh process with ``PYTHONPATH`` set to its tree. Prints every wall time, the
minimum per tree and the ratio of the minima (candidate / baseline), and the same for the CPU
time of the command (user + system of the child: on a shared machine wall time mostly measures
the other jobs). With ``--check`` it also compares the
first baseline and candidate report folders (``bench/compare_reports.py``: same tables, JSON and
HTML; figures present) and fails if they differ.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, type=Path)
    parser.add_argument("--candidate", default=ROOT, type=Path)
    parser.add_argument("--participants", type=int, default=70)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-figures", action="store_true")
    parser.add_argument("--check", action="store_true", help="compare the two trees' outputs")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from analysis.simulate import simulate_choice_study

    trees = {"baseline": args.baseline.resolve(), "candidate": args.candidate.resolve()}
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    times: dict[str, list[float]] = {name: [] for name in trees}
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    framelab = Path(sys.executable).with_name("framelab")
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "choice_long.csv"
        simulate_choice_study(n_participants=args.participants, n_pairs=args.pairs, seed=0).to_csv(
            export, index=False
        )
        for rep in range(args.repeats):
            for name, tree in trees.items():
                out = Path(tmp) / f"{name}_{rep}"
                cmd = [str(framelab), "analyze", "choice", str(export), "--out", str(out)]
                if args.no_figures:
                    cmd.append("--no-figures")
                env = {**os.environ, "PYTHONPATH": str(tree), "MPLBACKEND": "Agg"}
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
                times[name].append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(
                    after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                )
                if proc.returncode != 0:
                    sys.exit(f"{name} failed:\n{proc.stdout}\n{proc.stderr}")
        if args.check:
            sys.path.insert(0, str(ROOT / "bench"))
            from compare_reports import compare

            problems = compare(Path(tmp) / "baseline_0", Path(tmp) / "candidate_0")
            print("outputs:", "same results" if not problems else "; ".join(problems))
            if problems:
                sys.exit(1)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"study: {args.participants} x {args.pairs}, figures: {not args.no_figures}")
    for name, values in times.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name:9s} {trees[name]}: {shown} s (min {min(values):.2f} s)")
    ratio = min(times["candidate"]) / min(times["baseline"])
    print(f"ratio candidate / baseline (minima): {ratio:.2f}")
    for name, values in cpu.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name:9s} CPU: {shown} s (min {min(values):.2f} s)")
    cpu_ratio = min(cpu["candidate"]) / min(cpu["baseline"])
    print(f"CPU ratio candidate / baseline (minima): {cpu_ratio:.2f}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
