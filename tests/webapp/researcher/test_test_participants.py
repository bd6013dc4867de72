"""Bots and previews are test participants: out of payments, counts and default exports; cleared
on request, audited, without touching a real participant."""

from __future__ import annotations

import csv
import io
import random

import pytest

from tests.webapp.conftest import demo_copy, load_demo
from tests.webapp.researcher.conftest import PASSWORD, csrf_from, login
from webapp.bots import Bot, BotBehaviour, FlaskTransport, run_bots

SLUG = "product-choice-demo"
ALWAYS = {"original": 1.0, "summary": 1.0}
NEVER = {"original": 0.0, "summary": 0.0}
PAIRS = 3  # of the demo's ten: each participant makes 3 choices


@pytest.fixture
def short_study(app, tmp_path):
    """The demo study with its first three pairs, loaded into ``app``."""
    return load_demo(app, demo_copy(tmp_path, pairs=PAIRS))


def _pilot_and_real(app, definition) -> None:
    """Three real participants who always choose the target, five bots who never do.

    Were the bots counted, the majority would be "not the target" and the real participants'
    bonus would be zero; counted apart, every real choice matches the majority.
    """
    for i in range(3):
        bot = Bot(
            FlaskTransport(app),
            definition,
            BotBehaviour(p_target=ALWAYS),
            rng=random.Random(i),
            external_id=f"real{i}",
        )
        assert bot.run().outcome == "completed"
    secret = app.config["SECRET_KEY"]
    summary = run_bots(
        app, definition, n=5, behaviour=BotBehaviour(p_target=NEVER), seed=4, test_secret=secret
    )
    assert summary.counts == {"completed": 5}


def _client(app, username="rita"):
    from webapp.services.researchers import set_researcher

    with app.app_context():
        set_researcher(username, PASSWORD, is_admin=True)
    client = app.test_client()
    assert login(client, username).status_code == 302
    return client


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _everything_about_test_participants_on(app, folder) -> None:
    from sqlalchemy import func, select

    from webapp.extensions import db
    from webapp.models import ChoiceResponse, Participant, Platform, PlatformIdentity, utcnow
    from webapp.services import monitor
    from webapp.services.export import build_table
    from webapp.services.payments import issue_bonuses, write_bonus_file
    from webapp.services.studies import get_study, status_counts

    definition = load_demo(app, demo_copy(folder, pairs=PAIRS))
    _pilot_and_real(app, definition)
    with app.app_context():
        study = get_study(SLUG)
        ids = dict(
            db.session.execute(
                select(PlatformIdentity.external_id, Participant.is_test).join(
                    Participant, Participant.id == PlatformIdentity.participant_id
                )
            ).all()
        )
        # Bots keep the platform they test, with IDs no recruiter issues.
        assert sorted(ids.values()) == [False] * 3 + [True] * 5
        assert all(pid.startswith("test-") == is_test for pid, is_test in ids.items())
        assert db.session.scalar(select(func.count()).where(Participant.is_test)) == 5
        assert {p.value for p in db.session.scalars(select(Participant.platform))} == {
            Platform.prolific.value
        }
        # Payments: only real people, bonus rule over real choices only (3 matching each).
        issue = issue_bonuses(study, Platform.prolific, issued_by="t", now=utcnow(), to_file=True)
        out = io.StringIO()
        assert write_bonus_file(issue.lines, Platform.prolific, out) == 3
        assert "test-" not in out.getvalue()
        cents = round(definition.payment.bonus.amount * 100)
        assert [line.amount_cents for line in issue.lines] == [PAIRS * cents] * 3
        # Counts and the progress bar.
        assert status_counts(study)["completed"]["total"] == 3
        assert monitor.target_progress(study)["completed"] == 3
        # Exports: left out by default; brought in, marked.
        rows, columns = build_table(study, "long")
        assert len(rows) == 3 * PAIRS and "is_test" not in columns
        rows, columns = build_table(study, "long", include_test=True)
        assert len(rows) == 8 * PAIRS and columns[-1] == "is_test"
        assert sorted({r["is_test"] for r in rows}) == [0, 1]
        assert sum(r["is_test"] for r in rows) == 5 * PAIRS
        for fmt in ("wide", "page-times"):
            rows, columns = build_table(study, fmt)
            assert "is_test" not in columns and not any(r["is_test"] for r in rows)
            rows, columns = build_table(study, fmt, include_test=True)
            assert "is_test" in columns and any(r["is_test"] for r in rows)
        real_choices = db.session.scalar(
            select(func.count())
            .select_from(ChoiceResponse)
            .join(Participant, Participant.id == ChoiceResponse.participant_id)
            .where(Participant.is_test.is_(False))
        )
    # Clear: only the bots go, audited with counts.
    result = app.test_cli_runner().invoke(args=["clear-test-data", SLUG, "--yes"])
    assert result.exit_code == 0, result.output
    assert "participants 5" in result.output and f"choices {5 * PAIRS}" in result.output
    with app.app_context():
        from webapp.models import AuditEvent, BonusPayment

        assert db.session.scalar(select(func.count()).select_from(Participant)) == 3
        assert db.session.scalar(select(func.count()).select_from(ChoiceResponse)) == real_choices
        assert db.session.scalar(select(func.count()).select_from(BonusPayment)) == 3
        event = db.session.scalars(
            select(AuditEvent).where(AuditEvent.action == "study.clear_test_data")
        ).one()
        assert event.actor == "cli" and event.detail["counts"]["participants"] == 5
        assert event.detail["counts"]["page_visits"] > 0


