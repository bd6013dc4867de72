"""CSRF on every state-changing route and login on every researcher route (URL map enumerated),
session fixation on login, cookies and security headers."""

from __future__ import annotations

import re

from webapp.extensions import csrf

from ..conftest import load_demo, make_app
from .conftest import STATE_CHANGING, build, csrf_token, login, rules


def _state_changing(app):
    return [r for r in rules(app) if (r.methods or set()) & STATE_CHANGING]


# The one view without Flask-WTF's session token: a participant's page, whose form carries its
# own anti-forgery token (the page token, webapp.tasks.base.PageForm; docs/security.md).
PAGE_TOKEN_ROUTES = {"participant.page"}
# The consent POST checks Flask-WTF's token itself (``csrf.protect()``): without a usable one it
# records nothing and sends the visitor back to the consent page (or, when the entry already
# names a participant, where their study link would take them), never "form expired".
SELF_CHECKED_ROUTES = {"participant.start"}


def _participants(app) -> int:
    from webapp.extensions import db
    from webapp.models import Participant

    with app.app_context():
        return db.session.scalar(db.select(db.func.count()).select_from(Participant))


def test_the_url_map_has_state_changing_routes_and_only_the_page_is_exempt(app):
    endpoints = {r.endpoint for r in _state_changing(app)}
    assert {"participant.start", "participant.page", "researcher.login"} <= endpoints
    assert csrf._exempt_views == {
        "webapp.participant.routes.page",
        "webapp.participant.routes.start",
    }
    assert not csrf._exempt_blueprints


def test_every_state_changing_route_refuses_a_post_without_csrf_token(app, client, study):
    # A logged-in researcher with a participant session too: CSRF is the only barrier left.
    login(app, client)
    entry = client.get(f"/s/{study.slug}?participant=csrf1")
    assert entry.status_code == 200
    checked = []
    for rule in _state_changing(app):
        if rule.endpoint in PAGE_TOKEN_ROUTES:
            continue  # test_a_page_post_without_a_valid_page_token_is_refused
        url = build(app, rule)
        for method in sorted((rule.methods or set()) & STATE_CHANGING):
            for data in ({}, {"csrf_token": "forged"}):
                before = _participants(app)
                resp = client.open(url, method=method, data=data)
                body = resp.get_data(as_text=True)
                if rule.endpoint in SELF_CHECKED_ROUTES:  # no entry parameters: a clear 400
                    assert resp.status_code == 400, (method, url, resp.status_code)
                    assert 'data-error-code="E400-PARAMS"' in body, (method, url)
                    assert _participants(app) == before
                    continue
                assert resp.status_code == 400, (method, url, resp.status_code)
                assert 'data-error-code="E400-CSRF"' in body, (method, url)
            checked.append(f"{method} {rule.rule}")
    assert len(checked) >= 3


def test_a_page_post_without_a_valid_page_token_is_refused(app, client, study, make_bot):
    # The page route's forgery barrier is the page token: a forged post (no token, a made-up
    # one, another participant's) is refused with nothing saved, logged in or not.
    from sqlalchemy import func, select

    from webapp.extensions import db
    from webapp.models import PageVisit

    login(app, client)
    other = make_bot(external_id="other")
    other.open()
    other.step()
    stolen = other.answer()["page"]
    bot = make_bot(external_id="victim")
    bot.open()
    bot.step()
    url = bot.page.url
    submitted = (
        select(func.count()).select_from(PageVisit).where(PageVisit.submitted_at.is_not(None))
    )
    with app.app_context():
        before = db.session.scalar(submitted)
    for data in ({}, {"page": "forged"}, {"page": "1.0000"}, {"page": stolen}):
        resp = client.post(url, data=data)
        assert resp.status_code == 400, (data, resp.status_code)
        assert 'data-error-code="E400-TAMPER"' in resp.get_data(as_text=True), data
    with app.app_context():
        assert db.session.scalar(submitted) == before  # nothing answered
    before_kind = bot.page.kind
    page = bot.step()  # the participant's own form, with its page token, still goes through
    assert page.status == 200 and page.kind != before_kind, (before_kind, page.kind)
    with app.app_context():
        assert db.session.scalar(submitted) == before + 1


