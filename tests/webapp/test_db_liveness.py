"""A pooled PostgreSQL connection the server has ended is replaced without a pre-ping round trip.

``webapp.db_liveness`` replaces SQLAlchemy's ``pool_pre_ping`` (``SELECT 1`` at every checkout)
on psycopg with a poll of the idle connection's socket. These tests end a pooled connection
the way PostgreSQL does on a restart or ``pg_terminate_backend`` and check that the next
request does not see it, and that a healthy connection costs no statement at checkout.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import create_engine, event, text

from webapp.config import normalise_database_url

pytestmark = pytest.mark.postgres


def _statements(engine):
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


def test_psycopg_engines_use_the_socket_check_not_the_pre_ping(pg_app):
    from webapp.extensions import db

    with pg_app.app_context():
        assert pg_app.config["SQLALCHEMY_ENGINE_OPTIONS"]["pool_pre_ping"] is False
        db.session.execute(text("SELECT 1"))
        db.session.remove()
        raw = db.engine.pool.status()
        seen = _statements(db.engine)
        db.session.execute(text("SELECT 2"))
        db.session.remove()
    assert raw  # the pool had the connection to hand out again
    # A healthy pooled connection: no SELECT 1 before the statement, no BEGIN of a ping.
    assert seen == ["SELECT 2"]


def test_a_terminated_pooled_connection_is_replaced_at_checkout(pg_app, pg_url):
    from webapp.extensions import db

    admin = create_engine(normalise_database_url(pg_url), isolation_level="AUTOCOMMIT")
    with pg_app.app_context():
        old = db.session.execute(text("SELECT pg_backend_pid()")).scalar_one()
        db.session.remove()  # back to the pool, idle
        with admin.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": old})
        time.sleep(0.2)  # the server's FATAL message and the close reach the socket
        new = db.session.execute(text("SELECT pg_backend_pid()")).scalar_one()
        db.session.remove()
    admin.dispose()
    assert new != old


def test_other_drivers_keep_the_pre_ping(app):
    # SQLite (the embedded default) and any other driver: SQLAlchemy's pre-ping as before.
    assert app.config["SQLALCHEMY_ENGINE_OPTIONS"]["pool_pre_ping"] is True


def test_an_explicit_setting_wins(tmp_path):
    from webapp import create_app

    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": "postgresql://u@127.0.0.1:1/none",
            "SQLALCHEMY_ENGINE_OPTIONS": {"pool_pre_ping": True},
            "SECRET_KEY": "x" * 32,
        }
    )
    assert app.config["SQLALCHEMY_ENGINE_OPTIONS"]["pool_pre_ping"] is True
