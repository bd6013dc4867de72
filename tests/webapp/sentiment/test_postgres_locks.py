"""Row locks on PostgreSQL: reservations skip locked items, and wait rather than say "full"."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select, text

from webapp.extensions import db
from webapp.models import Annotation, AnnotationItem, Participant, PlatformIdentity

from .conftest import load, write_study


def _at_qualification(bot):
    bot.open()
    bot.step()  # consent
    assert bot.page.kind == "sentiment_qualification"
    return bot


def _items_of(app, external_id: str) -> list[str]:
    with app.app_context():
        return sorted(
            db.session.scalars(
                select(AnnotationItem.item_id)
                .join(Annotation, Annotation.item_pk == AnnotationItem.id)
                .join(Participant, Participant.id == Annotation.participant_id)
                .join(PlatformIdentity, PlatformIdentity.participant_id == Participant.id)
                .where(PlatformIdentity.external_id == external_id)
            )
        )


@pytest.mark.postgres
def test_reservation_skips_locked_items_then_waits_for_them(pg_app, tmp_path):
    import random

    from webapp.bots import Bot, BotBehaviour, FlaskTransport

    definition = load(pg_app, write_study(tmp_path, n_items=4, k=1, batch=2))

    def bot(name: str) -> Bot:
        behaviour = BotBehaviour(platform="link")
        return Bot(
            FlaskTransport(pg_app), definition, behaviour, rng=random.Random(1), external_id=name
        )

    first, second = _at_qualification(bot("first")), _at_qualification(bot("second"))
    with pg_app.app_context():
        holder = db.engine.connect()
    tx = holder.begin()  # another transaction holds i000 and i001
    holder.execute(
        text("SELECT id FROM annotation_item WHERE item_id IN ('i000', 'i001') FOR UPDATE")
    )
    try:
        # qualification → reservation: the locked items are skipped, no waiting (waiting
        # would never end: the lock is released only below)
        first.step()
        assert first.page.kind == "sentiment"
        assert _items_of(pg_app, "first") == ["i002", "i003"]

        # Only the locked items are left: the second reservation waits for them.
        done = threading.Event()
        thread = threading.Thread(target=lambda: (second.step(), done.set()))
        thread.start()
        assert not done.wait(1.5)
        assert _items_of(pg_app, "second") == []
    finally:
        tx.rollback()
        holder.close()
    thread.join(30)
    assert done.is_set() and second.page.kind == "sentiment"
    assert _items_of(pg_app, "second") == ["i000", "i001"]
