"""Exact allocation of annotation slots: reserve → confirm, or expire back to the pool.

Each item of a ``sentiment_annotation`` block needs ``annotators_per_item`` labels from
different people. A slot is *taken* when it has a confirmed label or a live reservation (not
expired, held by a participant who is still ``started``). All changes to an item's slots
happen while holding that item's row lock, so a count read after taking the lock is exact:

- :func:`reserve_batch` locks candidate items with ``SELECT … FOR UPDATE SKIP LOCKED`` on
  PostgreSQL (concurrent arrivals take different items instead of queueing), then — under
  the locks, in a fresh statement — frees dead reservations and recounts before reserving.
  SQLite has no row locks; there every transaction is ``BEGIN IMMEDIATE`` (see
  ``webapp/__init__.py``), which serialises the same steps.
- :func:`record_label` locks the item, then confirms the reservation if it still holds its
  slot (its row is still ``reserved``); a label whose reservation another recount expired
  is stored as ``surplus`` (kept, never counted). ``(item, participant)`` is unique, so
  nobody labels an item twice.

Reservations end by time or as soon as their participant is no longer ``started`` (returned,
timed out, screened out): no sweeper is needed, the next reservation of that item frees them.
A newcomer's reservations are *tentative*: until the participant's first label they last only
``first_label_minutes`` (a few minutes; :func:`webapp.tasks.base.first_label_minutes`), and the
first label extends the ones still live to ``reservation_minutes``, as every later reservation
lasts. Made-up recruiter IDs that enter and never label therefore hold their slots for minutes,
and a study whose free slots are held only tentatively is never "full" (:func:`study_is_full`,
:func:`held_by_newcomers`): newcomers wait for those slots instead of being turned away.

A label whose reservation expired by time is still counted when nobody has taken the slot
since (its row is still ``reserved``): expiry makes a slot available to the next reservation,
it does not throw away the holder's work unless the slot was given to someone else.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import aliased

from webapp.definition import TaskBlock
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import (
    Annotation,
    AnnotationItem,
    AnnotationState,
    Participant,
    ParticipantStatus,
    Study,
)
from webapp.tasks.base import SlotRules, first_label_minutes

# Every task type whose ``limits_slots`` is set hands out slots with this module: it syncs its
# items (TaskType.sync_slots) and shares the rest: reserve_batch, record_label, study_is_full.
# What the console and exports report of the slots is in webapp.services.slot_report.
# Candidates locked beyond the batch size: a few may turn out to be full when recounted.
_MARGIN = 4
# Items a sentiment participant holds ahead of their labels: the first part of a batch, and
# each later part once those are labelled. A visitor who never labels holds this many slots
# (not a whole batch), so a few dozen made-up IDs cannot make a study look full.
RESERVE_AHEAD = 2


def annotation_blocks(study: Study) -> list[TaskBlock]:
    """The study's blocks whose items people label (``TaskType.labels_items``), in order."""
    from webapp.tasks.registry import get_task_type

    return [b for b in study_definition(study).tasks if get_task_type(b.type).labels_items]


def slot_rules(block: TaskBlock) -> SlotRules:
    """How a slot-limited block hands out its items, as its task type reads it."""
    from webapp.tasks.registry import get_task_type

    return get_task_type(block.type).slot_rules(block)


def slot_blocks(study: Study) -> list[TaskBlock]:
    """The study's blocks whose task type hands out slots (``TaskType.limits_slots``)."""
    from webapp.tasks.registry import get_task_type

    return [b for b in study_definition(study).tasks if get_task_type(b.type).limits_slots]


def sync_items(study: Study) -> bool:
    """Make the item rows of every slot-limited block match the study definition (after a
    load or a ``--force`` reload; ``TaskType.sync_slots``). The caller commits.

    Returns
    -------
    bool
        True when rows were added or updated.
    """
    from webapp.tasks.registry import get_task_type

    synced = [get_task_type(b.type).sync_slots(study, b) for b in slot_blocks(study)]
    return any(synced)


