"""An answer is saved exactly once, whole, or not at all.

Each answer is one transaction under the participant's row lock (``FOR UPDATE`` on PostgreSQL;
SQLite transactions hold the database's write lock). These tests put another answer in each
place it can be relative to this one — holding the row while this one waits, then committed or
rolled back; an answer row already there; many copies at once — and check that
what is saved is exactly one answer, with the visit's stamp and the participant's position
consistent with it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select, text

from webapp.bots import Bot, BotBehaviour, FlaskTransport, HttpTransport
from webapp.extensions import db
from webapp.models import ChoiceResponse, PageVisit, Participant

from .conftest import load_demo, make_app, pg_schema

ANSWERED = "That page was already answered"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_app(request, tmp_path):
    """An app on SQLite, then on PostgreSQL (each with its schema built by the migrations)."""
    from webapp.extensions import dispose_engines

    if request.param == "sqlite":
        app = make_app(f"sqlite:///{tmp_path / 'test.sqlite'}")
        yield app
    else:
        with pg_schema(request.getfixturevalue("pg_url")) as url:
            app = make_app(url)
            yield app
            with app.app_context():
                dispose_engines()
            return
    with app.app_context():
        dispose_engines()


def _bot_on(app, definition, kind: str, transport=None) -> Bot:
    bot = Bot(transport or FlaskTransport(app), definition, BotBehaviour(platform="link"))
    bot.open()
    while bot.page.kind != kind:
        bot.step()
    return bot


def _state(app) -> dict:
    """The participant's page counter, their choices and the stamped visits."""
    with app.app_context():
        p = db.session.scalars(select(Participant)).one()
        choices = db.session.scalars(select(ChoiceResponse).order_by(ChoiceResponse.id)).all()
        stamped = db.session.scalar(
            select(func.count()).select_from(PageVisit).where(PageVisit.submitted_at.is_not(None))
        )
        return {
            "page_seq": p.page_seq,
            "choices": [(c.trial_index, c.chosen_side, c.wtp_premium_usd) for c in choices],
            "stamped": stamped,
        }


def _post(bot: Bot, data: dict) -> str:
    """POST the bot's page with ``data``; return the text of the page it is sent to."""
    status, location, _ = bot.transport.request("POST", bot.page.forms[0].action, data)
    assert status == 302, status
    return bot.transport.request("GET", location, None)[2]


def _pid(app) -> int:
    with app.app_context():
        return db.session.scalars(select(Participant.id)).one()


@pytest.mark.postgres
def test_eight_copies_of_a_wtp_answer_with_different_values_save_one(pg_app, serve_app):
    # Eight different WTP answers to the same page at once (a participant's double clicks
    # with an edit in between): one is saved whole, the participant moves one page.
    definition = load_demo(pg_app)
    transport = HttpTransport(serve_app(pg_app))
    bot = _bot_on(pg_app, definition, "wtp", transport)
    before = _state(pg_app)
    action = bot.page.forms[0].action
    base = bot.answer()
    copies = [{**base, "premium": f"{i}.25"} for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda d: transport.request("POST", action, d)[0], copies))
    transport.close()
    assert set(statuses) == {302}, statuses
    after = _state(pg_app)
    assert after["page_seq"] == before["page_seq"] + 1
    assert after["stamped"] == before["stamped"] + 1
    (trial, side, premium), *_ = after["choices"]
    assert premium in {i + 0.25 for i in range(8)}
    assert len(after["choices"]) == 1


@pytest.mark.postgres
def test_eight_copies_of_a_text_page_move_the_participant_once(pg_app, serve_app):
    # The instructions page writes no row: the move itself is the answer.
    definition = load_demo(pg_app)
    transport = HttpTransport(serve_app(pg_app))
    bot = _bot_on(pg_app, definition, "instructions", transport)
    before = _state(pg_app)
    action, data = bot.page.forms[0].action, bot.answer()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: transport.request("POST", action, data), range(8)))
    transport.close()
    after = _state(pg_app)
    assert after["page_seq"] == before["page_seq"] + 1
    assert after["stamped"] == before["stamped"] + 1


def _blocked_post(app, bot: Bot, data: dict, holder, holder_pid: int) -> tuple[dict, str]:
    """POST while the connection ``holder_pid`` holds the participant's row; the POST must wait
    for it (until ``holder`` commits or rolls back)."""
    result: dict = {}

    def send() -> None:
        result["page"] = _post(bot, data)

    thread = threading.Thread(target=send)
    thread.start()
    # Until the POST waits for the row; if it ends without waiting, it never took the lock.
    with app.app_context(), db.engine.connect() as watcher:
        while thread.is_alive():
            # Only a session blocked by this test's holder counts (tests in other processes
            # share the database).
            waiting = watcher.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE :holder = ANY("
                    "pg_blocking_pids(pid)) AND query LIKE '%FOR UPDATE OF participant%'"
                ),
                {"holder": holder_pid},
            ).scalar()
            watcher.rollback()
            if waiting:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the answer never waited for the participant's row")
    holder()
    thread.join()
    return _state(app), result["page"]


