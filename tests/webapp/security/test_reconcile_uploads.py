"""Recruiter exports uploaded to the console: malformed, huge or binary files are a clear
message, never a 500. Before, a field over ``csv.field_size_limit()`` was an unhandled
``csv.Error``, and an over-long status reached ``Participant.platform_status`` (a 500 on
PostgreSQL)."""

from __future__ import annotations

import csv
import io

import pytest

from webapp.definition_cache import study_definition
from webapp.services import reconcile

from ..researcher.conftest import login, own_demo, page_token

SLUG = "product-choice-demo"
HEADER = b"Submission id,Participant id,Status\n"


def _post(client, body: bytes):
    token = page_token(client, f"/researcher/studies/{SLUG}")
    return client.post(
        f"/researcher/studies/{SLUG}/reconcile",
        data={"csrf_token": token, "platform": "prolific", "file": (io.BytesIO(body), "x.csv")},
        content_type="multipart/form-data",
    )


def _console(app):
    from webapp.services.researchers import set_researcher

    from ..researcher.conftest import PASSWORD

    with app.app_context():
        set_researcher("ana", PASSWORD)
    own_demo(app, "ana")
    client = app.test_client()
    assert login(client, "ana").status_code == 302
    return client


BAD_FILES = [
    (HEADER + b"s1," + b"P" * (csv.field_size_limit() + 1) + b",APPROVED\n", "line 2"),
    (HEADER + b's1,"unterminated,APPROVED\n' + b"x" * (csv.field_size_limit() + 1), "CSV"),
    (b"Participant id," + b"H" * (csv.field_size_limit() + 1) + b"\n", "line 1"),
    (HEADER + b"s1,P1," + b"APPROVED" * 10 + b"\n", "line 2"),
    (HEADER + b"s1,P\x001,APPROVED\n", "line 2"),
    (HEADER + b"s1,P1,APPR\x1bOVED\n", "line 2"),
    (HEADER + b"s1,P" + b"9" * 200 + b",APPROVED\n", "line 2"),
    (HEADER + b"s1,P1,APPROVED\n\xff\xfe\x00binary\n", "line 3"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "UTF-8"),
    (
        b"Submission id," + b",".join(b"col%d" % i + b"x" * 500 for i in range(300)) + b"\n",
        "no column",
    ),
]


@pytest.mark.parametrize(("body", "reason"), BAD_FILES)
def test_a_malformed_export_is_refused_with_a_short_reason(body, reason):
    with pytest.raises(reconcile.ReconcileError) as info:
        reconcile.read_export(reconcile.Platform.prolific, body)
    message = str(info.value)
    assert reason in message and len(message) < 800, message


@pytest.mark.slow  # a study run by a bot for each bad file
@pytest.mark.parametrize(("body", "reason"), BAD_FILES)
def test_the_console_shows_the_reason_and_changes_nothing(app, study, make_bot, body, reason):
    make_bot(external_id="P1").run()
    client = _console(app)
    resp = _post(client, body)
    assert resp.status_code == 302, resp.status_code
    page = client.get(resp.headers["Location"]).get_data(as_text=True)
    assert "Could not read the file" in page and reason in page
    from webapp.extensions import db
    from webapp.models import Participant

    with app.app_context():
        assert db.session.scalar(db.select(Participant.platform_status)) is None


def test_a_file_over_the_bound_is_refused_without_reading_it_all(app, study, monkeypatch):
    # The real bound is 8 MB; a smaller one keeps the test light (the test client leaks the
    # temporary file of a multi-megabyte upload).
    assert reconcile.MAX_BYTES == 8 * 1024 * 1024
    monkeypatch.setattr(reconcile, "MAX_BYTES", 1000)
    client = _console(app)
    body = HEADER + b"s1,P1,APPROVED\n" * 100
    resp = _post(client, body)
    page = client.get(resp.headers["Location"]).get_data(as_text=True)
    assert "Could not read the file: the file is larger than" in page


def test_a_good_export_still_imports(app, study, make_bot):
    from webapp.bots import platform_id

    make_bot(external_id="P1").run()  # arrives as the valid Prolific ID derived from "P1"
    client = _console(app)
    pid = platform_id("prolific", "P1").encode()
    resp = _post(client, HEADER + b"s1," + pid + b",RETURNED\n")
    assert resp.status_code == 200 and "completed here, RETURNED on prolific" in resp.get_data(
        as_text=True
    )


def test_the_cli_refuses_a_malformed_export_with_a_message(app, study, tmp_path):
    export = tmp_path / "bad.csv"
    export.write_bytes(BAD_FILES[0][0])
    result = app.test_cli_runner().invoke(
        args=["reconcile", SLUG, "--platform", "prolific", str(export)]
    )
    assert result.exit_code == 1 and "line 2" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    export.write_bytes(b"\xff\xfe binary")
    result = app.test_cli_runner().invoke(
        args=["reconcile", SLUG, "--platform", "prolific", str(export)]
    )
    assert result.exit_code == 1 and "UTF-8" in result.output


@pytest.mark.postgres
def test_on_postgres_a_long_or_nul_status_is_a_message_not_a_500(pg_app):
    from ..conftest import load_demo

    load_demo(pg_app)
    from webapp.bots import run_bots
    from webapp.services.studies import get_study

    with pg_app.app_context():
        definition = study_definition(get_study(SLUG))
    run_bots(pg_app, definition, n=1, seed=3)
    client = _console(pg_app)
    from webapp.extensions import db
    from webapp.models import PlatformIdentity

    with pg_app.app_context():
        pid = db.session.scalar(db.select(PlatformIdentity.external_id)).encode()
    for status in (b"AWAITING REVIEW" * 20, b"APPR\x00OVED"):
        resp = _post(client, HEADER + b"s1," + pid + b"," + status + b"\n")
        assert resp.status_code == 302
        assert "Could not read the file" in client.get(resp.headers["Location"]).get_data(
            as_text=True
        )
