"""Who gets a bonus: one payment per person whatever the case of their ID, and once a
reconciliation file is imported only the people it lists as submitted."""

from __future__ import annotations

import pytest

from webapp.models import Platform

# Two of the demo's ten pairs: these checks need participants, not their every page.
pytestmark = pytest.mark.demo_pairs(2)

SLUG = "product-choice-demo"
LOWER = "5f1a2b3c4d5e6f7a8b9c0d1e"
UPPER = LOWER.upper()
# Prolific IDs are 24 hex digits: entry refuses any other (webapp.services.entry.canonical_id).
ID_A, ID_B, ID_C, ID_D = (c * 24 for c in "abcd")


def _complete(make_bot, *ids: str, platform: str = "prolific") -> None:
    for external_id in ids:
        assert make_bot(platform=platform, external_id=external_id).run().outcome == "completed"


def _rename(app, old: str, new: str) -> None:
    """Give a stored identity another spelling (data from before IDs were normalised on entry)."""
    from webapp.extensions import db
    from webapp.models import PlatformIdentity

    with app.app_context():
        identity = db.session.scalar(
            db.select(PlatformIdentity).where(PlatformIdentity.external_id == old)
        )
        identity.external_id = new
        db.session.commit()


def _code(app, external_id: str) -> str:
    from webapp.extensions import db
    from webapp.models import PlatformIdentity

    with app.app_context():
        return db.session.scalar(
            db.select(PlatformIdentity).where(PlatformIdentity.external_id == external_id)
        ).participant.code


def _bonus(runner, tmp_path, platform: str = "prolific"):
    out = tmp_path / f"{platform}.csv"
    result = runner.invoke(args=["bonus", SLUG, "--platform", platform, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result.output, out.read_text().splitlines()


def _reconcile(runner, tmp_path, text: str, platform: str = "prolific") -> None:
    path = tmp_path / "recon.csv"
    path.write_text(text)
    result = runner.invoke(args=["reconcile", SLUG, "--platform", platform, str(path)])
    assert result.exit_code == 0, result.output


def test_ids_that_differ_only_in_case_are_one_person_paid_once(
    app, runner, study, make_bot, tmp_path
):
    _complete(make_bot, LOWER, "5ec0d0000000000000000aaa")
    _rename(app, "5ec0d0000000000000000aaa", UPPER)
    first, second = _code(app, LOWER), _code(app, UPPER)
    output, lines = _bonus(runner, tmp_path)
    assert len(lines) == 1 and lines[0].startswith(f"{LOWER},")
    assert f"left out: {second}: same prolific ID as {first} (paid once)" in output


def test_mturk_worker_ids_are_paid_upper_case_and_once(app, runner, study, make_bot, tmp_path):
    _complete(make_bot, "A1B2C3D4E5F6G7", "A9B9C9D9E9F9G9", platform="mturk")
    _rename(app, "A9B9C9D9E9F9G9", " a1b2c3d4e5f6g7")
    _, lines = _bonus(runner, tmp_path, "mturk")
    assert len(lines) == 2 and lines[1].startswith("A1B2C3D4E5F6G7,")


def test_after_a_reconciliation_only_reconciled_ids_are_paid(
    app, runner, study, make_bot, tmp_path
):
    _complete(make_bot, ID_A, ID_B, ID_C, ID_D)
    _reconcile(
        runner,
        tmp_path,
        f"Participant id,Status\n{ID_A.upper()},APPROVED\n{ID_B},RETURNED\n{ID_D},REJECTED\n",
    )
    output, lines = _bonus(runner, tmp_path)
    assert [line.split(",")[0] for line in lines] == [ID_A]
    assert "paid only participants the last prolific reconciliation file lists" in output
    assert f"left out: {_code(app, ID_B)}: RETURNED on prolific" in output
    assert f"left out: {_code(app, ID_C)}: not in the last prolific reconciliation file" in output
    assert f"left out: {_code(app, ID_D)}: REJECTED on prolific" in output


def test_someone_missing_from_a_later_file_is_no_longer_paid(
    app, runner, study, make_bot, tmp_path
):
    _complete(make_bot, ID_A, ID_C)
    _reconcile(runner, tmp_path, f"Participant id,Status\n{ID_A},APPROVED\n{ID_C},APPROVED\n")
    _reconcile(runner, tmp_path, f"Participant id,Status\n{ID_A},APPROVED\n")
    _, lines = _bonus(runner, tmp_path)
    assert [line.split(",")[0] for line in lines] == [ID_A]


def test_a_reconciliation_of_another_platform_changes_nothing(
    app, runner, study, make_bot, tmp_path
):
    _complete(make_bot, ID_A, ID_B)
    _reconcile(runner, tmp_path, "WorkerId,AssignmentStatus\nW1,Approved\n", platform="mturk")
    output, lines = _bonus(runner, tmp_path)
    assert len(lines) == 2 and "left out" not in output


def test_reconciliation_matches_ids_whatever_their_case(app, runner, study, make_bot, tmp_path):
    from webapp.extensions import db
    from webapp.models import Participant

    _complete(make_bot, LOWER)
    path = tmp_path / "recon.csv"
    path.write_text(f"Participant id,Status\n {UPPER} ,APPROVED\n")
    result = runner.invoke(args=["reconcile", SLUG, "--platform", "prolific", str(path)])
    assert "never arrived" not in result.output and "1 matched" in result.output
    with app.app_context():
        assert db.session.scalars(db.select(Participant.platform_status)).one() == "APPROVED"


def test_the_console_names_who_is_left_out(app, study, make_researcher, make_bot, runner, tmp_path):
    from .conftest import own_demo, page_token

    _complete(make_bot, ID_A, ID_C)
    _reconcile(runner, tmp_path, f"Participant id,Status\n{ID_A},APPROVED\n")
    ana = make_researcher("ana")
    own_demo(app, "ana")
    page = ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    missing = _code(app, ID_C)
    assert 'data-bonus-reconciled="prolific"' in page
    assert 'data-bonus-excluded="prolific"' in page and missing in page
    token = page_token(ana, f"/researcher/studies/{SLUG}")
    resp = ana.post(
        f"/researcher/studies/{SLUG}/bonus", data={"csrf_token": token, "platform": "prolific"}
    )
    assert resp.status_code == 200 and resp.get_data(as_text=True).startswith(f"{ID_A},")
    page = ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    assert f"Bonuses left out on prolific: {missing}: not in the last" in page


def test_the_plan_is_computed_without_storing_anything(app, study, make_bot):
    from webapp.extensions import db
    from webapp.models import BonusPayment
    from webapp.services.payments import bonus_plan
    from webapp.services.studies import get_study

    _complete(make_bot, ID_A)
    with app.app_context():
        plan = bonus_plan(get_study(SLUG), Platform.prolific)
        assert [line.worker_id for line in plan.lines] == [ID_A] and not plan.reconciled
        assert db.session.scalar(db.select(db.func.count()).select_from(BonusPayment)) == 0
