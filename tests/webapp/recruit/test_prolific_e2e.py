"""End to end on a fake Prolific: create and publish a study, bots arrive through the URL the
fake hands out, approve exactly those who completed here, pay the bonus ledger once."""

from __future__ import annotations

import json
import random

import pytest

from tests.webapp.recruit.fake_prolific import TOKEN
from webapp.bots import Bot, BotBehaviour, HttpTransport, platform_id


def _run(runner, *args: str):
    result = runner.invoke(args=["recruit", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _bot(base: str, definition, url: str, pid: str, seed: int, **behaviour):
    bot = Bot(
        HttpTransport(base),
        definition,
        BotBehaviour(platform="prolific", **behaviour),
        rng=random.Random(seed),
        external_id=pid,
    )
    bot.entry_url = lambda extra=None: url  # arrive exactly as Prolific sends people
    try:
        return bot.run()
    finally:
        bot.transport.close()


@pytest.mark.slow
def test_create_publish_bots_approve_and_pay_once(
    app, runner, fake, load_recruit_study, serve_app, query
):
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import AuditEvent, BonusPayment, Participant, PlatformIdentity

    definition = load_recruit_study()
    slug = definition.slug
    codes = definition.recruitment.completion_codes
    base = serve_app(app)

    # plan: 6 places x $3.00 = $18.00, fee a third = $6.00; bonuses at most 2 x $0.50 = $1.00
    # per person, $6.00, fee $2.00; total $32.00. Nothing is created.
    out = _run(runner, slug, "plan")
    assert "total     $32.00" in out and not fake.studies

    out = _run(runner, slug, "create", "--url", base, "--yes")
    (study_id,) = fake.studies
    created = fake.studies[study_id]
    assert created["status"] == "UNPUBLISHED" and study_id in out
    assert created["external_study_url"] == (
        f"{base}/s/{slug}?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&STUDY_ID={{{{%STUDY_ID%}}}}"
        "&SESSION_ID={{%SESSION_ID%}}"
    )
    assert (created["reward"], created["total_available_places"]) == (300, 6)
    assert created["device_compatibility"] == ["desktop"]
    assert created["filters"][0]["filter_id"] == "current-country-of-residence"
    by_code = {c["code"]: c["actions"][0]["action"] for c in created["completion_codes"]}
    assert by_code == {
        codes.completed: "MANUALLY_REVIEW",
        codes.screened_out: "REQUEST_RETURN",
    }
    # A second create is refused and creates nothing.
    again = runner.invoke(args=["recruit", slug, "create", "--url", base, "--yes"])
    assert again.exit_code != 0 and "already listed" in again.output and len(fake.studies) == 1

    _run(runner, slug, "publish", "--yes")
    assert fake.studies[study_id]["status"] == "PUBLISHING"  # active from the next request on

    sessions: dict[str, str] = {}
    outcomes: dict[str, str] = {}

    def arrive(name: str, seed: int, **behaviour) -> None:
        pid = platform_id("prolific", name)
        url = fake.arrive(study_id, pid)
        sessions[pid] = url.rsplit("SESSION_ID=", 1)[1]
        result = _bot(base, definition, url, pid, seed, **behaviour)
        outcomes[pid] = result.outcome
        if result.outcome in {"completed", "screened_out"}:
            fake.finish(sessions[pid], result.completion_code)

    for i in range(2):
        arrive(f"done{i}", i)
    arrive("quizfail", 10, fail_quiz=True)
    arrive("leaver", 11, abandon_at=3)
    # Someone who types the completion code without having done the study.
    arrive("cheat", 12, abandon_at=2)
    cheat = platform_id("prolific", "cheat")
    fake.finish(sessions[cheat], codes.completed)
    assert sorted(outcomes.values()) == [
        "abandoned", "abandoned", "completed", "completed", "screened_out"
    ]  # fmt: skip

    out = _run(runner, slug, "approve", "--yes")
    status = {
        fake.submissions[s]["participant_id"]: fake.submissions[s]["status"]
        for s in fake.submissions
    }
    done = {pid for pid, o in outcomes.items() if o == "completed"}
    assert {pid for pid, st in status.items() if st == "APPROVED"} == done
    assert status[cheat] == "AWAITING REVIEW" and "not approved" in out
    assert status[platform_id("prolific", "quizfail")] == "RETURNED"
    assert status[platform_id("prolific", "leaver")] == "ACTIVE"

    out = _run(runner, slug, "bonus", "--yes")

    def ledger():
        with app.app_context():
            rows = db.session.execute(
                select(BonusPayment, PlatformIdentity.external_id).join(
                    PlatformIdentity,
                    PlatformIdentity.participant_id == BonusPayment.participant_id,
                )
            ).all()
            return [(b.amount_cents, ext, b.platform_payment_id, b.paid_at) for b, ext in rows]

    # Prolific accepted the payment and pays it within minutes: sent, not yet paid.
    rows = ledger()
    assert rows and {ext for _, ext, _, _ in rows} <= done
    assert all(paid is None and bulk for _, _, bulk, paid in rows)
    assert "Prolific pays them within minutes" in out
    for amount, ext, _, _ in rows:
        assert round(fake.paid_to(ext) * 100) == amount
    fake.process_payments()
    paid_before = list(fake.payments)
    assert sum(a for _, _, a in paid_before) > 0

    # A second run finds nothing new, confirms the payments from the submissions and pays
    # nothing.
    pay_calls = [c for c in fake.calls if c[1].endswith("/pay/")]
    out = _run(runner, slug, "bonus", "--yes")
    assert fake.payments == paid_before and fake.pending == []
    assert [c for c in fake.calls if c[1].endswith("/pay/")] == pay_calls
    confirmed = ledger()
    assert [r[:3] for r in confirmed] == [r[:3] for r in rows]
    assert all(paid is not None for *_, paid in confirmed)
    assert f"paid {len(rows)} bonus(es)" in out

    # Every call is in the audit log, and the token never is.
    calls = query(
        lambda: [
            e.detail
            for e in db.session.scalars(
                select(AuditEvent).where(AuditEvent.action == "recruit.call")
            )
        ]
    )
    assert len(calls) == len(fake.calls)
    assert {c["endpoint"] for c in calls} >= {
        "/api/v1/studies/",
        f"/api/v1/studies/{study_id}/transition/",
        "/api/v1/submissions/bulk-approve/",
        "/api/v1/submissions/bonus-payments/",
    }
    everything = json.dumps(
        query(lambda: [e.detail for e in db.session.scalars(select(AuditEvent))])
    )
    assert TOKEN not in everything
    # Statuses came from the API: the completed participants are APPROVED here too.
    statuses = query(
        lambda: {
            p.platform_status
            for p in db.session.scalars(select(Participant))
            if p.status.value == "completed"
        }
    )
    assert statuses <= {"APPROVED", "AWAITING REVIEW"}
