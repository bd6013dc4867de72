"""The page lookup sent through the driver (webapp.services.driver_sql) against the ORM's.

On PostgreSQL a page's lookup runs in autocommit through psycopg directly and its rows are made ORM
objects by hand (about a tenth of a page's CPU less). The ORM's own lookup (a transaction, SQLite,
a row lock) is the reference: both must give the same values of the same types, the same objects in
the session, and SQLAlchemy's exceptions for the driver's errors.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime

import psycopg
import pytest
from sqlalchemy import (
    String,
    TypeDecorator,
    bindparam,
    event,
    insert,
    inspect,
    literal_column,
    select,
    update,
)
from sqlalchemy.exc import (
    ArgumentError,
    IntegrityError,
    OperationalError,
    ProgrammingError,
    StatementError,
)

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.extensions import db
from webapp.models import (
    ChoiceResponse,
    PageVisit,
    Participant,
    ParticipantStatus,
    Platform,
    Study,
)
from webapp.services import driver_sql, flow, flow_sql

from .conftest import load_demo

pytestmark = pytest.mark.postgres


def _participant_on_a_wtp_page(app) -> tuple[int, str]:
    """A participant past their first choice (on the WTP page, which prefetches the choice)."""
    definition = load_demo(app)
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="drv")
    bot.open()
    while bot.page.kind != "choice":
        bot.step()
    bot.step()
    assert bot.page.kind == "wtp"
    with app.app_context():
        pid, slug = db.session.execute(
            select(Participant.id, Study.slug).join(Study, Study.id == Participant.study_id)
        ).one()
        db.session.remove()
    return pid, slug


def _lookup(app, pid: int, slug: str, *, autocommit: bool, shown: bool) -> dict:
    """participant_in_study in a request: in autocommit (through the driver, on PostgreSQL)
    or in a transaction (the ORM's statement); what it gave, every column read."""
    secret = app.config["SECRET_KEY"]
    token = flow.participant_token(pid, secret)
    sent: list[str] = []
    with app.test_request_context(f"/s/{slug}/p/{token}"):
        if autocommit:
            assert flow.read_in_autocommit()
        with driver_sql.observing(lambda conn, sql: sent.append(sql)):
            rows = flow.participant_in_study(token, secret, slug, shown=shown)
        p, study = rows.participant, rows.study
        found = {  # deferred columns load on first use, as through the ORM
            "participant": {a.key: getattr(p, a.key) for a in inspect(Participant).column_attrs},
            "study": {a.key: getattr(study, a.key) for a in inspect(Study).column_attrs},
            "shown_at": rows.shown_at,
            "prefetched": rows.prefetched,
            "same_study_object": p.study is study,
            "persistent": inspect(p).persistent and inspect(study).persistent,
            "clean": not (db.session.dirty or db.session.new),
        }
        db.session.remove()
    return found | {"through_the_driver": len(sent)}


@pytest.mark.parametrize("shown", [False, True], ids=["GET", "POST"])
def test_the_driver_lookup_gives_what_the_orm_lookup_gives(pg_app, shown):
    pid, slug = _participant_on_a_wtp_page(pg_app)
    by_driver = _lookup(pg_app, pid, slug, autocommit=True, shown=shown)
    by_orm = _lookup(pg_app, pid, slug, autocommit=False, shown=shown)
    assert (by_driver.pop("through_the_driver"), by_orm.pop("through_the_driver")) == (1, 0)
    assert by_driver == by_orm
    p = by_driver["participant"]
    # The types the column types make, not the driver's raw values.
    assert isinstance(p["status"], ParticipantStatus) and isinstance(p["platform"], Platform)
    assert isinstance(p["last_seen_at"], datetime) and p["last_seen_at"].tzinfo is not None
    assert isinstance(by_driver["study"]["state"], enum.Enum)
    assert by_driver["study"]["definition"]["tasks"]  # the definition from the cache
    if shown:
        assert isinstance(by_driver["shown_at"], datetime)
    else:  # the WTP page's prefetch: whether the first choice was the target
        assert isinstance(by_driver["prefetched"]["product_choice"], bool)


def test_a_row_the_session_already_holds_is_looked_up_by_the_orm(pg_app):
    pid, slug = _participant_on_a_wtp_page(pg_app)
    secret = pg_app.config["SECRET_KEY"]
    token = flow.participant_token(pid, secret)
    with pg_app.test_request_context(f"/s/{slug}/p/{token}"):
        assert flow.read_in_autocommit()
        held = db.session.get(Participant, pid)
        rows = flow.participant_in_study(token, secret, slug)
        assert rows.participant is held  # not a second object for the same row
        db.session.remove()


def test_an_unknown_participant_or_another_study_is_none(pg_app):
    pid, slug = _participant_on_a_wtp_page(pg_app)
    secret = pg_app.config["SECRET_KEY"]
    for other_pid, other_slug in ((pid + 1000, slug), (pid, "not-this-study")):
        token = flow.participant_token(other_pid, secret)
        with pg_app.test_request_context(f"/s/{other_slug}/p/{token}"):
            assert flow.read_in_autocommit()
            assert flow.participant_in_study(token, secret, other_slug) is None
            db.session.remove()


class _Tagged(TypeDecorator):
    """A type whose bind and result processors both leave a mark."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value, dialect):  # noqa: ARG002
        return f"in:{value}"

    def process_result_value(self, value, dialect):  # noqa: ARG002
        return f"{value}:out"


def test_parameters_and_results_go_through_the_column_types(pg_app):
    pid, _ = _participant_on_a_wtp_page(pg_app)
    with pg_app.app_context():
        conn = db.session.connection()
        tagged = driver_sql.compile_for_driver(select(bindparam("v", type_=_Tagged)), conn.dialect)
        assert driver_sql.fetch_one(conn, tagged, {"v": "x"}) == ("in:x:out",)
        # An Enum parameter is sent as what the column stores.
        query = select(Participant.id, Participant.status).where(
            Participant.status == bindparam("s"), Participant.id == bindparam("p")
        )
        stmt = driver_sql.compile_for_driver(query, conn.dialect)
        row = driver_sql.fetch_one(conn, stmt, {"s": ParticipantStatus.started, "p": pid})
        assert row == (pid, ParticipantStatus.started)
        assert (
            driver_sql.fetch_one(conn, stmt, {"s": ParticipantStatus.completed, "p": pid}) is None
        )
        db.session.remove()


def test_driver_errors_are_sqlalchemy_errors_and_a_lost_connection_is_replaced(pg_app):
    with pg_app.app_context():
        conn = db.session.connection()
        bad = driver_sql.compile_for_driver(select(literal_column("no_such_column")), conn.dialect)
        with pytest.raises(ProgrammingError):
            driver_sql.fetch_one(conn, bad, {})
        db.session.remove()

        # A connection the server ends while a request holds it.
        conn = db.session.connection()
        backend = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        with db.engine.connect() as killer:
            killer.exec_driver_sql(f"SELECT pg_terminate_backend({int(backend)})")
            killer.commit()
        one = driver_sql.compile_for_driver(select(literal_column("1")), conn.dialect)
        with pytest.raises(OperationalError) as lost:
            driver_sql.fetch_one(conn, one, {})
        assert lost.value.connection_invalidated  # the pool will not hand it out again
        db.session.remove()
        conn = db.session.connection()  # the next request's connection is a live one
        assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != backend
        assert driver_sql.fetch_one(conn, one, {}) == (1,)
        db.session.remove()


def test_a_write_returns_nothing_and_a_missing_value_is_refused(pg_app):
    pid, _ = _participant_on_a_wtp_page(pg_app)
    move = update(Participant.__table__).where(Participant.id == bindparam("p_id"))
    move = move.values(quiz_attempts=bindparam("n"))
    with pg_app.app_context():
        conn = db.session.connection()
        stmt = driver_sql.compile_for_driver(move, conn.dialect)
        assert driver_sql.fetch_one(conn, stmt, {"p_id": pid, "n": 7}) is None
        with pytest.raises(StatementError, match="'n'"):  # never a silent NULL
            driver_sql.fetch_one(conn, stmt, {"p_id": pid})
        db.session.commit()
        assert db.session.get(Participant, pid).quiz_attempts == 7
        db.session.remove()


def test_a_duplicate_row_is_sqlalchemys_integrity_error(pg_app):
    pid, _ = _participant_on_a_wtp_page(pg_app)
    visit = insert(PageVisit.__table__).values(
        participant_id=bindparam("p"), page_seq=bindparam("s"), page="x", shown_at=bindparam("t")
    )
    with pg_app.app_context():
        conn = db.session.connection()
        seq = db.session.get(Participant, pid).page_seq
        stmt = driver_sql.compile_for_driver(visit, conn.dialect)
        now = datetime.now(UTC)
        assert driver_sql.fetch_one(conn, stmt, {"p": pid, "s": seq + 50, "t": now}) is None
        with pytest.raises(IntegrityError) as duplicate:  # the same (participant, page) again
            driver_sql.fetch_one(conn, stmt, {"p": pid, "s": seq + 50, "t": now})
        assert isinstance(duplicate.value.orig, psycopg.errors.UniqueViolation)
        db.session.rollback()
        db.session.remove()


def test_what_only_sqlalchemys_execution_can_do_is_refused(pg_app):
    with pg_app.app_context():
        dialect = db.engine.dialect
    refused = {
        "a Python-side default (shown_at)": insert(PageVisit.__table__).values(
            participant_id=bindparam("p"), page_seq=bindparam("s"), page="x"
        ),
        "a numeric result": select(ChoiceResponse.other_price_usd),
        "an expanding IN": select(Participant.id).where(
            Participant.id.in_(bindparam("ids", expanding=True))
        ),
    }
    for what, statement in refused.items():
        with pytest.raises(ArgumentError, match="not through the driver"):
            driver_sql.compile_for_driver(statement, dialect)
            pytest.fail(f"compiled {what}")


def _page_columns(pid: int) -> dict:
    """The participant's columns the page lookup reads (the driver's shape), read by Core."""
    shape = flow_sql.page_rows_for_driver(db.engine.dialect)
    table = Participant.__table__
    row = db.session.execute(select(table).where(table.c.id == pid)).one()._mapping
    return {
        key: row[Participant.__mapper__.attrs[key].columns[0]] for key in shape.participant_keys
    }


def _state(obj) -> dict:
    state = inspect(obj)
    return {
        "key": state.key,
        "persistent": state.persistent,
        "modified": state.modified,
        "committed_state": dict(state.committed_state),
        "expired_attributes": set(state.expired_attributes),
        "unloaded": set(state.unloaded),
        "values": {k: v for k, v in state.dict.items() if not k.startswith("_")},
    }


def test_as_loaded_leaves_an_object_as_the_documented_way_does(pg_app):
    """driver_sql.as_loaded against SQLAlchemy's documented way for rows read elsewhere
    (constructor, make_transient_to_detached, Session.add): the same state, in the session."""
    from sqlalchemy.orm import make_transient_to_detached

    pid, _ = _participant_on_a_wtp_page(pg_app)
    with pg_app.app_context():
        values = _page_columns(pid)
        db.session.remove()
        documented = Participant(**values)
        make_transient_to_detached(documented)
        db.session.add(documented)
        expected = _state(documented)
        db.session.remove()

        loaded = driver_sql.as_loaded(db.session(), Participant, dict(values))
        assert _state(loaded) == expected
        assert expected["expired_attributes"]  # the columns the lookup leaves out
        assert db.session.get(Participant, pid) is loaded  # in the identity map
        assert not (db.session.dirty or db.session.new)
        db.session.remove()


def test_an_object_as_loaded_loads_flushes_and_relates_as_a_loaded_one(pg_app):
    pid, _ = _participant_on_a_wtp_page(pg_app)
    sent: list[str] = []

    def record(conn, cursor, statement, *_):  # noqa: ARG001
        sent.append(statement)

    with pg_app.app_context():
        values = _page_columns(pid)
        started_at, study_id = db.session.execute(
            select(Participant.started_at, Participant.study_id).where(Participant.id == pid)
        ).one()
        db.session.remove()
        p = driver_sql.as_loaded(db.session(), Participant, values)
        event.listen(db.engine, "before_cursor_execute", record)
        try:
            db.session.flush()
            assert sent == []  # nothing changed: nothing written
            assert p.started_at == started_at  # a column left out loads on first use
            assert [s.split()[0] for s in sent] == ["SELECT"]
            assert p.study.id == study_id  # a relationship resolves
            sent.clear()
            p.quiz_attempts = 41
            assert p in db.session.dirty
            db.session.commit()
            assert len(sent) == 1 and sent[0].startswith("UPDATE participant SET quiz_attempts")
        finally:
            event.remove(db.engine, "before_cursor_execute", record)
        db.session.remove()
        assert db.session.get(Participant, pid).quiz_attempts == 41
        db.session.remove()


def test_a_listener_to_loading_gets_the_orms_lookup(pg_app):
    """A `load` listener on a class (or `loaded_as_persistent` on the session) must see the
    page's rows loaded: the lookup then goes through the ORM, not the driver."""
    pid, slug = _participant_on_a_wtp_page(pg_app)
    seen: list[object] = []

    def on_load(target, context):  # noqa: ARG001
        seen.append(target)

    event.listen(Participant, "load", on_load)
    try:
        found = _lookup(pg_app, pid, slug, autocommit=True, shown=False)
    finally:
        event.remove(Participant, "load", on_load)
    assert found["through_the_driver"] == 0
    assert [p.id for p in seen] == [pid]
