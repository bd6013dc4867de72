"""PostgreSQL's second engine: requests that need no transaction run on connections that stay
in autocommit (webapp.extensions.Session, webapp.services.flow.read_in_autocommit).

What must hold: such a request's statements run on the autocommit engine, in autocommit; a
transaction it then needs (a row lock) runs on the app's engine, in a transaction; the app
engine's connections are never left in autocommit; a connection of the autocommit engine the
server has ended is replaced as the app engine's are; SQLite has no such engine.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import create_engine, text

from webapp.config import AUTOCOMMIT_BIND, normalise_database_url
from webapp.extensions import db
from webapp.services import flow


def _connection():
    conn = db.session.connection()
    return conn.engine, conn.connection.driver_connection.autocommit


@pytest.mark.postgres
def test_a_request_reads_on_the_autocommit_engine_and_locks_on_the_apps(pg_app):
    with pg_app.test_request_context("/"):
        autocommit = db.engines[AUTOCOMMIT_BIND]
        assert autocommit.pool is not db.engine.pool  # its own connections
        assert flow.read_in_autocommit()
        assert _connection() == (autocommit, True)
        flow.end_autocommit()  # e.g. before a row lock
        assert _connection() == (db.engine, False)
        assert db.session().in_transaction()
        db.session.remove()
    for _ in range(3):  # the app engine's connections never come back in autocommit
        with pg_app.test_request_context("/"):
            assert _connection() == (db.engine, False)
            db.session.execute(text("SELECT 1"))
            db.session.remove()


@pytest.mark.postgres
def test_a_request_in_a_transaction_stays_on_the_apps_engine(pg_app):
    with pg_app.test_request_context("/"):
        db.session.execute(text("SELECT 1"))
        assert not flow.read_in_autocommit()  # too late: a transaction has begun
        assert _connection() == (db.engine, False)
        db.session.remove()


@pytest.mark.postgres
def test_a_terminated_autocommit_connection_is_replaced(pg_app, pg_url):
    admin = create_engine(normalise_database_url(pg_url), isolation_level="AUTOCOMMIT")
    try:
        pids = []
        for _ in range(2):
            with pg_app.test_request_context("/"):
                assert flow.read_in_autocommit()
                pids.append(db.session.execute(text("SELECT pg_backend_pid()")).scalar_one())
                db.session.remove()
            if len(pids) == 1:
                with admin.connect() as conn:
                    conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pids[0]})
                time.sleep(0.2)  # the server's FATAL message and the close reach the socket
    finally:
        admin.dispose()
    assert pids[1] != pids[0]


def test_sqlite_has_no_autocommit_engine(app):
    with app.test_request_context("/"):
        assert AUTOCOMMIT_BIND not in db.engines
        assert not flow.read_in_autocommit()
        db.session.remove()


def test_only_psycopg_gets_the_autocommit_engine(tmp_path):
    """The driver path (webapp.services.flow_driver) speaks psycopg; another PostgreSQL driver
    keeps every request in a transaction, as SQLite does."""
    from webapp.config import resolve_config

    def binds(url: str) -> dict:
        settings = resolve_config(tmp_path, {"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "k"})
        return settings.get("SQLALCHEMY_BINDS") or {}

    psycopg = binds("postgres://u@h:5432/db")[AUTOCOMMIT_BIND]
    assert psycopg["url"] == "postgresql+psycopg://u@h:5432/db"
    assert (psycopg["isolation_level"], psycopg["pool_reset_on_return"]) == ("AUTOCOMMIT", None)
    assert AUTOCOMMIT_BIND not in binds("postgresql+pg8000://u@h:5432/db")
