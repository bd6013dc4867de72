"""Prolific money paths that must settle: a rejected or returned submission gets no bonus,
payments are confirmed from Prolific's records, unknown outcomes are settled, a connection that
never opened is sent again, one refused ID blocks nobody else, and a publish whose answer was
lost is no error."""

from __future__ import annotations

import httpx
import pytest

from tests.webapp.recruit.test_prolific import in_app, listed, take_part

SETUP = r"^/api/v1/submissions/bonus-payments/$"
PAY = r"/pay/$"


def ledger_states(app) -> list[tuple[str | None, str | None]]:
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import BonusPayment

    with app.app_context():
        rows = db.session.scalars(select(BonusPayment).order_by(BonusPayment.id))
        return [(b.platform_state, b.platform_payment_id) for b in rows]


def submission_of(fake, pid: str) -> dict:
    (sub,) = [s for s in fake.submissions.values() if s["participant_id"] == pid]
    return sub


def pays(fake) -> int:
    """How many pay calls Prolific accepted, all set-ups together."""
    return sum(b["paid"] for b in fake.bulk.values())


@pytest.fixture
def one_done(app, fake, load_recruit_study):
    """The study listed, and one participant who completed it (waiting for review)."""
    definition = load_recruit_study()
    study_id = listed(app, fake)
    return take_part(app, fake, definition, study_id, "a")


# -- rejected or returned submissions ----------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "status"),
    [((PAY, 429, 5), "REJECTED"), ((SETUP, 503, 1), "RETURNED")],
    ids=["set-up-left-unpaid-then-rejected", "set-up-failed-then-returned"],
)
def test_no_bonus_after_the_submission_was_rejected_or_returned(
    app, fake, one_done, failure, status
):
    """A run that failed before paying leaves rows; the next run pays nobody Prolific now
    lists as rejected or returned (before, it paid them)."""
    path, code, times = failure
    fake.inject("POST", path, code, times=times)
    in_app(app, lambda r: r.bonus())
    assert pays(fake) == 0
    submission_of(fake, one_done)["status"] = status
    second = in_app(app, lambda r: r.bonus())
    assert pays(fake) == 0 and second.counts["sent"] == 0
    assert any(f"{status} on Prolific" in line for line in second.lines)
    assert ledger_states(app)[0][0] in (None, "set_up")


def test_the_status_is_read_again_just_before_paying(app, fake, one_done, monkeypatch):
    """Rejected between the set-up and the pay call of one run: the set-up is dropped."""
    from webapp.recruit.prolific import ProlificRecruiter

    original = ProlificRecruiter.call

    def call(self, method, path, **kw):
        answer = original(self, method, path, **kw)
        if path == "/api/v1/submissions/bonus-payments/":
            submission_of(fake, one_done)["status"] = "REJECTED"
        return answer

    monkeypatch.setattr(ProlificRecruiter, "call", call)
    report = in_app(app, lambda r: r.bonus())
    assert pays(fake) == 0
    assert report.counts["sent"] == 0 and report.counts["withheld"] == 1
    assert any("REJECTED on Prolific just before paying" in line for line in report.lines)
    assert ledger_states(app) == [(None, None)]  # new again; its person is now rejected


# -- asynchronous payment, confirmation and settling ----------------------------------------------


def test_an_accepted_payment_is_confirmed_from_the_submission(app, fake, one_done, monkeypatch):
    """Prolific's 202 is not a payment: the row is ``sent`` until the submission lists the
    bonus; one not listed an hour later is reported as not settled (before, the 202 was
    recorded as paid and never checked)."""
    import time

    first = in_app(app, lambda r: r.bonus())
    assert ledger_states(app)[0][0] == "sent" and fake.payments == []
    assert first.counts["sent"] == 1 and first.counts["paid"] == 0
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 2 * 3600)
    late = in_app(app, lambda r: r.settle())
    assert late.counts["unsettled"] == 1 and late.counts["paid"] == 0
    assert any("does not list it as paid" in line for line in late.lines)
    fake.process_payments()
    done = in_app(app, lambda r: r.settle())
    assert done.counts["paid"] == 1 and done.counts["unsettled"] == 0
    assert ledger_states(app)[0][0] == "paid" and pays(fake) == 1


