"""The MTurk recruiter through boto3 with botocore's Stubber: the documented request shapes
(the Stubber checks every call's parameters against MTurk's service model), approval of
exactly those who completed here, and SendBonus idempotency through the ledger's tokens."""

from __future__ import annotations

import hashlib
import random

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.stub import ANY, Stubber  # noqa: E402

from webapp.bots import Bot, BotBehaviour, FlaskTransport, platform_id  # noqa: E402
from webapp.recruit.mturk import SANDBOX_ENDPOINT  # noqa: E402

BLOCK = """
recruiter:
  platform: mturk
  places: 12
  reward: 3.00
  qualifications:
    - {type: approval_rate, comparator: GreaterThanOrEqualTo, value: 95}
    - {type: locale, comparator: In, locales: [US, US-NY]}
  block_screened_out: true
  lifetime_hours: 48
  assignment_minutes: 60
  keywords: survey, products
"""
SLUG = "product-choice-demo"
HIT_TYPE = "3HITTYPE0EXAMPLE0000000000000A"
HIT = "3HIT0EXAMPLE000000000000000000"
QUAL = "3QUAL0EXAMPLE00000000000000000"
# The publish's UniqueRequestToken: from the slug and the listing row (the first: id 1).
HIT_TOKEN = "framelab-hit-" + hashlib.sha256(f"{SLUG}:hit:1".encode()).hexdigest()[:32]


@pytest.fixture
def mturk():
    from tests.webapp.recruit.fake_mturk import sandbox_client

    client = sandbox_client()
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def recruiter(client, **kw):
    from webapp.recruit import get_recruiter
    from webapp.services.studies import get_study

    return get_recruiter(get_study(SLUG), actor="test", client=client, **kw)


def publish(app, client, stub):
    stub.add_response(
        "create_qualification_type",
        {"QualificationType": {"QualificationTypeId": QUAL}},
        {"Name": ANY, "Description": ANY, "QualificationTypeStatus": "Active"},
    )
    stub.add_response(
        "create_hit_type",
        {"HITTypeId": HIT_TYPE},
        {
            "AutoApprovalDelayInSeconds": 7 * 24 * 3600,
            "AssignmentDurationInSeconds": 3600,
            "Reward": "3.00",
            "Title": "Choosing between products",
            "Keywords": "survey, products",
            "Description": ANY,
            "QualificationRequirements": [
                {
                    "QualificationTypeId": "000000000000000000L0",
                    "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [95],
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                },
                {
                    "QualificationTypeId": "00000000000000000071",
                    "Comparator": "In",
                    "LocaleValues": [{"Country": "US"}, {"Country": "US", "Subdivision": "NY"}],
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                },
                {
                    "QualificationTypeId": QUAL,
                    "Comparator": "DoesNotExist",
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                },
            ],
        },
    )
    stub.add_response(
        "create_hit_with_hit_type",
        {"HIT": {"HITId": HIT, "HITTypeId": HIT_TYPE, "HITStatus": "Assignable"}},
        {
            "HITTypeId": HIT_TYPE,
            "MaxAssignments": 12,
            "LifetimeInSeconds": 48 * 3600,
            "Question": ANY,
            "RequesterAnnotation": f"framelab:{SLUG}:{HIT_TOKEN}",
            "UniqueRequestToken": HIT_TOKEN,
        },
    )
    with app.app_context():
        r = recruiter(client)
        r.create("https://study.example.org")
        r.publish()
        row = r.row()
        return row.external_id, row.status, row.sandbox


def test_plan_states_mturk_commission(app, load_recruit_study, runner):
    load_recruit_study(BLOCK)
    result = runner.invoke(args=["recruit", SLUG, "plan"])
    # 12 x $3.00 = $36.00; 40% commission (10+ assignments) = $14.40; bonuses at most
    # 12 x $1.00 = $12.00 with 20% = $2.40; total $64.80.
    assert result.exit_code == 0 and "total     $64.80" in result.output
    assert "sandbox" in result.output
    # Found by the outside walkthrough: "fees $16.80 (40.0% of rewards and bonuses)", which
    # bonuses are not charged.
    assert "fees      $16.80 ($14.40 on rewards, $2.40 on bonuses)" in result.output


def test_create_and_publish_send_the_documented_requests(app, load_recruit_study, mturk):
    load_recruit_study(BLOCK)
    client, stub = mturk
    assert publish(app, client, stub) == (HIT, "Assignable", True)


def run_worker(app, definition, name: str, assignment: str, **behaviour) -> str:
    worker = platform_id("mturk", name)
    bot = Bot(
        FlaskTransport(app),
        definition,
        BotBehaviour(platform="mturk", **behaviour),
        rng=random.Random(name),
        external_id=worker,
    )
    own = bot.entry_url
    bot.entry_url = lambda extra=None: own({"hitId": HIT, "assignmentId": assignment})
    bot.run()
    return worker


def assignments(*rows: tuple[str, str, str]) -> dict:
    return {
        "Assignments": [
            {"AssignmentId": a, "WorkerId": w, "HITId": HIT, "AssignmentStatus": st}
            for w, a, st in rows
        ],
        "NumResults": len(rows),
    }


