"""Peer benchmark: the product-choice study on FrameLab and on oTree, same machine, same run.

Usage::

    make peer-bench N=200                   # both profiles, both platforms, N participants
    .venv/bin/python bench/peer/run.py --n 200 --think-ms 5000 --ramp-s 60

What one run does (everything on 127.0.0.1; what it creates is removed at the end):

1. builds oTree (the version pinned in ``bench/peer/otree_project/requirements.txt``) into its
   own virtualenv ``bench/peer/.venv-otree`` (once; not a FrameLab dependency);
2. for each profile — ``burst``: everyone at once with no think time (saturation), and
   ``ramp``: arrivals spread over ``--ramp-s`` with a mean ``--think-ms`` reading time — and for
   each platform, on a fresh PostgreSQL database:

   * FrameLab: ``flask db upgrade``, the demo studies loaded, gunicorn with ``--workers``
     gthread processes of ``--threads`` threads;
   * oTree: ``otree resetdb``, a session of N participants, ``otree prodserver`` (oTree's
     documented production server: one uvicorn process, ``OTREE_PRODUCTION=1``);

   with the server's processes pinned to the same CPUs (``--server-cpus``) and the load
   generator to the others, so both get the same CPU;
3. drives N async bots over HTTP (the same think-time and arrival model as
   ``bench/loadtest.py``), reads each server's own CPU time from ``/proc``;
4. audits each database against the bots' log of acknowledged answers (every answer stored
   exactly once, with the submitted value);
5. writes ``bench/results/peer-<timestamp>.json`` and ``.md``: requests/s, the servers' share
   of the machine's CPU and requests per server CPU-second (the figure to compare on a shared
   machine: requests/s follows the CPU share each server got), p50/p95/p99 per profile, CPU
   ms per request, errors, lost, duplicated, and the FrameLab/oTree ratios;
6. fails (exit status 1) when a platform's audit fails, a request fails, or a platform
   finishes nobody.

oTree runs one server process, so the fair comparison gives FrameLab one worker process too
(``--workers 1``, the default here); its threads are FrameLab's own way to overlap database
waits, as oTree's event loop is oTree's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
ROOT = BENCH.parent
for p in (str(ROOT), str(BENCH), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import loadtest  # noqa: E402
from common import (  # noqa: E402
    RESULTS,
    add_pg_url,
    markdown_table,
    run_header,
    timings_summary,
    write_result,
)
from loadtest_bots import run_within  # noqa: E402
from loadtest_cpu import CpuSnapshot, cpu_report  # noqa: E402
from otree_bot import OTreeBot  # noqa: E402
from peer_otree import OTreeServer, audit_otree, ensure_otree  # noqa: E402

STUDY_FILE = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"
PLATFORMS = ("framelab", "otree", "floor")
COLUMNS = ("profile", "platform", "completed", "requests/s", "server CPU share",
           "requests per server CPU-s", "p50 ms", "p95 ms", "p99 ms", "app CPU ms/req",
           "PostgreSQL CPU ms/req", "errors", "lost", "duplicated", "verdict")  # fmt: skip
RATIO_COLUMNS = {
    "requests_per_server_cpu_s": "FrameLab/oTree requests per server CPU-s",
    "requests_per_s": "requests/s (follows the CPU share)",
    "participants_per_min": "participants/min",
    "p50_ms": "p50",
    "p99_ms": "p99",
    "app_cpu_ms_per_request": "app CPU per request",
}


# -- one platform, one profile ------------------------------------------------------------------
def measured(args: argparse.Namespace, server: Any, bots: Callable[[Any], Any]) -> tuple:
    """Start ``server`` (a context manager) with its processes on ``--server-cpus``, run the
    coroutine ``bots(server)`` on ``--bot-cpus``; return what it returned and the server's CPU
    counters before and after. Only the start is pinned: the load generator then runs on its
    own CPUs."""
    with contextlib.ExitStack() as stack:
        with pinned(args.server_cpus):
            stack.enter_context(server)
        before = CpuSnapshot.take(server.pids())
        with pinned(args.bot_cpus):
            out = asyncio.run(bots(server))
        return out, before, CpuSnapshot.take(server.pids())


def side(platform: str, server: str, timings: list[Any], wall_s: float, cpu: tuple, **rest: Any):
    """One platform's figures: its timings' summary and its CPU per request (``cpu``: the
    counters before and after), with ``completed``, ``bound_reached`` and ``audit``."""
    report = cpu_report(*cpu, wall_s, len(timings))
    return {"platform": platform, "server": server, "wall_s": round(wall_s, 2), **rest,
            **timings_summary(timings, wall_s), "cpu": report}  # fmt: skip


@contextlib.contextmanager
def pinned(cpus: set[int] | None) -> Iterator[None]:
    """Start children on ``cpus`` (they inherit this process's affinity), then restore it."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def run_framelab(args: argparse.Namespace, profile: dict[str, float]) -> dict[str, Any]:
    """The FrameLab side of one profile."""
    env = {"SECRET_KEY": secrets.token_hex(32), "FRAMELAB_ENV": "development", "FLASK_DEBUG": "0"}
    with loadtest.demo_app(args.pg_url, "framelab_peer", env) as (db_url, app, _):
        definition = loadtest.demo_definition(app)
        pages = loadtest.pages_per_participant(definition)
        bound = loadtest.profile_bound(pages, profile["think_s"], profile["ramp_s"], n=args.n)
        with tempfile.TemporaryDirectory() as logs:
            server = loadtest.Gunicorn(
                {**env, "DATABASE_URL": db_url}, args.workers, args.threads, Path(logs)
            )
            run, *cpu = measured(
                args,
                server,
                lambda s: loadtest.run_async_bots(
                    s.url,
                    [(definition, args.n)],
                    concurrency=args.n,
                    think_ms=profile["think_s"] * 1000,
                    ramp_s=profile["ramp_s"],
                    timeout_s=bound,
                    seed=args.seed,
                ),
            )
        result = loadtest.audit(app, run)
    return side(
        "FrameLab",
        f"gunicorn gthread, {args.workers} worker(s) x {args.threads} threads",
        [t for b in run.bots for t in b.timings],
        run.wall_s,
        cpu,
        completed=sum(1 for r in run.results if r.outcome == "completed"),
        bound_reached=run.timed_out,
        audit={k: result[k] for k in ("ok", "lost", "duplicated", "incomplete", "problems")},
    )


def run_otree(args: argparse.Namespace, profile: dict[str, float], bin_dir: Path) -> dict[str, Any]:
    """The oTree side of one profile."""
    import yaml

    study = yaml.safe_load(STUDY_FILE.read_text(encoding="utf-8"))
    # consent, instructions, quiz, 10 x (choice, WTP), attention, demographics, debrief
    bound = loadtest.profile_bound(26, profile["think_s"], profile["ramp_s"], n=args.n)
    with loadtest.fresh_database(args.pg_url, "otree_peer") as db_url:
        server = OTreeServer(bin_dir, db_url, args.n)
        (bots, results, wall, cut), *cpu = measured(
            args, server, lambda s: _otree_bots(s.url, s.join_path, study, args, profile, bound)
        )
        audit = audit_otree(db_url, bots, results)
    return side(
        "oTree",
        f"otree prodserver ({server.version}), 1 process",
        [t for b in bots for t in b.timings],
        wall,
        cpu,
        completed=sum(1 for r in results if r.outcome == "completed"),
        bound_reached=cut > 0,
        audit=audit,
    )


async def _otree_bots(url, join_path, study, args, profile, bound):
    import httpx

    master = random.Random(args.seed)
    bots: list[OTreeBot] = []

    async def one(k: int):
        if profile["ramp_s"] > 0:
            await asyncio.sleep(profile["ramp_s"] * k / max(1, args.n))
        limits = httpx.Limits(max_keepalive_connections=1, keepalive_expiry=1.5)
        async with httpx.AsyncClient(base_url=url, timeout=120.0, limits=limits) as client:
            bot = OTreeBot(
                client,
                join_path,
                study,
                f"{secrets.token_hex(12)}",
                random.Random(master.getrandbits(32) ^ k),
                think_s=profile["think_s"],
            )
            bots.append(bot)
            return await bot.arun()

    results, wall, cut = await run_within([one(k) for k in range(args.n)], bound)
    return bots, results, wall, cut


def run_floor(args: argparse.Namespace, profile: dict[str, float]) -> dict[str, Any]:
    """The floor app (bench/peer/floor/app.py) under FrameLab's gunicorn settings."""
    from floor.app import PAGES, build

    with loadtest.fresh_database(args.pg_url, "floor_peer") as db_url:
        build(db_url)
        with tempfile.TemporaryDirectory() as logs:
            server = loadtest.Gunicorn(
                {"DATABASE_URL": db_url},
                args.workers,
                args.threads,
                Path(logs),
                app="floor.app:create_app()",
                cwd=HERE,
                ready_path="/done",
            )
            (timings, wall), *cpu = measured(
                args, server, lambda s: _floor_bots(s.url, args, profile, PAGES)
            )
        import psycopg

        with psycopg.connect(db_url.replace("+psycopg", "")) as conn:
            stored = conn.execute("SELECT count(*) FROM floor_answer").fetchone()[0]
    expected = args.n * PAGES
    return side(
        "floor (Flask + Jinja, 1 SELECT, 1 INSERT)",
        f"gunicorn gthread, {args.workers} worker(s) x {args.threads} threads",
        timings,
        wall,
        cpu,
        completed=args.n,
        bound_reached=False,
        audit={
            "ok": stored == expected,
            "lost": max(0, expected - stored),
            "duplicated": max(0, stored - expected),
            "problems": [],
        },  # fmt: skip
    )


async def _floor_bots(url, args, profile, pages):
    import httpx
    from bots_async import Timing, ms_since

    timings: list[Timing] = []
    rng = random.Random(args.seed)

    async def one(k: int) -> None:
        if profile["ramp_s"] > 0:
            await asyncio.sleep(profile["ramp_s"] * k / max(1, args.n))
        async with httpx.AsyncClient(base_url=url, timeout=120.0) as client:
            for n in range(1, pages + 1):
                for method, data in (("GET", None), ("POST", {"side": "left"})):
                    if method == "POST" and profile["think_s"] > 0:
                        await asyncio.sleep(rng.expovariate(1 / profile["think_s"]))
                    t0 = time.perf_counter()
                    r = await client.request(method, f"/p/floor{k}/{n}", data=data)
                    timings.append(Timing(f"{method} page", r.status_code, ms_since(t0)))

    t0 = time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(args.n)))
    return timings, time.perf_counter() - t0


