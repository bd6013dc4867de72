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


# -- one ledger for the payment file and the API -------------------------------------------------


def write_file(runner, tmp_path, *extra: str):
    """``framelab bonus --platform prolific --out FILE``; (result, the file's text)."""
    out = tmp_path / "bonus.csv"
    result = runner.invoke(
        args=["bonus", "product-choice-demo", "--platform", "prolific", "--out", str(out), *extra]
    )
    return result, out.read_text() if out.exists() else ""


def test_a_bonus_paid_by_file_is_never_paid_again_by_the_api(app, fake, one_done, runner, tmp_path):
    """The researcher writes the payment file and pastes it into Prolific; a later "Pay
    bonuses" pays nothing more (before, it paid the same $1.00 again: $2.00 in all)."""
    result, text = write_file(runner, tmp_path)
    assert result.exit_code == 0, result.output
    fake.upload_file(next(iter(fake.studies)), text)
    before = in_app(app, lambda r: r.bonus())  # Prolific has not paid the file yet
    assert fake.paid_to(one_done) == 1.00 and before.counts["sent"] == 0
    assert ledger_states(app) == [("filed", None)] and "sent by file" in result.output
    assert any("sent by file" in line for line in before.lines)
    fake.process_payments()
    after = in_app(app, lambda r: r.bonus())  # now Prolific lists it: recorded, not paid
    assert after.counts["sent"] == 0 and ledger_states(app)[0][0] == "paid"
    assert pays(fake) == 1 and fake.paid_to(one_done) == 1.00


