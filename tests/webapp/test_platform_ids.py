"""Recruiter IDs are checked against the platforms' own formats at entry, in one canonical
spelling: Prolific 24 hex digits (lower case), MTurk IDs by the patterns of botocore's MTurk
service model (upper case)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from sqlalchemy import func, select

from webapp.extensions import db
from webapp.models import Participant, PlatformIdentity

PID = "5f1a2b3c4d5e6f708192a3b4"


def _prolific(pid: str) -> str:
    return urlencode({"PROLIFIC_PID": pid, "STUDY_ID": "S1", "SESSION_ID": "X1"})


def _mturk(worker: str, hit: str = "3HIT", assignment: str = "3ASG") -> str:
    return urlencode(
        {
            "workerId": worker,
            "hitId": hit,
            "assignmentId": assignment,
            "turkSubmitTo": "https://workersandbox.mturk.com",
        }
    )


@pytest.mark.parametrize(
    "query",
    [
        _prolific("abc"),  # too short
        _prolific("5f1a2b3c4d5e6f708192a3b4ff"),  # too long
        _prolific("5f1a2b3c4d5e6f708192a3bz"),  # not hex
        _prolific("BOT0001"),
        _mturk("A1-B2"),
        _mturk("worker@example.org"),
        # MTurk refuses these in every call (botocore's CustomerId and EntityId patterns):
        _mturk("B1B2C3D4E5F6G7"),  # a worker ID starts with A
        _mturk("A"),
        _mturk("A" * 65),
        _mturk("A1B2C3D4E5F6G7", hit="3" * 65),
        _mturk("A1B2C3D4E5F6G7", assignment="3ASG_1"),
    ],
)
def test_a_malformed_platform_id_gets_the_friendly_params_page(app, client, study, query):
    resp = client.get(f"/s/{study.slug}?{query}")
    assert resp.status_code == 400 and b'data-error-code="E400-PARAMS"' in resp.data
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Participant)) == 0


def test_mturk_id_patterns_are_botocores():
    """The entry page checks MTurk IDs by the patterns MTurk itself applies (botocore's service
    model: WorkerId is a CustomerId, HITId and AssignmentId are EntityIds)."""
    botocore_session = pytest.importorskip("botocore.session")
    from webapp.services.entry import MTURK_ID_PATTERNS

    model = botocore_session.get_session().get_service_model("mturk")
    params = {
        **model.operation_model("SendBonus").input_shape.members,
        **model.operation_model("GetHIT").input_shape.members,
    }
    for name, (pattern, least, most) in MTURK_ID_PATTERNS.items():
        meta = params[name].metadata
        assert (pattern, least, most) == (meta["pattern"], meta["min"], meta["max"]), name


def test_a_bad_or_missing_id_says_what_to_do_and_a_placeholder_is_explained(client, study):
    # Found by the outside walkthrough: "The study link has a malformed PROLIFIC_PID." for a
    # researcher trying the Prolific link with Prolific's placeholders still in it.
    from html import unescape

    for query in (_prolific("abc"), _prolific(""), _mturk("A1-B2")):
        text = unescape(client.get(f"/s/{study.slug}?{query}").get_data(as_text=True))
        assert "Please open the study again from the link" in text, query
    text = unescape(
        client.get(f"/s/{study.slug}?{_prolific('{{%PROLIFIC_PID%}}')}").get_data(as_text=True)
    )
    assert "still holds Prolific's placeholder {{%PROLIFIC_PID%}}" in text
    assert "Preview on the study's page in the researcher console" in text


def _enrol(client, slug: str, query: str):
    from urllib.parse import parse_qsl

    from .security.conftest import csrf_token

    page = client.get(f"/s/{slug}?{query}")
    assert page.status_code == 200, page.status_code
    form = dict(parse_qsl(query))
    return client.post(
        f"/s/{slug}/start",
        data={**form, "agree": "y", "csrf_token": csrf_token(page.get_data(as_text=True))},
    )


@pytest.mark.parametrize(
    ("first", "second", "stored"),
    [
        (_prolific(PID.upper()), _prolific(PID), PID),
        (_mturk("a1b2c3d4e5f6g7"), _mturk("A1B2C3D4E5F6G7"), "A1B2C3D4E5F6G7"),
    ],
)
def test_one_person_in_two_spellings_is_one_participant(app, study, first, second, stored):
    started = _enrol(app.test_client(), study.slug, first)
    assert started.status_code == 302
    # The other spelling from a fresh browser resumes the same session, not a second one.
    again = app.test_client().get(f"/s/{study.slug}?{second}")
    assert again.status_code == 302 and again.headers["Location"] == started.headers["Location"]
    with app.app_context():
        assert db.session.scalars(select(PlatformIdentity.external_id)).all() == [stored]


def test_the_exclusion_list_matches_any_spelling(app, client, tmp_path):
    import shutil

    from webapp.services.studies import load_study

    from .conftest import DEMO

    shutil.copytree(DEMO.parents[1], tmp_path / "stimuli")  # the files the study names
    listed = f"exclude_ids: [{PID.upper()}]"
    path = tmp_path / "stimuli" / "studies" / DEMO.name
    path.write_text(DEMO.read_text().replace("exclude_ids: []", listed, 1))

    with app.app_context():
        slug = load_study(path).study.slug
    resp = client.get(f"/s/{slug}?{_prolific(PID)}")
    assert resp.status_code == 403 and b"E403-EXCLUDED" in resp.data