def sync_block(study: Study, block: TaskBlock, items: list[dict[str, Any]]) -> bool:
    """Make a slot-limited block's item rows match ``items`` (``AnnotationItem`` columns:
    ``item_id``, ``text``, ``base_sentiment``, ``is_gold``, ``gold_label``, ``extra``), in
    order; True when rows were added or updated.

    Cheap when nothing changed (one count query). Otherwise the study row is locked so
    concurrent first requests insert the items once. Items are never deleted: labels refer
    to them; an item dropped from the definition just stops being offered. The caller commits.
    """
    n, low = db.session.execute(
        select(func.count(), func.min(AnnotationItem.study_version)).where(
            AnnotationItem.study_id == study.id, AnnotationItem.block_id == block.id
        )
    ).one()
    if n >= len(items) and low == study.version:
        return False
    db.session.execute(select(Study.id).where(Study.id == study.id).with_for_update())
    existing = {
        it.item_id: it
        for it in db.session.scalars(
            select(AnnotationItem).where(
                AnnotationItem.study_id == study.id, AnnotationItem.block_id == block.id
            )
        )
    }
    for position, item in enumerate(items):
        row = existing.get(item["item_id"])
        if row is None:
            row = AnnotationItem(study_id=study.id, block_id=block.id, item_id=item["item_id"])
            db.session.add(row)
        for key, value in item.items():
            setattr(row, key, value)
        row.position = position
        row.study_version = study.version
    db.session.flush()
    return True


def _has_labelled(participant_id: Any) -> Any:
    """SQL condition: the participant has labelled (or rated, or chosen in) an item."""
    own = aliased(Annotation)
    return (
        select(own.id).where(own.participant_id == participant_id, own.label.is_not(None)).exists()
    )


def _live(now: datetime, *, firm: bool = False) -> Any:
    """SQL condition: the annotation holds a slot (confirmed, or reserved and alive).

    Test participants (bots, researcher previews) never hold slots: they are given items as
    usual, but a pilot run or a preview does not use up the items real people need. With
    ``firm``, a reservation counts only when its holder has labelled something: the slots a
    newcomer holds tentatively (:func:`first_label_minutes`) do not make a study full.
    """
    holder = aliased(Participant)
    reserved = and_(
        Annotation.state == AnnotationState.reserved,
        Annotation.expires_at > now,
        holder.status == ParticipantStatus.started,
    )
    if firm:
        reserved = and_(reserved, _has_labelled(holder.id))
    return (
        select(holder.id)
        .where(
            holder.id == Annotation.participant_id,
            holder.is_test.is_(False),
            or_(Annotation.state == AnnotationState.confirmed, reserved),
        )
        .exists()
    )


def _taken_count(now: datetime, *, firm: bool = False) -> Any:
    """Correlated count of an item's taken slots (for filtering and ordering candidates)."""
    return (
        select(func.count())
        .select_from(Annotation)
        .where(Annotation.item_pk == AnnotationItem.id, _live(now, firm=firm))
        .correlate(AnnotationItem)
        .scalar_subquery()
    )


def _lock_candidates(
    study: Study,
    block: TaskBlock,
    participant: Participant,
    *,
    now: datetime,
    limit: int,
    skip_locked: bool,
    exclude: Iterable[int] = (),
) -> list[int]:
    """Lock items that look free for this participant (the count may be stale; recheck)."""
    taken = _taken_count(now)
    seen = select(Annotation.item_pk).where(Annotation.participant_id == participant.id)
    query = (
        select(AnnotationItem.id)
        .where(
            AnnotationItem.study_id == study.id,
            AnnotationItem.block_id == block.id,
            AnnotationItem.is_gold.is_(False),
            AnnotationItem.id.not_in(seen),
            taken < slot_rules(block).annotators_per_item,
        )
        .limit(limit)
    )
    exclude = list(exclude)
    if exclude:
        query = query.where(AnnotationItem.id.not_in(exclude))
    if skip_locked:
        # Items closest to complete first, so few items stay half-labelled if the study stops.
        query = query.order_by(taken.desc(), AnnotationItem.position)
        query = query.with_for_update(skip_locked=True, of=AnnotationItem)
    else:
        # Waiting for locks: take them in primary-key order, so waiters never deadlock.
        query = query.order_by(AnnotationItem.id).with_for_update(of=AnnotationItem)
    return list(db.session.scalars(query))