@pytest.mark.postgres
@pytest.mark.parametrize("rival", ["commit", "rollback"])
def test_an_answer_waits_for_another_holding_the_participant(pg_app, rival):
    # The other answer holds the participant's row (moved, not yet committed) when this POST's
    # lookup takes the lock: it waits. If the other commits, this one reads the moved position
    # and writes nothing; if the other rolls back, this answer is saved once, whole.
    bot = _bot_on(pg_app, load_demo(pg_app), "choice")
    before = _state(pg_app)
    pid, data = _pid(pg_app), bot.answer()
    with pg_app.app_context(), db.engine.connect() as conn:
        conn.execute(
            text("UPDATE participant SET page_seq = page_seq + 1 WHERE id = :i"), {"i": pid}
        )
        holder_pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        after, page = _blocked_post(pg_app, bot, data, getattr(conn, rival), holder_pid)
    assert after["page_seq"] == before["page_seq"] + 1
    if rival == "commit":
        assert ANSWERED in page
        assert after["choices"] == [] and after["stamped"] == before["stamped"]
    else:
        assert ANSWERED not in page and 'data-page="wtp"' in page
        assert after["stamped"] == before["stamped"] + 1
        assert [(t, s) for t, s, _ in after["choices"]] == [(0, data["side"])]


def test_a_duplicate_row_refuses_the_whole_answer(any_app):
    # The last line of defence: an answer row already there (by any road) makes the unique
    # constraint refuse the answer, and nothing of it stays: no move, no stamp.
    from webapp.tasks.product_choice import _CHOICE_COLUMNS

    bot = _bot_on(any_app, load_demo(any_app), "choice")
    before = _state(any_app)
    pid, data = _pid(any_app), bot.answer()
    row = {c: None for c in _CHOICE_COLUMNS} | {
        "participant_id": pid,
        "block_id": "choices",  # the demo's block: answers are keyed by block and trial
        "trial_index": 0,
        "pair_id": "x",
        "format": "original",
        "target_side": "left",
        "chosen_side": "left",
        "chose_target": True,
        "other_price_usd": 1.0,
        "answered_at": datetime(2026, 1, 1, tzinfo=UTC),
    }
    with any_app.app_context():
        db.session.execute(ChoiceResponse.__table__.insert(), row)
        db.session.commit()
    page = _post(bot, data)
    assert ANSWERED in page
    after = _state(any_app)
    assert after["page_seq"] == before["page_seq"] and after["stamped"] == before["stamped"]
    assert [(t, s) for t, s, _ in after["choices"]] == [(0, "left")]  # the one put there


def test_the_quiz_and_attention_check_set_the_participant_with_their_answer(any_app):
    # The question pages' participant columns (quiz_attempts, quiz_passed, attention_passed)
    # are written with the move (PageContext.set_participant): a retry, a pass, a screen-out
    # and a failed attention check are stored as such.
    from webapp.models import ParticipantStatus, QuizAttempt, TaskResponse

    definition = load_demo(any_app)
    bot = _bot_on(any_app, definition, "quiz")
    bot.behaviour = BotBehaviour(platform="link", fail_quiz=True)
    page = bot.step()
    assert page.kind == "quiz" and "Attempt 2 of 2" in page.text
    bot.behaviour = BotBehaviour(platform="link")
    assert bot.step().kind == "choice"
    while bot.page.kind != "attention_check":
        bot.step()
    data = bot.answer()
    with any_app.app_context():
        attention = next(b for b in definition.tasks if b.type == "attention_check")
        question = attention.params["questions"][0]
        other = next(o for o in question["options"] if o != question["correct"])
    data[f"q_{question['id']}"] = other
    assert _post(bot, data)
    failed = Bot(FlaskTransport(any_app), definition, BotBehaviour(platform="link", fail_quiz=True))
    assert failed.run().outcome == "screened_out"
    with any_app.app_context():
        first, second = db.session.scalars(select(Participant).order_by(Participant.id)).all()
        assert (first.quiz_attempts, first.quiz_passed, first.attention_passed) == (2, True, False)
        assert second.status is ParticipantStatus.screened_out
        assert (second.quiz_attempts, second.quiz_passed) == (2, False)
        attempts = db.session.scalars(select(QuizAttempt).order_by(QuizAttempt.id)).all()
        assert [(a.participant_id, a.attempt, a.passed) for a in attempts] == [
            (first.id, 1, False),
            (first.id, 2, True),
            (second.id, 1, False),
            (second.id, 2, False),
        ]
        response = db.session.scalars(
            select(TaskResponse).where(TaskResponse.task_type == "attention_check")
        ).one()
        assert response.payload["passed"] is False and response.participant_id == first.id
