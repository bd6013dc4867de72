"""NUL and other control characters in a request's path, query or form: a friendly, numbered
400 on every route of the URL map, on SQLite and on PostgreSQL (whose text types cannot hold
NUL, so before the guard ``/s/a%00b`` was a 500 without logging in)."""

from __future__ import annotations

import pytest

from ..conftest import load_demo
from .conftest import STATE_CHANGING, build, csrf_token, int_arguments, login, rules

CODE = 'data-error-code="E400-CHARACTERS"'
NASTY = ["\x00", "\x01", "\x1b", "\x7f", "\x85"]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_app(request):
    """The app on SQLite and on PostgreSQL, with the demo study loaded."""
    app = request.getfixturevalue("app" if request.param == "sqlite" else "pg_app")
    load_demo(app)
    return app


def _methods(rule) -> list[str]:
    return sorted((rule.methods or set()) - {"HEAD", "OPTIONS"})


def _send(client, method: str, url: str, token: str, **form: str):
    if method in STATE_CHANGING:
        return client.open(url, method=method, data={"csrf_token": token, **form})
    return client.open(url, method=method, query_string=form or None)


def _assert_refused(resp, what: str) -> None:
    body = resp.get_data(as_text=True)
    assert resp.status_code == 400, (what, resp.status_code, body[:300])
    assert CODE in body, (what, body[:300])
    assert "Traceback" not in body


def test_nul_in_every_path_argument_of_every_route_is_a_friendly_400(any_app):
    client = any_app.test_client()
    login(any_app, client)  # researcher routes then reach their database lookups
    token = csrf_token(client.get("/researcher/").get_data(as_text=True))
    checked = []
    for rule in rules(any_app):
        # An int argument cannot carry NUL: its converter answers 404 to anything but digits.
        for arg in sorted(rule.arguments - int_arguments(rule)):
            url = build(any_app, rule, **{arg: "a\x00b"})
            assert "%00" in url, url
            for method in _methods(rule):
                _assert_refused(_send(client, method, url, token), f"{method} {url}")
                checked.append((rule.endpoint, arg, method))
    # Every participant route with a slug or token, and the console's study pages.
    endpoints = {e for e, _, _ in checked}
    assert {"participant.entry", "participant.start", "participant.page"} <= endpoints
    assert {"researcher.study", "researcher.export", "researcher.reconcile_import"} <= endpoints


def test_nul_in_the_query_or_form_of_every_route_is_a_friendly_400(any_app):
    client = any_app.test_client()
    login(any_app, client)
    token = csrf_token(client.get("/researcher/").get_data(as_text=True))
    n = 0
    for rule in rules(any_app):
        url = build(any_app, rule)
        for method in _methods(rule):
            # In a value and in a name: both reach views (request.args.to_dict()).
            for form in ({"participant": "a\x00b"}, {"a\x00b": "x"}):
                resp = _send(client, method, url, token, **form)
                if method == "POST" and rule.endpoint == "participant.page":
                    # A made-up page token: the body is never read, so there is nothing to
                    # refuse in it (test_request_bodies.py); a real token's form is checked
                    # (test_a_refused_answer_links_back_to_the_participants_page).
                    assert resp.status_code == 404, resp.status_code
                    assert 'data-error-code="E404-SESSION"' in resp.get_data(as_text=True)
                else:
                    _assert_refused(resp, f"{method} {url}")
                n += 1
    assert n >= 2 * len(list(rules(any_app)))


def test_nul_in_the_login_username_is_a_friendly_400_and_logs_nothing(any_app):
    client = any_app.test_client()
    token = csrf_token(client.get("/researcher/login").get_data(as_text=True))
    resp = client.post(
        "/researcher/login",
        data={"csrf_token": token, "username": "adm\x00in", "password": "whatever"},
    )
    _assert_refused(resp, "login")
    from webapp.extensions import db
    from webapp.models import LoginAttempt

    with any_app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(LoginAttempt)) == 0


PROLIFIC_PID = "5f1a2b3c4d5e6f7a8b9c0d1e"  # entry refuses anything but 24 hex digits