def _free_and_recount(item_pks: list[int], now: datetime) -> dict[int, int]:
    """Under the items' locks: expire dead reservations, return the exact taken counts."""
    if not item_pks:
        return {}
    holder_gone = (
        select(Participant.id)
        .where(
            Participant.id == Annotation.participant_id,
            Participant.status != ParticipantStatus.started,
        )
        .exists()
    )
    db.session.execute(
        update(Annotation)
        .where(
            Annotation.item_pk.in_(item_pks),
            Annotation.state == AnnotationState.reserved,
            or_(Annotation.expires_at <= now, holder_gone),
        )
        .values(state=AnnotationState.expired)
        .execution_options(synchronize_session=False)
    )
    counts = dict.fromkeys(item_pks, 0)
    rows = db.session.execute(
        select(Annotation.item_pk, func.count())
        .join(Participant, Participant.id == Annotation.participant_id)
        .where(
            Annotation.item_pk.in_(item_pks),
            Annotation.state.in_([AnnotationState.confirmed, AnnotationState.reserved]),
            Participant.is_test.is_(False),
        )
        .group_by(Annotation.item_pk)
    )
    counts.update({pk: n for pk, n in rows})
    return counts


def _usable(item_pks: list[int], counts: dict[int, int], k: int, want: int) -> list[int]:
    return [pk for pk in item_pks if counts[pk] < k][:want]


def reserve_batch(
    study: Study,
    block: TaskBlock,
    participant: Participant,
    *,
    now: datetime,
    rng: random.Random,
    start: int = 0,
    limit: int | None = None,
) -> list[Annotation]:
    """Reserve (part of) a participant's batch of items, with gold items interleaved.

    Runs inside the caller's transaction, which must already hold the participant's row
    lock (:func:`webapp.services.flow.enter`); the caller commits.

    The whole batch is planned from ``rng`` first — which trial positions are gold items, and
    which gold items — so a caller that reserves the batch in parts (``limit``), passing an
    ``rng`` seeded the same way each time, fills one consistent sequence: the items that
    still need labels now go to the next free positions, and the gold items planned right
    after them come along.

    Parameters
    ----------
    study : Study
    block : dict
        The block (normalised): ``annotators_per_item``, ``items_per_participant``,
        ``n_gold``, ``reservation_minutes``.
    participant : Participant
        Locked, ``started``.
    now : datetime
        Current time (UTC); reservations expire ``reservation_minutes`` later, or
        :func:`first_label_minutes` later while the participant has labelled nothing.
    rng : random.Random
        Plans the gold positions and items, and shuffles the items reserved now.
    start : int
        The first trial position to fill (the number of slots the participant already has in
        this block).
    limit : int, optional
        Reserve at most this many (non-gold) items now; ``None``: the rest of the batch.

    Returns
    -------
    list of Annotation
        The new reservations (gold items included) in ``trial_index`` order; empty when no
        item needs a label from this participant now (for a first part: the study is full
        for them).
    """
    rules = slot_rules(block)
    total, n_gold = rules.items_per_participant, rules.n_gold
    gold_pks = _gold_for(study, block, n_gold, rng)
    gold_at = dict(zip(sorted(rng.sample(range(1, total + n_gold), n_gold)), gold_pks, strict=True))
    have = sum(1 for i in range(start) if i not in gold_at)  # items already in the sequence
    want = total - have if limit is None else min(limit, total - have)
    if want <= 0:
        return []
    from webapp.tasks.registry import get_task_type

    get_task_type(block.type).sync_slots(study, block)
    k = rules.annotators_per_item
    dialect = db.session.get_bind().dialect.name
    savepoint = db.session.begin_nested()
    locked = _lock_candidates(
        study, block, participant, now=now, limit=want + _MARGIN, skip_locked=True
    )
    chosen = _usable(locked, _free_and_recount(locked, now), k, want)
    if not chosen and dialect != "sqlite":
        # Everything looked taken or locked by others. Release our useless locks (rolling
        # back the savepoint) and wait, in key order, for the items others hold: they may
        # free slots. Only then is "study full" the truth rather than a race.
        savepoint.rollback()
        locked = _lock_candidates(study, block, participant, now=now, limit=want, skip_locked=False)
        chosen = _usable(locked, _free_and_recount(locked, now), k, want)
    else:
        savepoint.commit()
    if not chosen:
        return []
    items = list(chosen)
    rng.shuffle(items)
    order: list[tuple[int, bool]] = []
    index = start
    while items or index in gold_at:  # the items, then the gold items planned right after
        if index in gold_at:
            order.append((gold_at[index], True))
        else:
            order.append((items.pop(), False))
        index += 1
    # Tentative until the participant's first label: see first_label_minutes.
    labelled = db.session.scalar(select(_has_labelled(participant.id)))
    minutes = rules.reservation_minutes if labelled else first_label_minutes(block)
    expires = now + timedelta(minutes=minutes)
    out = []
    for i, (pk, gold) in enumerate(order, start=start):
        a = Annotation(
            item_pk=pk,
            participant_id=participant.id,
            trial_index=i,
            state=AnnotationState.reserved,
            reserved_at=now,
            expires_at=None if gold else expires,
        )
        db.session.add(a)
        out.append(a)
    db.session.flush()
    return out


