"""What the console's live overview costs on a large annotation study, per poll.

Usage::

    .venv/bin/python bench/console_overview.py                       # SQLite file
    .venv/bin/python bench/console_overview.py --pg-url postgresql://postgres@127.0.0.1:5432/postgres
    .venv/bin/python bench/console_overview.py --code /tmp/old        # another checkout

Builds a sentiment study of ``--items`` items (default 63,000; five annotators each, batches of
ten) in a database made for the run, and ``--participants`` people who each labelled ten items
(every fifth of them still working, holding two reservations), with a page visit per page.
Then, logged in as an admin through Flask's test client, it times what the study page's script
and its researcher ask for: the live JSON the page polls every 2 s (each poll computed anew:
any overview cache of the checkout is emptied first, so this is the cost of a poll that finds
nothing cached), three tabs polling at once (whatever the checkout caches), the study page
itself and the items page. It prints median wall milliseconds, SQL statements and response
bytes. ``--code`` imports ``webapp`` (and its migrations) from another checkout, so two versions
are measured by the same script.
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_pg_url, database_url  # noqa: E402

SLUG = "overview-bench"
_TOKEN_RE = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')


def write_study(folder: Path, n_items: int) -> Path:
    """A sentiment study of ``n_items`` generated statements; its YAML path."""
    with (folder / "items.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "text", "base_sentiment"])
        for i in range(n_items):
            base = "positive" if i % 2 == 0 else "negative"
            w.writerow([f"i{i:06d}", f"Statement number {i} went {base}ly.", base])
    path = folder / "study.yaml"
    path.write_text(
        f"""slug: {SLUG}
title: Overview benchmark
recruitment:
  completion_codes: {{completed: DONE1, screened_out: SCR1, study_full: FULL1}}
payment: {{currency: USD, base: 1}}
tasks:
  - type: consent
    text: Consent.
  - type: sentiment_annotation
    id: ann
    items: items.csv
    annotators_per_item: 5
    items_per_participant: 10
    reservation_minutes: 30
  - type: debrief
    text: Thanks.
