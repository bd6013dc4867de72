"""Bonus runs racing over the same ledger rows: a run that stalls in its Prolific set-up past
the claim's expiry loses its rows to a second run and, when its answer finally comes, changes
nothing and pays nothing (SQLite and PostgreSQL: each UPDATE of a row's state is conditional
on the run's claim; the database decides); and the payment file and the API, each in a
process of its own on one PostgreSQL database, pay each bonus once."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.webapp.conftest import ROOT
from tests.webapp.recruit.conftest import PROLIFIC_BLOCK, study_with
from tests.webapp.recruit.test_prolific import in_app, listed, take_part
from webapp.definition_cache import study_definition


def _race(app, fake, definition, monkeypatch) -> tuple:
    from webapp.recruit.prolific import ProlificRecruiter

    study_id = listed(app, fake)
    take_part(app, fake, definition, study_id, "a")
    in_app(app, lambda r: r.approve())
    original = ProlificRecruiter.call
    real_time = time.time
    later: list = []

    def call(self, method, path, **kw):
        if path == "/api/v1/submissions/bonus-payments/" and not later:
            # Run A stalls here, in its set-up call, for two hours: its claim expires and
            # run B (its own app context and database session) takes the rows over and pays.
            self.release()
            monkeypatch.setattr(time, "time", lambda: real_time() + 2 * 3600)
            later.append(None)
            later[0] = in_app(app, lambda r: r.bonus())
        return original(self, method, path, **kw)  # A's set-up answer arrives only now

    monkeypatch.setattr(ProlificRecruiter, "call", call)
    first = in_app(app, lambda r: r.bonus())
    return first, later[0]


def _check(first, second, fake) -> None:
    assert len(fake.bulk) == 2  # both set up (a set-up pays nothing) ...
    assert sum(b["paid"] for b in fake.bulk.values()) == 1  # ... and only one is paid
    assert second.counts["sent"] == 1
    assert first.counts["sent"] == 0 and first.counts["claim_lost"] == 1
    assert any("taken over by another run" in line for line in first.lines)
    fake.process_payments()
    (pid,) = {p for _, p, _ in fake.payments}
    assert len(fake.payments) == 1 and fake.paid_to(pid) > 0


def test_a_stalled_set_up_whose_claim_expired_pays_nothing(
    app, fake, load_recruit_study, monkeypatch
):
    """Before, the stalled run's late answer overwrote the rows of the run that took them
    over, and both set-ups were paid."""
    definition = load_recruit_study()
    first, second = _race(app, fake, definition, monkeypatch)
    _check(first, second, fake)


@pytest.mark.postgres
def test_a_stalled_set_up_whose_claim_expired_pays_nothing_on_postgres(
    pg_app, fake, tmp_path, monkeypatch
):
    from webapp.services.studies import load_study

    with pg_app.app_context():
        definition = study_definition(load_study(study_with(tmp_path, PROLIFIC_BLOCK)).study)
    first, second = _race(pg_app, fake, definition, monkeypatch)
    _check(first, second, fake)


def test_a_lost_claim_changes_no_row(app, fake, load_recruit_study):
    """The compare-and-set itself: a run one of whose rows was taken over moves none."""
    from datetime import timedelta

    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import BonusPayment, Platform, utcnow
    from webapp.recruit import ledger
    from webapp.services.payments import issue_bonuses
    from webapp.services.studies import get_study

    definition = load_recruit_study()
    study_id = listed(app, fake)
    for name in ("a", "b"):
        take_part(app, fake, definition, study_id, name)
    with app.app_context():
        issue_bonuses(
            get_study("product-choice-demo"),
            Platform.prolific,
            issued_by="t",
            now=utcnow(),
            to_file=False,
        )
        ids = set(db.session.scalars(select(BonusPayment.id)))
        assert len(ids) == 2
        a, b = ledger.Claim(), ledger.Claim()
        assert a.take(ids, (ledger.NEW,), to=ledger.CLAIMED) == ids
        assert b.take(ids, (ledger.CLAIMED,)) == set()  # held by a live run
        first = min(ids)
        db.session.get(BonusPayment, first).claimed_at = utcnow() - timedelta(hours=2)
        db.session.commit()
        assert b.take(ids, (ledger.CLAIMED,)) == {first}  # its run looked dead: taken over
        with pytest.raises(ledger.ClaimLost):
            a.move(ids, ledger.CLAIMED, ledger.SET_UP, platform_payment_id="x" * 24)
        rows = db.session.scalars(select(BonusPayment)).all()
        assert {(r.platform_state, r.platform_payment_id) for r in rows} == {(ledger.CLAIMED, None)}


def _framelab(app, fake, *args: str) -> subprocess.Popen:
    """``framelab ARGS`` in a process of its own, on the app's database and the fake Prolific
    (as a second terminal, or the console on another host, would run it)."""
    from tests.webapp.recruit.fake_prolific import TOKEN

    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "SECRET_KEY": app.config["SECRET_KEY"],
        "PROLIFIC_API_URL": fake.url,
        "PROLIFIC_TOKEN": TOKEN,
    }
    return subprocess.Popen(  # noqa: S603  (our own command line)
        [sys.executable, "-c", "from framelab.cli import main; main()", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=300)
    return proc.returncode, out


@pytest.mark.postgres
@pytest.mark.slow
def test_file_and_api_in_separate_processes_pay_each_bonus_once(pg_app, fake, tmp_path):
    """The payment file and the API, each in its own process on one PostgreSQL database:
    first one after the other (the file pasted into Prolific, then "Pay bonuses" in another
    process pays nothing more), then both started at once (whichever takes a row, each
    person is paid exactly once, by the file or by the API)."""
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import BonusPayment, PlatformIdentity
    from webapp.services.studies import load_study

    with pg_app.app_context():
        definition = study_definition(load_study(study_with(tmp_path, PROLIFIC_BLOCK)).study)
    study_id = listed(pg_app, fake)
    slug = definition.slug
    out = tmp_path / "bonus.csv"
    file_cmd = ("bonus", slug, "--platform", "prolific", "--out", str(out))
    api_cmd = ("recruit", slug, "bonus", "--yes")

    first = take_part(pg_app, fake, definition, study_id, "a")
    in_app(pg_app, lambda r: r.status())
    code, output = _finish(_framelab(pg_app, fake, *file_cmd))
    assert code == 0, output
    fake.upload_file(study_id, out.read_text())
    fake.process_payments()
    code, output = _finish(_framelab(pg_app, fake, *api_cmd))
    assert code == 0, output
    assert fake.paid_to(first) == 1.00 and sum(b["paid"] for b in fake.bulk.values()) == 1

    people = [take_part(pg_app, fake, definition, study_id, n) for n in ("b", "c", "d")]
    in_app(pg_app, lambda r: r.status())
    out.unlink()
    procs = [_framelab(pg_app, fake, *file_cmd), _framelab(pg_app, fake, *api_cmd)]
    results = [_finish(p) for p in procs]
    if out.exists():
        fake.upload_file(study_id, out.read_text())
    code, output = _finish(_framelab(pg_app, fake, *api_cmd))  # pays whatever is left
    assert code == 0, (results, output)
    fake.process_payments()
    with pg_app.app_context():
        owed = {
            ext: b.amount_cents
            for b, ext in db.session.execute(
                select(BonusPayment, PlatformIdentity.external_id).join(
                    PlatformIdentity,
                    PlatformIdentity.participant_id == BonusPayment.participant_id,
                )
            )
        }
    assert sorted(owed) == sorted([first, *people])
    for pid in people:
        assert round(fake.paid_to(pid) * 100) == owed[pid], (pid, results)
