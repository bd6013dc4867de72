"""Capacity flooding: people who enter and never label hold a couple of slots each (not a
whole batch), and the researcher sees how many slots such people hold."""

from __future__ import annotations

from sqlalchemy import func, select

from webapp.extensions import db
from webapp.models import Annotation, AnnotationState
from webapp.services import allocation
from webapp.services.studies import get_study

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

        held = allocation.idle_holds(get_study(definition["slug"]), utcnow())
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
    slug = definition["slug"]
    live = console.get(f"/researcher/studies/{slug}/live.json").get_json()
    assert live["idle_holds"] == {"slots": allocation.RESERVE_AHEAD, "people": 1}
    page = console.get(f"/researcher/studies/{slug}").get_data(as_text=True)
    assert f'data-idle-holds="{allocation.RESERVE_AHEAD}"' in page
    items = console.get(f"/researcher/studies/{slug}/items").get_data(as_text=True)
    assert f'data-idle-holds="{allocation.RESERVE_AHEAD}"' in items
