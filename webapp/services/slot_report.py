"""What the console and the exports report of annotation slots: per item, in total, idle holds.

Every figure is aggregated in the database, in a fixed number of statements whatever the
number of items, and the per-item table is read a page at a time (``offset``/``limit``): the
console's overview of a study of 63,000 items reads no more rows than one of 60. The counts are
the allocation's (:mod:`webapp.services.allocation`): a label counts when it is ``confirmed``
and its participant is not a test participant; a reservation is open while it has not
expired and its holder is still ``started``. An item's *shift count* is WildFrame's (002 §2.3),
as :func:`analysis.stats.annotation.shift_counts` counts it: confirmed votes for the sentiment
opposite to the item's base sentiment, so a ``neutral`` vote is no shift.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import aliased

from webapp.definition import TaskBlock
from webapp.extensions import db
from webapp.models import (
    Annotation,
    AnnotationItem,
    AnnotationState,
    Participant,
    ParticipantStatus,
    Study,
)
from webapp.services.allocation import annotation_blocks, slot_rules, sync_items

OPPOSITE = {"positive": "negative", "negative": "positive"}


@dataclass(frozen=True)
class ItemStatus:
    """Where one item stands: confirmed labels, live reservations, labels still needed."""

    item: AnnotationItem
    block_id: str
    n_labels: int
    n_surplus: int
    n_reserved: int
    needed: int
    shift_count: int


def _counts(now: datetime) -> tuple[Any, Any, Any, Any, Any]:
    """Per-item aggregates over ``Annotation`` joined to its holder (returned as ``holder``):
    confirmed, surplus, reserved, shifted (confirmed for the sentiment opposite to the base)."""
    holder = aliased(Participant)
    counted = holder.is_test.is_(False)
    confirmed = and_(Annotation.state == AnnotationState.confirmed, counted)
    reserved = and_(
        Annotation.state == AnnotationState.reserved,
        Annotation.expires_at > now,
        holder.status == ParticipantStatus.started,
        counted,
    )
    shifted = and_(
        confirmed, Annotation.label == case(OPPOSITE, value=AnnotationItem.base_sentiment)
    )
    return (
        holder,
        func.count(Annotation.id).filter(confirmed),
        func.count(Annotation.id).filter(Annotation.state == AnnotationState.surplus),
        func.count(Annotation.id).filter(reserved),
        func.count(Annotation.id).filter(shifted),
    )


def _of_blocks(study: Study, blocks: list[TaskBlock]) -> Any:
    """SQL condition: a non-gold item of one of ``blocks``."""
    return and_(
        AnnotationItem.study_id == study.id,
        AnnotationItem.block_id.in_([b.id for b in blocks]),
        AnnotationItem.is_gold.is_(False),
    )


def _synced_blocks(study: Study) -> list[dict[str, Any]]:
    if sync_items(study):
        db.session.commit()
    return annotation_blocks(study)


def _block_items(study: Study, block: TaskBlock) -> Any:
    """SQL condition: a non-gold item of ``block`` (an index range, in position order)."""
    return and_(
        AnnotationItem.study_id == study.id,
        AnnotationItem.block_id == block.id,
        AnnotationItem.is_gold.is_(False),
    )


def item_count(study: Study) -> int:
    """Number of non-gold items of the study's ``sentiment_annotation`` blocks."""
    blocks = _synced_blocks(study)
    if not blocks:
        return 0
    return db.session.scalar(select(func.count(AnnotationItem.id)).where(_of_blocks(study, blocks)))


def item_status(
    study: Study, now: datetime, *, offset: int = 0, limit: int | None = None
) -> list[ItemStatus]:
    """Per non-gold item: confirmed / surplus / reserved counts, needed and shift count
    (confirmed votes for the sentiment opposite to the base).

    Parameters
    ----------
    study : Study
    now : datetime
        Reservations that expired before ``now`` are not counted as reserved.
    offset, limit : int
        The page of items to report (``limit`` ``None``: all from ``offset``), in the order
        below. A page costs two statements per block (an index range each) and one for the
        counts of its items, whatever the number of items.

    Returns
    -------
    list of ItemStatus
        By block, then item position.
    """
    blocks = _synced_blocks(study)
    items: list[AnnotationItem] = []
    skip = offset
    for block in blocks:
        if limit is not None and len(items) >= limit:
            break
        in_block = select(AnnotationItem).where(_block_items(study, block))
        if skip:
            n = db.session.scalar(
                select(func.count(AnnotationItem.id)).where(_block_items(study, block))
            )
            if skip >= n:
                skip -= n
                continue
        want = None if limit is None else limit - len(items)
        items += db.session.scalars(
            in_block.order_by(AnnotationItem.position).offset(skip).limit(want)
        )
        skip = 0
    if not items:
        return []
    holder, confirmed, surplus, reserved, shifted = _counts(now)
    query = (
        select(Annotation.item_pk, confirmed, surplus, reserved, shifted)
        .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
        .join(holder, holder.id == Annotation.participant_id)
        .group_by(Annotation.item_pk)
    )
    if limit is not None:  # one page: only its items (a bounded list of keys)
        query = query.where(Annotation.item_pk.in_([it.id for it in items]))
    else:  # every item: by block, not by a list of keys as long as the study
        query = query.where(_of_blocks(study, blocks))
    counts = {pk: rest for pk, *rest in db.session.execute(query)}
    k_of = {b.id: slot_rules(b).annotators_per_item for b in blocks}
    out = []
    for it in items:
        n_labels, n_surplus, n_reserved, n_shifted = counts.get(it.id, (0, 0, 0, 0))
        out.append(
            ItemStatus(
                item=it,
                block_id=it.block_id,
                n_labels=n_labels,
                n_surplus=n_surplus,
                n_reserved=n_reserved,
                needed=max(0, k_of[it.block_id] - n_labels),
                shift_count=n_shifted,
            )
        )
    return out


