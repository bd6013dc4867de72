"""Migration 0009 (ledger claims) up and down, with rows: the older code's claim marks become
claims and back, states the older code does not know are mapped, the schema matches the models
after the upgrade, and the columns are gone after the downgrade."""

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
        f"last_seen_at, excluded) VALUES ({n}, 1, 'p_{n}', 'prolific', 1, 'A', 'completed', 0, "
        "0, 0, 0, false, 1, '2026-01-01', '2026-01-01', false)"
        for n in (1, 2, 3)
    ),
    # 1: claimed by a run of the older code at 2026-11-24 10:00:00 UTC; 2: paid; 3: new.
    "INSERT INTO bonus_payment (id, study_id, participant_id, rule, amount_cents, platform, "
    "request_token, reason, issued_by, issued_at, platform_payment_id, platform_state, paid_at) "
    "VALUES (1, 1, 1, 'r', 50, 'prolific', 't1', 'r', 'cli', '2026-01-01', "
    "'claim:1795514400:deadbeefcafe0001', 'claimed', NULL), "
    "(2, 1, 2, 'r', 70, 'prolific', 't2', 'r', 'cli', '2026-01-01', 'bulk2', 'paid', "
    "'2026-01-02'), "
    "(3, 1, 3, 'r', 90, 'prolific', 't3', 'r', 'cli', '2026-01-01', NULL, NULL, NULL)",
]
_NEW = {"claim_token", "claimed_at", "sent_at", "platform_note"}


def _app(url: str):
    return create_app({"ENV_NAME": "testing", "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": url})


def _columns(table: str) -> set[str]:
    from webapp.extensions import db

    return {c["name"] for c in inspect(db.engine).get_columns(table)}


def _ledger() -> list[tuple]:
    from webapp.extensions import db

    return [
        tuple(r)
        for r in db.session.execute(
            text("SELECT id, platform_state, platform_payment_id FROM bonus_payment ORDER BY id")
        )
    ]


def _check(url: str) -> None:
    from flask_migrate import downgrade, upgrade

    from webapp.extensions import db

    app = _app(url)
    with disposing(app), app.app_context():
        upgrade(revision="0008_console_indexes")
        for sql in _ROWS:
            db.session.execute(text(sql))
        db.session.commit()
        db.session.remove()
        upgrade(revision="0009_ledger_claims")
        assert _columns("bonus_payment") >= _NEW
        assert {"claim_token", "claimed_at"} <= _columns("recruitment")
        assert _ledger() == [(1, "claimed", None), (2, "paid", "bulk2"), (3, None, None)]
        claim = db.session.execute(
            text("SELECT claim_token, claimed_at FROM bonus_payment WHERE id = 1")
        ).one()
        assert claim[0] == "deadbeefcafe0001" and "2026-11-24 10:00:00" in str(claim[1])
        # A row the newer code sent (Prolific pays later) and one Prolific refused.
        db.session.execute(
            text(
                "UPDATE bonus_payment SET platform_state = 'sent', platform_payment_id = 'b3', "
                "sent_at = '2026-11-25 08:00:00' WHERE id = 3"
            )
        )
        db.session.execute(text("UPDATE bonus_payment SET platform_state = 'refused' WHERE id = 2"))
        db.session.commit()
        db.session.remove()
        downgrade(revision="0008_console_indexes")
        assert not _NEW & _columns("bonus_payment")
        assert not {"claim_token", "claimed_at"} & _columns("recruitment")
        assert _ledger() == [
            (1, "claimed", "claim:1795514400:deadbeefcafe0001"),
            (2, None, "bulk2"),
            (3, "paid", "b3"),
        ]
        paid_at = db.session.execute(text("SELECT paid_at FROM bonus_payment WHERE id = 3"))
        assert "2026-11-25 08:00:00" in str(paid_at.scalar())
        db.session.remove()
        upgrade()  # and up again: the head's schema is the models'
        from alembic.autogenerate import compare_metadata
        from alembic.migration import MigrationContext

        with db.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), db.metadata) == []


def test_0009_up_and_down_on_sqlite(tmp_path):
    _check(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_0009_up_and_down_on_postgres(pg_url):
    with pg_schema(pg_url) as url:
        _check(url)
