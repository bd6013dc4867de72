"""The Prolific recruiter against the fake: retries, refusals, unknown outcomes, rejections,
and the client against example payloads of Prolific's API reference."""

from __future__ import annotations

import json
import random
from pathlib import Path

import httpx
import pytest

from tests.webapp.recruit.fake_prolific import TOKEN
from webapp.bots import Bot, BotBehaviour, FlaskTransport, platform_id
from webapp.definition_cache import study_definition

EXAMPLES = json.loads((Path(__file__).parent / "prolific_examples.json").read_text())


def recruiter(app):
    from webapp.recruit import get_recruiter
    from webapp.services.studies import get_study

    return get_recruiter(get_study("product-choice-demo"), actor="test")


def in_app(app, fn):
    with app.app_context():
        return fn(recruiter(app))


def listed(app, fake) -> str:
    """Create and publish the study on the fake; return Prolific's study id."""
    in_app(app, lambda r: r.create("http://localhost"))
    in_app(app, lambda r: r.publish())
    (study_id,) = fake.studies
    return study_id


def take_part(app, fake, definition, study_id: str, name: str, **behaviour) -> str:
    """A bot arrives through the fake's URL, runs in-process, and reports back; its pid."""
    pid = platform_id("prolific", name)
    url = fake.arrive(study_id, pid)
    bot = Bot(
        FlaskTransport(app),
        definition,
        BotBehaviour(platform="prolific", **behaviour),
        rng=random.Random(name),
        external_id=pid,
    )
    bot.entry_url = lambda extra=None: url
    result = bot.run()
    if result.completion_code:
        fake.finish(url.rsplit("SESSION_ID=", 1)[1], result.completion_code)
    return pid


def calls(app) -> list[dict]:
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import AuditEvent

    with app.app_context():
        return [
            e.detail
            for e in db.session.scalars(
                select(AuditEvent)
                .where(AuditEvent.action == "recruit.call")
                .order_by(AuditEvent.id)
            )
        ]


def test_429_is_retried_with_backoff_and_every_attempt_logged(
    app, fake, load_recruit_study, no_waiting
):
    load_recruit_study()
    fake.inject("POST", r"^/api/v1/studies/$", 429, times=2)
    in_app(app, lambda r: r.create("http://localhost"))
    assert len(fake.studies) == 1
    assert [c["status"] for c in calls(app)] == [429, 429, 201]
    assert no_waiting == [1.0, 1.0]  # Prolific's Retry-After


def test_429_that_does_not_stop_is_surfaced(app, fake, load_recruit_study, runner):
    load_recruit_study()
    in_app(app, lambda r: r.create("http://localhost"))
    fake.inject("POST", r"/transition/$", 429, times=99)
    result = runner.invoke(args=["recruit", "product-choice-demo", "publish", "--yes"])
    assert result.exit_code == 1 and "429" in result.output and "5 times" in result.output
    (study,) = fake.studies.values()
    assert study["status"] == "UNPUBLISHED"


def test_5xx_on_a_read_is_retried(app, fake, load_recruit_study):
    load_recruit_study()
    listed(app, fake)
    fake.inject("GET", r"/submissions/$", 503, times=2)
    report, subs = in_app(app, lambda r: r.status())
    assert subs == [] and [c["status"] for c in calls(app)][-3:] == [503, 503, 200]


def test_create_is_not_retried_on_5xx_and_a_lost_answer_is_looked_up(app, fake, load_recruit_study):
    from webapp.recruit.base import RecruitError

    load_recruit_study()
    # Prolific failed before doing anything: the next create finds no draft and makes one.
    fake.inject("POST", r"^/api/v1/studies/$", 500)
    with pytest.raises(RecruitError, match="may have been made"):
        in_app(app, lambda r: r.create("http://localhost"))
    assert len([c for c in fake.calls if c[1] == "/api/v1/studies/"]) == 1  # not retried
    assert in_app(app, lambda r: r.row().status) == "CREATING"
    in_app(app, lambda r: r.create("http://localhost"))
    assert len(fake.studies) == 1


def test_a_create_whose_answer_was_lost_makes_no_second_draft(app, fake, load_recruit_study):
    """The draft was made and its answer lost: the next create finds it by its reference.

    Before, the row was deleted on the lost answer and the next create made a second draft.
    """
    from webapp.recruit.base import RecruitError

    load_recruit_study()
    fake.inject("POST", r"^/api/v1/studies/$", 502, after=True)
    with pytest.raises(RecruitError):
        in_app(app, lambda r: r.create("http://localhost"))
    assert len(fake.studies) == 1
    report = in_app(app, lambda r: r.create("http://localhost"))
    (study_id,) = fake.studies
    assert (
        len(fake.studies) == 1
        and f"found the earlier Prolific listing {study_id}" in report.lines[0]
    )
    assert in_app(app, lambda r: r.row().external_id) == study_id
    assert fake.studies[study_id]["internal_name"].startswith("framelab:product-choice-demo:")


