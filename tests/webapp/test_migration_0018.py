"""Migration 0018 (stored definitions carry a schema version and every key) up and down: a
study stored as version 1 (keys left out when the file did not give them) is rewritten once
into version 2 with its hash, so loading the unchanged file finds it unchanged; the downgrade
gives back the version-1 form."""

from __future__ import annotations

import importlib.util
import json

import pytest
from sqlalchemy import text

from tests.webapp.conftest import ROOT
from webapp import create_app

from .conftest import disposing, pg_schema

DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"
_SPEC = importlib.util.spec_from_file_location(
    "migration_0018", ROOT / "migrations" / "versions" / "0018_definition_schema_version.py"
)
MIGRATION = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(MIGRATION)


def stored_v1(definition: dict) -> dict:
    """``definition`` (version 2, as stored now) as versions before 0018 stored it."""
    return MIGRATION.convert(definition, up=False)


def test_version_1_left_out_exactly_the_keys_the_file_did_not_give():
    from webapp.studydef import load_study_file

    v2 = load_study_file(DEMO).to_json()
    v1 = stored_v1(v2)
    # The demo pre-registers its test (analysis) and names no language or recruiter.
    assert set(v2) - set(v1) == {"schema_version", "language", "authenticity", "recruiter"}
    assert set(v2["recruitment"]) - set(v1["recruitment"]) == {
        "target_n",
        "time_limit_minutes",
        "verified_entry",
    }
    assert "study_full" not in v1["recruitment"]["completion_codes"]
    assert "max" not in v1["payment"]["bonus"]
    assert MIGRATION.convert(v1, up=True) == v2


def _check(url: str) -> None:
    from flask_migrate import downgrade, upgrade

    from webapp.extensions import db
    from webapp.models import Study, definition_hash
    from webapp.services.studies import load_study
    from webapp.studydef import load_study_file

    current = load_study_file(DEMO).to_json()
    older = stored_v1(current)
    app = create_app({"ENV_NAME": "testing", "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": url})
    with disposing(app), app.app_context():
        upgrade(revision="0017_authenticity_signals")
        db.session.execute(
            text(
                "INSERT INTO study (id, slug, title, definition, definition_hash, version, "
                "export_salt, created_at, updated_at, state) VALUES (1, :slug, 't', :d, :h, 1, "
                "'s', '2026-01-01', '2026-01-01', 'live')"
            ),
            {"slug": current["slug"], "d": json.dumps(older), "h": definition_hash(older)},
        )
        db.session.commit()
        db.session.remove()
        upgrade(revision="0018_definition_schema_version")
        study = db.session.get(Study, 1)
        assert study.definition == current and study.definition["schema_version"] == 2
        assert study.definition_hash == definition_hash(current)
        db.session.remove()
        for _ in range(2):
            assert load_study(DEMO).action == "unchanged"
            db.session.remove()
        downgrade(revision="0017_authenticity_signals")
        row, digest = db.session.execute(
            text("SELECT definition, definition_hash FROM study")
        ).one()
        assert (json.loads(row) if isinstance(row, str) else row) == older
        assert digest == definition_hash(older)


def test_0018_up_and_down_on_sqlite(tmp_path):
    _check(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_0018_up_and_down_on_postgres(pg_url):
    with pg_schema(pg_url) as url:
        _check(url)
