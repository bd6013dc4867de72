"""Same-run wall time of ``framelab analyze choice`` from two source trees (what a change costs).

Usage::

    .venv/bin/python bench/report_cost.py --baseline /work/main --candidate . \
        [--participants 70] [--pairs 10] [--repeats 3] [--no-figures] [--check] \
        [--baseline-env KEY=VALUE] [--candidate-env KEY=VALUE] [--realtime]

Simulates one study (``analysis.simulate``, seed 0), then runs the real command once per tree
per repeat, alternating (baseline, candidate, baseline, ...) so both see the same machine load;
each run is a fresh process with ``PYTHONPATH`` set to its tree (``--baseline-env`` adds
environment variables to the baseline's runs only: ``--baseline . --baseline-env
FRAMELAB_FIGURE_WORKER=0 --candidate-env FRAMELAB_FIGURE_WORKER=1`` times the figure worker
against drawing in-process; by default the worker is only forked when the load average leaves a
core idle). Prints every
wall time, the minimum and the median per tree and their ratios (candidate / baseline), and the
same for the CPU time of the command (user + system of the command and its figure worker: on a
shared machine wall time mostly measures the other jobs), with the load average before and
after. ``--realtime`` runs each command under the SCHED_FIFO real-time policy (``chrt -f 10``;
root on Linux): the other jobs of a shared machine then wait while it runs (the kernel still
leaves them 5 % of each second), which gives the wall time of an idle machine; say so when
reporting such numbers.

``--check`` also compares the first baseline and candidate report folders
(``bench/compare_reports.py``: same tables, JSON and HTML; figures present) and checks the
goal for the design, end to end and figures included: 70 x 10 under 3 s, 3,000 x 20 under
10 s of wall time (the candidate's median). It exits 1 if the outputs differ or the goal is
missed, and prints the load average beside the verdict: a goal missed at a load above the
machine's core count says more about the other jobs than about the command (``--realtime``
takes them out of the measurement).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, analyze_choice, machine_line  # noqa: E402

# The end-to-end goals (wall seconds, figures included) by (participants, pairs).
GOALS_S = {(70, 10): 3.0, (3000, 20): 10.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, type=Path)
    parser.add_argument("--candidate", default=ROOT, type=Path)
    parser.add_argument("--participants", type=int, default=70)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-figures", action="store_true")
    parser.add_argument("--check", action="store_true", help="compare outputs, check the goal")
    parser.add_argument("--realtime", action="store_true", help="under SCHED_FIFO (chrt -f 10)")
    for side in ("baseline", "candidate"):
        parser.add_argument(f"--{side}-env", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    extra_env = {
        "baseline": dict(item.split("=", 1) for item in args.baseline_env),
        "candidate": dict(item.split("=", 1) for item in args.candidate_env),
    }

    from analysis.simulate import simulate_choice_study

    trees = {"baseline": args.baseline.resolve(), "candidate": args.candidate.resolve()}
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    times: dict[str, list[float]] = {name: [] for name in trees}
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "choice_long.csv"
        simulate_choice_study(n_participants=args.participants, n_pairs=args.pairs, seed=0).to_csv(
            export, index=False
        )
        for rep in range(args.repeats):
            for name, tree in trees.items():
                wall, cpu_s, _, _ = analyze_choice(
                    export,
                    Path(tmp) / f"{name}_{rep}",
                    tree=tree,
                    options=["--no-figures"] if args.no_figures else [],
                    prefix=["chrt", "-f", "10"] if args.realtime else [],
                    env=extra_env[name],
                )
                times[name].append(wall)
                cpu[name].append(cpu_s)
        problems = []
        if args.check:
            from compare_reports import compare

            problems = compare(Path(tmp) / "baseline_0", Path(tmp) / "candidate_0")
            print("outputs:", "same results" if not problems else "; ".join(problems))
    load_end = os.getloadavg()[0]
    print(machine_line())
    print(
        f"study: {args.participants} x {args.pairs}, figures: {not args.no_figures}, "
        f"real-time priority: {args.realtime}"
    )
    for label, values in (("wall", times), ("CPU", cpu)):
        for name, runs in values.items():
            shown = ", ".join(f"{v:.2f}" for v in runs)
            print(
                f"{name:9s} {label}: {shown} s (min {min(runs):.2f} s, "
                f"median {statistics.median(runs):.2f} s)"
            )
        ratio_min = min(values["candidate"]) / min(values["baseline"])
        ratio_median = statistics.median(values["candidate"]) / statistics.median(
            values["baseline"]
        )
        print(
            f"{label} ratio candidate / baseline: minima {ratio_min:.2f}, "
            f"medians {ratio_median:.2f}"
        )
    print(f"load average at the end: {load_end:.1f}")
    if args.check:
        goal = GOALS_S.get((args.participants, args.pairs))
        failed = bool(problems)
        if goal is not None and not args.no_figures:
            median = statistics.median(times["candidate"])
            met = median < goal
            print(
                f"goal: {args.participants} x {args.pairs} end to end < {goal:g} s: "
                f"{'met' if met else 'NOT met'} (candidate median {median:.2f} s, best "
                f"{min(times['candidate']):.2f} s, load {load_end:.1f} on {os.cpu_count()} CPUs)"
            )
            failed = failed or not met
        if failed:
            sys.exit(1)


if __name__ == "__main__":
    main()
