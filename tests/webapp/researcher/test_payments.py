"""Bonuses: the Done-when check, recomputed independently from the long export; the ledger."""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from decimal import Decimal

import pytest

SLUG = "product-choice-demo"


def _long(runner, tmp_path) -> list[dict[str, str]]:
    out = tmp_path / "long.csv"
    result = runner.invoke(
        args=["export", SLUG, "--format", "long", "--include-platform-ids", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    with out.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def recompute_bonuses(rows: list[dict[str, str]], usd: Decimal) -> dict[str, Decimal]:
    """The rule, written again from its statement: per (pair, format) the majority choice among
    completed participants; each matching choice pays ``usd`` (ties: both choices match)."""
    completed = [r for r in rows if r["status"] == "completed"]
    votes: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in completed:
        votes[(r["pair_id"], r["format"])][r["chose_target"]] += 1
    pay: dict[str, Decimal] = defaultdict(Decimal)
    for r in completed:
        v = votes[(r["pair_id"], r["format"])]
        top = max(v.values())
        if v[r["chose_target"]] == top:
            pay[r["platform_participant_id"]] += usd
    return {pid: amount for pid, amount in pay.items() if amount > 0}


@pytest.mark.slow
def test_done_when_30_bots_then_bonus_matches_the_rule_and_refuses_twice(runner, study, tmp_path):
    from webapp.bots import run_bots

    # Bots standing in for real participants (`framelab bots` would make test participants,
    # whom no payment file ever lists).
    assert run_bots(runner.app, study, n=30, seed=7).counts == {"completed": 30}
    out = tmp_path / "b.csv"
    result = runner.invoke(args=["bonus", SLUG, "--platform", "prolific", "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert len(lines) == 30
    paid = {}
    for line in lines:
        pid, amount = line.split(",")
        assert len(amount.split(".")[1]) == 2  # two decimals
        paid[pid] = Decimal(amount)
    expected = recompute_bonuses(_long(runner, tmp_path), Decimal("0.10"))
    assert paid == expected
    # Raw Prolific IDs (24 hex digits), for payment only.
    assert all(len(pid) == 24 and set(pid) <= set("0123456789abcdef") for pid in paid)

    first = out.read_text()
    again = runner.invoke(args=["bonus", SLUG, "--platform", "prolific", "--out", str(out)])
    assert again.exit_code != 0 and "no new bonuses" in again.output
    assert "use --force" in again.output  # the command line's own option
    assert out.read_text() == first
    forced = runner.invoke(
        args=["bonus", SLUG, "--platform", "prolific", "--out", str(out), "--force"]
    )
    assert forced.exit_code == 0 and "0 new, 30 written again" in forced.output
    assert out.read_text() == first  # same amounts; the ledger still holds one row each

    from webapp.extensions import db
    from webapp.models import BonusPayment

    with runner.app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(BonusPayment)) == 30


def test_mturk_sendbonus_plan_and_new_participants_only(app, runner, study, make_bot, tmp_path):
    for _ in range(3):
        assert make_bot(platform="mturk").run().outcome == "completed"
    out = tmp_path / "mturk.csv"
    result = runner.invoke(args=["bonus", SLUG, "--platform", "mturk", "--out", str(out)])
    assert result.exit_code == 0, result.output
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == [
        "WorkerId",
        "AssignmentId",
        "BonusAmount",
        "Reason",
        "UniqueRequestToken",
    ]
    assert len(rows) == 3
    assert all(r["AssignmentId"] == f"A{r['WorkerId']}" for r in rows)
    assert len({r["UniqueRequestToken"] for r in rows}) == 3
    assert all(len(r["UniqueRequestToken"]) <= 64 for r in rows)
    # Three people, ten pairs: a choice matches when at least two of three made it.
    assert {Decimal(r["BonusAmount"]) for r in rows} <= {Decimal(n) / 10 for n in range(1, 11)}
    # A fourth participant later: only their bonus is issued; the first three are not repeated.
    assert make_bot(platform="mturk").run().outcome == "completed"
    result = runner.invoke(args=["bonus", SLUG, "--platform", "mturk", "--out", str(out)])
    assert result.exit_code == 0 and "3 already issued and skipped" in result.output
    with out.open(newline="") as fh:
        later = list(csv.DictReader(fh))
    assert len(later) <= 1 and not {r["WorkerId"] for r in later} & {r["WorkerId"] for r in rows}


def test_the_ledger_refuses_a_second_row(app, study, make_bot):
    from sqlalchemy.exc import IntegrityError

    from webapp.extensions import db
    from webapp.models import BonusPayment, Participant, Platform

    make_bot().run()
    with app.app_context():
        p = db.session.scalars(db.select(Participant)).one()
        for token in ("t1", "t2"):
            db.session.add(
                BonusPayment(
                    study_id=p.study_id,
                    participant_id=p.id,
                    rule="majority_choice",
                    amount_cents=10,
                    platform=Platform.prolific,
                    request_token=token,
                    reason="r",
                    issued_by="test",
                )
            )
        with pytest.raises(IntegrityError):
            db.session.commit()


def test_bonus_from_the_console_downloads_the_file(app, clock, study, make_researcher, make_bot):
    from .conftest import own_demo, page_token

    make_bot().run()
    make_bot().run()
    ana = make_researcher("ana")
    own_demo(app, "ana")
    token = page_token(ana, f"/researcher/studies/{SLUG}")
    resp = ana.post(
        f"/researcher/studies/{SLUG}/bonus", data={"csrf_token": token, "platform": "prolific"}
    )
    assert resp.status_code == 200 and resp.mimetype == "text/csv"
    assert "attachment" in resp.headers["Content-Disposition"]
    assert len(resp.get_data(as_text=True).splitlines()) == 2  # both agree with themselves
    assert all(line.endswith(",1.00") for line in resp.get_data(as_text=True).splitlines())
    again = ana.post(
        f"/researcher/studies/{SLUG}/bonus", data={"csrf_token": token, "platform": "prolific"}
    )
    assert again.status_code == 302
    refused = ana.get(again.headers["Location"]).get_data(as_text=True)
    # The console names its own checkbox, not the command line's --force.
    assert "no new bonuses" in refused and "--force" not in refused
    assert "Write bonuses already sent by file again" in refused
    # The ledger says how each was paid; a file never uploaded is said so, audited.
    assert refused.count("sent by file (never paid through the API)") == 2
    unused = {"csrf_token": token, "unused-platform": "prolific", "unused-codes": "all"}
    early = ana.post(f"/researcher/studies/{SLUG}/bonus/file-not-used", data=unused)
    page = ana.get(early.headers["Location"]).get_data(as_text=True)
    # Prolific may not list a bonus pasted from the file yet: refused, saying from when.
    assert "less than an hour ago" in page and "from 2025-01-06 " in page
    assert page.count("sent by file (never paid through the API)") == 2
    clock.sleep(3600)
    said = ana.post(f"/researcher/studies/{SLUG}/bonus/file-not-used", data=unused)
    page = ana.get(said.headers["Location"]).get_data(as_text=True)
    assert "Payable again (prolific)" in page and page.count("issued, not yet sent") == 2
    with app.app_context():
        from webapp.extensions import db
        from webapp.models import AuditEvent

        (event,) = db.session.scalars(
            db.select(AuditEvent).where(AuditEvent.action == "bonus.file_not_used")
        )
        assert event.actor == "ana" and len(event.detail["participants"]) == 2


def test_a_study_without_a_bonus_rule_is_refused(app, study, runner, tmp_path):
    from webapp.extensions import db
    from webapp.services.studies import get_study

    with app.app_context():
        s = get_study(SLUG)
        s.definition = {
            **s.definition,
            "payment": {
                "currency": "USD",
                "base": 3.0,
                "bonus": {"amount": 0, "rule": "none", "max": None},
            },
        }
        db.session.commit()
    result = runner.invoke(
        args=["bonus", SLUG, "--platform", "prolific", "--out", str(tmp_path / "x")]
    )
    assert result.exit_code != 0 and "pays no bonus" in result.output