def slot_totals(study: Study, now: datetime) -> dict[str, int] | None:
    """Slots over all items of the annotation blocks, in two statements (``None``: no blocks).

    The items per block are counted on their index; the labels and reservations are grouped
    per item over the study's annotations only, so items nobody has reached yet cost nothing
    but their count (each still needs ``annotators_per_item`` labels).

    Returns
    -------
    dict or None
        ``items``, ``confirmed``, ``reserved``, ``needed`` (labels still missing, item by
        item) and ``surplus``.
    """
    blocks = _synced_blocks(study)
    if not blocks:
        return None
    k_of = {b.id: slot_rules(b).annotators_per_item for b in blocks}
    n_items = dict(
        db.session.execute(
            select(AnnotationItem.block_id, func.count(AnnotationItem.id))
            .where(_of_blocks(study, blocks))
            .group_by(AnnotationItem.block_id)
        ).all()
    )
    holder, confirmed, surplus, reserved, _ = _counts(now)
    per_item = (
        select(
            AnnotationItem.block_id.label("block"),
            confirmed.label("confirmed"),
            reserved.label("reserved"),
            surplus.label("surplus"),
        )
        .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
        .join(holder, holder.id == Annotation.participant_id)
        .where(_of_blocks(study, blocks))
        .group_by(Annotation.item_pk, AnnotationItem.block_id)
        .subquery()
    )
    k = case(k_of, value=per_item.c.block)
    missing = case((per_item.c.confirmed < k, k - per_item.c.confirmed), else_=0)
    totals = {"items": sum(n_items.values()), "confirmed": 0, "reserved": 0, "needed": 0}
    totals["surplus"] = 0
    reached: dict[str, int] = {}
    for block, n, n_confirmed, n_reserved, n_surplus, n_missing in db.session.execute(
        select(
            per_item.c.block,
            func.count(),
            func.sum(per_item.c.confirmed),
            func.sum(per_item.c.reserved),
            func.sum(per_item.c.surplus),
            func.sum(missing),
        ).group_by(per_item.c.block)
    ):
        reached[block] = n
        totals["confirmed"] += int(n_confirmed or 0)
        totals["reserved"] += int(n_reserved or 0)
        totals["surplus"] += int(n_surplus or 0)
        totals["needed"] += int(n_missing or 0)
    for block, n in n_items.items():  # items nobody has reached yet need all their labels
        totals["needed"] += (n - reached.get(block, 0)) * k_of[block]
    return totals


@dataclass(frozen=True)
class IdleHolds:
    """Live reservations held by participants who have not labelled a single item yet."""

    slots: int
    people: int


def idle_holds(study: Study, now: datetime) -> IdleHolds:
    """Count the slots held right now by people who never labelled anything in the study.

    Such holders are either just starting or never meant to label (made-up recruiter IDs
    entering to make the study look full); their holds are tentative and short
    (:func:`webapp.tasks.base.first_label_minutes`) and never make the study full.
    Test participants, expired reservations and holders no longer ``started`` do not count.
    """
    labelled = (
        select(Annotation.id)
        .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
        .where(
            AnnotationItem.study_id == study.id,
            Annotation.participant_id == Participant.id,
            Annotation.label.is_not(None),
        )
        .exists()
    )
    slots, people = db.session.execute(
        select(func.count(Annotation.id), func.count(func.distinct(Annotation.participant_id)))
        .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
        .join(Participant, Participant.id == Annotation.participant_id)
        .where(
            AnnotationItem.study_id == study.id,
            AnnotationItem.is_gold.is_(False),
            Annotation.state == AnnotationState.reserved,
            Annotation.expires_at > now,
            Participant.status == ParticipantStatus.started,
            Participant.is_test.is_(False),
            ~labelled,
        )
    ).one()
    return IdleHolds(slots=slots, people=people)
