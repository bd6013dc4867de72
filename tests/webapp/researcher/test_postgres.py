"""The console's services on PostgreSQL: ledger, concurrent bonus runs, login limiter, reconcile."""

from __future__ import annotations

import io
import threading
from datetime import timedelta

import pytest

from tests.webapp.conftest import load_demo
from webapp.bots import run_bots

pytestmark = pytest.mark.postgres
SLUG = "product-choice-demo"


def test_bonus_ledger_and_concurrent_runs_on_postgres(pg_app):
    from webapp.models import Platform, utcnow
    from webapp.services.payments import PaymentError, issue_bonuses
    from webapp.services.studies import get_study

    definition = load_demo(pg_app)
    assert run_bots(pg_app, definition, n=6, seed=1).counts == {"completed": 6}
    outcomes: list[object] = []
    barrier = threading.Barrier(2)

    def issue() -> None:
        with pg_app.app_context():
            study = get_study(SLUG)
            barrier.wait()
            try:
                outcomes.append(
                    issue_bonuses(
                        study, Platform.prolific, issued_by="t", now=utcnow(), to_file=True
                    ).newly_issued
                )
            except PaymentError as exc:
                outcomes.append(str(exc))

    threads = [threading.Thread(target=issue) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    issued = [o for o in outcomes if isinstance(o, int)]
    assert sum(issued) == 6  # never twice, whoever wins
    with pg_app.app_context():
        from webapp.extensions import db
        from webapp.models import BonusPayment

        assert db.session.scalar(db.select(db.func.count()).select_from(BonusPayment)) == 6
        with pytest.raises(PaymentError, match="no new bonuses"):
            issue_bonuses(
                get_study(SLUG), Platform.prolific, issued_by="t", now=utcnow(), to_file=True
            )


def test_login_limiter_and_reconcile_on_postgres(pg_app):
    from webapp.models import ParticipantStatus, Platform, utcnow
    from webapp.services import accounts, reconcile
    from webapp.services.studies import get_study

    definition = load_demo(pg_app)
    run_bots(pg_app, definition, n=1, seed=2)
    with pg_app.app_context():
        now = utcnow()
        for i in range(5):
            assert accounts.reserve_attempt("ana", "c1", now - timedelta(minutes=14 - i)).allowed
        limit = accounts.reserve_attempt("ana", "c1", now)
        assert not limit.allowed and 50 <= limit.retry_after_s <= 61
        assert accounts.reserve_attempt("ana", "c1", now + timedelta(minutes=2)).allowed
        study = get_study(SLUG)
        pid = study.participants[0].identity.external_id
        statuses = reconcile.read_statuses(
            Platform.prolific, io.StringIO(f"Participant id,Status\n{pid},APPROVED\n")
        )
        report = reconcile.reconcile(study, Platform.prolific, statuses, "t", now=utcnow())
        assert report.matched == 1 and report.mismatches == []
        assert study.participants[0].status is ParticipantStatus.completed
        assert study.participants[0].platform_status == "APPROVED"


def test_console_overview_and_timeouts_on_postgres(pg_app):
    """The funnel's medians (percentile_cont on PostgreSQL) against Python's median of the same
    visits; the time-out sweep (row locks) and the paged table on PostgreSQL."""
    import statistics

    from webapp.bots import Bot, BotBehaviour, FlaskTransport
    from webapp.extensions import db
    from webapp.models import PageVisit, Participant, ParticipantStatus, utcnow
    from webapp.services import monitor, timeouts
    from webapp.services.studies import get_study

    definition = load_demo(pg_app)
    run_bots(pg_app, definition, n=4, seed=5)
    Bot(FlaskTransport(pg_app), definition, BotBehaviour(abandon_at=4)).run()
    with pg_app.app_context():
        study = get_study(SLUG)
        now = utcnow()
        funnel = monitor.funnel(study, now, timedelta(minutes=60))
        visits = db.session.execute(
            db.select(PageVisit.page, PageVisit.shown_at, PageVisit.submitted_at)
        ).all()
        for row in funnel:
            spans = [(b - a).total_seconds() for p, a, b in visits if p == row["page"] and b]
            assert row["median_s"] == pytest.approx(round(statistics.median(spans), 1), abs=0.051)
        assert funnel[0]["reached"] == 5 and sum(r["in_progress"] for r in funnel) == 1
        quitter = db.session.scalars(
            db.select(Participant).where(Participant.status == ParticipantStatus.started)
        ).one()
        quitter.last_seen_at = now - timedelta(hours=2)
        db.session.commit()
        assert timeouts.sweep(study, now) == [quitter.code]
        assert timeouts.sweep(study, now) == []
        table = monitor.participant_table(study, status="timed_out")
        assert [r["participant_id"] for r in table.rows] == [quitter.code]
