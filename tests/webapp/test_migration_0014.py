"""Migration 0014 (product-choice answers keyed by block, longer format names) up and down,
with rows: answers are kept, two blocks may share a trial index, a long format name fits, the
schema matches the models, and the downgrade restores the earlier key."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from webapp import create_app

from .conftest import disposing, pg_schema

_STUDY = (
    "INSERT INTO study (id, slug, title, definition, definition_hash, version, export_salt, "
    "created_at, updated_at, state) VALUES "
    "(1, 's', 't', '{}', 'h', 1, 's', '2026-01-01', '2026-01-01', 'live')"
)
_PARTICIPANT = (
    "INSERT INTO participant (id, study_id, code, platform, seed, sequence, status, "
    "block_index, step, page_seq, quiz_attempts, is_preview, study_version, started_at, "
    "last_seen_at, excluded, is_test) VALUES (1, 1, 'p_1', 'link', 1, 'C', 'completed', 0, "
    "0, 0, 0, false, 1, '2026-01-01', '2026-01-01', false, false)"
)


def _choice(n: int, block: str, fmt: str) -> str:
    return (
        "INSERT INTO choice_response (id, participant_id, block_id, trial_index, pair_id, "
        "format, target_side, chosen_side, chose_target, other_price_usd, answered_at) VALUES "
        f"({n}, 1, '{block}', 0, 'pair{n}', '{fmt}', 'left', 'left', true, 1.0, '2026-01-01')"
    )


def _check(url: str) -> None:
    from flask_migrate import downgrade, upgrade

    from webapp.extensions import db

    app = create_app({"ENV_NAME": "testing", "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": url})
    with disposing(app), app.app_context():
        upgrade(revision="0013_test_participants")
        for sql in (_STUDY, _PARTICIPANT, _choice(1, "choices", "summary")):
            db.session.execute(text(sql))
        db.session.commit()
        db.session.remove()
        upgrade(revision="0014_choice_blocks_formats")
        # Trial 0 of a second block, in a format of 27 characters: both fit now.
        db.session.execute(text(_choice(2, "more", "mitigated:balanced-coverage")))
        db.session.commit()
        rows = db.session.execute(text("SELECT id, format FROM choice_response ORDER BY id"))
        assert list(rows) == [(1, "summary"), (2, "mitigated:balanced-coverage")]
        with pytest.raises(IntegrityError):  # the same block's trial twice is still refused
            db.session.execute(text(_choice(3, "more", "original")))
            db.session.commit()
        db.session.rollback()
        db.session.remove()
        from alembic.autogenerate import compare_metadata
        from alembic.migration import MigrationContext

        # The models are the head's: compare there (later migrations change other tables).
        upgrade(revision="head")
        with db.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), db.metadata) == []
        db.session.remove()
        # The earlier key cannot hold two blocks' trial 0: a downgrade needs one block's rows.
        db.session.execute(text("DELETE FROM choice_response WHERE id = 2"))
        db.session.commit()
        db.session.remove()
        downgrade(revision="0013_test_participants")
        uniques = inspect(db.engine).get_unique_constraints("choice_response")
        assert [u["column_names"] for u in uniques] == [["participant_id", "trial_index"]]
        assert db.session.scalar(text("SELECT count(*) FROM choice_response")) == 1


def test_0014_up_and_down_on_sqlite(tmp_path):
    _check(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_0014_up_and_down_on_postgres(pg_url):
    with pg_schema(pg_url) as url:
        _check(url)
