"""The participant table at 5,000 participants: a fixed number of queries per page, each served
by an index (query counts and plans, never timings)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from .conftest import own_demo

pytestmark = pytest.mark.slow
SLUG = "product-choice-demo"
N = 5_000


@pytest.fixture
def crowd(app, study):
    """5,000 participants of the demo in every status, inserted in one statement."""
    from sqlalchemy import insert

    from webapp.extensions import db
    from webapp.models import Participant, ParticipantStatus, Platform, utcnow
    from webapp.services.studies import get_study

    rng = random.Random(17)
    statuses = list(ParticipantStatus)
    now = utcnow()
    with app.app_context():
        study_id = get_study(SLUG).id
        rows = []
        for i in range(N):
            started = now - timedelta(minutes=rng.randrange(1, 600))
            rows.append(
                {
                    "study_id": study_id,
                    "code": f"p_{i:016x}",
                    "platform": Platform.prolific,
                    "seed": i,
                    "sequence": "AB"[i % 2],
                    "status": statuses[i % len(statuses)],
                    "block_index": 3,
                    "step": 0,
                    "page_seq": 0,
                    "quiz_attempts": 0,
                    "is_preview": False,
                    "study_version": 1,
                    "started_at": started,
                    "last_seen_at": started + timedelta(minutes=rng.randrange(0, 30)),
                    "excluded": i % 20 == 0,  # 250: five pages
                }
            )
        db.session.execute(insert(Participant), rows)
        db.session.commit()
    return study_id


def _statements(app, fn):
    """Run ``fn`` in an app context; return its result and the SQL statements it sent."""
    from sqlalchemy import event

    from webapp.extensions import db

    sent: list[tuple[str, tuple]] = []
    with app.app_context():

        def listen(conn, cursor, statement, parameters, *args):  # noqa: ARG001
            sent.append((statement, tuple(parameters)))

        event.listen(db.engine, "before_cursor_execute", listen)
        try:
            return fn(), sent
        finally:
            event.remove(db.engine, "before_cursor_execute", listen)


def test_each_table_page_is_two_indexed_queries(app, crowd):
    """Every filter × sort: the count and the page, each an index search (no full scan)."""
    from webapp.extensions import db
    from webapp.services import monitor
    from webapp.services.studies import get_study

    for status in ("all", "completed", "started", "excluded"):
        for sort in monitor.SORTS:
            table, sent = _statements(
                app,
                lambda status=status, sort=sort: monitor.participant_table(
                    get_study(SLUG), status=status, sort=sort, page=3
                ),
            )
            if status == "all":
                assert table.total == N and table.pages == N // monitor.PER_PAGE
            assert len(table.rows) == monitor.PER_PAGE and table.page == 3
            queries = [(s, p) for s, p in sent if "FROM participant" in s]
            assert len(queries) == 2  # the count and the page; nothing per row
            with app.app_context():
                statement, params = queries[1]
                plan = " | ".join(
                    row[-1]
                    for row in db.session.connection().exec_driver_sql(
                        f"EXPLAIN QUERY PLAN {statement}", params
                    )
                )
            assert "USING INDEX" in plan and "SCAN participant" not in plan, plan
            # Sorting in a temporary tree only for the excluded filter (no index on a flag).
            if status != "excluded":
                assert "TEMP B-TREE" not in plan, (status, sort, plan)


def test_the_study_page_and_live_json_do_not_grow_with_participants(app, crowd, make_researcher):
    ana = make_researcher("ana")
    own_demo(app, "ana")
    html = ana.get(f"/researcher/studies/{SLUG}?page=2&sort=last_seen").get_data(as_text=True)
    assert html.count("<tr data-participant=") == 50 and "Page 2 of 100" in html
    data = ana.get(f"/researcher/studies/{SLUG}/live.json?status=completed").get_json()
    assert data["table"] == {"total": 1000, "page": 1, "pages": 20}
    assert data["counts"]["arrivals"] == N and len(data["participants"]) == 50


def test_a_search_finds_one_of_5000_through_the_pseudonym_index(app, crowd):
    from webapp.services import monitor
    from webapp.services.studies import get_study

    table, sent = _statements(
        app, lambda: monitor.participant_table(get_study(SLUG), query=f"p_{4321:016x}")
    )
    assert [r["participant_id"] for r in table.rows] == [f"p_{4321:016x}"]
    assert len([s for s, _ in sent if "FROM participant" in s]) == 2
