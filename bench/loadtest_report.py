"""Markdown tables of a load-test result, as published in ``docs/benchmarks.md``.

Usage::

    .venv/bin/python bench/loadtest_report.py bench/results/loadtest-<timestamp>.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table  # noqa: E402


def summary_table(r: dict[str, Any]) -> str:
    """The one-run summary: participants, requests, errors, audit, latency, CPU, pgbench."""
    a, c = r["audit"], r.get("cpu") or {}
    cfg = r["config"]
    rows = [
        ("command", f"`{r['command']}`"),
        (
            "load",
            f"{r['participants']:,} participants ({r['participants_product_choice']:,} product "
            f"choice + {r['participants_sentiment']} sentiment); "
            + (
                f"think time {cfg['think_ms'] / 1000:g} s (mean, exponential)"
                if cfg["think_ms"]
                else "no think time"
            )
            + (f", arrivals over {cfg['ramp_s']:g} s" if cfg["ramp_s"] else ", all at once")
            + f"; gunicorn {cfg['workers']} x {cfg['threads']} threads",
        ),
        ("outcomes", ", ".join(f"{k} {v:,}" for k, v in r["outcomes"].items())),
        (
            "requests",
            f"{r['requests']:,} in {r['wall_s']:,.1f} s = {r['requests_per_s']} requests/s; "
            + ", ".join(f"HTTP {k} {v:,}" for k, v in r["http_statuses"].items()),
        ),
        ("errors", f"**{r['errors']}**"),
        (
            "integrity audit",
            f"**{'passed' if a['ok'] else 'FAILED'}**: {a['acknowledged']:,} acknowledged "
            f"submissions, **{a['lost']} lost, {a['duplicated']} duplicated**, "
            f"{a['incomplete']} incomplete, {a['recoveries']} recoveries",
        ),
        (
            "latency, all requests (client)",
            f"p50 {r['p50_ms']:,} ms, p95 {r['p95_ms']:,} ms, **p99 {r['p99_ms']:,} ms**",
        ),
        (
            "server time per request (p99)",
            ", ".join(
                f"{k} {v['p99_ms']:,} ms"
                for k, v in r["server_latency_by_route"].items()
                if v["n"] > 10
            ),
        ),
        ("committed responses/s", f"{r['responses_per_s']}"),
        (
            "pgbench simple-update",
            f"{r['pgbench_tps']:,.0f} TPS; app / pgbench **{r['ratio_responses_to_pgbench']}**"
            if r.get("pgbench_tps")
            else "not run",
        ),
    ]
    if c.get("ms_per_request"):
        per, share = c["ms_per_request"], c["share_of_machine"]
        rows.append(
            (
                "CPU per request (share of the 2 cores)",
                ", ".join(f"{k} {per[k]} ms ({share[k]:.0%})" for k in per)
                + f"; machine busy {c['machine_busy']:.0%}",
            )
        )
    return markdown_table(["figure", "value"], rows)


def route_table(r: dict[str, Any]) -> str:
    """Client-side latency per route class."""
    keys = ("n", "p50_ms", "p95_ms", "p99_ms", "max_ms")
    return markdown_table(
        ["route", "requests", "p50 ms", "p95 ms", "p99 ms", "max ms"],
        (
            [f"`{route}`", *(f"{s[k]:,}" for k in keys)]
            for route, s in r["latency_by_route"].items()
        ),
    )


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    r = json.loads(Path(args[0]).read_text())
    print(f"Run of {r['date']} ({r['machine']['cpu']}, {r['machine']['cpus']} cores)\n")
    print(summary_table(r))
    print()
    print(route_table(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