def test_the_payment_file_needs_no_folder_and_one_it_cannot_write_issues_nothing(
    app, fake, one_done, runner, tmp_path
):
    """A file under a plain file (no folder can be made there) is refused before the ledger
    records anything as sent by file; a folder that does not exist yet is made."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    args = ["bonus", "product-choice-demo", "--platform", "prolific", "--out"]
    refused = runner.invoke(args=[*args, str(blocked / "bonus.csv")])
    assert refused.exit_code == 1 and "nothing issued" in refused.output
    assert refused.exception is None or isinstance(refused.exception, SystemExit)
    assert ledger_states(app) == []  # nothing issued
    out = tmp_path / "new" / "bonus.csv"
    written = runner.invoke(args=[*args, str(out)])
    assert written.exit_code == 0, written.output
    assert one_done in out.read_text() and ledger_states(app) == [("filed", None)]


def test_a_file_that_fails_after_issuing_says_so_and_force_writes_it_again(
    app, fake, one_done, runner, tmp_path, monkeypatch
):
    """A write that fails once the rows are issued (a full disk) says the ledger holds them as
    sent by file and nothing was paid; --force writes the same rows again."""
    import errno

    from webapp.services import payments

    real = payments.write_bonus_file

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(payments, "write_bonus_file", full_disk)
    args = ["bonus", "product-choice-demo", "--platform", "prolific", "--out"]
    failed = runner.invoke(args=[*args, str(tmp_path / "bonus.csv")])
    assert failed.exit_code == 1
    assert "holds 1 bonus(es) as sent by file and nothing was paid" in failed.output
    assert ledger_states(app) == [("filed", None)] and pays(fake) == 0
    monkeypatch.setattr(payments, "write_bonus_file", real)
    again = runner.invoke(args=[*args, str(tmp_path / "bonus.csv"), "--force"])
    assert again.exit_code == 0, again.output
    assert one_done in (tmp_path / "bonus.csv").read_text()
    assert ledger_states(app) == [("filed", None)]


def test_the_api_reads_prolifics_record_before_paying_any_row(app, fake, one_done):
    """A row still new in the ledger whose bonus Prolific already lists (paid by a file of an
    older version, or by hand) is recorded as paid, never set up (before, it was paid again)."""
    import io

    from webapp.models import Platform, utcnow
    from webapp.services.payments import issue_bonuses, write_bonus_file
    from webapp.services.studies import get_study

    with app.app_context():
        issue = issue_bonuses(
            get_study("product-choice-demo"),
            Platform.prolific,
            issued_by="t",
            now=utcnow(),
            to_file=False,
        )
        text = io.StringIO()
        write_bonus_file(issue.lines, Platform.prolific, text)
    fake.upload_file(next(iter(fake.studies)), text.getvalue())
    fake.process_payments()
    report = in_app(app, lambda r: r.bonus())
    assert report.counts["sent"] == 0 and report.counts["paid"] == 1
    assert any("already lists this bonus" in line for line in report.lines)
    assert ledger_states(app)[0][0] == "paid" and len(fake.bulk) == 1
    assert fake.paid_to(one_done) == 1.00


def test_a_file_not_used_is_said_so_audited_and_then_paid_once(
    app, clock, fake, one_done, runner, tmp_path
):
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import AuditEvent

    write_file(runner, tmp_path)
    clock.sleep(3600)  # Prolific would list a bonus paid from the file by now
    assert in_app(app, lambda r: r.bonus()).counts["sent"] == 0  # sent by file: not paid
    code = unsettled_code(app)
    wrong = runner.invoke(
        args=["bonus", "product-choice-demo", "--platform", "prolific", "--file-not-used", "p_x"]
    )
    assert wrong.exit_code != 0 and "p_x" in wrong.output
    assert ledger_states(app) == [("filed", None)]
    done = runner.invoke(
        args=["bonus", "product-choice-demo", "--platform", "prolific", "--file-not-used", code]
    )
    assert done.exit_code == 0 and code in done.output
    assert ledger_states(app) == [(None, None)]
    with app.app_context():
        (event,) = db.session.scalars(
            select(AuditEvent).where(AuditEvent.action == "bonus.file_not_used")
        )
        assert event.actor == "cli" and event.detail["participants"] == [code]
    paid = in_app(app, lambda r: r.bonus())
    fake.process_payments()
    assert paid.counts["sent"] == 1 and fake.paid_to(one_done) == 1.00


def test_a_file_is_not_said_unused_before_prolific_could_list_it(
    app, clock, fake, one_done, runner, tmp_path
):
    """A file pasted into Prolific is paid "in the following minutes": said unused at once, the
    API would find no bonus listed yet and pay a second time. The researcher is told when the
    action becomes possible, and why; an hour on, Prolific's own record still decides."""
    result, text = write_file(runner, tmp_path)
    fake.upload_file(next(iter(fake.studies)), text)  # pasted; Prolific has not paid it yet
    code = unsettled_code(app)
    args = ["bonus", "product-choice-demo", "--platform", "prolific", "--file-not-used", code]
    clock.sleep(59 * 60)
    early = runner.invoke(args=args)
    assert early.exit_code != 0 and ledger_states(app) == [("filed", None)]
    assert "2025-01-06 10:00 UTC" in early.output and "written to a payment file" in early.output
    assert in_app(app, lambda r: r.bonus()).counts["sent"] == 0
    clock.sleep(60)
    fake.process_payments()
    assert runner.invoke(args=args).exit_code == 0  # the researcher was wrong: it was used
    report = in_app(app, lambda r: r.bonus())
    assert report.counts["sent"] == 0 and ledger_states(app)[0][0] == "paid"
    assert fake.paid_to(one_done) == 1.00 and pays(fake) == 1


def test_force_never_writes_again_what_the_api_paid(
    app, fake, load_recruit_study, runner, tmp_path
):
    """``bonus --force`` re-creates a lost file: it repeats the rows sent by file, never a row
    the API sent or paid (before, it wrote every issued bonus, unmarked)."""
    definition = load_recruit_study()
    study_id = listed(app, fake)
    a = take_part(app, fake, definition, study_id, "a")
    in_app(app, lambda r: r.bonus())  # a: sent through the API
    b = take_part(app, fake, definition, study_id, "b")
    in_app(app, lambda r: r.status())  # the file pays whom the last status lists
    first, text = write_file(runner, tmp_path)  # b: by file
    assert first.exit_code == 0 and a not in text and b in text, first.output
    forced, again = write_file(runner, tmp_path, "--force")
    assert forced.exit_code == 0 and again == text
    assert "not written" in forced.output and "through the API" in forced.output
    fake.process_payments()
    forced, again = write_file(runner, tmp_path, "--force")  # a is paid now: still left out
    assert a not in again and b in again


