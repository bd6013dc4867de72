"""Migration 0013 (test participants) up and down, with rows: earlier previews become test
participants, everyone else stays real, the schema matches the models after the upgrade, and the
column is gone after the downgrade."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from webapp import create_app

from .conftest import disposing, pg_schema

_ROWS = [
    "INSERT INTO study (id, slug, title, definition, definition_hash, version, export_salt, "
    "created_at, updated_at, state) VALUES "
    "(1, 's', 't', '{}', 'h', 1, 's', '2026-01-01', '2026-01-01', 'live')",
    *(
        "INSERT INTO participant (id, study_id, code, platform, seed, sequence, status, "
        "block_index, step, page_seq, quiz_attempts, is_preview, study_version, started_at, "
        f"last_seen_at, excluded) VALUES ({n}, 1, 'p_{n}', 'link', 1, 'A', 'completed', 0, "
        f"0, 0, 0, {preview}, 1, '2026-01-01', '2026-01-01', false)"
        for n, preview in ((1, "false"), (2, "true"), (3, "false"))
    ),
]


def _check(url: str) -> None:
    from flask_migrate import downgrade, upgrade

    from webapp.extensions import db

    app = create_app({"ENV_NAME": "testing", "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": url})
    with disposing(app), app.app_context():
        upgrade(revision="0012_prereg_looks")
        for sql in _ROWS:
            db.session.execute(text(sql))
        db.session.commit()
        db.session.remove()
        upgrade(revision="0013_test_participants")
        marks = db.session.execute(text("SELECT id, is_test FROM participant ORDER BY id"))
        assert [(i, bool(t)) for i, t in marks] == [(1, False), (2, True), (3, False)]
        db.session.remove()
        # A row written without the column (older code still running) is a real participant.
        db.session.execute(text(_ROWS[1].replace("(1, 1, 'p_1'", "(4, 1, 'p_4'")))
        db.session.commit()
        assert not db.session.scalar(text("SELECT is_test FROM participant WHERE id = 4"))
        db.session.remove()
        from alembic.autogenerate import compare_metadata
        from alembic.migration import MigrationContext

        # The models are the head's: compare there (later migrations change other tables).
        upgrade(revision="head")
        with db.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), db.metadata) == []
        db.session.remove()
        downgrade(revision="0012_prereg_looks")
        columns = {c["name"] for c in inspect(db.engine).get_columns("participant")}
        assert "is_test" not in columns and "is_preview" in columns
        assert db.session.scalar(text("SELECT count(*) FROM participant")) == 4


def test_0013_up_and_down_on_sqlite(tmp_path):
    _check(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_0013_up_and_down_on_postgres(pg_url):
    with pg_schema(pg_url) as url:
        _check(url)
