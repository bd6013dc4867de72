"""Migration 0005 moves existing data sensibly: qualification results into the scope of the
study they were taken in, MTurk identities into the assignment history."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from webapp import create_app

from .conftest import disposing, make_app, pg_schema


def _app(url: str):
    return create_app({"ENV_NAME": "testing", "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": url})


_ROWS = [
    "INSERT INTO researcher (id, username, password_hash, created_at, is_admin) "
    "VALUES (7, 'ana', 'x', '2026-01-01', false)",
    "INSERT INTO study (id, slug, title, definition, definition_hash, version, export_salt, "
    "created_at, updated_at, state, owner_id) VALUES "
    "(1, 'owned', 't', '{}', 'h', 1, 's', '2026-01-01', '2026-01-01', 'live', 7), "
    "(2, 'unowned', 't', '{}', 'h', 1, 's', '2026-01-01', '2026-01-01', 'live', NULL)",
    "INSERT INTO participant (id, study_id, code, platform, seed, sequence, status, "
    "block_index, step, page_seq, quiz_attempts, is_preview, study_version, started_at, "
    "last_seen_at, excluded) VALUES (1, 1, 'p_1', 'mturk', 1, 'A', 'started', 0, 0, 0, 0, "
    "false, 1, '2026-01-01', '2026-01-01', false)",
    "INSERT INTO platform_identity (id, participant_id, study_id, platform, external_id, "
    "external_study_id, external_session_id, return_url, created_at) VALUES "
    "(1, 1, 1, 'mturk', 'A1B2C3', 'HIT1', 'ASG1', 'https://www.mturk.com', '2026-01-01')",
    "INSERT INTO qualification_result (id, qualification, platform, external_id, passed, "
    "n_correct, n_items, study_id, created_at) VALUES "
    "(1, 'q', 'mturk', 'A1B2C3', true, 2, 2, 1, '2026-01-01'), "
    "(2, 'q', 'mturk', 'OTHER', false, 0, 2, 2, '2026-01-01')",
]


def _check(url: str) -> None:
    from flask_migrate import upgrade

    from webapp.extensions import db

    old = _app(url)
    with disposing(old), old.app_context():
        upgrade(revision="0003_sentiment")
        for sql in _ROWS:
            db.session.execute(text(sql))
        db.session.commit()
    app = make_app(url)
    with disposing(app), app.app_context():
        scopes = db.session.execute(
            text("SELECT id, scope FROM qualification_result ORDER BY id")
        ).all()
        assert [tuple(r) for r in scopes] == [(1, "researcher:7"), (2, "server")]
        history = db.session.execute(
            text("SELECT participant_id, assignment_id, hit_id, return_url FROM mturk_assignment")
        ).all()
        assert [tuple(r) for r in history] == [(1, "ASG1", "HIT1", "https://www.mturk.com")]


def test_0005_moves_existing_rows_on_sqlite(tmp_path):
    _check(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_0005_moves_existing_rows_on_postgres(pg_url):
    with pg_schema(pg_url) as url:
        _check(url)