@pytest.mark.parametrize(
    ("fee_rate", "vat_rate"), [(0.4, 0.0), (1 / 3, 0.2)], ids=["higher-fee", "vat"]
)
def test_a_set_up_charging_more_than_confirmed_is_never_paid(
    app, fake, one_done, fee_rate, vat_rate
):
    """Prolific's set-up answer names its fees and VAT: above what the confirmation showed
    (the recruiter block's fee_rate), the set-up is dropped and nothing is paid (before, only
    the amount was compared, and the higher charge was paid)."""
    fake.fee_rate, fake.vat_rate = fee_rate, vat_rate
    report = in_app(app, lambda r: r.bonus())
    assert pays(fake) == 0 and report.counts["sent"] == 0
    assert any("more than the $1.33 confirmed" in line for line in report.lines)
    assert ledger_states(app) == [(None, None)]  # new again; nothing refused
    fake.fee_rate, fake.vat_rate = 1 / 3, 0.0
    assert in_app(app, lambda r: r.bonus()).counts["sent"] == 1 and pays(fake) == 1


def test_prolific_refuses_a_bonus_while_another_is_processed_and_nothing_is_lost(
    app, fake, one_done
):
    """Prolific takes no concurrent bonus requests of a workspace (say, a file being pasted
    in the browser): the set-up is answered 429, retried, and left new; nothing is refused."""
    fake.bonus_in_flight = True
    busy = in_app(app, lambda r: r.bonus())
    assert busy.counts["sent"] == 0 and busy.counts["refused"] == 0
    assert any("429" in line for line in busy.lines) and ledger_states(app) == [(None, None)]
    fake.bonus_in_flight = False
    assert in_app(app, lambda r: r.bonus()).counts["sent"] == 1 and pays(fake) == 1


def test_insufficient_balance_pays_nothing_and_the_set_up_is_paid_once_later(app, fake, one_done):
    fake.balance = 50.0  # cents: less than the $1.33 asked
    short = in_app(app, lambda r: r.bonus())
    assert short.counts["sent"] == 0 and short.counts["refused"] == 0 and pays(fake) == 0
    assert any("Insufficient balance" in line for line in short.lines)
    assert ledger_states(app)[0][0] == "set_up"
    fake.balance = 10_000.0
    assert in_app(app, lambda r: r.bonus()).counts["sent"] == 1 and pays(fake) == 1
    fake.process_payments()
    assert fake.paid_to(one_done) == 1.00


# -- what is confirmed is what is paid ----------------------------------------------------------


def finishing_meanwhile(monkeypatch, then):
    """The researcher reads the printed preview; ``then`` happens before they answer yes (in
    a thread of its own: participants' requests are not the command's)."""
    import threading

    import click

    def confirm(text, **kw):
        from webapp.extensions import db

        db.session.commit()  # the command waits holding no transaction
        elsewhere = threading.Thread(target=then)
        elsewhere.start()
        elsewhere.join()
        return True

    monkeypatch.setattr(click, "confirm", confirm)


def test_cli_bonus_pays_what_its_preview_printed(
    app, fake, load_recruit_study, runner, monkeypatch
):
    """Someone finishes between the preview and the yes: only the previewed bonus is paid
    and the new one is named (before, both were paid under a confirmation of one)."""
    definition = load_recruit_study()
    study_id = listed(app, fake)
    a = take_part(app, fake, definition, study_id, "a")
    late: list[str] = []
    finishing_meanwhile(
        monkeypatch, lambda: late.append(take_part(app, fake, definition, study_id, "b"))
    )
    result = runner.invoke(args=["recruit", "product-choice-demo", "bonus"])
    fake.process_payments()
    assert {pid for _, pid, _ in fake.payments} == {a}, result.output
    assert fake.paid_to(late[0]) == 0 and result.exit_code == 0
    assert "to pay now: $1.00 + fees $0.33 = $1.33 (1 bonus(es))" in result.output
    assert "1 more bonus(es)" in result.output


