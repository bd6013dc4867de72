"""Reconciliation with Prolific's submissions export and MTurk's assignment CSV."""

from __future__ import annotations

import io

import pytest

from webapp.bots import platform_id
from webapp.models import ParticipantStatus

# Two of the demo's ten pairs: these checks need participants, not their every page.
pytestmark = pytest.mark.demo_pairs(2)

SLUG = "product-choice-demo"


def pid(name: str) -> str:
    """The valid Prolific ID the bot named ``name`` arrives with (24 hex digits)."""
    return platform_id("prolific", name)


def _status(app, external_id):
    from webapp.extensions import db
    from webapp.models import Participant, PlatformIdentity

    with app.app_context():
        p = db.session.scalar(
            db.select(Participant)
            .join(PlatformIdentity)
            .where(PlatformIdentity.external_id == external_id)
        )
        return p.status, p.platform_status, p.reconcile_note


def test_prolific_import_updates_statuses_and_flags_mismatches(
    app, runner, study, make_bot, tmp_path
):
    make_bot(external_id="DONE1").run()
    make_bot(external_id="DONE2").run()
    make_bot(external_id="GONE1", abandon_at=3).run()
    make_bot(external_id="SLOW1", abandon_at=3).run()
    make_bot(external_id="HALF1", abandon_at=3).run()
    export = tmp_path / "prolific.csv"
    export.write_text(
        "Submission id,Participant id,Status,Started at,Completed at,Completion code\n"
        f"s1,{pid('DONE1')},APPROVED,2026-01-01,2026-01-01,C7F3D2A1\n"
        f"s2,{pid('DONE2')},RETURNED,2026-01-01,,\n"
        f"s3,{pid('GONE1')},RETURNED,2026-01-01,,\n"
        f"s4,{pid('SLOW1')},TIMED-OUT,2026-01-01,,\n"
        f"s5,{pid('HALF1')},AWAITING REVIEW,2026-01-01,2026-01-01,C7F3D2A1\n"
        f"s6,{pid('NEVERHERE')},AWAITING REVIEW,2026-01-01,2026-01-01,C7F3D2A1\n"
    )
    result = runner.invoke(args=["reconcile", SLUG, "--platform", "prolific", str(export)])
    assert result.exit_code == 0, result.output
    assert "6 rows, 5 matched; status changes: returned 1, timed_out 1" in result.output
    assert _status(app, pid("DONE1")) == (ParticipantStatus.completed, "APPROVED", None)
    assert _status(app, pid("GONE1"))[0] is ParticipantStatus.returned
    assert _status(app, pid("SLOW1"))[0] is ParticipantStatus.timed_out
    assert _status(app, pid("DONE2")) == (
        ParticipantStatus.completed,
        "RETURNED",
        "completed here, RETURNED on prolific",
    )
    assert _status(app, pid("HALF1"))[2] == "AWAITING REVIEW on prolific, started here"
    never = pid("NEVERHERE")
    assert f"mismatch: {never}: AWAITING REVIEW on prolific, never arrived here" in result.output
    # Returned and timed-out participants no longer hold a sequence slot.
    from datetime import timedelta

    from webapp.models import utcnow
    from webapp.services.entry import balance_counts
    from webapp.services.studies import get_study

    with app.app_context():
        counts = balance_counts(get_study(SLUG), utcnow(), timedelta(hours=1))
    assert sum(counts.values()) == 3  # DONE1, DONE2 (completed) and HALF1 (active)


def test_completed_here_but_absent_there_is_flagged(app, runner, study, make_bot, tmp_path):
    make_bot(external_id="ONLYHERE").run()
    export = tmp_path / "p.csv"
    export.write_text("Participant id,Status\nSOMEONE,RETURNED\n")
    result = runner.invoke(args=["reconcile", SLUG, "--platform", "prolific", str(export)])
    assert (
        "mismatch" in result.output and "completed here, not in the prolific file" in result.output
    )


def test_mturk_assignment_csv(app, runner, study, make_bot, tmp_path):
    make_bot(platform="mturk", external_id="AW1").run()
    make_bot(platform="mturk", external_id="AW2", abandon_at=2).run()
    export = tmp_path / "batch.csv"
    export.write_text(
        "HITId,AssignmentId,WorkerId,AssignmentStatus,Answer.completion_code\n"
        "H,3ASG1,AW1,Approved,C7F3D2A1\n"
        "H,3ASG2,AW2,Submitted,\n"
    )
    result = runner.invoke(args=["reconcile", SLUG, "--platform", "mturk", str(export)])
    assert result.exit_code == 0, result.output
    assert _status(app, "AW1")[1] == "APPROVED"
    assert _status(app, "AW2")[2] == "SUBMITTED on mturk, started here"


def test_a_file_without_the_needed_columns_is_refused(runner, study, tmp_path):
    export = tmp_path / "wrong.csv"
    export.write_text("id,state\n1,APPROVED\n")
    result = runner.invoke(args=["reconcile", SLUG, "--platform", "prolific", str(export)])
    assert result.exit_code != 0 and "no column 'participant id'" in result.output


def test_console_import_shows_the_report(app, study, make_researcher, make_bot):
    from .conftest import own_demo, page_token

    make_bot(external_id="DONE1").run()
    ana = make_researcher("ana")
    own_demo(app, "ana")
    token = page_token(ana, f"/researcher/studies/{SLUG}")
    data = {
        "csrf_token": token,
        "platform": "prolific",
        "file": (
            io.BytesIO(f"Participant id,Status\n{pid('DONE1')},RETURNED\n".encode()),
            "sub.csv",
        ),
    }
    resp = ana.post(
        f"/researcher/studies/{SLUG}/reconcile", data=data, content_type="multipart/form-data"
    )
    html = resp.get_data(as_text=True)
    assert resp.status_code == 200 and "Mismatches (1)" in html
    assert "completed here, RETURNED on prolific" in html