def _gold_for(study: Study, block: TaskBlock, n_gold: int, rng: random.Random) -> list[int]:
    if not n_gold:
        return []
    pks = list(
        db.session.scalars(
            select(AnnotationItem.id)
            .where(
                AnnotationItem.study_id == study.id,
                AnnotationItem.block_id == block.id,
                AnnotationItem.is_gold.is_(True),
            )
            .order_by(AnnotationItem.position)
        )
    )
    return rng.sample(pks, n_gold)


def record_label(
    annotation: Annotation,
    label: str,
    *,
    participant: Participant,
    block: TaskBlock,
    rt_ms: int | None,
    now: datetime,
) -> Annotation:
    """Store a label: confirm a reservation still held, or keep one given away as surplus.

    Runs inside the caller's transaction (which holds the participant's row lock). Under the
    item's lock, a row still ``reserved`` holds one of the item's counted slots even when its
    time is up (every reservation of the item recounts, and expires dead rows, under that
    lock first), so confirming it never makes more than ``annotators_per_item`` labels. Only a
    reservation that another participant's recount expired gives a ``surplus`` label.

    A participant's first label also extends their other tentative reservations (see
    :func:`first_label_minutes`) to ``reservation_minutes`` from now.

    Parameters
    ----------
    annotation : Annotation
        The participant's reservation of the item.
    label : str
        One of the block's labels (lower-case).
    participant : Participant
    block : dict
        The annotation block (for the labels allowed and the reservation times).
    rt_ms : int or None
        Client-measured time to label.
    now : datetime

    Returns
    -------
    Annotation
        ``confirmed`` (counted) or ``surplus`` (kept, flagged, not counted).
    """
    labels = slot_rules(block).labels
    if label not in labels:
        raise ValueError(f"label {label!r} is not one of {labels}")
    item = db.session.scalars(
        select(AnnotationItem).where(AnnotationItem.id == annotation.item_pk).with_for_update()
    ).one()
    db.session.refresh(annotation)  # its state may have changed before we held the lock
    live = item.is_gold or (
        annotation.state is AnnotationState.reserved
        and participant.status is ParticipantStatus.started
    )
    if live and not item.is_gold and _tentative(annotation, block):
        _extend_tentative(participant, annotation, block, now)
    annotation.state = AnnotationState.confirmed if live else AnnotationState.surplus
    annotation.surplus = not live
    annotation.label = label
    annotation.rt_ms = rt_ms
    annotation.answered_at = now
    return annotation


def _tentative(annotation: Annotation, block: TaskBlock) -> bool:
    """True for a reservation made before its holder's first label (shorter than usual)."""
    if annotation.expires_at is None:
        return False
    full = timedelta(minutes=slot_rules(block).reservation_minutes) - timedelta(seconds=1)
    return annotation.expires_at - annotation.reserved_at < full