def test_a_csrf_token_from_another_session_is_refused(app, study):
    alice, mallory = app.test_client(), app.test_client()
    token = csrf_token(mallory.get(f"/s/{study.slug}?participant=mallory").get_data(True))
    alice.get(f"/s/{study.slug}?participant=alice")
    resp = alice.post(f"/s/{study.slug}/start", data={"csrf_token": token, "participant": "alice"})
    # Not enrolled: back to alice's own consent page with a fresh form.
    assert resp.status_code == 302
    assert resp.headers["Location"] == f"/s/{study.slug}?participant=alice"
    assert _participants(app) == 0


def test_every_researcher_route_requires_login(app, client, study):
    token = csrf_token(client.get("/researcher/login").get_data(as_text=True))
    public = {"researcher.login"}
    checked = 0
    for rule in rules(app):
        if not rule.endpoint.startswith("researcher.") or rule.endpoint in public:
            continue
        url = build(app, rule)
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            data = {"csrf_token": token} if method in STATE_CHANGING else None
            resp = client.open(url, method=method, data=data)
            assert resp.status_code in (302, 401, 403), (method, url, resp.status_code)
            if resp.status_code == 302:
                assert resp.headers["Location"].endswith("/researcher/login"), (method, url)
            checked += 1
    assert checked >= 2


def test_login_drops_everything_planted_in_the_session_before(app, client, study):
    client.get("/researcher/login")
    with client.session_transaction("/researcher/") as sess:
        sess["planted"] = "by-an-attacker"
        sess["researcher_id"] = 999_999  # a forged id must not survive either
    login(app, client)
    with client.session_transaction("/researcher/") as sess:
        assert "planted" not in sess
        assert sess["researcher_id"] != 999_999


def test_logout_ends_the_session(app, client, study):
    login(app, client)
    page = client.get("/researcher/").get_data(as_text=True)
    client.post("/researcher/logout", data={"csrf_token": csrf_token(page)})
    assert client.get("/researcher/").status_code == 302


def test_production_cookies_are_secure_httponly_samesite(tmp_path):
    app = make_app(f"sqlite:///{tmp_path / 'prod.sqlite'}", ENV_NAME="production")
    definition = load_demo(app)
    resp = app.test_client().get(f"/s/{definition.slug}?participant=cookie1")
    cookie = resp.headers["Set-Cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=None" in cookie
    resp = app.test_client().get("/researcher/login")
    cookie = resp.headers["Set-Cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie


def _csp(resp) -> dict[str, str]:
    policy = resp.headers["Content-Security-Policy"]
    return {d.split()[0]: d.strip() for d in policy.split(";") if d.strip()}


def test_headers_participant_pages_framed_by_mturk_only(app, client, study):
    mturk = client.get(
        f"/s/{study.slug}?workerId=AW1&hitId=H1&assignmentId=A1"
        "&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com"
    )
    csp = _csp(mturk)
    ancestors = csp["frame-ancestors"].split()[1:]
    assert ancestors and all("mturk.com" in a for a in ancestors)
    assert "X-Frame-Options" not in mturk.headers
    assert "'unsafe-inline'" not in mturk.headers["Content-Security-Policy"]
    for url in (f"/s/{study.slug}?PROLIFIC_PID=P1&STUDY_ID=S&SESSION_ID=X", "/nowhere"):
        resp = client.get(url)
        assert _csp(resp)["frame-ancestors"] == "frame-ancestors 'none'", url
        assert resp.headers["X-Frame-Options"] == "DENY"


def test_headers_console_never_framed(app, client, study):
    for resp in (client.get("/researcher/login"), client.get("/researcher/")):
        assert _csp(resp)["frame-ancestors"] == "frame-ancestors 'none'"
        assert resp.headers["X-Frame-Options"] == "DENY"
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        assert resp.headers["Referrer-Policy"] == "no-referrer"
    login(app, client)
    resp = client.get("/researcher/")
    assert _csp(resp)["frame-ancestors"] == "frame-ancestors 'none'"
    assert re.search(r"no-store", resp.headers["Cache-Control"])