def test_two_creates_at_once_make_one_listing(app, fake, load_recruit_study, monkeypatch):
    from webapp.recruit.base import RecruitError
    from webapp.recruit.prolific import ProlificRecruiter

    load_recruit_study()
    original = ProlificRecruiter.call
    nested: list = []

    def call(self, method, path, **kw):
        if path == "/api/v1/studies/" and method == "POST" and not nested:
            self.release()
            nested.append(None)
            with pytest.raises(RecruitError, match="by another run") as second:
                in_app(app, lambda r: r.create("http://localhost"))
            nested[0] = second.value
        return original(self, method, path, **kw)

    monkeypatch.setattr(ProlificRecruiter, "call", call)
    in_app(app, lambda r: r.create("http://localhost"))
    assert nested[0] is not None and len(fake.studies) == 1


def test_a_payment_with_unknown_outcome_is_never_sent_again(app, fake, load_recruit_study):
    definition = load_recruit_study()
    study_id = listed(app, fake)
    take_part(app, fake, definition, study_id, "a")  # alone: every choice is the majority
    in_app(app, lambda r: r.approve())
    fake.inject("POST", r"^/api/v1/bulk-bonus-payments/\w+/pay/$", 502)
    report = in_app(app, lambda r: r.bonus())
    assert report.counts["sent"] == 0 and report.counts["unconfirmed"] > 0
    assert any("unconfirmed" in line for line in report.lines)
    pays = [c for c in fake.calls if c[1].endswith("/pay/")]
    assert len(pays) == 1
    again = in_app(app, lambda r: r.bonus())
    assert [c for c in fake.calls if c[1].endswith("/pay/")] == pays  # not re-sent
    assert again.counts["sent"] == 0 and fake.payments == fake.pending == []


def test_a_refused_payment_is_paid_by_the_next_run_once(app, fake, load_recruit_study):
    definition = load_recruit_study()
    study_id = listed(app, fake)
    take_part(app, fake, definition, study_id, "a")  # alone: every choice is the majority
    in_app(app, lambda r: r.approve())
    fake.inject("POST", r"/pay/$", 429, times=5)  # refused: nothing was paid
    first = in_app(app, lambda r: r.bonus())
    assert first.counts["sent"] == 0 and first.counts["unconfirmed"] == 0
    second = in_app(app, lambda r: r.bonus())
    assert second.counts["sent"] == 1 and second.counts["paid"] == 0  # paid within minutes
    fake.process_payments()
    third = in_app(app, lambda r: r.bonus())
    assert third.counts["paid"] == 1 and third.counts["sent"] == 0
    bulk_ids = {b for b, _, _ in fake.payments}
    assert len(bulk_ids) == 1  # the one set-up, paid once
    assert round(sum(a for _, _, a in fake.payments) * 100) == third.counts["paid_cents"]
    assert round(sum(a for _, _, a in fake.payments) * 100) == second.counts["sent_cents"]


def test_reject_needs_a_reason_prolific_accepts(app, fake, load_recruit_study):
    from webapp.recruit.base import RecruitError

    definition = load_recruit_study()
    study_id = listed(app, fake)
    pid = take_part(app, fake, definition, study_id, "lazy")

    def code(r):
        from sqlalchemy import select

        from webapp.extensions import db
        from webapp.models import PlatformIdentity

        ident = db.session.scalar(
            select(PlatformIdentity).where(PlatformIdentity.external_id == pid)
        )
        return ident.participant.code

    p_code = in_app(app, code)
    with pytest.raises(RecruitError, match="needs a reason"):
        in_app(app, lambda r: r.reject([p_code], "  ", "LOW_EFFORT"))
    with pytest.raises(RecruitError, match="at least 100 characters"):
        in_app(app, lambda r: r.reject([p_code], "bad", "LOW_EFFORT"))
    with pytest.raises(RecruitError, match="no participant"):
        in_app(app, lambda r: r.reject(["p_0000000000000000"], "x" * 120, "LOW_EFFORT"))
    reason = "Your answers were given faster than anyone could read the product descriptions. " * 2
    with pytest.raises(RecruitError, match="not one of"):
        in_app(app, lambda r: r.reject([p_code], reason, "BORING"))
    in_app(app, lambda r: r.reject([p_code], reason, "TOO_QUICKLY"))
    (sub,) = fake.submissions.values()
    assert sub["status"] == "REJECTED"


