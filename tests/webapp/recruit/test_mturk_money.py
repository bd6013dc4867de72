"""MTurk money paths against a fake that refuses what MTurk refuses (tests/webapp/recruit/
fake_mturk.py): a publish whose answer was lost records its HIT and never posts a second one,
not even after MTurk forgot the token (24 hours); a rejected assignment gets no bonus; a create
whose answer was lost makes no second qualification type."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from tests.webapp.recruit.test_mturk import BLOCK, SLUG

boto3 = pytest.importorskip("boto3")

from tests.webapp.recruit.fake_mturk import FakeMTurk  # noqa: E402
from webapp.bots import Bot, BotBehaviour, FlaskTransport, platform_id  # noqa: E402


@pytest.fixture
def turk():
    return FakeMTurk()


def act(app, turk, action: str, **kw):
    from webapp.recruit import get_recruiter
    from webapp.services.studies import get_study

    with app.app_context():
        r = get_recruiter(get_study(SLUG), actor="test", client=turk.client())
        return getattr(r, action)(**kw)


def listing(app):
    from webapp.recruit import get_recruiter
    from webapp.services.studies import get_study

    with app.app_context():
        row = get_recruiter(get_study(SLUG), actor="test", client=None).row()
        return row.external_id, row.status, dict(row.extra)


def worker_done(app, definition, turk, hit: str, name: str, assignment: str) -> str:
    """A worker does the whole study here through the HIT, and MTurk lists the assignment."""
    worker = platform_id("mturk", name)
    bot = Bot(
        FlaskTransport(app),
        definition,
        BotBehaviour(platform="mturk"),
        rng=random.Random(name),
        external_id=worker,
    )
    own = bot.entry_url
    bot.entry_url = lambda extra=None: own({"hitId": hit, "assignmentId": assignment})
    assert bot.run().outcome == "completed"
    turk.assign(hit, worker, assignment)
    return worker


def test_the_fake_refuses_repeated_tokens_as_mturk_does(turk):
    """Within 24 hours a token is refused naming the HIT; after them it posts a new HIT."""
    from botocore.exceptions import ClientError

    client = turk.client()
    hit_type = client.create_hit_type(
        AssignmentDurationInSeconds=60, Reward="1.00", Title="t", Description="d"
    )["HITTypeId"]
    params = {
        "HITTypeId": hit_type,
        "MaxAssignments": 1,
        "LifetimeInSeconds": 60,
        "Question": "<q/>",
        "UniqueRequestToken": "tok",
    }
    hit = client.create_hit_with_hit_type(**params)["HIT"]["HITId"]
    with pytest.raises(ClientError) as refused:
        client.create_hit_with_hit_type(**params)
    assert refused.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.HitAlreadyExists"
    assert hit in refused.value.response["Error"]["Message"]
    turk.now += timedelta(hours=25)
    assert client.create_hit_with_hit_type(**params)["HIT"]["HITId"] != hit
    assert len(turk.hits) == 2


def test_a_publish_whose_answer_was_lost_records_the_hit(app, load_recruit_study, turk):
    """The retried CreateHITWithHITType is answered HitAlreadyExists: its HIT is recorded
    (before, that was an error and the live HIT had no id here: no pause, close or pay)."""
    load_recruit_study(BLOCK)
    act(app, turk, "create", base_url="https://study.example.org")
    turk.fail("CreateHITWithHITType", "read", after=True)
    act(app, turk, "publish")
    (hit,) = turk.hits
    assert listing(app)[:2] == (hit, "Assignable")
    turk.fail("UpdateExpirationForHIT", "read", after=True)  # expiring again changes nothing
    act(app, turk, "pause")  # the recorded HIT can be driven
    assert turk.hits[hit]["Expiration"].year == 2015 and listing(app)[1] == "PAUSED"


def test_a_publish_retried_after_24_hours_posts_no_second_hit(app, load_recruit_study, turk):
    """Every answer was lost; a day later MTurk has forgotten the token, so a blind retry
    would post a second HIT: the HIT is looked up by its annotation first."""
    from webapp.recruit.base import RecruitError

    load_recruit_study(BLOCK)
    act(app, turk, "create", base_url="https://study.example.org")
    turk.fail("CreateHITWithHITType", "read", times=5, after=True)
    with pytest.raises(RecruitError):
        act(app, turk, "publish")
    assert len(turk.hits) == 1 and "hit_id" not in listing(app)[2]
    turk.now += timedelta(hours=25)
    act(app, turk, "publish")
    (hit,) = turk.hits
    assert listing(app)[0] == hit


def test_settle_finds_the_hit_of_an_unanswered_publish(app, load_recruit_study, turk):
    from webapp.recruit.base import RecruitError

    load_recruit_study(BLOCK)
    act(app, turk, "create", base_url="https://study.example.org")
    turk.fail("CreateHITWithHITType", "read", times=5, after=True)
    with pytest.raises(RecruitError):
        act(app, turk, "publish")
    report = act(app, turk, "settle")
    (hit,) = turk.hits
    assert listing(app)[0] == hit and any(hit in line for line in report.lines)


def test_an_mturk_create_whose_answer_was_lost_makes_no_second_qualification(
    app, load_recruit_study, turk
):
    load_recruit_study(BLOCK)
    turk.fail("CreateQualificationType", "read", after=True)  # made; the answer was lost
    act(app, turk, "create", base_url="https://study.example.org")
    assert len(turk.qualification_types) == 1
    (qual,) = turk.qualification_types
    assert listing(app)[2]["qualification_type_id"] == qual


@pytest.fixture
def assignment(app, load_recruit_study, turk) -> str:
    """The study's HIT published on the fake, and one worker's assignment of it, done."""
    definition = load_recruit_study(BLOCK)
    act(app, turk, "create", base_url="https://study.example.org")
    act(app, turk, "publish")
    (hit,) = turk.hits
    worker_done(app, definition, turk, hit, "adone", "3ASSIGNDONE00000000000000000000")
    return "3ASSIGNDONE00000000000000000000"


def test_no_mturk_bonus_after_the_assignment_was_rejected(app, turk, assignment):
    """A run that failed before paying leaves the row; MTurk now lists the assignment as
    rejected: the next run reads it just before paying and pays nothing."""
    turk.fail("SendBonus", "connect", times=5)  # nothing reaches MTurk
    first = act(app, turk, "bonus")
    assert first.counts["paid"] == 0 and turk.paid(assignment) == []
    turk.assignments[assignment]["AssignmentStatus"] = "Rejected"
    tried = turk.calls.count("SendBonus")  # the five that never connected
    second = act(app, turk, "bonus")
    assert turk.paid(assignment) == [] and turk.calls.count("SendBonus") == tried
    assert any("nothing was sent" in line for line in first.lines)
    assert any("REJECTED on MTurk" in line for line in second.lines)


def test_an_mturk_bonus_whose_answer_was_lost_is_paid_once(app, turk, assignment):
    turk.fail("SendBonus", "read", times=5, after=True)  # paid; every answer lost
    first = act(app, turk, "bonus")
    assert first.counts["unconfirmed"] == 1 and len(turk.paid(assignment)) == 1
    turk.now += timedelta(hours=25)  # MTurk has forgotten the token: a resend would pay
    second = act(app, turk, "bonus")
    assert second.counts["paid"] == 1 and len(turk.paid(assignment)) == 1


def test_an_approval_whose_answer_was_lost_is_done_not_an_error(app, turk, assignment):
    """MTurk refuses to approve an approved assignment: after a lost answer, the retry's
    refusal is checked against the assignment's status (the reward is paid once, by MTurk)."""
    turk.fail("ApproveAssignment", "read", after=True)
    report = act(app, turk, "approve")
    assert report.counts["approve"] == 1
    assert turk.assignments[assignment]["AssignmentStatus"] == "Approved"
    assert turk.calls.count("ApproveAssignment") == 2