# -- report -------------------------------------------------------------------------------------
def ratios(framelab: dict[str, Any], otree: dict[str, Any]) -> dict[str, float | None]:
    """FrameLab / oTree for throughput (higher is better) and latency, CPU (lower is better)."""

    def r(a: float, b: float) -> float | None:
        return round(a / b, 2) if b else None

    return {
        "requests_per_s": r(framelab["requests_per_s"], otree["requests_per_s"]),
        "participants_per_min": r(
            framelab["completed"] / framelab["wall_s"], otree["completed"] / otree["wall_s"]
        ),
        "p50_ms": r(framelab["p50_ms"], otree["p50_ms"]),
        "p99_ms": r(framelab["p99_ms"], otree["p99_ms"]),
        "app_cpu_ms_per_request": r(
            framelab["cpu"]["ms_per_request"].get("app", 0.0),
            otree["cpu"]["ms_per_request"].get("app", 0.0),
        ),
        # The stable figure on a shared machine: requests/s follows each server's CPU share.
        "requests_per_server_cpu_s": r(
            framelab["cpu"].get("requests_per_server_cpu_s") or 0.0,
            otree["cpu"].get("requests_per_server_cpu_s") or 0.0,
        ),
    }


def verdict(side: dict[str, Any]) -> str:
    """``passed``, or ``FAILED`` with why: the audit found a problem, a request failed, or the
    platform finished nobody (a run cut by its time bound before anyone completed proves
    nothing about the platform's speed)."""
    problems = [
        why
        for failed, why in (
            (not side["audit"]["ok"], "audit"),
            (bool(side["errors"]), "errors"),
            (side["completed"] == 0, "finished nobody"),
        )
        if failed
    ]
    return f"FAILED ({', '.join(problems)})" if problems else "passed"