def test_wrong_or_missing_token(app, fake, load_recruit_study, monkeypatch, runner):
    load_recruit_study()
    monkeypatch.setenv("PROLIFIC_TOKEN", "not-the-token")
    result = runner.invoke(
        args=["recruit", "product-choice-demo", "create", "--url", "http://localhost", "--yes"]
    )
    assert result.exit_code == 1 and "401" in result.output and "not-the-token" not in result.output
    monkeypatch.delenv("PROLIFIC_TOKEN")
    result = runner.invoke(
        args=["recruit", "product-choice-demo", "create", "--url", "http://localhost", "--yes"]
    )
    assert result.exit_code == 1 and "set PROLIFIC_TOKEN" in result.output
    assert not fake.studies


def test_plan_and_dry_run_send_nothing(app, fake, load_recruit_study, runner):
    load_recruit_study()
    for action in ("plan", "create"):
        result = runner.invoke(args=["recruit", "product-choice-demo", action, "--dry-run"])
        assert result.exit_code == 0, result.output
        assert "total" in result.output
    assert "create needs --url https://HOST" in result.output
    # Found by the outside walkthrough: without --url the cost was shown and "yes" asked for,
    # and only then did create refuse for want of the address.
    no_url = runner.invoke(args=["recruit", "product-choice-demo", "create"], input="y\n")
    assert no_url.exit_code == 1 and "give --url https://HOST" in no_url.output
    assert "create on Prolific" not in no_url.output
    declined = runner.invoke(
        args=["recruit", "product-choice-demo", "create", "--url", "https://x.org"], input="n\n"
    )
    assert declined.exit_code == 1 and "Aborted" in declined.output
    assert fake.calls == []


def test_public_url_must_be_https(app, fake, load_recruit_study):
    from webapp.recruit.base import RecruitError

    load_recruit_study()
    with pytest.raises(RecruitError, match="https"):
        in_app(app, lambda r: r.create("http://example.org"))
    assert fake.calls == []


# -- example payloads of Prolific's API reference ------------------------------------------------


def mocked(app, handler):
    """A recruiter whose HTTP client answers with ``handler`` (httpx.MockTransport)."""
    from webapp.recruit.prolific import ProlificRecruiter
    from webapp.services.studies import get_study

    s = get_study("product-choice-demo")
    client = httpx.Client(
        base_url="https://api.prolific.com", transport=httpx.MockTransport(handler)
    )
    return ProlificRecruiter(s, study_definition(s).recruiter, actor="test", client=client)


def test_documented_submission_list_is_read(app, load_recruit_study):
    load_recruit_study()
    example = EXAMPLES["list_study_submissions"]["response"]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=example)

    with app.app_context():
        subs = mocked(app, handler).fetch_submissions("60aca280709ee40ec37d4885")
    assert [(s.submission_id, s.worker_id, s.status) for s in subs] == [
        (r["id"], r["participant_id"], r["status"]) for r in example["results"]
    ]


def test_documented_bonus_set_up_and_error_bodies(app, load_recruit_study):
    from webapp.recruit.base import RecruitError

    load_recruit_study()
    setup = EXAMPLES["set_up_bonuses"]["response"]
    err = EXAMPLES["error_400"]["response"]

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/submissions/bonus-payments/":
            return httpx.Response(201, json=setup)
        return httpx.Response(400, json=err)

    with app.app_context():
        r = mocked(app, handler)
        assert (
            r.call("POST", "/api/v1/submissions/bonus-payments/", idempotent=False)["id"]
            == setup["id"]
        )
        with pytest.raises(RecruitError, match=err["error"]["title"]):
            r.call("POST", "/api/v1/studies/", json={}, idempotent=False)


def test_create_body_has_the_documented_fields(app, load_recruit_study):
    load_recruit_study()
    required = set(EXAMPLES["create_study"]["required"])
    with app.app_context():
        body = mocked(app, lambda request: httpx.Response(500)).create_body(
            "https://x.org/s/product-choice-demo?PROLIFIC_PID={{%PROLIFIC_PID%}}"
        )
    assert required <= set(body)
    assert {c["code_type"] for c in body["completion_codes"]} <= set(
        EXAMPLES["create_study"]["code_types"]
    )
    assert TOKEN not in json.dumps(body)


def test_pause_publish_again_and_close(app, fake, load_recruit_study):
    from webapp.recruit.base import RecruitError

    load_recruit_study()
    study_id = listed(app, fake)
    seen = []
    for action in ("pause", "publish", "close"):
        in_app(app, lambda r, a=action: getattr(r, a)())
        seen.append(fake.studies[study_id]["status"])
    assert seen == ["PAUSED", "ACTIVE", "AWAITING REVIEW"]
    with pytest.raises(RecruitError, match="400"):
        in_app(app, lambda r: r.publish())  # Prolific refuses to publish a stopped study


