"""The participant path's data access (webapp.services.participant_data): what it reads and
writes, the same on SQLite and PostgreSQL.

A page's lookup names the participant with their study; showing a page records its visit
once (a reload keeps the first time) and moves ``last_seen_at``; an answer stamps its visit,
writes the task's rows and moves the participant, in one transaction.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select, text

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import ChoiceResponse, PageVisit, Participant

from .conftest import admin_engine, disposing, load_demo, make_app, pg_schema


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_app(request, tmp_path):
    """An app on SQLite, then on PostgreSQL (each with its schema built by the migrations)."""
    from webapp.extensions import dispose_engines

    if request.param == "sqlite":
        app = make_app(f"sqlite:///{tmp_path / 'test.sqlite'}")
        yield app
        with app.app_context():
            dispose_engines()
        return
    with pg_schema(request.getfixturevalue("pg_url")) as url:
        app = make_app(url)
        yield app
        with app.app_context():
            dispose_engines()


def _bot_on_first_choice(app, definition) -> Bot:
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="sql")
    bot.open()
    while bot.page.kind != "choice":
        bot.step()
    return bot


def test_the_app_chooses_its_data_access_once(any_app):
    from webapp.services.participant_data import SqlParticipantData, participant_data

    with any_app.app_context():
        chosen = participant_data()
    with any_app.test_request_context():
        assert participant_data() is chosen
    assert isinstance(chosen, SqlParticipantData)


def test_a_page_lookup_finds_only_a_participant_of_that_study(any_app):
    from webapp.services import flow

    definition = load_demo(any_app)
    bot = _bot_on_first_choice(any_app, definition)
    token = bot.page.forms[0].action.rsplit("/", 1)[1]
    secret = any_app.config["SECRET_KEY"]
    with any_app.app_context():
        rows = flow.participant_in_study(token, secret, definition.slug)
        assert rows is not None and rows.study.slug == definition.slug
        assert rows.participant.page_seq > 0 and study_definition(rows.study) == definition
        assert flow.participant_in_study(token, secret, "another-study") is None
        assert flow.participant_in_study(token + "x", secret, definition.slug) is None
        unknown = flow.participant_token(rows.participant.id + 1000, secret)
        assert flow.participant_in_study(unknown, secret, definition.slug) is None


def test_every_visit_and_timing_is_written(any_app):
    # A completed bot's visits are stamped and each choice's server time is exactly
    # submitted_at - shown_at of its page (the shown_at read under the lock).
    definition = load_demo(any_app)
    bot = Bot(FlaskTransport(any_app), definition, BotBehaviour(platform="link"), external_id="t")
    assert bot.run().outcome == "completed"
    with any_app.app_context():
        p = db.session.scalars(select(Participant)).one()
        visits = db.session.scalars(select(PageVisit).order_by(PageVisit.page_seq)).all()
        assert [v.page_seq for v in visits] == list(range(len(visits)))
        answered = visits[:-1]  # the debrief is shown, its "finish" posts once more
        assert all(v.submitted_at is not None and v.rt_ms is not None for v in visits)
        assert all(v.submitted_at >= v.shown_at for v in answered)
        assert p.last_seen_at == max(v.submitted_at for v in visits)
        choices = db.session.scalars(select(ChoiceResponse)).all()
        assert len(choices) == 10
        by_page = {v.page: v for v in visits}
        for c in choices:
            visit = by_page[f"{c.block_id}/{c.trial_index}/choice"]
            expected = int((visit.submitted_at - visit.shown_at).total_seconds() * 1000)
            assert c.server_rt_ms == expected
            assert c.rt_ms == visit.rt_ms
            assert c.wtp_premium_usd is not None and c.wtp_answered_at is not None
            assert c.wtp_premium_pct == 100.0 * c.wtp_premium_usd / c.other_price_usd  # exact


def test_a_reload_keeps_the_first_shown_at_and_moves_last_seen(any_app):
    bot = _bot_on_first_choice(any_app, load_demo(any_app))

    def state():
        with any_app.app_context():
            p = db.session.scalars(select(Participant)).one()
            v = db.session.scalars(select(PageVisit).where(PageVisit.page_seq == p.page_seq)).one()
            n = len(db.session.scalars(select(PageVisit)).all())
            return v.shown_at, p.last_seen_at, n

    shown, seen, n = state()
    bot.reload()
    shown_again, seen_again, n_again = state()
    assert shown_again == shown and seen_again > seen and n_again == n


def test_the_wtp_page_shows_the_chosen_product(any_app):
    bot = _bot_on_first_choice(any_app, load_demo(any_app))
    data = bot.answer()
    after = bot.page.text.split(f'value="{data["side"]}" data-manufacturer="', 1)[1]
    chosen = after.split('"', 1)[0]
    page = bot.post(data)
    assert page.kind == "wtp"
    assert f"<h1>You chose {chosen}</h1>" in page.text


def test_a_page_whose_task_acts_on_entry_shows_and_records_once(any_app, tmp_path):
    # The sentiment tasks act when their page is shown, under the participant's row lock: a
    # reload shows the same page and its visit stays one row.
    from .sentiment.conftest import load, write_study

    definition = load(any_app, write_study(tmp_path, n_items=4, k=1, batch=2))
    bot = Bot(FlaskTransport(any_app), definition, BotBehaviour(platform="link"), external_id="e")
    bot.open()
    bot.step()  # consent, then the first page of the study's tasks is shown
    kind = bot.page.kind
    assert kind == "sentiment_qualification"
    bot.reload()
    assert bot.page.kind == kind
    with any_app.app_context():
        p = db.session.scalars(select(Participant)).one()
        seqs = db.session.scalars(
            select(PageVisit.page_seq).where(PageVisit.participant_id == p.id)
        )
        assert list(seqs) == [p.page_seq]


@pytest.mark.postgres
def test_a_connection_the_server_ended_is_replaced_at_checkout(pg_url):
    # PostgreSQL restarted or ended the pooled connection: the next request gets a new one
    # (SQLAlchemy's pre-ping) instead of an error page.
    with pg_schema(pg_url) as url, admin_engine(pg_url) as admin:
        app = make_app(url)
        with disposing(app), app.app_context():
            assert app.config["SQLALCHEMY_ENGINE_OPTIONS"]["pool_pre_ping"] is True
            old = db.session.execute(text("SELECT pg_backend_pid()")).scalar_one()
            db.session.remove()  # back to the pool, idle
            with admin.connect() as conn:
                conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": old})
                # The call only signals the backend: wait until it is gone.
                gone = text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid")
                while conn.execute(gone, {"pid": old}).scalar_one():
                    time.sleep(0.01)
            new = db.session.execute(text("SELECT pg_backend_pid()")).scalar_one()
    assert new != old


def test_an_explicit_pool_setting_wins():
    from webapp import create_app

    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": "postgresql://u@127.0.0.1:1/none",
            "SQLALCHEMY_ENGINE_OPTIONS": {"pool_pre_ping": False},
            "SECRET_KEY": "x" * 32,
        }
    )
    assert app.config["SQLALCHEMY_ENGINE_OPTIONS"]["pool_pre_ping"] is False


@pytest.mark.postgres
def test_an_answer_holds_the_row_lock_even_after_its_lookups_transaction_ended(pg_app):
    # A POST's lookup takes the participant's row lock; lock() relies on it only while the
    # lookup's transaction lasts. After a commit it takes the lock again.
    from sqlalchemy.exc import OperationalError

    from webapp.services.participant_data import participant_data

    definition = load_demo(pg_app)
    _bot_on_first_choice(pg_app, definition)
    pid = _pid(pg_app)

    def locked_elsewhere() -> bool:
        with pg_app.app_context(), db.engine.connect() as other:
            try:
                other.execute(
                    text("SELECT id FROM participant WHERE id = :i FOR UPDATE NOWAIT"), {"i": pid}
                )
            except OperationalError:
                return True
            finally:
                other.rollback()
            return False

    with pg_app.test_request_context():
        data = participant_data()
        assert data.page(pid, definition.slug, lock=True) is not None
        assert locked_elsewhere()
        assert data.lock(pid) is not None and locked_elsewhere()
        db.session.commit()
        assert not locked_elsewhere()
        locked = data.lock(pid)
        assert locked is not None and locked.participant.id == pid and locked_elsewhere()
        data.release()
        assert not locked_elsewhere()


def _pid(app) -> int:
    with app.app_context():
        return db.session.scalars(select(Participant.id)).one()
