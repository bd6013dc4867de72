"""Bots over HTTP with concurrency, on SQLite and PostgreSQL; migrations on both databases."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import func, select

from webapp.bots import Bot, BotBehaviour, HttpTransport, run_bots
from webapp.extensions import db
from webapp.models import ChoiceResponse, Participant, ParticipantStatus

from .conftest import load_demo


def _schema_matches_models(app) -> list:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with app.app_context(), db.engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn), db.metadata)


def _sequences(app) -> Counter:
    with app.app_context():
        return Counter(db.session.scalars(select(Participant.sequence)))


def _check_race(app, url: str, definition) -> None:
    """Eight copies of one POST at once save exactly one choice."""
    transport = HttpTransport(url)
    bot = Bot(transport, definition, BotBehaviour(platform="link"), external_id="racer")
    bot.open()
    for _ in range(3):
        bot.step()
    assert bot.page.kind == "choice"
    data = bot.answer()
    action = bot.page.forms[0].action
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: transport.request("POST", action, data)[0], range(8)))
    transport.close()
    assert set(statuses) == {303} or set(statuses) == {302}
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(ChoiceResponse)) == 1
        assert (
            db.session.scalars(select(Participant)).one().page_seq == 3
        )  # instructions, quiz, this choice


def _post_copies(url: str, cookies, action: str, data, n: int) -> list[tuple[int, str | None]]:
    """``n`` copies of one POST sent at once, each on its own connection: (status, location)."""

    def send(_: int) -> tuple[int, str | None]:
        with httpx.Client(base_url=url, cookies=cookies, follow_redirects=False) as client:
            resp = client.post(action, data=data)
            return resp.status_code, resp.headers.get("location")

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(send, range(n)))


def _check_double_start(app, url: str, definition) -> None:
    """Eight copies of one consent POST at once enrol one participant, all sent to its page.

    The enrolment no longer re-reads the platform ID under the study lock: the unique
    identity refuses the copies, which then resume the participant the first one created.
    """
    transport = HttpTransport(url)
    bot = Bot(transport, definition, BotBehaviour(platform="prolific"), external_id="clicker")
    bot.open()
    assert bot.page.kind == "consent"
    data = bot.answer()
    action = bot.page.forms[0].action
    # Every copy carries the cookie the consent page set: copies that race inside the server.
    # A copy sent with the cookie an earlier reply emptied is the other half of a double click
    # (test_participant_ux.py, test_a_double_clicked_consent_sent_with_the_first_replys_cookie…).
    cookies = dict(transport.client.cookies)
    transport.close()

    replies = _post_copies(url, cookies, action, data, 8)
    assert {status for status, _ in replies} == {302}, [r[0] for r in replies]
    assert len({location for _, location in replies}) == 1  # the same session for all
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Participant)) == 1


def _check_lost_enrolment(app, url: str, definition, monkeypatch) -> None:
    """Two consent copies both find no participant before either enrols: one insert wins, the
    unique identity refuses the other, which resumes the winner. Deterministic: both copies
    wait for each other after their lookup, so the losing path runs every time.

    PostgreSQL only: on SQLite every transaction is ``BEGIN IMMEDIATE``, so the second copy's
    lookup waits for the first copy's commit and finds its participant (the eight-copy test).
    """
    import threading

    from webapp.services import entry as entry_service

    real = entry_service.find_participant
    both_looked = threading.Barrier(2, timeout=20)
    found: list[bool] = []
    lock = threading.Lock()

    def lookup(study, entry):
        participant = real(study, entry)
        with lock:
            found.append(participant is not None)
            first_two = len(found) <= 2
        if first_two:
            both_looked.wait()
        return participant

    transport = HttpTransport(url)
    bot = Bot(transport, definition, BotBehaviour(platform="prolific"), external_id="loser")
    bot.open()
    data, action = bot.answer(), bot.page.forms[0].action
    cookies = dict(transport.client.cookies)
    transport.close()
    monkeypatch.setattr(entry_service, "find_participant", lookup)  # for the two copies only

    replies = _post_copies(url, cookies, action, data, 2)
    assert [status for status, _ in replies] == [302, 302]
    assert replies[0][1] == replies[1][1]  # both sent to the one participant's page
    # Two lookups that found nobody, then the loser's lookup after its refused insert.
    assert found == [False, False, True]
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Participant)) == 1


@pytest.mark.postgres
def test_a_consent_copy_that_loses_the_enrolment_resumes_the_winner_on_postgres(
    pg_app, serve_app, monkeypatch
):
    _check_lost_enrolment(pg_app, serve_app(pg_app), load_demo(pg_app), monkeypatch)


def test_migrations_match_models_on_sqlite(app):
    assert _schema_matches_models(app) == []


@pytest.mark.demo_pairs(2)
def test_bots_over_http_with_concurrency_on_sqlite(app, study, serve_app):
    url = serve_app(app)
    summary = run_bots(None, study, n=8, url=url, concurrency=4, seed=3, fail_quiz_share=0.25)
    assert summary.errors == []
    assert summary.counts == {"completed": 6, "screened_out": 2}
    with app.app_context():
        statuses = Counter(p.status for p in db.session.scalars(select(Participant)))
        n_choices = db.session.scalar(select(func.count()).select_from(ChoiceResponse))
    assert statuses == {ParticipantStatus.completed: 6, ParticipantStatus.screened_out: 2}
    assert n_choices == 6 * 2


def test_concurrent_double_post_saves_once_on_sqlite(app, study, serve_app):
    _check_race(app, serve_app(app), study)


def test_concurrent_double_consent_enrols_once_on_sqlite(app, study, serve_app):
    _check_double_start(app, serve_app(app), study)


@pytest.mark.postgres
def test_concurrent_double_consent_enrols_once_on_postgres(pg_app, serve_app):
    definition = load_demo(pg_app)
    _check_double_start(pg_app, serve_app(pg_app), definition)


@pytest.mark.postgres
def test_migrations_match_models_on_postgres(pg_app):
    assert _schema_matches_models(pg_app) == []


@pytest.mark.postgres
def test_bots_on_postgres_in_process(pg_app):
    definition = load_demo(pg_app)
    summary = run_bots(pg_app, definition, n=6, concurrency=3, seed=5, abandon_share=1 / 6)
    assert summary.errors == []
    assert summary.counts == {"completed": 5, "abandoned": 1}
    with pg_app.app_context():
        from webapp.services.studies import get_study
        from webapp.tasks.product_choice.export import choice_rows

        rows = choice_rows(get_study("product-choice-demo"))
    completed = [r for r in rows if r["status"] == "completed"]
    assert len(completed) == 50 and all(r["wtp_premium"] is not None for r in completed)
    # Everyone still counts (the abandoned bot is recently active): 3 and 3.
    assert _sequences(pg_app) == {"A": 3, "B": 3}


@pytest.mark.postgres
def test_concurrent_arrivals_stay_balanced_on_postgres(pg_app, serve_app):
    definition = load_demo(pg_app)
    url = serve_app(pg_app)
    summary = run_bots(None, definition, n=10, url=url, concurrency=5, seed=9)
    assert summary.errors == [] and summary.counts == {"completed": 10}
    assert _sequences(pg_app) == {"A": 5, "B": 5}


@pytest.mark.postgres
def test_concurrent_double_post_saves_once_on_postgres(pg_app, serve_app):
    definition = load_demo(pg_app)
    _check_race(pg_app, serve_app(pg_app), definition)
