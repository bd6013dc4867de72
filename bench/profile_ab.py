"""Same-run A/B of a participant request's cost: two checkouts, alternating rounds.

Usage::

    mkdir /tmp/base && git archive <commit> webapp migrations stimuli | tar -x -C /tmp/base
    .venv/bin/python bench/profile_ab.py --a /tmp/base --b . --rounds 3 \\
        --pg-url postgresql://postgres@127.0.0.1:5432/postgres

    .venv/bin/python bench/profile_ab.py --a . --b floor --parallel   # FrameLab / floor

Each round runs ``bench/profile_pages.py`` (this checkout's copy) once per side, in a fresh
process, with ``--code`` pointing at that side's checkout, A then B then B then A ... (the order
alternates so a trend in the machine's load does not favour one side); with ``--parallel`` the
two sides of a round run at the same time, so both see the same load (each is timed on its own
thread's CPU clock). Prints per round and overall CPU ms per request (mean over all requests)
and SQL statements per request, the ratio A/B of the means and per round, and the load average
before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import write_json  # noqa: E402

FLOOR = "floor"  # as a side: the peer benchmark's floor app (profile_pages.py --floor)


def _start(code: Path | str, args: argparse.Namespace, out: Path) -> subprocess.Popen:
    cmd = [sys.executable, str(HERE / "profile_pages.py")]
    cmd += ["--floor"] if code == FLOOR else ["--code", str(code)]
    cmd += ["--n", str(args.n), "--json", str(out)]
    if args.pg_url:
        cmd += ["--pg-url", args.pg_url]
    log = out.with_suffix(".log").open("w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def _wait(proc: subprocess.Popen, out: Path) -> dict:
    if proc.wait() != 0:
        tail = out.with_suffix(".log").read_text().splitlines()[-15:]
        raise RuntimeError(
            f"{proc.args} failed with exit status {proc.returncode}:\n" + "\n".join(tail)
        )
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=Path, required=True, help="checkout A (the baseline)")
    parser.add_argument(
        "--b", type=Path, required=True, help="checkout B (the change), or 'floor': the floor app"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=30, help="bots per measurement")
    parser.add_argument("--pg-url", help="PostgreSQL server (default: SQLite file)")
    parser.add_argument("--json", type=Path, help="write all figures here")
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="run A and B of a round at the same time (a shared, noisy machine: both see the "
        "same load; each is timed on its own CPU clock)",
    )
    args = parser.parse_args(argv)
    sides = {
        s: FLOOR if str(p) == FLOOR else p.resolve() for s, p in (("A", args.a), ("B", args.b))
    }
    results: dict[str, list[dict]] = {"A": [], "B": []}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ("A", "B") if r % 2 == 0 else ("B", "A")
            outs = {side: Path(tmp) / f"{side}{r}.json" for side in order}
            if args.parallel:  # both at once: the same machine load at the same moment
                procs = {side: _start(sides[side], args, outs[side]) for side in order}
                figs = {side: _wait(procs[side], outs[side]) for side in order}
            else:
                figs = {
                    side: _wait(_start(sides[side], args, outs[side]), outs[side]) for side in order
                }
            for side in order:
                fig = figs[side]
                results[side].append(fig)
                print(
                    f"round {r + 1} {side}: {fig['all']['cpu_ms_mean']:.2f} CPU ms/request, "
                    f"{fig['all']['sql_per_request']:.2f} SQL/request",
                    flush=True,
                )
            a, b = figs["A"]["all"]["cpu_ms_mean"], figs["B"]["all"]["cpu_ms_mean"]
            print(f"round {r + 1} A/B: {a / b:.2f}x", flush=True)
    load_after = os.getloadavg()
    mean = {s: statistics.fmean(f["all"]["cpu_ms_mean"] for f in results[s]) for s in results}
    sql = {s: statistics.fmean(f["all"]["sql_per_request"] for f in results[s]) for s in results}
    print(f"database: {results['A'][0]['database']}; {args.rounds} rounds x {args.n} bots")
    for s in ("A", "B"):
        print(f"{s} ({sides[s]}): mean {mean[s]:.2f} CPU ms/request, {sql[s]:.2f} SQL/request")
    paired = [
        fa["all"]["cpu_ms_mean"] / fb["all"]["cpu_ms_mean"]
        for fa, fb in zip(results["A"], results["B"], strict=True)
    ]
    print(
        f"A/B CPU per request: {mean['A'] / mean['B']:.2f}x (ratio of means); per round "
        + ", ".join(f"{x:.2f}" for x in paired)
    )
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    write_json(
        {
            "sides": {s: str(p) for s, p in sides.items()},
            "rounds": results,
            "cpu_ms_mean": mean,
            "sql_per_request": sql,
            "ratio_a_over_b": round(mean["A"] / mean["B"], 3),
            "ratio_per_round": [round(x, 3) for x in paired],
            "parallel": args.parallel,
            "load_before": load_before,
            "load_after": load_after,
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
