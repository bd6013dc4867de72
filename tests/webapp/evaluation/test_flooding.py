"""Capacity flooding on the evaluation tasks: people who enter a rating or preference block
and never answer hold a couple of slots each, not a whole batch (as for sentiment labels)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from webapp.extensions import db
from webapp.models import Annotation, AnnotationState
from webapp.services import allocation

from .conftest import load, write_preference_study


def _held(app) -> int:
    with app.app_context():
        return db.session.scalar(
            select(func.count())
            .select_from(Annotation)
            .where(Annotation.state == AnnotationState.reserved)
        )


def _to_first_item(bot):
    bot.open()
    while bot.page.kind in {"consent", "instructions"}:
        bot.step()
    return bot


def test_made_up_ids_that_never_answer_cannot_fill_a_preference_study(app, bot_for, tmp_path: Path):
    definition = load(app, write_preference_study(tmp_path, n_pairs=8, k=1, batch=4))
    # Two arrivals stop on the first pair: with whole-batch reservation they held all 8 slots
    # and the next person was turned away as "study full".
    for i in range(2):
        _to_first_item(bot_for(definition, f"flood{i}", platform="prolific"))
    assert _held(app) == 2 * allocation.RESERVE_AHEAD
    honest = bot_for(definition, "honest", platform="prolific")
    assert honest.run().outcome == "completed"
    with app.app_context():
        confirmed = db.session.scalar(
            select(func.count())
            .select_from(Annotation)
            .where(Annotation.state == AnnotationState.confirmed)
        )
    assert confirmed == 4


def test_a_rater_holds_only_a_couple_of_slots_ahead_and_finishes_the_batch(
    app, bot_for, tmp_path: Path
):
    definition = load(app, write_preference_study(tmp_path, n_pairs=10, k=1, batch=6))
    bot = _to_first_item(bot_for(definition, "steady"))
    for answered in range(1, 6):
        bot.step()
        with app.app_context():
            rows = db.session.scalars(select(Annotation)).all()
            assert sum(a.state is AnnotationState.reserved for a in rows) <= (
                allocation.RESERVE_AHEAD
            )
            assert sum(a.state is AnnotationState.confirmed for a in rows) == answered
    assert bot.run().outcome == "completed"
