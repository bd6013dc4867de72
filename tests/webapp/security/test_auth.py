"""Console authentication under attack: parallel guessing, username probing, replayed cookies,
cross-site cookies, and production settings."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.webapp.conftest import DEMO, load_demo, make_app
from tests.webapp.researcher.conftest import PASSWORD, csrf_from, login, page_token

STRONG_KEY = "5b2f0c8e1d4a7b3c9e6f0a1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b"


@pytest.fixture
def make_researcher(app):
    """``make_researcher("ana")`` creates an account and returns a logged-in client."""

    def factory(username: str) -> Any:
        from webapp.services.researchers import set_researcher

        with app.app_context():
            set_researcher(username, PASSWORD)
        client = app.test_client()
        assert login(client, username).status_code == 302
        return client

    return factory


@pytest.fixture
def hash_calls(monkeypatch) -> Iterator[list[str]]:
    """Count every password hash check the login makes (thread-safe)."""
    from webapp.services import researchers

    calls: list[str] = []
    lock = threading.Lock()
    real = researchers.check_password_hash

    def counting(stored: str, password: str) -> bool:
        with lock:
            calls.append(password)
        return real(stored, password)

    monkeypatch.setattr(researchers, "check_password_hash", counting)
    yield calls


def _parallel_wrong_passwords(app, n: int) -> list[int]:
    """``n`` clients that each post one wrong password at the same moment; their statuses."""
    clients = [app.test_client() for _ in range(n)]
    tokens = [csrf_from(c.get("/researcher/login").get_data(as_text=True)) for c in clients]
    barrier = threading.Barrier(n)
    statuses: list[int] = []

    def attempt(i: int) -> None:
        barrier.wait()
        resp = clients[i].post(
            "/researcher/login",
            data={"csrf_token": tokens[i], "username": "ana", "password": f"guess {i}"},
        )
        statuses.append(resp.status_code)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


@pytest.mark.parametrize(
    "backend", [pytest.param("postgresql", marks=pytest.mark.postgres), "sqlite"]
)
def test_parallel_wrong_passwords_check_at_most_the_limit(backend, request, tmp_path, hash_calls):
    from webapp.services.accounts import MAX_FAILURES_PER_ACCOUNT_CLIENT
    from webapp.services.researchers import set_researcher

    if backend == "postgresql":
        app = request.getfixturevalue("pg_app")
    else:
        app = make_app(f"sqlite:///{tmp_path / 'limit.sqlite'}")
    with app.app_context():
        set_researcher("ana", PASSWORD)
    statuses = _parallel_wrong_passwords(app, 40)
    assert len(statuses) == 40
    assert len(hash_calls) <= MAX_FAILURES_PER_ACCOUNT_CLIENT, f"{len(hash_calls)} checked"
    assert statuses.count(200) == len(hash_calls) and statuses.count(429) == 40 - len(hash_calls)
    # The right password is refused too while the block lasts, from that client.
    assert login(app.test_client(), "ana").status_code == 429


def _from(app, address: str):
    """A browser at ``address`` (the login limiter's client)."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return client


def test_an_anonymous_visitor_cannot_lock_the_owner_out_of_their_own_client(app):
    from webapp.services.researchers import set_researcher

    with app.app_context():
        set_researcher("ana", PASSWORD)
    attacker = _from(app, "198.51.100.7")
    for i in range(5):
        assert login(attacker, "ana", f"guess {i}").status_code == 200
    assert login(attacker, "ana").status_code == 429  # the guesser is blocked, even when right
    # The owner, from her own client, has never been known to the server: she still gets in.
    assert login(_from(app, "203.0.113.5"), "ana").status_code == 302
    # Her success forgets nothing of the attacker's failures.
    assert login(attacker, "ana").status_code == 429


def test_one_client_trying_many_accounts_is_bounded(app):
    from webapp.services.accounts import MAX_FAILURES_PER_CLIENT
    from webapp.services.researchers import set_researcher

    with app.app_context():
        set_researcher("zoe", PASSWORD)
    sprayer = _from(app, "198.51.100.8")
    for i in range(MAX_FAILURES_PER_CLIENT):  # two guesses at each of ten names
        assert login(sprayer, f"user{i // 2}", f"guess {i}").status_code == 200
    assert login(sprayer, "zoe").status_code == 429  # a name it never tried: still blocked
    assert login(_from(app, "203.0.113.9"), "zoe").status_code == 302


def test_an_ipv6_attacker_is_one_client_across_its_64_and_ipv4_neighbours_are_apart(app, clock):
    from webapp.services.accounts import LOGIN_WINDOW, MAX_FAILURES_PER_ACCOUNT_CLIENT
    from webapp.services.researchers import set_researcher

    with app.app_context():
        set_researcher("ana", PASSWORD)
    # A host that owns 2001:db8:0:7::/64 picks a fresh address for every guess.
    for i in range(MAX_FAILURES_PER_ACCOUNT_CLIENT):
        guesser = _from(app, f"2001:db8:0:7:{i:x}::{i + 1:x}")
        assert login(guesser, "ana", f"guess {i}").status_code == 200
    assert login(_from(app, "2001:db8:0:7:ffff:1:2:3"), "ana").status_code == 429
    assert login(_from(app, "2001:db8:0:8::1"), "ana").status_code == 302  # the next /64
    # IPv4 counts each address: a neighbour of a blocked address is not blocked.
    for i in range(MAX_FAILURES_PER_ACCOUNT_CLIENT):
        assert login(_from(app, "198.51.100.7"), "ana", f"guess {i}").status_code == 200
    assert login(_from(app, "198.51.100.7"), "ana").status_code == 429
    assert login(_from(app, "198.51.100.8"), "ana").status_code == 302
    # The block lifts when the oldest failure leaves the window (the app's clock).
    clock.sleep(LOGIN_WINDOW.total_seconds() + 1)
    assert login(_from(app, "2001:db8:0:7::abcd"), "ana").status_code == 302


def test_many_clients_spraying_hit_the_global_bound_and_known_clients_still_log_in(app, clock):
    # The app's clock stands still: the failures stay inside the login window however long
    # the requests take.
    from webapp.models import utcnow
    from webapp.services import accounts
    from webapp.services.researchers import set_researcher

    with app.app_context():
        set_researcher("ana", PASSWORD)
        set_researcher("bob", PASSWORD)
    # Ana has logged in from her own client before; Bob never from the one he uses below.
    assert login(_from(app, "203.0.113.5"), "ana").status_code == 302
    with app.app_context():
        now = utcnow()
        for i in range(accounts.MAX_FAILURES_GLOBAL):  # one guess from each of 100 clients
            client = accounts.client_hash(f"10.0.{i // 250}.{i % 250}", "any")
            assert accounts.reserve_attempt(f"name{i % 7}", client, now).allowed
    assert login(_from(app, "203.0.113.5"), "ana").status_code == 302
    blocked = login(_from(app, "192.0.2.44"), "bob")
    assert blocked.status_code == 429 and "Too many failed logins" in blocked.get_data(as_text=True)


def test_requests_forwarded_by_an_unconfigured_proxy_are_reported_once(tmp_path, caplog):
    quiet = make_app(f"sqlite:///{tmp_path / 'a.sqlite'}")
    caplog.set_level("WARNING")
    quiet.test_client().get("/researcher/login")  # no proxy: nothing to say
    assert "FRAMELAB_PROXY_HOPS" not in caplog.text
    for _ in range(3):
        quiet.test_client().get("/researcher/login", headers={"X-Forwarded-For": "203.0.113.5"})
    warnings = [r for r in caplog.records if "FRAMELAB_PROXY_HOPS is 0" in r.getMessage()]
    assert len(warnings) == 1
    assert "requests arrive with X-Forwarded-For" in warnings[0].getMessage()
    assert "count all of them as one client" in warnings[0].getMessage()
    caplog.clear()
    configured = make_app(f"sqlite:///{tmp_path / 'b.sqlite'}", PROXY_HOPS=1)
    configured.test_client().get("/researcher/login", headers={"X-Forwarded-For": "203.0.113.5"})
    assert "FRAMELAB_PROXY_HOPS" not in caplog.text


def test_unknown_usernames_cost_a_password_hash_like_known_ones(app, hash_calls):
    from webapp.services.researchers import set_researcher

    with app.app_context():
        set_researcher("ana", PASSWORD)
    client = app.test_client()
    assert login(client, "ana", "wrong password").status_code == 200
    assert len(hash_calls) == 1
    assert login(client, "nobody-by-this-name", "wrong password").status_code == 200
    assert len(hash_calls) == 2  # the unknown name was hashed too (against a dummy hash)
    assert login(client, "ana").status_code == 302
    assert len(hash_calls) == 3


def _console_cookie(client) -> str:
    cookie = client.get_cookie("framelab_console")
    assert cookie is not None, "no console cookie"
    return cookie.value


def _replay(app, value: str):
    """A fresh browser that carries a copied console cookie."""
    thief = app.test_client()
    thief.set_cookie("framelab_console", value)
    return thief


def test_a_cookie_copied_before_logout_is_refused_after_it(app, make_researcher):
    ana = make_researcher("ana")
    saved = _console_cookie(ana)
    assert _replay(app, saved).get("/researcher/").status_code == 200
    token = page_token(ana, "/researcher/")
    assert ana.post("/researcher/logout", data={"csrf_token": token}).status_code == 302
    resp = _replay(app, saved).get("/researcher/")
    assert resp.status_code == 302 and resp.headers["Location"].endswith("/researcher/login")
    assert _replay(app, saved).get("/researcher/audit").status_code == 302


def _draft_page(app, client) -> int:
    """Status of the participant entry page of the (draft) demo study for ``client``."""
    return client.get("/s/product-choice-demo?participant=PREVIEWx1").status_code


def _upload_draft(client) -> None:
    from tests.webapp.researcher.test_lifecycle import upload

    assert upload(client, DEMO.read_text(), "demo.yaml").status_code == 302


def test_preview_gate_refuses_a_cookie_after_logout(app, make_researcher):
    ana = make_researcher("ana")
    _upload_draft(ana)
    saved = _console_cookie(ana)
    assert _draft_page(app, _replay(app, saved)) == 200  # the owner may preview a draft
    token = page_token(ana, "/researcher/")
    ana.post("/researcher/logout", data={"csrf_token": token})
    assert _draft_page(app, _replay(app, saved)) == 403  # "not open yet", no preview


def test_preview_gate_refuses_a_session_from_before_a_password_change(app, make_researcher):
    from webapp.services.researchers import set_researcher

    ana = make_researcher("ana")
    _upload_draft(ana)
    assert _draft_page(app, ana) == 200
    with app.app_context():
        set_researcher("ana", "a brand new password")
    assert _draft_page(app, ana) == 403
    assert ana.get("/researcher/").status_code == 302


def test_preview_is_a_post_with_csrf(app, make_researcher):
    from webapp.extensions import db
    from webapp.models import AuditEvent

    ana = make_researcher("ana")
    _upload_draft(ana)
    url = "/researcher/studies/product-choice-demo/preview"
    assert ana.get(url).status_code == 405
    assert ana.post(url).status_code == 400  # no CSRF token: refused, nothing audited
    with app.app_context():
        actions = db.session.scalars(db.select(AuditEvent.action)).all()
    assert "study.preview" not in actions
    token = page_token(ana, "/researcher/studies/product-choice-demo")
    resp = ana.post(url, data={"csrf_token": token})
    assert resp.status_code == 302 and "participant=test-" in resp.headers["Location"]
    with app.app_context():
        actions = db.session.scalars(db.select(AuditEvent.action)).all()
    assert actions.count("study.preview") == 1


def _set_cookie(resp, name: str) -> str:
    found = [h for h in resp.headers.getlist("Set-Cookie") if h.startswith(f"{name}=")]
    assert len(found) == 1, resp.headers.getlist("Set-Cookie")
    return found[0]


@pytest.fixture
def prod_app(tmp_path):
    app = make_app(
        f"sqlite:///{tmp_path / 'prod.sqlite'}", ENV_NAME="production", SECRET_KEY=STRONG_KEY
    )
    load_demo(app)
    return app


def test_console_and_participant_cookies_are_separate_in_production(prod_app):
    from webapp.services.researchers import set_researcher

    with prod_app.app_context():
        set_researcher("ana", PASSWORD)
    https: dict[str, Any] = {"base_url": "https://lab.example.org"}
    client = prod_app.test_client()
    page = client.get("/s/product-choice-demo?participant=cookie1", **https)
    participant = _set_cookie(page, "session")
    assert "Secure" in participant and "HttpOnly" in participant
    assert "SameSite=None" in participant
    assert not [h for h in page.headers.getlist("Set-Cookie") if "framelab_console" in h]
    participant_value = client.get_cookie("session", domain="lab.example.org").value

    form = client.get("/researcher/login", **https)
    console = _set_cookie(form, "framelab_console")
    assert "Secure" in console and "HttpOnly" in console and "SameSite=Lax" in console
    assert not [h for h in form.headers.getlist("Set-Cookie") if h.startswith("session=")]
    # CSRF works with the console's own cookie ...
    token = csrf_from(form.get_data(as_text=True))
    resp = client.post(
        "/researcher/login",
        data={"csrf_token": token, "username": "ana", "password": PASSWORD},
        **https,
    )
    assert resp.status_code == 302
    assert "SameSite=Lax" in _set_cookie(resp, "framelab_console")
    assert client.get("/researcher/", **https).status_code == 200
    # ... and logging in left the participant's session alone.
    assert client.get_cookie("session", domain="lab.example.org").value == participant_value
    page = client.get("/s/product-choice-demo?participant=cookie1", **https)
    assert page.status_code == 200 and 'name="csrf_token"' in page.get_data(as_text=True)


def test_hsts_in_production_only(prod_app, app):
    resp = prod_app.test_client().get("/researcher/login", base_url="https://lab.example.org")
    hsts = resp.headers["Strict-Transport-Security"]
    assert "max-age=" in hsts and int(hsts.split("max-age=")[1].split(";")[0]) >= 31536000
    assert "Strict-Transport-Security" not in app.test_client().get("/researcher/login").headers


@pytest.mark.parametrize(
    "key",
    ["x", "s3cret", "changeme-changeme-changeme-changeme", "a" * 64, "0123456789" * 4],
)
def test_production_refuses_a_weak_secret_key(tmp_path, key):
    from webapp.config import ConfigError, resolve_config

    with pytest.raises(ConfigError, match="SECRET_KEY"):
        resolve_config(tmp_path, environ={"FRAMELAB_ENV": "production", "SECRET_KEY": key})
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        resolve_config(tmp_path, {"ENV_NAME": "production", "SECRET_KEY": key}, environ={})


def test_production_accepts_generated_keys_and_development_generates_one(tmp_path):
    import secrets

    from webapp.config import resolve_config

    for key in (secrets.token_hex(32), secrets.token_urlsafe(32), STRONG_KEY):
        env = {"FRAMELAB_ENV": "production", "SECRET_KEY": key}
        assert resolve_config(tmp_path, environ=env)["SECRET_KEY"] == key
    generated = resolve_config(tmp_path, environ={})["SECRET_KEY"]
    assert (tmp_path / "secret_key").read_text() == generated and len(generated) == 64


def test_procfile_runs_production_explicitly():
    from tests.webapp.conftest import ROOT

    lines = dict(
        line.split(":", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line
    )
    for process in ("web", "release"):
        assert "FRAMELAB_ENV=production" in lines[process], process
