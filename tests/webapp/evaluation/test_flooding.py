"""Capacity flooding on the evaluation tasks: people who enter a rating or preference block
and never answer hold a couple of slots each, not a whole batch (as for sentiment labels)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from webapp.extensions import db
from webapp.models import Annotation, AnnotationState
from webapp.services import allocation
from webapp.tasks.base import FIRST_LABEL_MINUTES

from .conftest import RATING_DEMO, load, write_preference_study


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


def _later(monkeypatch, minutes: float) -> None:
    from datetime import timedelta

    import webapp.participant.routes as routes
    from webapp.models import utcnow

    later = utcnow() + timedelta(minutes=minutes)
    monkeypatch.setattr(routes, "utcnow", lambda: later)


@pytest.mark.parametrize("task", ["pairwise_preference", "summary_rating"])
def test_slots_held_only_by_newcomers_make_a_newcomer_wait_not_leave(
    app, bot_for, tmp_path: Path, monkeypatch, task
):
    if task == "pairwise_preference":
        definition = load(app, write_preference_study(tmp_path, n_pairs=2, k=1, batch=2))
    else:
        definition = load(app, _small_rating_study(tmp_path))
    _to_first_item(bot_for(definition, "made-up", platform="prolific"))  # holds the free slots
    newcomer = bot_for(definition, "newcomer", platform="prolific")
    assert newcomer.open().kind == "consent"  # before the defence: "study_full"
    page = _to_first_item(newcomer).page
    assert page.kind == "waiting" and page.status == 200 and not page.forms
    # A stray POST to the waiting page is refused like any tokenless answer, never a 500.
    status, _, _ = newcomer.transport.request("POST", page.url, {"choice": "first"})
    assert status == 400
    _later(monkeypatch, FIRST_LABEL_MINUTES + 0.5)
    assert newcomer.reload().kind == task
    assert newcomer.run().outcome == "completed"


def _small_rating_study(tmp_path: Path) -> Path:
    """The rating demo cut to two sources with one rater each (two slots in all)."""
    (tmp_path / "evaluation").mkdir(parents=True, exist_ok=True)
    lines = (RATING_DEMO.parent / "evaluation" / "rating-demo.jsonl").read_text().splitlines()
    (tmp_path / "evaluation" / "rating-demo.jsonl").write_text("\n".join(lines[:2]) + "\n")
    text = RATING_DEMO.read_text().replace("raters_per_item: 3", "raters_per_item: 1")
    path = tmp_path / "rating-small.yaml"
    path.write_text(text)
    return path