def test_approve_completed_only_and_bonus_once(app, load_recruit_study, mturk, no_waiting):
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import BonusPayment

    definition = load_recruit_study(BLOCK)
    client, stub = mturk
    publish(app, client, stub)
    done = run_worker(app, definition, "done", "3ASSIGNDONE00000000000000000000")
    out = run_worker(app, definition, "quiz", "3ASSIGNQUIZ00000000000000000000", fail_quiz=True)
    stranger = platform_id("mturk", "stranger")
    listed = [
        (done, "3ASSIGNDONE00000000000000000000", "Submitted"),
        (out, "3ASSIGNQUIZ00000000000000000000", "Submitted"),
        (stranger, "3ASSIGNSTRANGER000000000000000", "Submitted"),
    ]
    stub.add_response(
        "list_assignments_for_hit", assignments(*listed), {"HITId": HIT, "MaxResults": 100}
    )
    stub.add_response(
        "associate_qualification_with_worker",
        {},
        {
            "QualificationTypeId": QUAL,
            "WorkerId": out,
            "IntegerValue": 1,
            "SendNotification": False,
        },
    )
    stub.add_response(
        "approve_assignment",
        {},
        {"AssignmentId": "3ASSIGNDONE00000000000000000000", "RequesterFeedback": ANY},
    )
    with app.app_context():
        report = recruiter(client).approve()
    assert report.counts["approve"] == 1 and report.counts["waiting"] == 3

    # Bonus: the assignment's status is read just before paying; SendBonus carries the ledger
    # row's token; a throttled first try is retried.
    listed[0] = (done, listed[0][1], "Approved")
    stub.add_response(
        "list_assignments_for_hit", assignments(*listed), {"HITId": HIT, "MaxResults": 100}
    )

    with app.app_context():
        from webapp.models import Platform
        from webapp.services.payments import bonus_plan
        from webapp.services.studies import get_study

        (line,) = bonus_plan(get_study(SLUG), Platform.mturk).lines
    bonus_params = {
        "WorkerId": done,
        "BonusAmount": line.amount,
        "AssignmentId": "3ASSIGNDONE00000000000000000000",
        "Reason": ANY,
        "UniqueRequestToken": line.request_token,
    }
    stub.add_response(  # MTurk's own record first: no bonus on the assignment yet
        "list_bonus_payments",
        {"BonusPayments": [], "NumResults": 0},
        {"AssignmentId": listed[0][1], "MaxResults": 100},
    )
    stub.add_response(
        "get_assignment",
        {
            "Assignment": {
                "AssignmentId": listed[0][1],
                "HITId": HIT,
                "AssignmentStatus": "Approved",
            }
        },
        {"AssignmentId": listed[0][1]},
    )
    stub.add_client_error(
        "send_bonus", service_error_code="ThrottlingException", http_status_code=400
    )
    stub.add_response("send_bonus", {}, bonus_params)
    with app.app_context():
        report = recruiter(client).bonus()
        (row,) = db.session.scalars(select(BonusPayment)).all()
        assert (row.platform_payment_id, row.platform_state) == (line.request_token, "paid")
    assert report.counts["paid"] == 1 and report.counts["paid_cents"] == line.amount_cents
    assert no_waiting == [1.0]

    # A second run: the ledger row is paid, so no SendBonus (the Stubber refuses any).
    stub.add_response(
        "list_assignments_for_hit", assignments(*listed), {"HITId": HIT, "MaxResults": 100}
    )
    with app.app_context():
        again = recruiter(client).bonus()
    assert again.counts["paid"] == 0


def test_an_unknown_send_is_looked_up_before_sending_again(app, load_recruit_study, mturk):
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import BonusPayment, Platform
    from webapp.services.payments import issue_bonuses
    from webapp.services.studies import get_study

    definition = load_recruit_study(BLOCK)
    client, stub = mturk
    publish(app, client, stub)
    done = run_worker(app, definition, "done", "3ASSIGNDONE00000000000000000000")
    with app.app_context():
        from webapp.models import utcnow

        issue_bonuses(
            get_study(SLUG), Platform.mturk, issued_by="test", now=utcnow(), to_file=False
        )
        row = db.session.scalars(select(BonusPayment)).one()
        row.platform_state = "paying"  # an earlier run died after sending
        amount = f"{row.amount_cents / 100:.2f}"
        db.session.commit()
    listed = [(done, "3ASSIGNDONE00000000000000000000", "Approved")]
    stub.add_response(
        "list_assignments_for_hit", assignments(*listed), {"HITId": HIT, "MaxResults": 100}
    )
    stub.add_response(
        "list_bonus_payments",
        {
            "BonusPayments": [
                {
                    "WorkerId": done,
                    "BonusAmount": amount,
                    "AssignmentId": listed[0][1],
                    "Reason": "x",
                }
            ],
            "NumResults": 1,
        },
        {"AssignmentId": listed[0][1], "MaxResults": 100},
    )
    with app.app_context():
        report = recruiter(client).bonus()
    assert report.counts["paid"] == 1  # found on MTurk: recorded, not sent again


def test_sandbox_by_default_production_only_when_asked(app, load_recruit_study, monkeypatch, mturk):
    from webapp.recruit.base import RecruitError
    from webapp.recruit.mturk import PRODUCTION_ENDPOINT

    load_recruit_study(BLOCK)
    client, stub = mturk
    with app.app_context():
        assert recruiter(None).endpoint == SANDBOX_ENDPOINT
        assert recruiter(None, production=True).endpoint == PRODUCTION_ENDPOINT
        monkeypatch.setenv("MTURK_ENDPOINT_URL", "http://127.0.0.1:9")
        assert recruiter(None).endpoint == "http://127.0.0.1:9"
    publish(app, client, stub)
    with app.app_context(), pytest.raises(RecruitError, match="sandbox"):
        recruiter(client, production=True).pause()


def test_missing_boto3_says_which_extra(app, load_recruit_study, monkeypatch):
    import sys

    from webapp.recruit.base import RecruitError

    load_recruit_study(BLOCK)
    monkeypatch.setitem(sys.modules, "boto3", None)
    with app.app_context(), pytest.raises(RecruitError, match=r"framelab\[mturk\]"):
        recruiter(None).client  # noqa: B018
