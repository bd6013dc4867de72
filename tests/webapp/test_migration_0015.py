"""Migration 0015 (known login clients) up and down, with rows: earlier login failures stay
failures, the schema matches the models at the head, and the column is gone after the
downgrade with the failures kept."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from webapp import create_app

from .conftest import disposing, pg_schema

_FAILURE = (
    "INSERT INTO login_attempt (id, username, client_hash, created_at) "
    "VALUES ({n}, 'ana', 'c{n}', '2026-01-01')"
)


def _check(url: str) -> None:
    from flask_migrate import downgrade, upgrade

    from webapp.extensions import db

    app = create_app({"ENV_NAME": "testing", "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": url})
    with disposing(app), app.app_context():
        upgrade(revision="0014_choice_blocks_formats")
        db.session.execute(text(_FAILURE.format(n=1)))
        db.session.commit()
        db.session.remove()
        upgrade(revision="0015_known_login_clients")
        # A row written without the column (older code still running) is a failure.
        db.session.execute(text(_FAILURE.format(n=2)))
        db.session.commit()
        rows = db.session.execute(text("SELECT id, succeeded FROM login_attempt ORDER BY id"))
        assert [(i, bool(s)) for i, s in rows] == [(1, False), (2, False)]
        db.session.remove()
        from alembic.autogenerate import compare_metadata
        from alembic.migration import MigrationContext

        upgrade(revision="head")
        with db.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), db.metadata) == []
        db.session.remove()
        downgrade(revision="0014_choice_blocks_formats")
        columns = {c["name"] for c in inspect(db.engine).get_columns("login_attempt")}
        assert "succeeded" not in columns
        assert db.session.scalar(text("SELECT count(*) FROM login_attempt")) == 2


def test_0015_up_and_down_on_sqlite(tmp_path):
    _check(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_0015_up_and_down_on_postgres(pg_url):
    with pg_schema(pg_url) as url:
        _check(url)
