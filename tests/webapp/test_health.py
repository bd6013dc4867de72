"""``/healthz`` for load balancers, and the connection pool set from the environment."""

from __future__ import annotations

import pytest

from webapp.config import ConfigError, resolve_config


def test_health_says_ok_without_a_cookie_or_an_audit_row(app, client):
    from webapp.extensions import db
    from webapp.models import AuditEvent

    resp = client.get("/healthz")
    assert resp.status_code == 200 and resp.get_json() == {"status": "ok", "database": "ok"}
    assert "Set-Cookie" not in resp.headers
    assert client.head("/healthz").status_code == 200
    assert client.post("/healthz").status_code == 405
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(AuditEvent)) == 0


def test_health_says_unavailable_when_the_database_cannot_be_reached(tmp_path):
    from webapp import create_app

    # Nothing listens on port 9 of loopback: every connection attempt is refused at once.
    app = create_app(
        {
            "TESTING": True,
            "SECRET_KEY": "t" * 40,
            "SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://nobody@127.0.0.1:9/none",
            "SQLALCHEMY_ENGINE_OPTIONS": {"connect_args": {"connect_timeout": 2}},
        }
    )
    resp = app.test_client().get("/healthz")
    assert resp.status_code == 503
    assert resp.get_json() == {"status": "unavailable", "database": "unreachable"}
    assert "127.0.0.1" not in resp.get_data(as_text=True)  # nothing about the setup leaks


def test_pool_size_and_overflow_come_from_the_environment(tmp_path):
    env = {
        "DATABASE_URL": "postgresql://u@db.internal/framelab",
        "FRAMELAB_DB_POOL_SIZE": "5",
        "FRAMELAB_DB_MAX_OVERFLOW": "0",
        "FRAMELAB_DB_POOL_TIMEOUT": "10",
    }
    options = resolve_config(tmp_path, {}, environ=env)["SQLALCHEMY_ENGINE_OPTIONS"]
    assert (options["pool_size"], options["max_overflow"], options["pool_timeout"]) == (5, 0, 10)
    assert options["pool_pre_ping"] is True
    for bad, why in (("0", "at least 1"), ("five", "whole number")):
        with pytest.raises(ConfigError, match=why):
            resolve_config(tmp_path, {}, environ={**env, "FRAMELAB_DB_POOL_SIZE": bad})