@pytest.mark.parametrize(
    "param",
    ["participant", "PROLIFIC_PID", "STUDY_ID", "SESSION_ID", "workerId", "hitId", "assignmentId"],
)
@pytest.mark.parametrize("char", NASTY)
def test_control_characters_in_participant_entry_parameters_are_a_friendly_400(
    app, study, param, char
):
    client = app.test_client()
    base = {
        "PROLIFIC_PID": {"PROLIFIC_PID": PROLIFIC_PID, "STUDY_ID": "S1", "SESSION_ID": "X1"},
        "STUDY_ID": {"PROLIFIC_PID": PROLIFIC_PID, "STUDY_ID": "S1", "SESSION_ID": "X1"},
        "SESSION_ID": {"PROLIFIC_PID": PROLIFIC_PID, "STUDY_ID": "S1", "SESSION_ID": "X1"},
        "participant": {"participant": "p1"},
    }.get(
        param,
        {
            "workerId": "AW1",
            "hitId": "H1",
            "assignmentId": "A1",
            "turkSubmitTo": "https://workersandbox.mturk.com",
        },
    )
    params = {**base, param: f"id{char}1"}
    _assert_refused(client.get(f"/s/{study.slug}", query_string=params), f"GET {param}")
    # The consent form carries the same parameters as hidden fields.
    consent = client.get(f"/s/{study.slug}", query_string=base)
    assert consent.status_code == 200
    token = csrf_token(consent.get_data(as_text=True))
    resp = client.post(f"/s/{study.slug}/start", data={"csrf_token": token, "agree": "1", **params})
    _assert_refused(resp, f"POST {param}")


@pytest.mark.postgres
def test_nul_in_a_participant_id_on_postgres_enrols_nobody(pg_app):
    definition = load_demo(pg_app)
    client = pg_app.test_client()
    slug = definition.slug
    _assert_refused(client.get(f"/s/{slug}?participant=a%00b"), "entry")
    consent = client.get(f"/s/{slug}?participant=ok1")
    token = csrf_token(consent.get_data(as_text=True))
    resp = client.post(
        f"/s/{slug}/start", data={"csrf_token": token, "agree": "1", "participant": "a\x00b"}
    )
    _assert_refused(resp, "start")
    from webapp.extensions import db
    from webapp.models import Participant

    with pg_app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(Participant)) == 0


def test_line_breaks_and_tabs_in_form_values_are_still_accepted(app, client, study):
    # A typed answer may span lines; only the invisible control characters are refused.
    token = csrf_token(client.get("/researcher/login").get_data(as_text=True))
    resp = client.post(
        "/researcher/login",
        data={"csrf_token": token, "username": "ana", "password": "line one\r\n\tline two"},
    )
    assert resp.status_code != 400 and CODE not in resp.get_data(as_text=True)
    resp = client.get(f"/s/{study.slug}?participant=plain-id_1")
    assert resp.status_code == 200


def test_a_refused_answer_links_back_to_the_participants_page(app, make_bot):
    bot = make_bot(platform="link")
    bot.open()
    bot.step()  # consent: now on a page with a form
    url = bot.page.url
    form = bot.page.forms[0]
    resp = app.test_client().post(url, data={**form.hidden(), "x": "typed\x00"})
    _assert_refused(resp, "page")
    path = url.split("localhost", 1)[-1]
    assert f'href="{path}"' in resp.get_data(as_text=True)


@pytest.mark.postgres
@pytest.mark.parametrize(
    "username", ["x" * 81, "ana\x00", "a\x1bna"], ids=["81 characters", "NUL", "ESC"]
)
def test_create_researcher_refuses_a_username_the_table_cannot_hold(pg_app, username):
    # Found by review: `framelab create-researcher` with such a name was a database error
    # (a traceback) on PostgreSQL instead of a message.
    result = pg_app.test_cli_runner().invoke(
        args=["create-researcher", username, "--password", "pw-9f3k2-lq-long"]
    )
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "username" in result.output