@pytest.mark.postgres
def test_bots_stay_out_of_payments_counts_and_default_exports_on_postgres(pg_app, tmp_path):
    _everything_about_test_participants_on(pg_app, tmp_path)


def test_bots_stay_out_of_payments_counts_and_default_exports_on_sqlite(app, tmp_path):
    _everything_about_test_participants_on(app, tmp_path)


def test_framelab_bots_always_makes_test_participants(app, study, runner):
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import Participant, PlatformIdentity

    result = runner.invoke(args=["bots", SLUG, "--n", "2", "--platform", "mturk", "--seed", "1"])
    assert result.exit_code == 0 and "completed 2" in result.output
    with app.app_context():
        rows = db.session.execute(
            select(Participant.is_test, PlatformIdentity.external_id).join(
                PlatformIdentity, PlatformIdentity.participant_id == Participant.id
            )
        ).all()
    assert len(rows) == 2 and all(is_test and pid.startswith("TEST-") for is_test, pid in rows)
    out = runner.invoke(args=["export", SLUG, "--out", str(app.instance_path) + "/x.csv"])
    assert "wrote 0 rows" in out.output


def test_a_test_id_needs_its_key_and_a_key_never_makes_a_real_id_test(app, client, study):
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import Participant
    from webapp.services.testmark import entry_key

    base = f"/s/{SLUG}?STUDY_ID=S1&SESSION_ID=X1&PROLIFIC_PID="
    resp = client.get(base + "test-abc123")
    assert resp.status_code == 400 and "reserved for test runs" in resp.get_data(as_text=True)
    other = entry_key(app.config["SECRET_KEY"], "another-study", "prolific", "test-abc123")
    assert client.get(base + f"test-abc123&test_key={other}").status_code == 400
    forged = entry_key("not the server's secret", SLUG, "prolific", "test-abc123")
    assert client.get(base + f"test-abc123&test_key={forged}").status_code == 400
    good = entry_key(app.config["SECRET_KEY"], SLUG, "prolific", "test-abc123")
    assert client.get(base + f"test-abc123&test_key={good}").status_code == 200
    # A real participant's link with a (valid-looking) key is a real participant all the same.
    real = "5f1a2b3c4d5e6f708192a3b4"
    bot = Bot(
        FlaskTransport(app), study, rng=random.Random(1), external_id=real
    )  # arrives without a key, as Prolific sends people
    page = bot.open(bot.entry_url({"test_key": good}))
    assert page.kind == "consent"
    assert bot.run().outcome == "completed"
    with app.app_context():
        assert db.session.scalars(select(Participant.is_test)).all() == [False]


