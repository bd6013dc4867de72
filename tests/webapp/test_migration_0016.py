"""Migration 0016 (currency-neutral amount keys in stored definitions) up and down: a study
stored with the dollar keys reads as the same file loads now, so loading it again changes
nothing; the downgrade restores the earlier keys and refuses a study in another currency."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from tests.webapp.conftest import ROOT
from webapp import create_app

from .conftest import disposing, pg_schema

DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"


def _older(definition: dict) -> dict:
    """``definition`` as versions before payment.currency stored it (dollar keys)."""
    d = json.loads(json.dumps(definition))
    payment = d["payment"]
    del payment["currency"]
    payment["base_usd"] = payment.pop("base")
    payment["bonus"]["usd"] = payment["bonus"].pop("amount")
    for block in d["tasks"]:
        if block["type"] == "product_choice":
            block["wtp"]["max_premium_usd"] = block["wtp"].pop("max_premium")
            for pair in block["pairs"]:
                for role in ("target", "control"):
                    pair[role]["price_usd"] = pair[role].pop("price")
    return d


def _check(url: str) -> None:
    from flask_migrate import downgrade, upgrade

    from webapp.extensions import db
    from webapp.models import Study, definition_hash
    from webapp.services.studies import load_study
    from webapp.studydef import load_study_file

    from .test_migration_0018 import stored_v1

    current = stored_v1(load_study_file(DEMO).to_json())  # as the schema before 0018 stored it
    older = _older(current)
    app = create_app({"ENV_NAME": "testing", "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": url})
    with disposing(app), app.app_context():
        upgrade(revision="0015_known_login_clients")
        db.session.execute(
            text(
                "INSERT INTO study (id, slug, title, definition, definition_hash, version, "
                "export_salt, created_at, updated_at, state) VALUES (1, :slug, 't', :d, 'h', 1, "
                "'s', '2026-01-01', '2026-01-01', 'live')"
            ),
            {"slug": current["slug"], "d": json.dumps(older)},
        )
        db.session.commit()
        db.session.remove()
        upgrade(revision="0016_currency_definitions")
        study = db.session.get(Study, 1)
        assert study.definition == current
        assert study.definition_hash == definition_hash(current)
        db.session.remove()
        upgrade()
        assert load_study(DEMO).action == "unchanged"
        db.session.remove()
        downgrade(revision="0015_known_login_clients")
        row = db.session.execute(text("SELECT definition FROM study")).scalar_one()
        assert (json.loads(row) if isinstance(row, str) else row) == older
        db.session.remove()
        # A study in euros cannot go back to a schema that knows only dollars.
        upgrade(revision="0016_currency_definitions")
        euros = {**current, "payment": {**current["payment"], "currency": "EUR"}}
        study = db.session.get(Study, 1)
        study.definition = euros
        db.session.commit()
        db.session.remove()
        # flask-migrate logs the migration's reason ("study 1 pays in EUR") and exits.
        with pytest.raises(SystemExit):
            downgrade(revision="0015_known_login_clients")
        row = db.session.execute(text("SELECT definition FROM study")).scalar_one()
        assert (json.loads(row) if isinstance(row, str) else row) == euros


def test_0016_up_and_down_on_sqlite(tmp_path):
    _check(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_0016_up_and_down_on_postgres(pg_url):
    with pg_schema(pg_url) as url:
        _check(url)
