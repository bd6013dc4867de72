"""The participant path's SQL: how many statements a page costs, and what they write.

The page's lookup reads the participant with the study in one statement (under the row lock on
a POST, with when the page was shown); on PostgreSQL a GET's visit record moves
``last_seen_at`` in the same statement, and a POST's visit stamp and answer row ride in the
statement that moves the participant (docs/benchmarks.md, "Participant path vs oTree"). These
tests hold those budgets and check that the merged statements still write
every value.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy import event, select

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.extensions import db
from webapp.models import ChoiceResponse, PageVisit, Participant
from webapp.services import driver_sql

from .conftest import load_demo


@contextmanager
def _statements(app, *, autocommit: bool = False):
    """Collect the SQL statements the app sends while the block runs (one line each); with
    ``autocommit``, as (statement, whether the DBAPI connection was in autocommit) pairs."""
    seen: list = []

    def record(conn, cursor, statement, *_):  # noqa: ARG001
        line = " ".join(statement.split())  # one line, single spaces
        seen.append((line, conn.connection.driver_connection.autocommit) if autocommit else line)

    def record_sent(conn, statement):  # the page lookup goes through the driver directly
        record(conn, None, statement)

    with app.app_context():  # PostgreSQL: the app's engine and the autocommit one
        engines = list(db.engines.values())
    for engine in engines:
        event.listen(engine, "before_cursor_execute", record)
    try:
        with driver_sql.observing(record_sent):
            yield seen
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", record)


def _bot_on_first_choice(app, definition) -> Bot:
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="sql")
    bot.open()
    while bot.page.kind != "choice":
        bot.step()
    return bot


def _budget(app, definition) -> tuple[list[str], list[str]]:
    """Statements of a reload (GET) of the first choice page, then of its answer (POST)."""
    bot = _bot_on_first_choice(app, definition)
    with _statements(app) as get:
        bot.reload()
    data = bot.answer()
    action = bot.page.forms[0].action
    with _statements(app) as post:
        status, _, _ = bot.transport.request("POST", action, data)
    assert status == 302
    return get, post


@pytest.mark.postgres
def test_choice_page_costs_two_statements_and_its_answer_two_on_postgres(pg_app):
    get, post = _budget(pg_app, load_demo(pg_app))
    # GET: participant + study; the visit insert inside the last_seen_at update.
    assert len(get) == 2, get
    assert "JOIN study" in get[0] and "FOR UPDATE" not in get[0]
    assert get[1].startswith("WITH visit AS") and "ON CONFLICT" in get[1]
    # POST: participant + study + shown_at, no lock; then one statement: the move, only if
    # the participant is still on the page read (the WITH clause "moved"), and the visit's
    # stamp and the answer's row each gated on that move.
    assert len(post) == 2, post
    assert "FOR UPDATE" not in post[0] and "page_visit.shown_at" in post[0]
    answer = post[1]
    assert answer.startswith("WITH moved AS (UPDATE participant SET"), answer
    assert "participant.page_seq = %(r_seq)s" in answer.split("), stamp AS")[0], answer
    assert "stamp AS (UPDATE page_visit" in answer, answer
    assert "answer_0 AS (INSERT INTO choice_response" in answer, answer
    assert answer.count("EXISTS (SELECT moved.id FROM moved)") == 2, answer
    assert answer.endswith(" SELECT moved.id FROM moved"), answer


def test_choice_page_statements_on_sqlite(app, study):
    get, post = _budget(app, study)
    # Our own BEGIN IMMEDIATE (webapp._configure_engine) is the transaction start that
    # psycopg sends unseen on PostgreSQL.
    get, post = ([s for s in x if s != "BEGIN IMMEDIATE"] for x in (get, post))
    # SQLite has no data-modifying WITH: the visit and the stamp are statements of their own.
    assert len(get) == 3, get
    assert "JOIN study" in get[0]
    assert len(post) == 4, post
    assert post[1].startswith("UPDATE page_visit") and "RETURNING" in post[1]


def _check_timings(app, definition) -> None:
    """A completed bot's visits are stamped and each choice's server time is exactly
    submitted_at - shown_at of its page (the shown_at read under the lock)."""
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="t")
    assert bot.run().outcome == "completed"
    with app.app_context():
        p = db.session.scalars(select(Participant)).one()
        visits = db.session.scalars(select(PageVisit).order_by(PageVisit.page_seq)).all()
        assert [v.page_seq for v in visits] == list(range(len(visits)))
        answered = visits[:-1]  # the debrief is shown, its "finish" posts once more
        assert all(v.submitted_at is not None and v.rt_ms is not None for v in visits)
        assert all(v.submitted_at >= v.shown_at for v in answered)
        assert p.last_seen_at == max(v.submitted_at for v in visits)
        choices = db.session.scalars(select(ChoiceResponse)).all()
        assert len(choices) == 10
        by_page = {v.page: v for v in visits}
        for c in choices:
            visit = by_page[f"{c.block_id}/{c.trial_index}/choice"]
            expected = int((visit.submitted_at - visit.shown_at).total_seconds() * 1000)
            assert c.server_rt_ms == expected
            assert c.rt_ms == visit.rt_ms


@pytest.mark.postgres
def test_merged_statements_write_every_timing_on_postgres(pg_app):
    _check_timings(pg_app, load_demo(pg_app))


def test_visits_and_timings_on_sqlite(app, study):
    _check_timings(app, study)


@pytest.mark.postgres
def test_reload_keeps_first_shown_at_and_moves_last_seen_on_postgres(pg_app):
    bot = _bot_on_first_choice(pg_app, load_demo(pg_app))

    def state():
        with pg_app.app_context():
            p = db.session.scalars(select(Participant)).one()
            v = db.session.scalars(select(PageVisit).where(PageVisit.page_seq == p.page_seq)).one()
            return v.shown_at, p.last_seen_at

    shown, seen = state()
    bot.reload()
    shown_again, seen_again = state()
    assert shown_again == shown and seen_again > seen


@contextmanager
def _flushes_and_rollbacks(app):
    """Count ORM flushes and the rollbacks of a transaction open on the server while the block
    runs. A rollback of a connection in autocommit (a request that read and wrote without a
    transaction, handed back by the teardown) sends nothing: psycopg returns at once when the
    server says no transaction is open (``Connection._rollback_gen``), so it is not counted."""
    from psycopg.pq import TransactionStatus
    from sqlalchemy.orm import Session

    seen = {"flush": 0, "rollback": 0}

    def flushed(*_):
        seen["flush"] += 1

    def rolled_back(conn):
        status = conn.connection.dbapi_connection.info.transaction_status
        seen["rollback"] += status is not TransactionStatus.IDLE

    with app.app_context():
        engine = db.engine
    event.listen(Session, "before_flush", flushed)
    event.listen(engine, "rollback", rolled_back)
    try:
        yield seen
    finally:
        event.remove(Session, "before_flush", flushed)
        event.remove(engine, "rollback", rolled_back)


@pytest.mark.postgres
def test_a_trial_costs_no_orm_flush_and_no_second_transaction_on_postgres(pg_app):
    # A choice and its WTP answer are Core statements; the participant's move is
    # written by one statement, so the ORM has nothing to flush; the WTP page reads its
    # choice inside the visit's transaction (no transaction opened after the commit).
    bot = _bot_on_first_choice(pg_app, load_demo(pg_app))
    with _statements(pg_app) as sql, _flushes_and_rollbacks(pg_app) as counts:
        bot.step()  # the choice: POST, then GET of the WTP page
        assert bot.page.kind == "wtp"
        bot.step()  # the WTP answer: POST, then GET of the next choice page
        assert bot.page.kind == "choice"
    assert counts == {"flush": 0, "rollback": 0}, counts
    # The WTP page's chosen product is read with the page's lookup (TaskType.page_prefetch),
    # correlated with the participant's row, not by a statement of its own.
    assert not any(s.startswith("SELECT choice_response.chose_target") for s in sql), sql
    lookups = [s for s in sql if s.startswith("SELECT participant.id") and "shown_at" not in s]
    assert len(lookups) == 2 and all("AS prefetch_product_choice" in s for s in lookups)
    assert all("FROM choice_response WHERE" in s for s in lookups), lookups[0]  # correlated
    assert sum("answer_0 AS (UPDATE choice_response SET wtp_premium_usd" in s for s in sql) == 1
    with pg_app.app_context():
        c = db.session.scalars(select(ChoiceResponse)).one()
        assert c.wtp_premium_usd is not None and c.wtp_answered_at is not None
        assert c.wtp_premium_pct == 100.0 * c.wtp_premium_usd / c.other_price_usd  # exact


@pytest.mark.parametrize("prefetch", [True, False])
def test_the_wtp_page_shows_the_chosen_product_with_or_without_the_prefetch(
    app, study, monkeypatch, prefetch
):
    # TaskType.page_prefetch is an optimisation: a lookup that did not read the value (here
    # switched off) must give the same page through the task's own query.
    if not prefetch:
        monkeypatch.setattr("webapp.services.flow.prefetching_task_types", lambda: ())
    bot = _bot_on_first_choice(app, study)
    data = bot.answer()
    after = bot.page.text.split(f'value="{data["side"]}" data-manufacturer="', 1)[1]
    chosen = after.split('"', 1)[0]
    page = bot.post(data)
    assert page.kind == "wtp"
    assert f"<h1>You chose {chosen}</h1>" in page.text


@pytest.mark.postgres
def test_showing_a_page_and_answering_it_run_in_autocommit(pg_app):
    # flow.read_in_autocommit: a GET's lookup and its one-statement visit record need no
    # transaction (no BEGIN/COMMIT round trips); nor does an answer of a task whose rows go
    # through PageContext.write (one statement, conditional on the page read: flow.submit).
    bot = _bot_on_first_choice(pg_app, load_demo(pg_app))
    with _statements(pg_app, autocommit=True) as get:
        bot.reload()
    assert [flag for _, flag in get] == [True, True], get
    data = bot.answer()
    with _statements(pg_app, autocommit=True) as post:
        status, _, _ = bot.transport.request("POST", bot.page.forms[0].action, data)
    assert status == 302
    assert [flag for _, flag in post] == [True, True], post


@pytest.mark.postgres
def test_an_answer_of_a_task_without_answers_by_write_locks_in_a_transaction(pg_app, monkeypatch):
    # A task whose save may use the session (answers_by_write False; here the quiz switched
    # to it): its POST's lookup runs in autocommit, then the answer re-reads the participant
    # under FOR UPDATE in a transaction and writes there, its rows and the participant's
    # columns riding in the statement that moves the participant.
    from webapp.tasks.questions import QuizTask

    monkeypatch.setattr(QuizTask, "answers_by_write", False)
    bot = Bot(FlaskTransport(pg_app), load_demo(pg_app), BotBehaviour(platform="link"))
    bot.open()
    while bot.page.kind != "quiz":
        bot.step()
    data = bot.answer()
    with _statements(pg_app, autocommit=True) as post:
        status, _, _ = bot.transport.request("POST", bot.page.forms[0].action, data)
    assert status == 302
    assert post[0][1] is True and "FOR UPDATE" not in post[0][0], post  # the lookup
    locked = [i for i, (sql, _) in enumerate(post) if "FOR UPDATE OF participant" in sql]
    assert len(locked) == 1, post
    assert not any(flag for _, flag in post[locked[0] :]), post  # lock and writes: one tx
    assert "answer_0 AS (INSERT INTO quiz_attempt" in post[locked[0] + 1][0], post
    with pg_app.app_context():
        p = db.session.scalars(select(Participant)).one()
        assert (p.quiz_attempts, p.quiz_passed) == (1, True)


@pytest.mark.postgres
def test_a_page_whose_task_acts_on_entry_locks_in_a_transaction(pg_app, tmp_path):
    # The sentiment task reserves items when its page is shown: its lock (FOR UPDATE) must be
    # taken inside a transaction even though the page's lookup ran in autocommit.
    from .sentiment.conftest import load, write_study

    definition = load(pg_app, write_study(tmp_path, n_items=4, k=1, batch=2))
    bot = Bot(FlaskTransport(pg_app), definition, BotBehaviour(platform="link"), external_id="e")
    bot.open()
    with _statements(pg_app, autocommit=True) as seen:
        bot.step()  # consent, then the first page of the study's tasks is shown
    assert bot.page.kind == "sentiment_qualification"
    get = seen[[i for i, (sql, _) in enumerate(seen) if "JOIN study" in sql][-1] :]
    assert get[0][1] is True  # the page's lookup: autocommit
    locks = [flag for sql, flag in get if "FOR UPDATE" in sql]
    assert locks and not any(locks), get  # the task's locks: in a transaction


@pytest.mark.postgres
def test_an_autocommit_request_commits_pending_changes_and_settles_in_a_transaction(pg_app):
    # flow._commit leaves a clean autocommit session's connection to the teardown (each
    # statement committed itself), but a change still pending on a loaded row is written;
    # an MTurk settlement after an answer in autocommit writes its rows in a transaction.
    from webapp.services import flow
    from webapp.services.mturk import settle_assignment

    bot = _bot_on_first_choice(pg_app, load_demo(pg_app))
    with pg_app.test_request_context():
        assert flow.read_in_autocommit()
        p = db.session.scalars(select(Participant)).one()
        moved = p.last_seen_at + timedelta(hours=1)
        p.last_seen_at = moved
        flow._commit()  # pending: written, not dropped with the session
        db.session.remove()
        assert db.session.scalars(select(Participant)).one().last_seen_at == moved
        db.session.remove()

        assert flow.read_in_autocommit()
        p = db.session.scalars(select(Participant)).one()
        with _statements(pg_app, autocommit=True) as sql:
            settle_assignment(p, None, p.started_at)  # not on MTurk: reads, then returns
        assert not flow._in_autocommit()
        assert sql and not any(flag for _, flag in sql), sql  # in a transaction
    assert bot.page.kind == "choice"