def test_settle_records_a_payment_whose_answer_was_lost(app, fake, one_done):
    fake.inject("POST", PAY, 502, after=True)  # Prolific took it; the answer was lost
    first = in_app(app, lambda r: r.bonus())
    assert first.counts["unconfirmed"] == 1 and pays(fake) == 1
    again = in_app(app, lambda r: r.bonus())  # never sent again meanwhile
    assert pays(fake) == 1 and again.counts["unconfirmed"] == 1
    fake.process_payments()
    assert ledger_states(app)[0][0] == "paying"  # until Prolific's records are read
    settled = in_app(app, lambda r: r.settle())
    assert settled.counts["paid"] == 1 and settled.counts["unconfirmed"] == 0
    assert pays(fake) == 1 and len(fake.payments) == 1


def unsettled_code(app) -> str:
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import BonusPayment, Participant

    with app.app_context():
        (row,) = db.session.scalars(select(BonusPayment))
        return db.session.get(Participant, row.participant_id).code


def test_settle_never_sends_an_unsettled_pay_call_again_on_its_own(
    app, fake, one_done, monkeypatch
):
    """Prolific's pay call is not idempotent and its state cannot be read: a payment still not
    listed 24 hours on may yet arrive, so settle reports it and only the researcher, having
    checked on Prolific, releases it to be set up again."""
    import time

    fake.inject("POST", PAY, 502)  # failed before Prolific did anything
    in_app(app, lambda r: r.bonus())
    assert pays(fake) == 0 and ledger_states(app)[0][0] == "paying"
    early = in_app(app, lambda r: r.settle())
    assert ledger_states(app)[0][0] == "paying"  # too early to judge
    assert any("settle again 24 hours after the call" in line for line in early.lines)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 25 * 3600)
    code = unsettled_code(app)
    reported = in_app(app, lambda r: r.settle())
    assert any(f"settle --release {code}" in line for line in reported.lines)
    assert ledger_states(app)[0][0] == "paying"  # never released on FrameLab's judgement
    assert in_app(app, lambda r: r.bonus()).counts.get("sent", 0) == 0 and pays(fake) == 0
    other = in_app(app, lambda r: r.settle(release=frozenset({"p_nobody"})))
    assert any("not released p_nobody" in line for line in other.lines)
    assert ledger_states(app)[0][0] == "paying"
    released = in_app(app, lambda r: r.settle(release=frozenset({code})))
    assert any(f"released {code}" in line for line in released.lines)
    assert ledger_states(app) == [(None, None)]
    paid = in_app(app, lambda r: r.bonus())
    assert paid.counts["sent"] == 1 and pays(fake) == 1
    fake.process_payments()
    assert len(fake.payments) == 1  # paid exactly once


# -- connections that never opened --------------------------------------------------------------


def refuse_connections(monkeypatch, path: str, times: int) -> list[str]:
    """The next ``times`` requests to ``path`` fail to connect (nothing is sent)."""
    original = httpx.HTTPTransport.handle_request
    refused: list[str] = []

    def handle_request(self, request):
        if request.url.path.endswith(path) and len(refused) < times:
            refused.append(request.url.path)
            raise httpx.ConnectError("connection refused", request=request)
        return original(self, request)

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", handle_request)
    return refused


def test_a_pay_call_that_never_connected_is_sent_again(app, fake, one_done, monkeypatch):
    """A connection that never opened sent nothing: it is retried (before, a pay call that
    never left was 'outcome unknown' for ever)."""
    refused = refuse_connections(monkeypatch, "/pay/", 2)
    report = in_app(app, lambda r: r.bonus())
    assert len(refused) == 2 and pays(fake) == 1
    assert ledger_states(app)[0][0] == "sent" and report.counts["unconfirmed"] == 0


def test_a_pay_call_that_never_connected_at_all_is_paid_by_the_next_run(
    app, fake, one_done, monkeypatch
):
    refuse_connections(monkeypatch, "/pay/", 5)
    first = in_app(app, lambda r: r.bonus())
    assert pays(fake) == 0 and first.counts["unconfirmed"] == 0
    assert any("nothing was sent" in line for line in first.lines)
    assert ledger_states(app)[0][0] == "set_up"
    in_app(app, lambda r: r.bonus())
    assert pays(fake) == 1 and ledger_states(app)[0][0] == "sent"


