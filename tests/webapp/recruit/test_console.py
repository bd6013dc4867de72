"""The recruiter on the study page: every button shows the cost and asks before sending."""

from __future__ import annotations

import html

import pytest

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
    assert "total     $32.00" in html.unescape(page)
    token = csrf_from(page)

    # First press: a confirmation page with the cost; nothing sent.
    confirm = client.post(f"{URL}/recruit/create", data={"csrf_token": token})
    text = html.unescape(confirm.get_data(as_text=True))
    assert confirm.status_code == 200 and "total     $32.00" in text
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


def _confirm_form(page: str) -> dict[str, str]:
    """The hidden fields of a confirmation page (what pressing its Yes sends)."""
    import re

    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
    return {k: html.unescape(v) for k, v in fields.items()}


@pytest.mark.parametrize("action", ["bonus", "approve"])
def test_the_console_does_exactly_what_its_confirmation_showed(
    app, fake, load_recruit_study, make_researcher, action
):
    """One person finished when the page was shown; four more before Yes was pressed. Yes
    pays (approves) the one shown; the four are shown as a new confirmation (before, all five
    were paid: $4.40 under a confirmation of $1.00 + $0.33)."""
    from tests.webapp.recruit.test_prolific import take_part

    definition = load_recruit_study()
    client = make_researcher("ana")
    own_demo(app, "ana")
    token = csrf_from(client.get(URL).get_data(as_text=True))
    for step in ("create", "publish"):
        client.post(f"{URL}/recruit/{step}", data={"csrf_token": token, "confirm": "yes"})
    (study_id,) = fake.studies
    # Everyone chooses the target every time: every choice matches the majority, so each
    # bonus is $1.00 however many finish (the amounts themselves do not move).
    same = {"p_target": {"original": 1.0, "summary": 1.0}}
    first = take_part(app, fake, definition, study_id, "first", **same)
    page = client.post(f"{URL}/recruit/{action}", data={"csrf_token": token})
    shown = _confirm_form(page.get_data(as_text=True))
    later = [take_part(app, fake, definition, study_id, f"later{i}", **same) for i in range(4)]
    done = client.post(f"{URL}/recruit/{action}", data=shown)
    if action == "bonus":
        fake.process_payments()
        assert {pid for _, pid, _ in fake.payments} == {first}
    else:
        status = {s["participant_id"]: s["status"] for s in fake.submissions.values()}
        assert status[first] == "APPROVED"
        assert {status[p] for p in later} == {"AWAITING REVIEW"}
    assert "1 row(s)" in page.get_data(as_text=True) and shown["confirmation"]
    text = html.unescape(done.get_data(as_text=True))
    assert done.status_code == 200 and "4 more" in text and "4 row(s)" in text
    # The new confirmation, confirmed, does the four.
    client.post(f"{URL}/recruit/{action}", data=_confirm_form(done.get_data(as_text=True)))
    if action == "bonus":
        fake.process_payments()
        assert sorted(pid for _, pid, _ in fake.payments) == sorted([first, *later])
    else:
        assert all(s["status"] == "APPROVED" for s in fake.submissions.values())


def test_a_changed_or_forged_confirmation_does_nothing(
    app, fake, load_recruit_study, make_researcher
):
    from tests.webapp.recruit.test_prolific import take_part

    definition = load_recruit_study()
    client = make_researcher("ana")
    own_demo(app, "ana")
    token = csrf_from(client.get(URL).get_data(as_text=True))
    for step in ("create", "publish"):
        client.post(f"{URL}/recruit/{step}", data={"csrf_token": token, "confirm": "yes"})
    (study_id,) = fake.studies
    pid = take_part(app, fake, definition, study_id, "a")
    page = client.post(f"{URL}/recruit/bonus", data={"csrf_token": token}).get_data(as_text=True)
    shown = _confirm_form(page)
    forged = client.post(
        f"{URL}/recruit/bonus", data={**shown, "confirmation": "x" + shown["confirmation"]}
    )
    assert forged.status_code == 302 and fake.bulk == {}
    (sub,) = fake.submissions.values()
    sub["status"] = "REJECTED"  # between the page and the Yes
    changed = client.post(f"{URL}/recruit/bonus", data=shown)
    text = html.unescape(changed.get_data(as_text=True))
    assert changed.status_code == 200 and "nothing was paid" in text
    assert "to pay now: $0.00" in text and fake.bulk == {} and fake.paid_to(pid) == 0
