"""Balance of a k-format product-choice study under load: gunicorn on PostgreSQL, async bots.

Usage::

    .venv/bin/python bench/formats_balance.py --n 300            # the figure in docs/benchmarks.md
    .venv/bin/python bench/formats_balance.py --n 60 --workers 2

One run creates a fresh PostgreSQL database with the demo studies, serves it with gunicorn,
runs N participants through the three-format demo (``product-choice-formats-demo``) as
concurrent :class:`bots_async.AsyncBot` over HTTP, and then checks

* the load test's integrity audit (``bench/loadtest_audit.py``): every acknowledged answer
  stored once with its value, nothing the bots did not send;
* no (participant, block, pair) stored twice;
* the sequences A, B, C and every pair × format cell within one of each other.

It prints a JSON summary (and writes it with ``--out``); exit status 0 only when every check
passes. The test ``tests/webapp/faults/test_formats_load.py`` runs it with fewer bots.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadtest  # noqa: E402
from common import add_pg_url, emit_json, machine  # noqa: E402

SLUG = "product-choice-formats-demo"


def _counts(app: Any) -> dict[str, Any]:
    from sqlalchemy import func, select

    from webapp.definition_cache import study_definition
    from webapp.extensions import db
    from webapp.models import ChoiceResponse, Participant
    from webapp.services.studies import get_study
    from webapp.tasks import get_task_type

    with app.app_context():
        study = get_study(SLUG)
        mine = Participant.study_id == study.id
        statuses = Counter(
            s.value for s in db.session.scalars(select(Participant.status).where(mine))
        )
        sequences = Counter(db.session.scalars(select(Participant.sequence).where(mine)))
        cells = Counter(
            f"{pair}|{fmt}"
            for pair, fmt in db.session.execute(
                select(ChoiceResponse.pair_id, ChoiceResponse.format)
                .join(Participant, Participant.id == ChoiceResponse.participant_id)
                .where(mine)
            )
        )
        twice = db.session.scalar(
            select(func.count()).select_from(
                select(ChoiceResponse.participant_id)
                .group_by(
                    ChoiceResponse.participant_id, ChoiceResponse.block_id, ChoiceResponse.pair_id
                )
                .having(func.count() > 1)
                .subquery()
            )
        )
        block = next(b for b in study_definition(study).tasks if b.type == "product_choice")
        task = get_task_type(block.type)
        pairs = task.pair_ids(block)
        expected = sorted(f"{p}|{f}" for p in pairs for f in task.formats(block))
    return {
        "statuses": dict(statuses),
        "sequences": dict(sorted(sequences.items())),
        "cells": dict(sorted(cells.items())),
        "expected_cells": expected,
        "stored_twice": twice or 0,
        "n_pairs": len(pairs),
    }


def run(
    pg_url: str, *, n: int, concurrency: int, workers: int, threads: int, seed: int = 7
) -> dict[str, Any]:
    """One run; returns its summary (``ok`` says whether every check passed)."""
    env = {"SECRET_KEY": secrets.token_hex(16), "FRAMELAB_ENV": "development"}
    with (
        loadtest.demo_app(pg_url, "framelab_formats", env) as (db_url, app, _),
        tempfile.TemporaryDirectory() as logs,
    ):
        definition = loadtest.demo_definition(app, SLUG)
        server_env = {**env, "DATABASE_URL": db_url}
        with loadtest.Gunicorn(server_env, workers, threads, Path(logs)) as server:
            t0 = time.perf_counter()
            bots = loadtest.run_async_bots(
                server.url,
                [(definition, n)],
                concurrency=concurrency,
                seed=seed,
                timeout_s=max(300.0, 3.0 * n),
            )
            result = asyncio.run(bots)
            wall_s = time.perf_counter() - t0
        report = loadtest.audit(app, result)
        counts = _counts(app)
    outcomes = Counter(r.outcome for r in result.results)
    cells = counts["cells"]
    spread_cells = max(cells.values()) - min(cells.values()) if cells else None
    seq = counts["sequences"]
    spread_seq = max(seq.values()) - min(seq.values()) if seq else None
    checks = {
        "all_completed": outcomes.get("completed", 0) == n,
        "audit_ok": bool(report["ok"]),
        "nothing_stored_twice": counts["stored_twice"] == 0,
        "every_cell_present": sorted(cells) == counts["expected_cells"],
        "cells_within_one": spread_cells is not None and spread_cells <= 1,
        "sequences_within_one": spread_seq is not None and spread_seq <= 1,
        "rows": sum(cells.values()) == n * counts["n_pairs"],
    }
    return {
        "ok": all(checks.values()),
        "checks": checks,
        "n": n,
        "concurrency": concurrency,
        "workers": workers,
        "threads": threads,
        "wall_s": round(wall_s, 1),
        "participants_per_s": round(n / wall_s, 2),
        "outcomes": dict(outcomes),
        "audit": {k: report[k] for k in ("lost", "duplicated", "incomplete", "acknowledged")},
        "problems": report["problems"][:10],
        "sequences": seq,
        "cell_min": min(cells.values()) if cells else None,
        "cell_max": max(cells.values()) if cells else None,
        "statuses": counts["statuses"],
        "stored_twice": counts["stored_twice"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="participants (bots)")
    parser.add_argument("--concurrency", type=int, default=40, help="bots at once")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker")
    parser.add_argument("--seed", type=int, default=7)
    add_pg_url(parser)
    parser.add_argument("--out", type=Path, help="write the JSON summary here")
    args = parser.parse_args(argv)
    summary = run(
        args.pg_url,
        n=args.n,
        concurrency=args.concurrency,
        workers=args.workers,
        threads=args.threads,
        seed=args.seed,
    )
    summary["machine"] = machine()
    emit_json(summary, args.out)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
