"""Reserve → confirm / expire on SQLite, through the real pages (in-process bots)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from webapp.extensions import db
from webapp.models import (
    Annotation,
    AnnotationState,
    Participant,
    ParticipantStatus,
    PlatformIdentity,
    utcnow,
)
from webapp.services import allocation, slot_report
from webapp.services.studies import get_study
from webapp.tasks.base import FIRST_LABEL_MINUTES

from .conftest import to_first_label


def _participant(external_id: str) -> Participant:
    return db.session.scalars(
        select(Participant)
        .join(PlatformIdentity)
        .where(PlatformIdentity.external_id == external_id)
    ).one()


def _annotations(external_id: str) -> list[Annotation]:
    p = _participant(external_id)
    return list(
        db.session.scalars(
            select(Annotation)
            .where(Annotation.participant_id == p.id)
            .order_by(Annotation.trial_index)
        )
    )


def _status(app, slug: str) -> dict[str, tuple[int, int, int]]:
    with app.app_context():
        rows = slot_report.item_status(get_study(slug), utcnow())
        return {r.item.item_id: (r.n_labels, r.n_reserved, r.needed) for r in rows}


def test_reaching_the_task_reserves_a_first_part_then_the_rest_as_labels_come_in(
    app, clock, demo, bot_for
):
    # The app's clock stands still: the expiries compared below are exact, however long the
    # requests took.
    bot = to_first_label(bot_for(demo, "alice"))
    assert bot.page.kind == "sentiment" and "Statement 1 of 11" in bot.page.text
    with app.app_context():
        rows = _annotations("alice")
        assert [a.trial_index for a in rows] == list(range(len(rows)))
        assert all(a.state is AnnotationState.reserved for a in rows)
        real = [a for a in rows if not a.item.is_gold]
        assert len(real) == allocation.RESERVE_AHEAD  # not the whole batch of 10
        # Tentative until the first label: the block's first_label_minutes (3), not 20.
        soon = utcnow() + timedelta(minutes=FIRST_LABEL_MINUTES)
        assert all(soon - timedelta(minutes=1) < a.expires_at <= soon for a in real)
        assert all(a.trial_index > 0 and a.expires_at is None for a in rows if a.item.is_gold)
    # A reload reserves nothing more.
    n_first = len(rows)
    bot.reload()
    with app.app_context():
        assert len(_annotations("alice")) == n_first
    bot.step()  # the first label: what alice still holds now runs for reservation_minutes
    with app.app_context():
        held = [
            a
            for a in _annotations("alice")
            if a.state is AnnotationState.reserved and not a.item.is_gold  # gold: no expiry
        ]
        assert held and all(a.expires_at > utcnow() + timedelta(minutes=19) for a in held)
    result = bot.run()  # the bot goes on from the page it is on
    assert result.outcome == "completed" and len(bot.labels) == 11
    with app.app_context():
        rows = _annotations("alice")
        assert [a.trial_index for a in rows] == list(range(11))
        gold = [a for a in rows if a.item.is_gold]
        assert len(gold) == 1 and gold[0].trial_index > 0
        assert len({a.item_pk for a in rows if not a.item.is_gold}) == 10
        assert all(a.state is AnnotationState.confirmed and not a.surplus for a in rows)
        assert sorted((a.item.item_id, a.label) for a in rows) == sorted(bot.labels)
    status = _status(app, "sentiment-demo")
    assert sum(n for n, _, _ in status.values()) == 10
    assert sum(r for _, r, _ in status.values()) == 0


def test_each_item_gets_exactly_k_distinct_annotators_then_the_study_is_full(app, small, bot_for):
    definition = small(n_items=4, k=2, batch=2)
    outcomes = [bot_for(definition, f"p{i}").run() for i in range(5)]
    assert [r.outcome for r in outcomes] == ["completed"] * 4 + ["study_full"]
    assert outcomes[-1].completion_code == "FULL1"
    assert _status(app, "sent-small") == {f"i{i:03d}": (2, 0, 0) for i in range(4)}
    with app.app_context():
        pairs = db.session.execute(select(Annotation.item_pk, Annotation.participant_id)).all()
        assert len(pairs) == len(set(pairs)) == 8
        # The turned-away participant was never created: the entry page already said full.
        assert db.session.scalar(select(func.count()).select_from(Participant)) == 4
    # A newcomer sees the study-full page with its own code at once.
    page = bot_for(definition, "late").open()
    assert page.kind == "study_full" and 'data-completion-code="FULL1"' in page.text


def test_expired_reservation_returns_to_the_pool_and_its_late_label_is_surplus(app, small, bot_for):
    definition = small(n_items=2, k=1, batch=2)
    slow = to_first_label(bot_for(definition, "slow"))
    with app.app_context():  # time passes: slow's reservations expire
        db.session.execute(update(Annotation).values(expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()
    fast = bot_for(definition, "fast").run()
    assert fast.outcome == "completed" and len(fast.labels) == 2
    late = slow.run()  # answers anyway: kept, flagged, not counted
    assert late.outcome == "completed" and len(late.labels) == 2
    with app.app_context():
        slow_rows = _annotations("slow")
        assert all(a.state is AnnotationState.surplus and a.surplus for a in slow_rows)
        assert all(a.label is not None for a in slow_rows)
        fast_rows = _annotations("fast")
        assert all(a.state is AnnotationState.confirmed for a in fast_rows)
    assert _status(app, "sent-small") == {"i000": (1, 0, 0), "i001": (1, 0, 0)}


def test_returned_participant_frees_the_slots(app, small, bot_for):
    definition = small(n_items=2, k=1, batch=2)
    # One label makes the leaver's other reservation firm (a newcomer's alone is tentative and
    # would not make the study full): with it the study is full until the leaver returns.
    to_first_label(bot_for(definition, "leaver")).step()
    assert bot_for(definition, "blocked").open().kind == "study_full"
    with app.app_context():
        allocation.end_participant(_participant("leaver"), ParticipantStatus.returned, utcnow())
        db.session.commit()
        states = [a.state for a in _annotations("leaver")]
        assert states == [AnnotationState.confirmed, AnnotationState.expired]
    assert bot_for(definition, "taker").run().outcome == "completed"
    assert _status(app, "sent-small") == {"i000": (1, 0, 0), "i001": (1, 0, 0)}


def test_partial_batch_ends_the_block_early(app, small, bot_for):
    definition = small(n_items=3, k=1, batch=2)
    assert bot_for(definition, "a").run().outcome == "completed"
    b = bot_for(definition, "b")
    result = b.run()
    assert result.outcome == "completed" and len(b.labels) == 1
    assert "sentiment" in b.history and b.history[-2] == "debrief"


def test_nobody_labels_an_item_twice(app, small, bot_for):
    definition = small(n_items=2, k=2, batch=2)
    to_first_label(bot_for(definition, "dup"))
    with app.app_context():
        first = _annotations("dup")[0]
        db.session.add(
            Annotation(
                item_pk=first.item_pk,
                participant_id=first.participant_id,
                trial_index=9,
                state=AnnotationState.reserved,
            )
        )
        with pytest.raises(IntegrityError):
            db.session.commit()


def test_qualification_fail_screens_out_and_is_remembered_across_studies(
    app, small, bot_for, tmp_path
):
    first = small(slug="sent-one", qualification="shared-pool")
    failed = bot_for(first, "w1", fail_quiz=True).run()
    assert failed.outcome == "screened_out" and failed.completion_code == "SCR1"
    passed_bot = bot_for(first, "w2")
    assert passed_bot.run().outcome == "completed"
    second = small(slug="sent-two", qualification="shared-pool")
    # w2 passed in sent-one: the qualification page is skipped in sent-two.
    again = bot_for(second, "w2")
    assert again.run().outcome == "completed"
    assert "sentiment_qualification" not in again.history
    # w1 failed before: screened out without a second try.
    retry = bot_for(second, "w1")
    assert retry.run().outcome == "screened_out"
    assert "sentiment_qualification" not in retry.history
    with app.app_context():
        p = _participant_in("w1", "sent-two")
        assert p.end_reason == "qualification_failed"
        assert (
            db.session.scalar(
                select(func.count())
                .select_from(Annotation)
                .where(Annotation.participant_id == p.id)
            )
            == 0
        )


def _participant_in(external_id: str, slug: str) -> Participant:
    study = get_study(slug)
    return db.session.scalars(
        select(Participant)
        .join(PlatformIdentity)
        .where(PlatformIdentity.external_id == external_id, Participant.study_id == study.id)
    ).one()


def test_a_qualification_error_needs_every_statement_right(app, small, bot_for):
    definition = small(n_qual=4)
    bot = bot_for(definition, "near")
    bot.open()
    bot.step()  # consent
    assert bot.page.kind == "sentiment_qualification"
    data = bot.answer()
    data["q_q0"] = "positive"  # q0 is negative: 3 of 4 right
    page = bot.post(data)
    assert page.kind == "screened_out"


def test_previews_do_not_use_up_slots(app, small, bot_for):
    definition = small(n_items=2, k=1, batch=2)
    bot = bot_for(definition, "preview")
    bot.open()
    bot.step()  # consent: the participant exists now
    with app.app_context():  # as if a logged-in researcher had started it (a preview)
        db.session.execute(update(Participant).values(is_preview=True, is_test=True))
        db.session.commit()
    assert bot.run().outcome == "completed" and len(bot.labels) == 2
    assert _status(app, "sent-small") == {"i000": (0, 0, 1), "i001": (0, 0, 1)}
    assert bot_for(definition, "real").run().outcome == "completed"
    assert _status(app, "sent-small") == {"i000": (1, 0, 0), "i001": (1, 0, 0)}


def test_pilot_bots_label_as_usual_but_never_take_a_real_participants_slot(app, small):
    from webapp.bots import Bot, BotBehaviour, FlaskTransport

    definition = small(n_items=2, k=1, batch=2)

    def pilot(name: str) -> Bot:
        behaviour = BotBehaviour(platform="link")
        secret = app.config["SECRET_KEY"]
        return Bot(FlaskTransport(app), definition, behaviour, external_id=name, test_secret=secret)

    # Each pilot bot gets the whole batch, as the first real participant would: they hold and
    # fill no slot, so the study is never full for real people because of a pilot.
    for name in ("pilot1", "pilot2"):
        result = pilot(name).run()
        assert result.outcome == "completed" and len(result.labels) == 2
    assert _status(app, "sent-small") == {"i000": (0, 0, 1), "i001": (0, 0, 1)}
    pending = to_first_label(pilot("pilot3"))  # holds its reservations right now
    assert pending.page.kind == "sentiment"
    real = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="r1")
    assert real.run().outcome == "completed" and len(real.labels) == 2
    assert _status(app, "sent-small") == {"i000": (1, 0, 0), "i001": (1, 0, 0)}