def test_previews_are_test_participants_with_reserved_ids(app, study):
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import Participant, PlatformIdentity
    from webapp.services.export import build_table
    from webapp.services.studies import get_study

    client = _client(app)
    html = client.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    resp = client.post(
        f"/researcher/studies/{SLUG}/preview",
        data={"csrf_token": csrf_from(html), "block": "choices"},
    )
    assert resp.status_code == 302
    with app.app_context():
        p, pid = db.session.execute(
            select(Participant, PlatformIdentity.external_id).join(
                PlatformIdentity, PlatformIdentity.participant_id == Participant.id
            )
        ).one()
        assert p.is_preview and p.is_test and pid.startswith("test-")
        assert build_table(get_study(SLUG), "wide")[0] == []
        assert len(build_table(get_study(SLUG), "wide", include_test=True)[0]) == 1


def test_console_clears_test_data_after_confirmation_and_audits_it(app, short_study):
    from sqlalchemy import func, select

    from webapp.extensions import db
    from webapp.models import AuditEvent, Participant

    _pilot_and_real(app, short_study)
    client = _client(app)
    url = f"/researcher/studies/{SLUG}"
    html = client.get(url).get_data(as_text=True)
    assert 'data-test-count="5"' in html and 'data-export-test="long-csv"' in html
    long_with_tests = client.get(f"{url}/export/long.csv?include_test=1").get_data(as_text=True)
    assert len(_csv(long_with_tests)) == 8 * PAIRS and "is_test" in long_with_tests.splitlines()[0]
    assert len(_csv(client.get(f"{url}/export/long.csv").get_data(as_text=True))) == 3 * PAIRS
    clear = f"{url}/test-data/clear"
    resp = client.post(clear, data={"csrf_token": csrf_from(html)}, follow_redirects=True)
    assert "Tick the box" in resp.get_data(as_text=True)
    assert client.post(clear, data={"confirm": "y"}).status_code == 400  # no CSRF token
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Participant)) == 8
    resp = client.post(
        clear, data={"csrf_token": csrf_from(html), "confirm": "y"}, follow_redirects=True
    )
    assert "Deleted 5 test participant(s)" in resp.get_data(as_text=True)
    with app.app_context():
        assert db.session.scalars(select(Participant.is_test)).all() == [False] * 3
        event = db.session.scalars(
            select(AuditEvent).where(AuditEvent.action == "study.clear_test_data")
        ).one()
        assert event.actor == "rita" and event.detail["counts"]["choices"] == 5 * PAIRS


def test_clearing_is_refused_while_a_test_participants_payment_is_on_its_way(app, short_study):
    from sqlalchemy import func, select

    from webapp.extensions import db
    from webapp.models import BonusPayment, Participant, Platform
    from webapp.services.studies import get_study

    _pilot_and_real(app, short_study)
    with app.app_context():
        bot = db.session.scalars(select(Participant).where(Participant.is_test)).first()
        db.session.add(
            BonusPayment(
                study_id=get_study(SLUG).id,
                participant_id=bot.id,
                rule="majority_choice",
                amount_cents=10,
                platform=Platform.prolific,
                request_token="framelab-test-in-flight",
                reason="r",
                issued_by="t",
                platform_state="paying",
            )
        )
        db.session.commit()
    result = app.test_cli_runner().invoke(args=["clear-test-data", SLUG, "--yes"])
    assert result.exit_code == 1 and "on their way" in result.output
    assert "Nothing was deleted" in result.output
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Participant)) == 8


def test_a_researcher_without_access_who_takes_part_is_a_real_participant(app, study):
    """Only a researcher who may see the study previews it: anyone else logged in to the console
    (a colleague taking part) is an ordinary participant, counted and limited like one."""
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import Participant
    from webapp.services.researchers import set_researcher

    with app.app_context():
        set_researcher("bob", PASSWORD)  # no admin, owns nothing
    transport = FlaskTransport(app)
    assert login(transport.client, "bob").status_code == 302
    bot = Bot(transport, study, BotBehaviour(), rng=random.Random(7), external_id="colleague")
    bot.open()
    while "consent" in bot.history[-1:]:
        bot.step()
    with app.app_context():
        rows = db.session.execute(select(Participant.is_preview, Participant.is_test)).all()
    assert [tuple(r) for r in rows] == [(False, False)]
