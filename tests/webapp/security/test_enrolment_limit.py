"""Made-up recruiter IDs: one client network enrols at most a few people per study and window
(counted in the shared database, before the participant is created, under a lock), no raw
address is stored, and people who enrol and never answer stop steering the sequence balance."""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.extensions import db
from webapp.models import EnrolmentAttempt, Participant, PlatformIdentity, utcnow

from ..conftest import load_demo

NETWORK = "203.0.113.9"


def _bot(app, definition, name: str, address: str) -> Bot:
    return Bot(
        FlaskTransport(app, remote_addr=address),
        definition,
        BotBehaviour(platform="prolific"),
        rng=random.Random(name),
        external_id=name,
    )


def _consent(bot: Bot):
    bot.open()
    return bot.step()  # the consent form: enrolment


def _participants(app) -> int:
    with app.app_context():
        return db.session.scalar(select(func.count()).select_from(Participant))


def _later(monkeypatch, minutes: float) -> None:
    import webapp.participant.routes as routes

    later = utcnow() + timedelta(minutes=minutes)
    monkeypatch.setattr(routes, "utcnow", lambda: later)


def test_one_network_enrols_at_most_the_limit_then_hears_when_to_come_back(app, monkeypatch):
    app.config.update(ENROLMENTS_PER_CLIENT=3, ENROLMENT_WINDOW_MINUTES=10)
    definition = load_demo(app)
    for i in range(3):
        assert _consent(_bot(app, definition, f"fake{i}", NETWORK)).kind == "instructions"
    page = _consent(_bot(app, definition, "fake3", NETWORK))
    assert page.status == 429 and page.error_code == "E429-BUSY"
    assert "again in 10 minutes" in page.text and "Traceback" not in page.text
    assert _participants(app) == 3
    # Another network is not affected, and those already enrolled resume as before.
    assert _consent(_bot(app, definition, "other", "198.51.100.4")).kind == "instructions"
    assert _bot(app, definition, "fake0", NETWORK).open().kind == "instructions"
    with app.app_context():  # only keyed hashes are kept, never the address
        hashes = set(db.session.scalars(select(EnrolmentAttempt.client_hash)))
    assert len(hashes) == 2 and not any("203.0.113" in h or "198.51" in h for h in hashes)
    # Once the window has passed the network may enrol again (and the old rows are dropped).
    _later(monkeypatch, 10.5)
    assert _consent(_bot(app, definition, "fake4", NETWORK)).kind == "instructions"
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(EnrolmentAttempt)) == 1


def test_an_ipv6_network_counts_as_one_client(app):
    app.config.update(ENROLMENTS_PER_CLIENT=2)
    definition = load_demo(app)
    for i, host in enumerate(("2001:db8:5:6::1", "2001:db8:5:6:abcd::2")):
        assert _consent(_bot(app, definition, f"v6{i}", host)).kind == "instructions"
    page = _consent(_bot(app, definition, "v62", "2001:db8:5:6:ffff:1:2:3"))
    assert page.error_code == "E429-BUSY"
    assert _consent(_bot(app, definition, "v63", "2001:db8:5:7::1")).kind == "instructions"


def _parallel(app) -> None:
    app.config.update(ENROLMENTS_PER_CLIENT=5)
    definition = load_demo(app)
    start = threading.Barrier(30)

    def one(i: int) -> str:
        bot = _bot(app, definition, f"burst{i}", NETWORK)
        bot.open()
        start.wait()
        page = bot.step()
        return page.error_code or page.kind

    with ThreadPoolExecutor(30) as pool:
        outcomes = Counter(pool.map(one, range(30)))
    assert outcomes == {"instructions": 5, "E429-BUSY": 25}
    assert _participants(app) == 5


def test_parallel_consents_from_one_network_enrol_exactly_the_limit(app):
    _parallel(app)


@pytest.mark.postgres
def test_parallel_consents_from_one_network_enrol_exactly_the_limit_on_postgres(pg_app):
    _parallel(pg_app)


def test_made_up_ids_that_never_answer_stop_steering_the_balance(app, monkeypatch):
    """A flood of made-up IDs enrols in the product-choice study; the ones that landed in
    sequence A reload their page now and then (a reload keeps a participant "active"), the
    others are left. Later arrivals must still be spread over both sequences."""
    definition = load_demo(app)
    fakes = [_bot(app, definition, f"fake{i:02d}", f"10.0.{i}.1") for i in range(20)]
    for bot in fakes:
        assert _consent(bot).kind == "instructions"
    with app.app_context():
        sequence = dict(
            db.session.execute(
                select(PlatformIdentity.external_id, Participant.sequence).join(
                    Participant, Participant.id == PlatformIdentity.participant_id
                )
            ).all()
        )
    assert Counter(sequence.values()) == {"A": 10, "B": 10}
    _later(monkeypatch, 50)  # the A ones reload their page
    for bot in fakes:
        if sequence[bot.external_id] == "A":
            assert bot.reload().kind == "instructions"
    _later(monkeypatch, 61)  # real people arrive
    for i in range(8):
        assert _consent(_bot(app, definition, f"real{i}", f"198.51.100.{i + 1}")).kind == (
            "instructions"
        )
    with app.app_context():
        real = Counter(
            db.session.scalars(
                select(Participant.sequence)
                .join(PlatformIdentity, PlatformIdentity.participant_id == Participant.id)
                .where(PlatformIdentity.external_id.not_in(list(sequence)))
            )
        )
    # Before: the reloading A's still counted and the B's did not, so all 8 went to B.
    assert real == {"A": 4, "B": 4}
