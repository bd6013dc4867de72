"""Every console route refuses anonymous access; researchers cannot reach each other's studies."""

from __future__ import annotations

import re

import pytest

from webapp import create_app

from .conftest import own_demo, page_token

# Two of the demo's ten pairs: these checks need participants, not their every page.
pytestmark = pytest.mark.demo_pairs(2)


def _console_rules() -> list[tuple[str, str, str]]:
    """(endpoint, URL with sample arguments, method) for every console route except login."""
    app = create_app(
        {"ENV_NAME": "testing", "SECRET_KEY": "x", "SQLALCHEMY_DATABASE_URI": "sqlite://"}
    )
    samples = {
        "slug": "product-choice-demo",
        "fmt": "long",
        "ext": "csv",
        "filename": "x.js",
        "code": "p_0123456789abcdef",
        "look": "1",
    }
    out = []
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith("researcher.") or rule.endpoint in {
            "researcher.login",
            "researcher.static",
        }:
            continue
        url = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: samples[m.group(1)], rule.rule)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            out.append((rule.endpoint, url, method))
    return out


RULES = _console_rules()


def test_the_url_map_has_the_console_routes():
    endpoints = {e for e, _, _ in RULES}
    assert {"researcher.study", "researcher.live", "researcher.bonus", "researcher.export"} <= (
        endpoints
    )


@pytest.mark.parametrize(
    ("endpoint", "url", "method"), RULES, ids=[f"{m} {u}" for _, u, m in RULES]
)
def test_anonymous_requests_are_refused(app, study, endpoint, url, method):
    app.config["WTF_CSRF_ENABLED"] = False  # reach the login check, not the CSRF check
    resp = app.test_client().open(url, method=method)
    if url.endswith(".json"):
        assert resp.status_code == 401
    else:
        assert resp.status_code == 302
        assert resp.headers["Location"].endswith("/researcher/login")


def test_anonymous_post_without_csrf_is_refused(client, study):
    resp = client.post("/researcher/studies/product-choice-demo/bonus", data={"platform": "mturk"})
    assert resp.status_code == 400


def test_a_researcher_cannot_read_or_change_another_researchers_study(
    app, study, make_researcher, make_bot
):
    ana = make_researcher("ana")
    bob = make_researcher("bob")
    own_demo(app, "ana")
    make_bot().run()
    base = "/researcher/studies/product-choice-demo"
    assert ana.get(base).status_code == 200
    assert 'data-study="product-choice-demo"' in ana.get("/researcher/").get_data(as_text=True)
    assert 'data-study="product-choice-demo"' not in bob.get("/researcher/").get_data(as_text=True)
    for url in (base, f"{base}/live.json", f"{base}/export/long.csv"):
        assert bob.get(url).status_code == 404, url
    token = page_token(bob, "/researcher/")
    posts = {
        f"{base}/preview": {},
        f"{base}/state": {"state": "paused"},
        f"{base}/bonus": {"platform": "prolific"},
        f"{base}/bonus/file-not-used": {"unused-platform": "prolific", "unused-codes": "all"},
        f"{base}/participants": {"participant": "p_x", "action": "exclude", "reason": "x"},
    }
    for url, data in posts.items():
        assert bob.post(url, data={"csrf_token": token, **data}).status_code == 404, url
    # Bob's upload of a study with Ana's slug is refused too.
    from .test_lifecycle import upload

    resp = upload(bob, (study_yaml := _demo_text()), "mine.yaml")
    assert resp.status_code == 422 and "taken by another researcher" in resp.get_data(as_text=True)
    assert study_yaml
    with app.app_context():
        from webapp.extensions import db
        from webapp.models import BonusPayment, Participant, StudyState
        from webapp.services.studies import get_study

        assert get_study("product-choice-demo").state is StudyState.live
        assert db.session.scalar(db.select(db.func.count()).select_from(BonusPayment)) == 0
        assert not db.session.scalars(db.select(Participant)).one().excluded


def test_an_admin_sees_every_study(app, study, make_researcher):
    make_researcher("ana")
    own_demo(app, "ana")
    admin = make_researcher("root", admin=True)
    assert admin.get("/researcher/studies/product-choice-demo").status_code == 200


def _demo_text() -> str:
    from tests.webapp.conftest import DEMO

    return DEMO.read_text()