def markdown(report: dict[str, Any]) -> str:
    """One table per run: a row per profile and platform, then the ratios."""
    lines = [
        f"Peer benchmark, {report['date']}, N = {report['n']}, "
        f"{report['machine']['cpus']} x {report['machine']['cpu']}; server CPUs "
        f"{report['config']['server_cpus']}, load generator CPUs {report['config']['bot_cpus']}; "
        f"load average {_load(report, 'start')} at the start, {_load(report, 'end')} at the end.",
        "",
    ]
    rows = []
    for name, prof in report["profiles"].items():
        for s in (prof[side] for side in PLATFORMS if side in prof):
            cpu, share, audit = s["cpu"]["ms_per_request"], s["cpu"]["share_of_machine"], s["audit"]
            said = verdict(s) + (" (bound reached)" if s["bound_reached"] else "")
            rows.append([name, s["platform"], f"{s['completed']}/{report['n']}",
                         s["requests_per_s"], f"{share['app'] + share['postgres']:.3f}",
                         s["cpu"].get("requests_per_server_cpu_s"), s["p50_ms"], s["p95_ms"],
                         s["p99_ms"], cpu.get("app", ""), cpu.get("postgres", ""), s["errors"],
                         audit["lost"], audit["duplicated"], said])  # fmt: skip
    lines.append(markdown_table(COLUMNS, rows))
    ratios = [
        [name, *(prof["ratios"][k] for k in RATIO_COLUMNS)]
        for name, prof in report["profiles"].items()
        if "ratios" in prof
    ]
    if ratios:
        lines += ["", markdown_table(["profile", *RATIO_COLUMNS.values()], ratios)]
    if report.get("framelab_cpu_over_floor"):
        lines += [
            "",
            f"FrameLab's app CPU per request is {report['framelab_cpu_over_floor']}x the floor's "
            "(a bare Flask + Jinja page with one indexed SELECT and one INSERT, same server).",
        ]
    return "\n".join(lines) + "\n"


