"""The researcher console: login required, counts by status and sequence, export download."""

from __future__ import annotations

import re

from webapp.services.researchers import set_researcher


def _login(app, client, password="correct horse"):
    with app.app_context():
        # An admin: the demo study is loaded from the command line, so it has no owner.
        set_researcher("rita", "correct horse", is_admin=True)
    page = client.get("/researcher/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
    return client.post(
        "/researcher/login", data={"csrf_token": token, "username": "rita", "password": password}
    )


def test_console_requires_login(client, study):
    assert client.get("/researcher/").headers["Location"].endswith("/researcher/login")
    resp = client.get("/researcher/studies/product-choice-demo/export-long.csv")
    assert resp.status_code == 302


def test_wrong_password_is_refused(app, client, study):
    resp = _login(app, client, password="wrong")
    assert resp.status_code == 200 and "wrong password" in resp.get_data(as_text=True)


def test_overview_counts_and_export(app, client, make_bot):
    make_bot().run()
    make_bot(fail_quiz=True).run()
    assert _login(app, client).status_code == 302
    html = client.get("/researcher/").get_data(as_text=True)
    assert "product-choice-demo" in html
    completed = re.search(r'data-status="completed">(.*?)</tr>', html).group(1)
    screened = re.search(r'data-status="screened_out">(.*?)</tr>', html).group(1)
    assert re.findall(r"<td>(\d+)</td>", completed)[2] == "1"
    assert re.findall(r"<td>(\d+)</td>", screened)[2] == "1"
    resp = client.get("/researcher/studies/product-choice-demo/export-long.csv")
    assert resp.status_code == 200 and resp.mimetype == "text/csv"
    assert len(resp.get_data(as_text=True).strip().splitlines()) == 11


def test_researcher_sessions_are_previews_left_out_of_exports(app, client, study):
    from sqlalchemy import select

    from webapp.bots import Bot, FlaskTransport
    from webapp.extensions import db
    from webapp.models import Participant

    _login(app, client)
    bot = Bot(FlaskTransport(app), study)
    bot.transport.client = client  # the logged-in browser tries the study
    assert bot.run().outcome == "completed"
    with app.app_context():
        p = db.session.scalars(select(Participant)).one()
        assert p.is_preview is True
        from webapp.tasks.product_choice.export import choice_rows

        assert choice_rows(p.study) == []
        assert len(choice_rows(p.study, include_test=True)) == 10
