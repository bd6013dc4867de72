"""Error pages inside MTurk's frame: errors raised before (or instead of) a view on a participant
URL that came from MTurk may be framed by MTurk and tell the worker to return the HIT; every
other error page, and every console page, stays unframeable."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from webapp.models import Study, StudyState

from .conftest import csrf_token

WORKER = "A1B2C3D4E5F6G7"
MTURK = {
    "workerId": WORKER,
    "hitId": "3HITABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "assignmentId": "3ASSIGNABCDEFGHIJKLMNOPQRSTUV",
    "turkSubmitTo": "https://workersandbox.mturk.com",
}


def _set_state(app, slug: str, state: StudyState) -> None:
    from sqlalchemy import select

    from webapp.extensions import db

    with app.app_context():
        db.session.scalars(select(Study).where(Study.slug == slug)).one().state = state
        db.session.commit()


def _mturk_study(app, study):
    from ..sentiment.conftest import DEMO, load

    return load(app, DEMO)


def _framed_by_mturk(resp) -> bool:
    csp = resp.headers["Content-Security-Policy"]
    return "frame-ancestors https://*.mturk.com" in csp and "X-Frame-Options" not in resp.headers


def _unframeable(resp) -> bool:
    csp = resp.headers["Content-Security-Policy"]
    return "frame-ancestors 'none'" in csp and resp.headers.get("X-Frame-Options") == "DENY"


@pytest.mark.parametrize(
    ("state", "code", "status"),
    [(StudyState.paused, "E403-PAUSED", 403), (StudyState.closed, "E410-CLOSED", 410)],
)
def test_paused_or_closed_study_page_is_framed_for_mturk_and_says_return_the_hit(
    app, client, state, code, status
):
    definition = _mturk_study(app, None)
    _set_state(app, definition.slug, state)
    resp = client.get(f"/s/{definition.slug}?{urlencode(MTURK)}")
    body = resp.get_data(as_text=True)
    assert resp.status_code == status and f'data-error-code="{code}"' in body
    assert _framed_by_mturk(resp)
    assert "return the HIT" in body
    # The same page reached from a plain link is not framed and says nothing of HITs.
    resp = client.get(f"/s/{definition.slug}?participant=someone")
    assert resp.status_code == status and _unframeable(resp)
    assert "HIT" not in resp.get_data(as_text=True)


def test_csrf_failure_of_an_mturk_consent_form_is_framed_for_mturk(app, client):
    # A consent form whose token cannot be checked records nothing and goes back to the
    # worker's consent page (no "form expired"): both answers stay inside MTurk's frame.
    definition = _mturk_study(app, None)
    resp = client.post(f"/s/{definition.slug}/start", data={**MTURK, "csrf_token": "forged"})
    assert resp.status_code == 302 and _framed_by_mturk(resp)
    assert resp.headers["Location"].startswith(f"/s/{definition.slug}?")
    again = client.get(resp.headers["Location"])
    body = again.get_data(as_text=True)
    assert again.status_code == 200 and _framed_by_mturk(again)
    assert "confirm once more" in body and 'name="csrf_token"' in body


def test_malformed_mturk_link_is_framed_for_mturk(app, client):
    definition = _mturk_study(app, None)
    resp = client.get(f"/s/{definition.slug}?{urlencode({**MTURK, 'workerId': 'no good!'})}")
    body = resp.get_data(as_text=True)
    assert resp.status_code == 400 and 'data-error-code="E400-PARAMS"' in body
    assert _framed_by_mturk(resp) and "return the HIT" in body


def test_session_error_of_an_mturk_session_is_framed_for_mturk(app, client):
    from webapp.bots import Bot, BotBehaviour, FlaskTransport

    definition = _mturk_study(app, None)
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="mturk"), external_id=WORKER)
    bot.open()
    bot.step()  # consent
    token = bot.page.url.rsplit("/p/", 1)[1].split("?")[0]
    # The worker's own token under another study's slug: E404-SESSION, but an MTurk session.
    from ..conftest import load_demo

    other = load_demo(app).slug
    resp = client.get(f"/s/{other}/p/{token}")
    assert resp.status_code == 404 and b"E404-SESSION" in resp.data
    assert _framed_by_mturk(resp)
    # A forged token loaded inside a frame (the browser says so) is MTurk's to show, too.
    resp = client.get(f"/s/{other}/p/forged", headers={"Sec-Fetch-Dest": "iframe"})
    assert resp.status_code == 404 and _framed_by_mturk(resp)
    # ... but not when it is opened as a top-level page.
    resp = client.get(f"/s/{other}/p/forged")
    assert resp.status_code == 404 and _unframeable(resp)


def test_console_pages_and_errors_stay_unframeable_even_with_mturk_parameters(app, client):
    resp = client.get(f"/researcher/login?{urlencode(MTURK)}", headers={"Sec-Fetch-Dest": "iframe"})
    assert _unframeable(resp)
    token = csrf_token(resp.get_data(as_text=True))
    assert token
    resp = client.post("/researcher/login", data={**MTURK, "csrf_token": "forged"})
    assert resp.status_code == 400 and _unframeable(resp)
    resp = client.get(
        f"/researcher/nowhere?{urlencode(MTURK)}", headers={"Sec-Fetch-Dest": "iframe"}
    )
    assert resp.status_code == 404 and _unframeable(resp)
