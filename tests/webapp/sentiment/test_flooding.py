"""Capacity flooding: people who enter and never label hold a couple of slots each (not a
whole batch), and the researcher sees how many slots such people hold."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from webapp.extensions import db
from webapp.models import Annotation, AnnotationState
from webapp.services import allocation, slot_report
from webapp.services.studies import get_study
from webapp.tasks.base import FIRST_LABEL_MINUTES

from .conftest import to_first_label


def _held(app) -> int:
    with app.app_context():
        return db.session.scalar(
            select(func.count())
            .select_from(Annotation)
            .where(Annotation.state == AnnotationState.reserved)
        )


def test_made_up_ids_that_never_label_cannot_make_the_study_full(app, small, bot_for):
    definition = small(n_items=8, k=1, batch=4)
    # Two made-up Prolific IDs enter and stop on the first label page: under the old
    # whole-batch reservation they held all 8 slots and everyone else saw "study full".
    for i in range(2):
        to_first_label(bot_for(definition, f"flood{i}", platform="prolific"))
    assert _held(app) == 2 * allocation.RESERVE_AHEAD
    honest = bot_for(definition, "honest", platform="prolific")
    result = honest.run()
    assert result.outcome == "completed" and len(honest.labels) == 4
    with app.app_context():
        from webapp.models import utcnow

        held = slot_report.idle_holds(get_study(definition.slug), utcnow())
        assert (held.slots, held.people) == (2 * allocation.RESERVE_AHEAD, 2)


def test_a_labeller_holds_only_a_couple_of_slots_ahead(app, small, bot_for):
    definition = small(n_items=10, k=1, batch=6)
    bot = to_first_label(bot_for(definition, "steady"))
    for n_labelled in range(1, 6):
        bot.step()
        with app.app_context():
            rows = db.session.scalars(select(Annotation)).all()
            open_ = [a for a in rows if a.state is AnnotationState.reserved]
            assert len(open_) <= allocation.RESERVE_AHEAD
            assert sum(a.state is AnnotationState.confirmed for a in rows) == n_labelled
    assert bot.run().outcome == "completed" and len(bot.labels) == 6


def test_the_dashboard_shows_slots_held_by_people_who_never_labelled(app, small, bot_for):
    from webapp.services.researchers import set_researcher

    from ..researcher.conftest import PASSWORD, login

    definition = small(n_items=8, k=1, batch=4)
    to_first_label(bot_for(definition, "idle1"))
    worker = to_first_label(bot_for(definition, "worker1"))
    worker.step()  # one label: no longer idle
    with app.app_context():
        set_researcher("admin", PASSWORD, is_admin=True)  # admins see command-line studies
    console = app.test_client()
    assert login(console, "admin").status_code == 302
    slug = definition.slug
    live = console.get(f"/researcher/studies/{slug}/live.json").get_json()
    assert live["idle_holds"] == {"slots": allocation.RESERVE_AHEAD, "people": 1}
    page = console.get(f"/researcher/studies/{slug}").get_data(as_text=True)
    assert f'data-idle-holds="{allocation.RESERVE_AHEAD}"' in page
    items = console.get(f"/researcher/studies/{slug}/items").get_data(as_text=True)
    assert f'data-idle-holds="{allocation.RESERVE_AHEAD}"' in items


def _later(monkeypatch, minutes: float) -> None:
    """Move the participant views' clock ``minutes`` ahead (time passes)."""
    from datetime import timedelta

    import webapp.participant.routes as routes
    from webapp.models import utcnow

    later = utcnow() + timedelta(minutes=minutes)
    monkeypatch.setattr(routes, "utcnow", lambda: later)


def test_slots_held_only_by_newcomers_never_make_the_study_full(app, small, bot_for, monkeypatch):
    definition = small(n_items=2, k=1, batch=2)
    to_first_label(bot_for(definition, "made-up", platform="prolific"))  # holds both slots
    newcomer = bot_for(definition, "newcomer", platform="prolific")
    assert newcomer.open().kind == "consent"  # before the defence: "study_full"
    page = to_first_label(newcomer).page
    # A page that waits for the slots (and looks again by itself), not the study-full ending.
    assert page.kind == "waiting" and page.status == 200 and not page.forms
    assert 'http-equiv="refresh"' in page.text
    with app.app_context():
        from webapp.models import Participant, ParticipantStatus

        assert {p.status for p in db.session.scalars(select(Participant))} == {
            ParticipantStatus.started
        }
    # The made-up ID never labels: after first_label_minutes its holds are gone.
    _later(monkeypatch, FIRST_LABEL_MINUTES + 0.5)
    assert newcomer.reload().kind == "sentiment"
    result = newcomer.run()
    assert result.outcome == "completed" and len(newcomer.labels) == 2
    assert bot_for(definition, "late").open().kind == "study_full"  # now it is full


def test_a_newcomers_holds_are_short_until_the_first_label(app, small, bot_for, monkeypatch):
    definition = small(n_items=4, k=1, batch=4, reservation_minutes=20)
    idle = to_first_label(bot_for(definition, "idle"))
    worker = to_first_label(bot_for(definition, "worker"))
    worker.step()  # one label: the worker's other reservation now runs for 20 minutes
    # Five minutes on, the idle newcomer's holds (3 minutes) are gone, the worker's are not.
    _later(monkeypatch, 5)
    taker = to_first_label(bot_for(definition, "taker"))
    assert taker.page.kind == "sentiment"
    with app.app_context():
        from .test_allocation import _annotations

        assert {a.state for a in _annotations("idle")} == {AnnotationState.expired}
        worker_rows = _annotations("worker")
        assert [a.state for a in worker_rows] == [AnnotationState.confirmed] + [
            AnnotationState.reserved
        ] * (len(worker_rows) - 1)
    assert idle.step().kind == "sentiment"  # a label on a slot given away is kept, not counted
    with app.app_context():
        assert _annotations("idle")[0].state is AnnotationState.surplus


def test_a_late_first_label_counts_when_nobody_needed_the_slot(app, small, bot_for, monkeypatch):
    definition = small(n_items=4, k=1, batch=2)
    slow = to_first_label(bot_for(definition, "slow"))
    _later(monkeypatch, 25)  # a slow reader: past even the block's 20 reservation minutes
    assert slow.run().outcome == "completed" and len(slow.labels) == 2
    with app.app_context():
        from .test_allocation import _annotations

        rows = _annotations("slow")
        assert [a.state for a in rows] == [AnnotationState.confirmed] * 2
        assert not any(a.surplus for a in rows)


def test_a_block_may_set_first_label_minutes_up_to_its_reservation(app, tmp_path, bot_for):
    from datetime import timedelta

    from webapp.models import utcnow
    from webapp.validation import StudyDefinitionError

    from .conftest import load, write_study

    path = write_study(tmp_path, n_items=4, k=1, batch=2, reservation_minutes=20)
    text = path.read_text()
    path.write_text(
        text.replace(
            "reservation_minutes: 20", "reservation_minutes: 20\n    first_label_minutes: 25"
        )
    )
    with pytest.raises(StudyDefinitionError, match="at most reservation_minutes"):
        load(app, path)
    path.write_text(
        text.replace(
            "reservation_minutes: 20", "reservation_minutes: 20\n    first_label_minutes: 8"
        )
    )
    definition = load(app, path)
    to_first_label(bot_for(definition, "reader"))
    with app.app_context():
        expiries = db.session.scalars(select(Annotation.expires_at)).all()
    soon = utcnow() + timedelta(minutes=8)
    assert expiries and all(soon - timedelta(minutes=1) < e <= soon for e in expiries)