def _load(report: dict[str, Any], when: str) -> str:
    values = report.get(f"load_average_{when}")
    return " / ".join(f"{v:.2f}" for v in values) if values else "?"


def _over(framelab: dict[str, Any], floor: dict[str, Any]) -> float | None:
    """FrameLab's app CPU per request as a multiple of the floor's."""
    a = framelab["cpu"]["ms_per_request"].get("app")
    b = floor["cpu"]["ms_per_request"].get("app")
    return round(a / b, 2) if a and b else None


def _cpus(text: str) -> set[int] | None:
    return {int(c) for c in text.split(",") if c != ""} or None


def main(argv: list[str] | None = None) -> int:
    cores = os.cpu_count() or 2
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="participants per platform and profile")
    parser.add_argument("--profiles", default="burst,ramp", help="burst, ramp or both")
    parser.add_argument("--think-ms", type=float, default=5000.0, help="ramp: mean think time")
    parser.add_argument("--ramp-s", type=float, default=60.0, help="ramp: arrivals over seconds")
    parser.add_argument("--workers", type=int, default=1, help="FrameLab worker processes")
    parser.add_argument("--threads", type=int, default=4, help="threads per FrameLab worker")
    parser.add_argument(
        "--server-cpus",
        default=",".join(str(c) for c in range(cores // 2, cores)) if cores > 1 else "",
        help="CPUs both servers are pinned to (empty: no pinning)",
    )
    parser.add_argument(
        "--bot-cpus",
        default=",".join(str(c) for c in range(cores // 2)) if cores > 1 else "",
        help="CPUs the load generator is pinned to",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--platforms", default=",".join(PLATFORMS), help="floor: burst only")
    add_pg_url(parser)
    parser.add_argument("--otree-venv", type=Path, default=HERE / ".venv-otree")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.server_cpus, args.bot_cpus = _cpus(args.server_cpus), _cpus(args.bot_cpus)

    platforms = {p.strip() for p in args.platforms.split(",") if p.strip()}
    if unknown := platforms - set(PLATFORMS):
        parser.error(f"unknown platform(s): {', '.join(sorted(unknown))}")
    bin_dir = ensure_otree(args.otree_venv) if "otree" in platforms else Path()
    profiles = {
        "burst": {"think_s": 0.0, "ramp_s": 0.0},
        "ramp": {"think_s": args.think_ms / 1000.0, "ramp_s": args.ramp_s},
    }
    report: dict[str, Any] = {
        **run_header(argv, "bench/peer/run.py"),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "n": args.n,
        "config": {
            "workers": args.workers,
            "threads": args.threads,
            "server_cpus": sorted(args.server_cpus or []),
            "bot_cpus": sorted(args.bot_cpus or []),
            "think_ms": args.think_ms,
            "ramp_s": args.ramp_s,
        },
        "profiles": {},
    }
    for name in [p.strip() for p in args.profiles.split(",") if p.strip()]:
        profile = profiles[name]
        entry: dict[str, Any] = {"profile": profile}
        report["profiles"][name] = entry
        if "framelab" in platforms:
            print(f"[{name}] FrameLab ...", flush=True)
            entry["framelab"] = run_framelab(args, profile)
        if "otree" in platforms:
            print(f"[{name}] oTree ...", flush=True)
            entry["otree"] = run_otree(args, profile, bin_dir)
        if "framelab" in entry and "otree" in entry:
            entry["ratios"] = ratios(entry["framelab"], entry["otree"])
        if name == "burst" and "floor" in platforms:
            print(f"[{name}] floor ...", flush=True)
            entry["floor"] = run_floor(args, profile)
            if "framelab" in entry:
                report["framelab_cpu_over_floor"] = _over(entry["framelab"], entry["floor"])
    report["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    path = write_result(report, args.out, "peer")
    table = markdown(report)
    path.with_suffix(".md").write_text(table)
    print(table)
    print(f"wrote {path} and {path.with_suffix('.md')}")
    ok = all(
        verdict(prof[side]) == "passed"
        for prof in report["profiles"].values()
        for side in ("framelab", "otree")
        if side in prof
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