def test_cli_bonus_pays_nothing_when_a_confirmed_row_changed(
    app, fake, one_done, runner, monkeypatch
):
    """Rejected between the preview and the yes: nothing is paid, the new preview is printed."""

    def reject() -> None:
        submission_of(fake, one_done)["status"] = "REJECTED"

    finishing_meanwhile(monkeypatch, reject)
    result = runner.invoke(args=["recruit", "product-choice-demo", "bonus"])
    assert result.exit_code != 0 and "changed since the preview" in result.output
    assert "nothing was paid" in result.output and "to pay now: $0.00" in result.output
    assert fake.bulk == {} and pays(fake) == 0


def test_cli_approve_approves_what_its_preview_printed(
    app, fake, load_recruit_study, runner, monkeypatch
):
    definition = load_recruit_study()
    study_id = listed(app, fake)
    a = take_part(app, fake, definition, study_id, "a")
    late: list[str] = []
    finishing_meanwhile(
        monkeypatch, lambda: late.append(take_part(app, fake, definition, study_id, "b"))
    )
    result = runner.invoke(args=["recruit", "product-choice-demo", "approve"])
    assert submission_of(fake, a)["status"] == "APPROVED"
    assert submission_of(fake, late[0])["status"] == "AWAITING REVIEW", result.output
    assert result.exit_code == 0 and "approve 1 submission(s): rewards $3.00" in result.output
    assert "approved 1" in result.output and "1 more submission(s)" in result.output


# -- what a run says -----------------------------------------------------------------------------


def test_settle_says_why_a_row_of_a_stopped_run_waits(app, fake, one_done):
    """A run killed mid set-up leaves its row claimed: settle names it, since when, that
    nothing of it was paid, and when another run takes it over (before: nothing was said)."""
    from datetime import timedelta

    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import BonusPayment, Platform, utcnow
    from webapp.services.payments import issue_bonuses
    from webapp.services.studies import get_study

    with app.app_context():
        issue_bonuses(
            get_study("product-choice-demo"),
            Platform.prolific,
            issued_by="t",
            now=utcnow(),
            to_file=False,
        )
        row = db.session.scalars(select(BonusPayment)).one()
        row.platform_state, row.claim_token = "claimed", "deadbeef" * 4
        row.claimed_at = utcnow() - timedelta(seconds=60)
        db.session.commit()
    report = in_app(app, lambda r: r.settle())
    (line,) = [x for x in report.lines if x.startswith("waits:")]
    assert "held by another run since" in line and "nothing of it was paid yet" in line
    assert "takes it over" in line and ledger_states(app) == [("claimed", None)]


def test_a_run_reports_only_the_payments_it_recorded_itself(app, fake, one_done, monkeypatch):
    """Another run confirms the payment while this one runs: it is counted by that run, not
    by this one too (before, a run counted every row paid by its end)."""
    from webapp.recruit.prolific_pay import ProlificPayments

    in_app(app, lambda r: r.bonus())
    fake.process_payments()
    original = ProlificPayments.confirm
    other: list = []

    def confirm(self, rows, report, states):
        if not other:  # another terminal's settle runs now (this one holds no transaction)
            self.r.release()
            other.append(None)
            other[0] = in_app(app, lambda r: r.settle())
        return original(self, rows, report, states)

    monkeypatch.setattr(ProlificPayments, "confirm", confirm)
    this = in_app(app, lambda r: r.settle())
    assert other[0].counts["paid"] == 1 and this.counts["paid"] == 0
    assert ledger_states(app)[0][0] == "paid"
