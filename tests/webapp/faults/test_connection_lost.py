"""A database connection that dies after the response was built must not turn it into a 500.

PostgreSQL terminates every connection when it restarts. A request whose transaction is still
open (a GET that only read) then fails in Flask-SQLAlchemy's teardown, when the session rolls
back on the dead connection; the exception escaped to gunicorn, which answered with a bare 500
instead of the page already rendered. Here the connection is terminated deterministically from a
second connection between the view and the teardown.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from ..conftest import admin_engine, load_demo


@pytest.fixture
def admin(pg_url):
    """An engine that ends other connections, disposed of after the test."""
    with admin_engine(pg_url) as engine:
        yield engine


@pytest.mark.postgres
def test_a_connection_terminated_after_the_view_still_gives_the_page(pg_app, admin):
    definition = load_demo(pg_app)
    killed: list[int] = []

    @pg_app.after_request
    def _terminate(response):
        from webapp.extensions import db

        pid = db.session.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with admin.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        killed.append(pid)
        return response

    client = pg_app.test_client()
    resp = client.get(f"/s/{definition.slug}?participant=teardown1")
    assert killed, "the connection was not terminated"
    assert resp.status_code == 200 and b'data-page="consent"' in resp.data
    # The pool recovers: the next request works on a fresh connection.
    assert client.get(f"/s/{definition.slug}?participant=teardown2").status_code == 200