# -- refusals of single IDs -------------------------------------------------------------------


def test_one_refused_id_blocks_nobody_else(app, fake, load_recruit_study):
    """Prolific's 400 names the IDs it refuses: those are refused (reported, skipped), the
    others paid (before, the whole run failed, and every later one)."""
    definition = load_recruit_study()
    study_id = listed(app, fake)
    a = take_part(app, fake, definition, study_id, "a")
    b = take_part(app, fake, definition, study_id, "b")
    fake.refuse_ids[b] = "participant account is not active"
    first = in_app(app, lambda r: r.bonus())
    assert first.counts["sent"] == 1 and first.counts["refused"] == 1
    assert any("not active" in line and line.startswith("refused") for line in first.lines)
    fake.process_payments()
    assert {pid for _, pid, _ in fake.payments} == {a}
    second = in_app(app, lambda r: r.bonus())  # b is not tried again; a not paid again
    assert second.counts["sent"] == 0 and second.counts["refused"] == 1
    del fake.refuse_ids[b]
    in_app(app, lambda r: r.settle(retry_refused=True))
    third = in_app(app, lambda r: r.bonus())
    fake.process_payments()
    assert third.counts["sent"] == 1 and sorted(p for _, p, _ in fake.payments) == sorted([a, b])


def test_an_unexplained_refusal_sets_each_up_alone(app, fake, load_recruit_study):
    definition = load_recruit_study()
    study_id = listed(app, fake)
    people = {take_part(app, fake, definition, study_id, n) for n in ("a", "b")}
    fake.inject("POST", SETUP, 400, detail="Something is wrong with this request.")
    report = in_app(app, lambda r: r.bonus())
    fake.process_payments()
    assert report.counts["sent"] == 2 and report.counts["refused"] == 0
    assert sorted(p for _, p, _ in fake.payments) == sorted(people)
    assert len(fake.bulk) == 2 and pays(fake) == 2  # one set-up each, each paid once


# -- publishing ----------------------------------------------------------------------------------


def test_publishing_turns_active_and_a_lost_publish_answer_is_no_error(
    app, fake, load_recruit_study
):
    load_recruit_study()
    in_app(app, lambda r: r.create("http://localhost"))
    (study_id,) = fake.studies
    fake.inject("POST", r"/transition/$", 502, after=True)  # published; the answer was lost
    report = in_app(app, lambda r: r.publish())  # the retry is refused: the study is live
    assert "ACTIVE" in report.lines[0] and fake.studies[study_id]["status"] == "ACTIVE"
    fake.inject("POST", r"/transition/$", 502, after=True)
    assert "PAUSED" in in_app(app, lambda r: r.pause()).lines[0]
    assert fake.studies[study_id]["status"] == "PAUSED"


def test_an_approval_whose_answer_was_lost_is_sent_again_harmlessly(app, fake, one_done):
    """Bulk approval is idempotent on Prolific: a lost answer is retried; the reward is paid
    by Prolific once per approved submission."""
    fake.inject("POST", r"/bulk-approve/$", 502, after=True)
    report = in_app(app, lambda r: r.approve())
    assert report.counts["approve"] == 1
    assert submission_of(fake, one_done)["status"] == "APPROVED"
    assert len([c for c in fake.calls if c[1].endswith("/bulk-approve/")]) == 2


def test_status_records_that_publishing_finished(app, fake, load_recruit_study):
    load_recruit_study()
    in_app(app, lambda r: r.create("http://localhost"))
    assert "PUBLISHING" in in_app(app, lambda r: r.publish()).lines[0]
    in_app(app, lambda r: r.status())
    assert in_app(app, lambda r: r.row().status) == "ACTIVE"


def test_a_refusal_that_names_no_one_refuses_no_bonus(app, fake, one_done):
    """A 403 (say, a revoked token) is about the call, not the IDs: nothing is marked
    refused, and the next run sets the bonus up again."""
    fake.inject("POST", SETUP, 403, detail="You do not have permission.")
    report = in_app(app, lambda r: r.bonus())
    assert report.counts["refused"] == 0 and ledger_states(app) == [(None, None)]
    assert any("permission" in line for line in report.lines)
    assert in_app(app, lambda r: r.bonus()).counts["sent"] == 1