"""
    )
    return path


def fill(study: Any, n_people: int, n_items: int) -> None:
    """Participants who labelled ten items each (groups of five share their items)."""
    from sqlalchemy import insert, select

    from webapp.extensions import db
    from webapp.models import (
        Annotation,
        AnnotationItem,
        AnnotationState,
        PageVisit,
        Participant,
        ParticipantStatus,
        Platform,
        utcnow,
    )

    now = utcnow()
    pks = list(
        db.session.scalars(
            select(AnnotationItem.id)
            .where(AnnotationItem.study_id == study.id)
            .order_by(AnnotationItem.position)
        )
    )
    people = []
    for p in range(n_people):
        working = p % 5 == 4
        started = now - timedelta(minutes=30 + p % 60)
        people.append(
            {
                "study_id": study.id,
                "code": f"p_{p:016x}",
                "platform": Platform.link,
                "seed": p,
                "sequence": "A",
                "status": ParticipantStatus.started if working else ParticipantStatus.completed,
                "block_index": 1 if working else 2,
                "step": 2 if working else 0,
                "page_seq": 3 if working else 11,
                "quiz_attempts": 0,
                "is_preview": False,
                "study_version": study.version,
                "started_at": started,
                "last_seen_at": now - timedelta(minutes=1),
                "finished_at": None if working else started + timedelta(minutes=9),
                "excluded": False,
            }
        )
    db.session.execute(insert(Participant), people)
    ids = list(
        db.session.scalars(
            select(Participant.id).where(Participant.study_id == study.id).order_by(Participant.id)
        )
    )
    labels, visits = [], []
    for p, pid in enumerate(ids):
        working = p % 5 == 4
        for j in range(10):
            item = pks[(p // 5 * 10 + j) % n_items]
            done = not working or j < 2
            if working and j >= 4:
                break
            labels.append(
                {
                    "item_pk": item,
                    "participant_id": pid,
                    "trial_index": j,
                    "state": AnnotationState.confirmed if done else AnnotationState.reserved,
                    "reserved_at": now - timedelta(minutes=20),
                    "expires_at": None if done else now + timedelta(minutes=10),
                    "label": ("positive" if (p + j) % 3 else "negative") if done else None,
                    "surplus": False,
                    "rt_ms": 4000 if done else None,
                    "answered_at": now - timedelta(minutes=10) if done else None,
                }
            )
            shown = now - timedelta(minutes=20, seconds=-10 * j)
            visits.append(
                {
                    "participant_id": pid,
                    "page_seq": j + 1,
                    "page": f"ann/{j}/label",
                    "shown_at": shown,
                    "submitted_at": shown + timedelta(seconds=4 + p % 7) if done else None,
                    "rt_ms": 4000 if done else None,
                }
            )
    for rows, table in ((labels, Annotation), (visits, PageVisit)):
        for start in range(0, len(rows), 20_000):
            db.session.execute(insert(table), rows[start : start + 20_000])
    db.session.commit()
    if db.engine.dialect.name == "postgresql":  # as autovacuum would after such a load
        with db.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")


def _empty_caches(app: Any) -> None:
    """Forget whatever overview the checkout keeps, so the next poll computes it."""
    for name, value in app.extensions.items():
        if "overview" in name and hasattr(value, "clear"):
            value.clear()


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Build the study at ``url`` and time the console's requests; return the figures."""
    from sqlalchemy import event

    from webapp import create_app
    from webapp.extensions import db
    from webapp.services import allocation
    from webapp.services.researchers import set_researcher
    from webapp.services.studies import load_study

    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench", "AUTO_TIMEOUT": 0})
    from flask_migrate import upgrade

    with app.app_context():
        upgrade()  # the migrations of the checkout webapp came from
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = write_study(Path(tmp), args.items)
        with app.app_context():
            study = load_study(path).study
            allocation.sync_items(study)
            db.session.commit()
            fill(study, args.participants, args.items)
            set_researcher("bench", "bench-password", is_admin=True)
            engines = list(db.engines.values())
        print(f"built in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    statements = [0]

    def count(*_: Any) -> None:
        statements[0] += 1

    for engine in engines:
        event.listen(engine, "before_cursor_execute", count)
    client = app.test_client()
    token = _TOKEN_RE.search(client.get("/researcher/login").get_data(as_text=True)).group(1)
    client.post(
        "/researcher/login",
        data={"csrf_token": token, "username": "bench", "password": "bench-password"},
    )
    base = f"/researcher/studies/{SLUG}"
    out: dict[str, Any] = {}

    def timed(path: str, *, cold: bool, client: Any = client) -> tuple[float, int, int]:
        if cold:
            _empty_caches(app)
        before = statements[0]
        t = time.perf_counter()
        resp = client.get(path)
        ms = (time.perf_counter() - t) * 1000
        assert resp.status_code == 200, (path, resp.status_code)
        return ms, statements[0] - before, len(resp.get_data())

    for name, path in (("live.json", f"{base}/live.json"), ("study page", base)):
        timed(path, cold=True)  # warm the definition cache and the connections
        runs = [timed(path, cold=True) for _ in range(args.repeat)]
        out[name] = _summary(runs)
    items = [timed(f"{base}/items", cold=True) for _ in range(max(1, args.repeat // 2))]
    out["items page"] = _summary(items)
    # Three tabs polling at the same moment, each its own logged-in client (same cookie).
    tabs = [app.test_client() for _ in range(3)]
    for tab in tabs:
        tab.set_cookie(
            "framelab_console", client.get_cookie("framelab_console").value, domain="localhost"
        )

    def three() -> float:
        _empty_caches(app)
        t = time.perf_counter()
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda c: c.get(f"{base}/live.json").status_code, tabs))
        return (time.perf_counter() - t) * 1000

    out["three tabs, one poll each (wall ms)"] = statistics.median(
        three() for _ in range(args.repeat)
    )
    for engine in engines:
        engine.dispose()
    return out


def _summary(runs: list[tuple[float, int, int]]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(r[0] for r in runs), 1),
        "min_ms": round(min(r[0] for r in runs), 1),
        "statements": statistics.median(r[1] for r in runs),
        "bytes": statistics.median(r[2] for r in runs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_pg_url(parser, default=None)
    parser.add_argument("--items", type=int, default=63_000)
    parser.add_argument("--participants", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--code", type=Path, help="the checkout to import webapp from")
    args = parser.parse_args(argv)
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))
    with database_url(args.pg_url, "framelab_overview") as url:
        figures = measure(url, args)
    print(f"{'(checkout ' + str(args.code) + ')' if args.code else '(this checkout)'} {url}")
    for name, value in figures.items():
        print(f"  {name}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
