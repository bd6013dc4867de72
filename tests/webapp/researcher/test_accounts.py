"""Accounts: hashed passwords, CSRF, rate limiting, no session fixation, production settings."""

from __future__ import annotations

import pytest

from webapp.config import ConfigError, resolve_config

from .conftest import PASSWORD, login


def test_passwords_are_stored_hashed(app, make_researcher):
    from webapp.extensions import db
    from webapp.models import Researcher

    make_researcher("ana")
    with app.app_context():
        stored = db.session.scalars(db.select(Researcher)).one().password_hash
    assert PASSWORD not in stored and stored.startswith(("scrypt:", "pbkdf2:"))


def test_login_without_csrf_token_is_refused(client):
    resp = client.post("/researcher/login", data={"username": "a", "password": "b"})
    assert resp.status_code == 400


def test_login_is_rate_limited_per_username_and_client(app, make_researcher):
    make_researcher("ana")
    client = app.test_client()
    for _ in range(5):
        assert login(client, "ana", "wrong password").status_code == 200
    blocked = login(client, "ana")  # even the right password is refused while blocked
    assert blocked.status_code == 429
    assert "Too many failed logins" in blocked.get_data(as_text=True)
    other = app.test_client()  # the same address: the block is per client, not per cookie
    assert login(other, "ana").status_code == 429
    elsewhere = app.test_client()
    elsewhere.environ_base["REMOTE_ADDR"] = "203.0.113.5"
    assert login(elsewhere, "ana").status_code == 302


def test_login_clears_the_session_and_password_reset_logs_out(app, make_researcher):
    from webapp.services.researchers import set_researcher

    client = app.test_client()
    with client.session_transaction("/researcher/") as sess:
        sess["planted"] = "by an attacker"
    with app.app_context():
        set_researcher("ana", PASSWORD)
    assert login(client, "ana").status_code == 302
    with client.session_transaction("/researcher/") as sess:  # the console's own cookie
        assert "planted" not in sess and "researcher_id" in sess
    assert client.get("/researcher/").status_code == 200
    with app.app_context():
        set_researcher("ana", "a brand new password")
    resp = client.get("/researcher/")
    assert resp.status_code == 302 and resp.headers["Location"].endswith("/researcher/login")


def test_logout_ends_the_session(app, make_researcher):
    from .conftest import page_token

    ana = make_researcher("ana")
    token = page_token(ana, "/researcher/")
    assert ana.post("/researcher/logout", data={"csrf_token": token}).status_code == 302
    assert ana.get("/researcher/").status_code == 302


def test_production_needs_a_secret_and_uses_secure_cookies(tmp_path):
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        resolve_config(tmp_path, environ={"FRAMELAB_ENV": "production"})
    env = {
        "FRAMELAB_ENV": "production",
        "SECRET_KEY": "9c4e1f7a2b8d3e6f0a5c9b2d7e1f4a8c3b6d9e2f5a8c1b4d7e0f3a6c9b2e5d8f",
    }
    settings = resolve_config(tmp_path, environ=env)
    assert settings["SESSION_COOKIE_SECURE"] is True
    assert settings["SESSION_COOKIE_HTTPONLY"] is True


def test_audit_log_records_who_did_what(app, study, make_researcher):
    from .conftest import own_demo
    from .test_lifecycle import set_state

    ana = make_researcher("ana")
    own_demo(app, "ana")
    set_state(ana, "product-choice-demo", "paused")
    html = ana.get("/researcher/audit").get_data(as_text=True)
    assert 'data-action="study.state"' in html and '"to": "paused"' in html
    assert 'data-action="login"' in html
    bob = make_researcher("bob")
    assert 'data-action="study.state"' not in bob.get("/researcher/audit").get_data(as_text=True)


def test_behind_a_proxy_links_use_the_public_https_address(tmp_path, study):
    from tests.webapp.conftest import make_app

    app = make_app(f"sqlite:///{tmp_path / 'proxy.sqlite'}", PROXY_HOPS=1)
    from tests.webapp.conftest import load_demo
    from webapp.services.researchers import set_researcher

    load_demo(app)
    with app.app_context():
        set_researcher("root", PASSWORD, is_admin=True)
    client = app.test_client()
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "lab.example.org"}
    token_page = client.get("/researcher/login", headers=headers).get_data(as_text=True)
    from .conftest import csrf_from

    client.post(
        "/researcher/login",
        data={"csrf_token": csrf_from(token_page), "username": "root", "password": PASSWORD},
        headers=headers,
    )
    html = client.get("/researcher/studies/product-choice-demo", headers=headers).get_data(
        as_text=True
    )
    assert "&lt;ExternalURL&gt;https://lab.example.org/s/product-choice-demo" in html