def _extend_tentative(
    participant: Participant, annotation: Annotation, block: TaskBlock, now: datetime
) -> None:
    """Give the participant's other live reservations the full ``reservation_minutes``.

    No item lock is needed: a concurrent recount under an item's lock either runs first (and
    expires only a dead row, which this then leaves alone) or sees the new time and counts the
    row, as it counts every live reservation.
    """
    db.session.execute(
        update(Annotation)
        .where(
            Annotation.participant_id == participant.id,
            Annotation.id != annotation.id,
            Annotation.state == AnnotationState.reserved,
            Annotation.expires_at > now,
        )
        .values(expires_at=now + timedelta(minutes=slot_rules(block).reservation_minutes))
        .execution_options(synchronize_session=False)
    )


def confirm_import(
    item: AnnotationItem,
    participant: Participant,
    label: str,
    *,
    k: int,
    trial_index: int,
    rt_ms: int | None,
    now: datetime,
    external_ref: str | None,
) -> Annotation:
    """Add a label that arrived without a reservation (an imported MTurk batch).

    The item is locked and recounted as in :func:`reserve_batch`; beyond ``k`` taken slots
    the label is kept as surplus.
    """
    db.session.scalars(
        select(AnnotationItem.id).where(AnnotationItem.id == item.id).with_for_update()
    ).one()
    taken = _free_and_recount([item.id], now)[item.id]
    counted = item.is_gold or taken < k
    a = Annotation(
        item_pk=item.id,
        participant_id=participant.id,
        trial_index=trial_index,
        state=AnnotationState.confirmed if counted else AnnotationState.surplus,
        reserved_at=now,
        expires_at=None,
        label=label,
        surplus=not counted,
        rt_ms=rt_ms,
        answered_at=now,
        external_ref=external_ref,
    )
    db.session.add(a)
    return a


def study_is_full(study: Study, now: datetime) -> bool:
    """True when a study has slot-limited blocks and none of their items has a free slot.

    A slot is taken by a label or by a live reservation of someone who has labelled something;
    the slots newcomers hold tentatively (:func:`first_label_minutes`) do not count, because
    they come back within minutes unless their holders start work. So made-up IDs that enter
    and wait can never make the study look full to the people arriving after them.
    """
    blocks = slot_blocks(study)
    if not blocks:
        return False
    if sync_items(study):
        db.session.commit()
    return all(_firm_free_item(study, block, now) is None for block in blocks)


def held_by_newcomers(
    study: Study, block: TaskBlock, participant: Participant, now: datetime
) -> bool:
    """True when an item this participant could label is taken only by tentative holds.

    Asked after :func:`reserve_batch` found nothing free: the participant is then shown a
    page that waits for those slots (they come back within :func:`first_label_minutes`
    unless their holders label) instead of the "study full" ending.
    """
    return _firm_free_item(study, block, now, participant) is not None


def _firm_free_item(
    study: Study, block: TaskBlock, now: datetime, participant: Participant | None = None
) -> int | None:
    """An item of the block with fewer firm holds than it needs (for ``participant``: one
    they have not seen), or ``None``."""
    query = select(AnnotationItem.id).where(
        AnnotationItem.study_id == study.id,
        AnnotationItem.block_id == block.id,
        AnnotationItem.is_gold.is_(False),
        _taken_count(now, firm=True) < slot_rules(block).annotators_per_item,
    )
    if participant is not None:
        seen = select(Annotation.item_pk).where(Annotation.participant_id == participant.id)
        query = query.where(AnnotationItem.id.not_in(seen))
    return db.session.scalar(query.limit(1))


def end_participant(participant: Participant, status: ParticipantStatus, now: datetime) -> None:
    """Mark a participant returned or timed out (their reservations go back to the pool).

    The reservations stop counting at once (a slot's holder must be ``started``); they are
    marked ``expired`` here too so the state is plain in the database. The caller commits.
    """
    if status not in (ParticipantStatus.returned, ParticipantStatus.timed_out):
        raise ValueError("only returned or timed_out ends a session from outside")
    participant.status = status
    participant.finished_at = now
    db.session.execute(
        update(Annotation)
        .where(
            Annotation.participant_id == participant.id,
            Annotation.state == AnnotationState.reserved,
        )
        .values(state=AnnotationState.expired)
        .execution_options(synchronize_session=False)
    )