def test_two_bonus_runs_at_once_pay_once(app, fake, load_recruit_study, monkeypatch):
    from webapp.recruit.prolific import ProlificRecruiter

    definition = load_recruit_study()
    study_id = listed(app, fake)
    take_part(app, fake, definition, study_id, "a")
    in_app(app, lambda r: r.approve())
    original = ProlificRecruiter.call
    nested: list = []

    def call(self, method, path, **kw):
        # While the first run sets up its bonuses, a second run (its own app context and
        # database session) pays whatever it may.
        if path == "/api/v1/submissions/bonus-payments/" and not nested:
            self.release()  # as the real call does before it sends
            nested.append(None)
            nested[0] = in_app(app, lambda r: r.bonus())
        return original(self, method, path, **kw)

    monkeypatch.setattr(ProlificRecruiter, "call", call)
    first = in_app(app, lambda r: r.bonus())
    second = nested[0]
    assert second.counts["sent"] == 0 and any("another run" in x for x in second.lines)
    assert first.counts["sent"] == 1
    fake.process_payments()
    assert len(fake.payments) == 1 and len(fake.bulk) == 1


@pytest.mark.postgres
def test_paid_once_on_postgres(pg_app, fake, tmp_path):
    """The ledger claims and the listing row on PostgreSQL: approve, pay, pay again."""
    from tests.webapp.recruit.conftest import PROLIFIC_BLOCK, study_with
    from webapp.services.studies import load_study

    with pg_app.app_context():
        definition = study_definition(load_study(study_with(tmp_path, PROLIFIC_BLOCK)).study)
    study_id = listed(pg_app, fake)
    take_part(pg_app, fake, definition, study_id, "a")
    assert in_app(pg_app, lambda r: r.approve()).counts["approve"] == 1
    first = in_app(pg_app, lambda r: r.bonus())
    fake.process_payments()
    second = in_app(pg_app, lambda r: r.bonus())
    assert first.counts["sent"] == 1 and second.counts["sent"] == 0
    assert second.counts["paid"] == 1  # confirmed from the submission's bonus payments
    assert len(fake.payments) == 1


def test_reconcile_without_a_file_asks_the_api(app, fake, load_recruit_study, runner):
    definition = load_recruit_study()
    study_id = listed(app, fake)
    pid = take_part(app, fake, definition, study_id, "a")
    (sub,) = fake.submissions.values()
    sub["status"] = "RETURNED"  # returned on Prolific after completing here
    result = runner.invoke(args=["reconcile", "product-choice-demo", "--platform", "prolific"])
    assert result.exit_code == 0, result.output
    assert "RETURNED 1" in result.output and "mismatch" in result.output
    wrong = runner.invoke(args=["reconcile", "product-choice-demo", "--platform", "mturk"])
    assert wrong.exit_code == 1 and "export FILE" in wrong.output
    assert pid


def test_claims_of_a_run_that_died_are_taken_an_hour_later(app, fake, load_recruit_study):
    from datetime import timedelta

    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import BonusPayment, Platform, utcnow
    from webapp.services.payments import issue_bonuses
    from webapp.services.studies import get_study

    definition = load_recruit_study()
    study_id = listed(app, fake)
    take_part(app, fake, definition, study_id, "a")
    in_app(app, lambda r: r.approve())

    def claimed(seconds_ago: int) -> None:
        with app.app_context():
            if not db.session.scalars(select(BonusPayment)).all():
                issue_bonuses(
                    get_study("product-choice-demo"),
                    Platform.prolific,
                    issued_by="t",
                    now=utcnow(),
                    to_file=False,
                )
            row = db.session.scalars(select(BonusPayment)).one()
            row.platform_state = "claimed"
            row.claim_token = "deadbeef" * 4
            row.claimed_at = utcnow() - timedelta(seconds=seconds_ago)
            db.session.commit()

    claimed(60)  # another run is setting it up right now: left alone
    report = in_app(app, lambda r: r.bonus())
    assert report.counts["sent"] == 0 and fake.pending == []
    assert any("another run" in line for line in report.lines)
    claimed(2 * 3600)  # that run died long ago (a set-up alone pays nothing): taken over
    assert in_app(app, lambda r: r.bonus()).counts["sent"] == 1 and len(fake.pending) == 1


def test_the_bonus_confirmation_names_what_is_paid_now(app, fake, load_recruit_study, runner):
    """The question names the bonuses and their fees, not the listing's whole cost."""
    definition = load_recruit_study()
    study_id = listed(app, fake)
    take_part(app, fake, definition, study_id, "a")  # alone: every choice is the majority
    result = runner.invoke(args=["recruit", "product-choice-demo", "bonus"], input="n\n")
    # 2 choices x $0.50 = $1.00 of bonuses, Prolific's fee of a third on it: $0.33.
    assert "bonus on Prolific ($1.00 + $0.33 fees now)?" in result.output
    assert "up to" not in result.output and fake.bulk == {}
