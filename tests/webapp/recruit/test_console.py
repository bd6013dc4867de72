"""The recruiter on the study page: every button shows the cost and asks before sending."""

from __future__ import annotations

import html

from tests.webapp.researcher.conftest import csrf_from, own_demo

URL = "/researcher/studies/product-choice-demo"


def test_buttons_confirm_the_cost_before_anything_is_sent(
    app, fake, load_recruit_study, make_researcher
):
    load_recruit_study()
    client = make_researcher("ana")
    own_demo(app, "ana")
    page = client.get(URL).get_data(as_text=True)
    assert 'id="recruit"' in page and "Not listed yet." in page
    assert "total     $31.99" in html.unescape(page)
    token = csrf_from(page)

    # First press: a confirmation page with the cost; nothing sent.
    confirm = client.post(f"{URL}/recruit/create", data={"csrf_token": token})
    text = html.unescape(confirm.get_data(as_text=True))
    assert confirm.status_code == 200 and "total     $31.99" in text
    assert 'data-recruit-confirm="create"' in text and fake.calls == []

    # Confirmed: created with this server's address, then published.
    done = client.post(
        f"{URL}/recruit/create", data={"csrf_token": csrf_from(text), "confirm": "yes"}
    )
    assert done.status_code == 302 and done.headers["Location"].endswith("#recruit")
    (study,) = fake.studies.values()
    assert study["external_study_url"].startswith("http://localhost/s/product-choice-demo?")
    client.post(f"{URL}/recruit/publish", data={"csrf_token": token, "confirm": "yes"})
    assert study["status"] == "ACTIVE"
    page = client.get(URL).get_data(as_text=True)
    assert study["id"] in page and "ACTIVE" in page

    # Approve shows what approving costs (nobody has finished: $0.00).
    text = html.unescape(
        client.post(f"{URL}/recruit/approve", data={"csrf_token": token}).get_data(as_text=True)
    )
    assert "approve 0 submission(s): rewards $0.00" in text


def test_other_researchers_cannot_act(app, fake, load_recruit_study, make_researcher):
    load_recruit_study()
    make_researcher("ana")
    own_demo(app, "ana")
    eve = make_researcher("eve")
    token = csrf_from(eve.get("/researcher/").get_data(as_text=True))
    resp = eve.post(f"{URL}/recruit/create", data={"csrf_token": token, "confirm": "yes"})
    assert resp.status_code == 404 and fake.calls == []


def test_no_recruiter_block_no_section(app, study, make_researcher):
    client = make_researcher("ana", admin=True)
    assert 'id="recruit"' not in client.get(URL).get_data(as_text=True)
