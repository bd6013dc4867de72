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
    assert study["status"] == "PUBLISHING"  # Prolific publishes asynchronously
    page = client.get(URL).get_data(as_text=True)
    assert study["id"] in page and "PUBLISHING" in page

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


def _listed(app, fake, load_recruit_study, make_researcher):
    """The demo listed and published on the fake through the console; (client, token)."""
    load_recruit_study()
    client = make_researcher("ana")
    own_demo(app, "ana")
    token = csrf_from(client.get(URL).get_data(as_text=True))
    for action in ("create", "publish"):
        client.post(f"{URL}/recruit/{action}", data={"csrf_token": token, "confirm": "yes"})
    (study_id,) = fake.studies
    return client, token, study_id


def test_an_answer_without_an_id_is_a_clear_message_not_a_500(
    app, fake, load_recruit_study, make_researcher
):
    client, token, study_id = _listed(app, fake, load_recruit_study, make_researcher)
    fake.submissions["broken"] = {
        "participant_id": "5f1a2b3c4d5e6f7a8b9c0d1e",
        "study_id": study_id,
        "status": "AWAITING REVIEW",
    }  # no "id": not what Prolific documents
    resp = client.post(f"{URL}/recruit/status", data={"csrf_token": token})
    assert resp.status_code == 302
    page = html.unescape(client.get(URL).get_data(as_text=True))
    assert "Prolific's answer to the list of submissions (entry 1) has no usable id" in page


def test_a_platform_error_is_shown_short_and_without_credentials(
    app, fake, load_recruit_study, make_researcher
):
    from tests.webapp.recruit.fake_prolific import TOKEN

    client, token, _ = _listed(app, fake, load_recruit_study, make_researcher)
    echoed = f"Bad request. Headers: Authorization: Token {TOKEN}; " + "x" * 5000
    fake.inject("POST", r"/transition/$", 400, detail=echoed)
    client.post(f"{URL}/recruit/pause", data={"csrf_token": token, "confirm": "yes"})
    page = html.unescape(client.get(URL).get_data(as_text=True))
    (message,) = [line for line in page.splitlines() if "Prolific refused" in line]
    assert TOKEN not in page and "Authorization: ***" in message
    assert len(message.strip()) < 500