# -- the fake refuses what MTurk refuses ---------------------------------------------------------


def test_the_fake_refuses_ids_that_break_botocores_patterns(turk):
    """botocore's client checks types, not patterns; MTurk refuses a worker ID outside
    ``^A[A-Z0-9]+$`` (its model's CustomerId), and so does the fake."""
    from botocore.exceptions import ClientError

    client = turk.client()
    with pytest.raises(ClientError) as refused:
        client.send_bonus(
            WorkerId="TEST-835E7134A02EA3162331",
            AssignmentId="3ASSIGN0000000000000000000000",
            BonusAmount="1.00",
            Reason="r",
            UniqueRequestToken="t",
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "^A[A-Z0-9]+$" in str(refused.value) and turk.bonuses == []


def test_no_test_participant_is_sent_to_mturk(app, load_recruit_study, turk):
    """A screened-out pilot bot (``TEST-…``) is never given the screened-out qualification:
    MTurk refuses its ID, and every later status, approve and bonus would have failed with it
    (before, each status sent it)."""
    definition = load_recruit_study(BLOCK)
    act(app, turk, "create", base_url="https://study.example.org")
    act(app, turk, "publish")
    (hit,) = turk.hits
    for test_secret, name in ((app.config["SECRET_KEY"], "pilot"), (None, "aquiz")):
        bot = Bot(
            FlaskTransport(app),
            definition,
            BotBehaviour(platform="mturk", fail_quiz=True),
            rng=random.Random(name),
            external_id=name,
            test_secret=test_secret,
        )
        own = bot.entry_url
        assignment = f"3ASSIGN{name.upper()}".ljust(30, "0")
        bot.entry_url = lambda extra=None, own=own, a=assignment: own(
            {"hitId": hit, "assignmentId": a}
        )
        assert bot.run().outcome == "screened_out"
    report, _ = act(app, turk, "status")
    assert turk.refused == [] and turk.calls.count("AssociateQualificationWithWorker") == 1
    assert "kept 1 screened-out worker(s) out of the HIT" in report.lines
    assert listing(app)[2]["blocked"] == [platform_id("mturk", "aquiz")]


# -- one ledger for the payment file and the API -------------------------------------------------


def test_a_bonus_paid_by_file_is_not_paid_again_a_day_later(
    app, turk, assignment, runner, tmp_path
):
    """The researcher sends the SendBonus plan of `framelab bonus --platform mturk`; 25 hours
    later MTurk has forgotten its tokens, and "Pay bonuses" pays nothing more (before, it
    sent the same bonus again: two bonuses)."""
    out = tmp_path / "mturk.csv"
    result = runner.invoke(args=["bonus", SLUG, "--platform", "mturk", "--out", str(out)])
    assert result.exit_code == 0, result.output
    turk.run_bonus_file(out.read_text())
    assert len(turk.paid(assignment)) == 1
    turk.now += timedelta(hours=25)
    report = act(app, turk, "bonus")
    assert len(turk.paid(assignment)) == 1 and turk.calls.count("SendBonus") == 1
    assert report.counts["paid"] == 1  # ListBonusPayments: recorded as paid
    with app.app_context():
        from sqlalchemy import select

        from webapp.extensions import db
        from webapp.models import BonusPayment

        assert db.session.scalars(select(BonusPayment.platform_state)).all() == ["paid"]


def test_the_api_reads_mturks_record_before_paying_a_new_row(app, turk, assignment):
    """A row still new whose bonus MTurk already lists (every page of ListBonusPayments) is
    recorded as paid, never sent (before, only rows of an unknown outcome were looked up)."""
    from webapp.models import Platform, utcnow
    from webapp.services.payments import issue_bonuses
    from webapp.services.studies import get_study

    with app.app_context():
        (line,) = issue_bonuses(
            get_study(SLUG), Platform.mturk, issued_by="t", now=utcnow(), to_file=False
        ).lines
    client = turk.client()
    for n, amount in enumerate(("0.05", "0.07", line.amount)):  # a third page holds it
        client.send_bonus(
            WorkerId=line.worker_id,
            AssignmentId=assignment,
            BonusAmount=amount,
            Reason="by hand",
            UniqueRequestToken=f"hand-{n}",
        )
    act(app, turk, "bonus")
    assert len(turk.paid(assignment)) == 3 and turk.calls.count("SendBonus") == 3


def test_the_review_list_shows_when_mturk_approves_by_itself(app, load_recruit_study, turk):
    """Three assignments (two pages of ListAssignmentsForHIT): each waiting one is listed with
    the date MTurk approves it unless it is reviewed (the HIT type's seven days)."""
    definition = load_recruit_study(BLOCK)
    act(app, turk, "create", base_url="https://study.example.org")
    act(app, turk, "publish")
    (hit,) = turk.hits
    for name in ("aone", "atwo", "athree"):
        worker_done(app, definition, turk, hit, name, f"3ASSIGN{name.upper()}".ljust(30, "0"))
    report, chosen = act(app, turk, "approval_plan")
    assert len(chosen) == 3
    due = (turk.now + timedelta(days=7)).strftime("%Y-%m-%d %H:%M")
    assert sum(f"approves it by itself on {due} UTC" in line for line in report.lines) == 3


# -- only IDs MTurk takes, only the study's own HIT ----------------------------------------------


def entry_through(app, definition, hit: str, name: str, assignment: str):
    """A worker opens the study's link with ``hit`` and ``assignment``: the entry page."""
    bot = Bot(
        FlaskTransport(app),
        definition,
        BotBehaviour(platform="mturk"),
        rng=random.Random(name),
        external_id=platform_id("mturk", name),
    )
    return app.test_client().get(bot.entry_url({"hitId": hit, "assignmentId": assignment}))


def participants(app) -> int:
    from sqlalchemy import func, select

    from webapp.extensions import db
    from webapp.models import Participant

    with app.app_context():
        return db.session.scalar(select(func.count()).select_from(Participant))


def test_an_entry_through_another_hit_is_not_the_studys_participant(app, load_recruit_study, turk):
    """Once FrameLab has posted the study's HIT, a worker arriving with another hitId (a HIT
    posted by hand, a link edited) is turned away: the study approves and pays through its
    own HIT only (before, they enrolled and counted as the study's participant)."""
    definition = load_recruit_study(BLOCK)
    act(app, turk, "create", base_url="https://study.example.org")
    act(app, turk, "publish")
    (hit,) = turk.hits
    other = entry_through(app, definition, "3OTHERHIT".ljust(30, "0"), "aother", "3ASGOTHER0")
    assert other.status_code == 403 and b'data-error-code="E403-UNVERIFIED"' in other.data
    assert b"Traceback" not in other.data and participants(app) == 0
    assert entry_through(app, definition, hit, "aown", "3ASGOWN0").status_code == 200


def test_a_worker_paid_only_on_an_assignment_of_the_studys_hit(app, load_recruit_study, turk):
    """A worker who entered through a hand-made HIT before FrameLab posted its own (nothing to
    compare with then) is not paid on that HIT's assignment: GetAssignment names the HIT."""
    definition = load_recruit_study(BLOCK)
    act(app, turk, "create", base_url="https://study.example.org")
    act(app, turk, "publish")
    (hit,) = turk.hits
    other = "3OTHERHIT".ljust(30, "0")
    turk.hits[other] = {**turk.hits[hit], "HITId": other}
    from webapp.extensions import db
    from webapp.models import Recruitment

    with app.app_context():  # as before the HIT was recorded
        row = db.session.scalars(db.select(Recruitment)).one()
        extra, row.extra = row.extra, {k: v for k, v in row.extra.items() if k != "hit_id"}
        db.session.commit()
    worker = worker_done(app, definition, turk, other, "aother", "3ASGOTHER0")
    with app.app_context():
        db.session.scalars(db.select(Recruitment)).one().extra = extra
        db.session.commit()
    turk.assign(hit, worker, "3ASGOWN0")  # also holds an assignment of the study's HIT
    report = act(app, turk, "bonus")
    assert turk.bonuses == [] and report.counts["paid"] == 0
    assert any(f"not this study's HIT {hit}" in line for line in report.lines), report.lines


def test_malformed_worker_ids_are_skipped_and_named_never_sent(app, load_recruit_study, turk):
    """A screened-out worker stored with an ID MTurk refuses (from before entry checked
    botocore's patterns) is skipped and named; the others are still kept out (before, MTurk's
    refusal stopped every status run)."""
    from webapp.extensions import db
    from webapp.models import Participant, ParticipantStatus, Platform, utcnow
    from webapp.services.entry import add_participant
    from webapp.services.studies import get_study

    definition = load_recruit_study(BLOCK)
    act(app, turk, "create", base_url="https://study.example.org")
    act(app, turk, "publish")
    (hit,) = turk.hits
    bot = Bot(
        FlaskTransport(app),
        definition,
        BotBehaviour(platform="mturk", fail_quiz=True),
        rng=random.Random("aquiz"),
        external_id="aquiz",
    )
    own = bot.entry_url
    bot.entry_url = lambda extra=None: own({"hitId": hit, "assignmentId": "3ASGQUIZ0"})
    assert bot.run().outcome == "screened_out"
    with app.app_context():  # a second screened-out worker, stored as older versions did
        add_participant(
            get_study(SLUG),
            platform=Platform.mturk,
            external_id="B1WORKER",
            now=utcnow(),
            seed=1,
            sequence=db.session.scalars(db.select(Participant.sequence)).one(),
            status=ParticipantStatus.screened_out,
        )
        db.session.commit()
    report, _ = act(app, turk, "status")
    assert turk.refused == [] and turk.calls.count("AssociateQualificationWithWorker") == 1
    assert "not kept out: worker ID 'B1WORKER' is not an MTurk worker ID" in report.lines
    assert listing(app)[2]["blocked"] == [platform_id("mturk", "aquiz")]


def test_a_listed_bonus_of_a_fraction_of_a_cent_confirms_no_row(app, turk, assignment):
    """ListBonusPayments' amounts are read as written: $0.995 is not the ledger's $1.00 (before,
    0.995 x 100 rounded to 100 and the row was recorded as paid, never sent)."""
    worker = turk.assignments[assignment]["WorkerId"]
    turk.bonuses.append(
        {"WorkerId": worker, "BonusAmount": "0.995", "AssignmentId": assignment, "Reason": "r"}
    )
    report = act(app, turk, "bonus")
    assert report.counts["paid"] == 0 and turk.calls.count("SendBonus") == 0
    assert any("not an amount in whole cents" in line for line in report.lines), report.lines
