"""What the ``summary_rating`` and ``pairwise_preference`` task types share.

Both hand out a limited number of raters per item with the sentiment task's machinery
(:mod:`webapp.services.allocation`: reserve → confirm, or expire back to the pool). Their items
are stored as ``AnnotationItem`` rows of their block (one row per source or pair; the texts stay
in the study definition), a slot is an ``Annotation``, and the answer itself (ratings, or the
chosen summary, its order and the reason) is the page's ``TaskResponse`` payload.

Items come from a JSONL stimulus set (one source or pair per line, written by
``analysis.llm.builders_eval`` or by hand; see ``stimuli/studies/evaluation/README.md``).
"""

from __future__ import annotations

import io
import json
import random
from typing import Any

from sqlalchemy import select

from webapp.definition import TaskBlock
from webapp.export_common import ExportScope, iso_time
from webapp.extensions import db
from webapp.models import Annotation, AnnotationItem, Participant, Study, TaskResponse
from webapp.tasks.base import Outcome, PageContext, SaveResult, reservation_keys
from webapp.validation import (
    ID_RE,
    Where,
    check_text,
    get_int,
    read_text,
    stimulus_path,
)

STUDY_FULL = "study_full"
# YAML keys both task types accept (each adds its own).
COMMON_KEYS = frozenset(
    ("items", "raters_per_item", "items_per_participant", "reservation_minutes")
    + ("first_label_minutes",)
    + ("heading", "instructions")
)


def read_jsonl(raw: Any, where: Where) -> tuple[str, list[tuple[int, dict[str, Any]]]]:
    """Read a JSONL file of the study's bundle; return its name with (line, record) pairs.

    Errors in a record name the JSONL file and the record's line (``Where.line``).
    """
    name = stimulus_path(raw, where, "a JSONL file")
    text = read_text(name, where)
    records = []
    # Universal newlines, as an editor counts lines; JSON strings cannot hold a raw newline.
    for n, line in enumerate(io.StringIO(text, newline=None), start=1):
        if not line.strip():
            continue
        rw = Where(name, f"line {n}", line=n)
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise rw.error(f"not JSON: {exc.msg} (column {exc.colno})") from None
        except (ValueError, RecursionError) as exc:  # 5,000-digit numbers, deep nesting
            raise rw.error(f"not JSON this program can read: {str(exc)[:200]}") from None
        if not isinstance(rec, dict):
            raise rw.error("expected a JSON object")
        records.append((n, rec))
    if not records:
        raise Where(name, line=1).error("has no items")
    return name, records


def text_of(raw: Any, where: Where) -> str:
    """A non-empty string from a stimulus record."""
    if not isinstance(raw, str) or not raw.strip():
        raise where.error("expected a non-empty text")
    return check_text(raw.strip(), where)


def item_id_of(raw: Any, where: Where, seen: set[str]) -> str:
    """A valid, unique item ID from a stimulus record."""
    value = str(raw or "").strip()
    if not ID_RE.match(value):
        raise where.error(f"{value!r} is not a valid id (letters, digits, _ . -)")
    if value in seen:
        raise where.error(f"duplicate id {value!r}")
    seen.add(value)
    return value


def allocation_keys(body: dict[str, Any], where: Where, n_items: int) -> dict[str, Any]:
    """The keys :func:`webapp.services.allocation.reserve_batch` reads, from the block's YAML."""
    per_participant = get_int(body, "items_per_participant", where, default=min(4, n_items))
    if per_participant < 1 or per_participant > n_items:
        raise where.at("items_per_participant").error(f"must be between 1 and {n_items}")
    return {
        "annotators_per_item": get_int(body, "raters_per_item", where, default=3, minimum=1),
        "items_per_participant": per_participant,
        **reservation_keys(body, where),
        # No gold items in these tasks (attention checks are their own block).
        "n_gold": 0,
        "gold_items": [],
    }


def sync_block_items(study: Study, block: TaskBlock) -> bool:
    """Make the block's ``AnnotationItem`` rows match its items (the texts stay in the
    definition); True when rows changed. The caller commits."""
    from webapp.services.allocation import sync_block

    # Not sentiment items: no base sentiment, no gold.
    empty = {"base_sentiment": "", "is_gold": False, "gold_label": None, "extra": {}}
    rows = [{"item_id": it["item_id"], "text": it["text"], **empty} for it in block.params["items"]]
    return sync_block(study, block, rows)


def slot(ctx: PageContext, trial_index: int) -> Annotation | None:
    """The participant's slot on page ``trial_index`` of this block."""
    return db.session.scalar(
        select(Annotation)
        .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
        .where(
            Annotation.participant_id == ctx.participant.id,
            AnnotationItem.study_id == ctx.study.id,
            AnnotationItem.block_id == ctx.block.id,
            Annotation.trial_index == trial_index,
        )
    )


def response(ctx: PageContext, trial_index: int) -> TaskResponse | None:
    """The page's stored response (created at reservation for preferences)."""
    return db.session.scalar(
        select(TaskResponse).where(
            TaskResponse.participant_id == ctx.participant.id,
            TaskResponse.block_id == ctx.block.id,
            TaskResponse.step == trial_index,
        )
    )


def block_rng(ctx: PageContext, *parts: object) -> random.Random:
    """Randomness re-derivable from the participant's recorded seed (and what it is for)."""
    return random.Random(":".join(str(p) for p in (ctx.participant.seed, ctx.block.id, *parts)))


def reserve(ctx: PageContext) -> list[Annotation] | SaveResult | None:
    """Reserve the next part of the participant's batch on a page that has no slot yet.

    Items are reserved :data:`webapp.services.allocation.RESERVE_AHEAD` at a time, and the
    next part only when the participant reaches a page past what they hold (they rated what
    they had): someone who enters and never answers holds a couple of slots, not a whole
    batch, so a few made-up arrivals cannot make the study look full. The batch plan comes
    from the participant's recorded seed, so the parts form one re-derivable sequence.

    Returns the new reservations, ``None`` when the page has its slot already (or, without
    one, waits for slots other newcomers hold tentatively), the end of the block when no item
    is left for a participant who has some (a partial batch), or the "study full" screen-out
    on the block's first page.
    """
    from webapp.services import allocation

    if slot(ctx, ctx.step) is not None:
        return None
    reserved = allocation.reserve_batch(
        ctx.study,
        ctx.block,
        ctx.participant,
        now=ctx.now,
        rng=block_rng(ctx, "batch"),
        start=ctx.step,
        limit=allocation.RESERVE_AHEAD,
    )
    if reserved:
        return reserved
    if ctx.step > 0:
        return SaveResult(Outcome.end_block)
    if allocation.held_by_newcomers(ctx.study, ctx.block, ctx.participant, ctx.now):
        return None  # not full: the page waits for slots held tentatively (no slot yet)
    ctx.participant.end_reason = STUDY_FULL
    return SaveResult(Outcome.screen_out)


def item_of(block: TaskBlock, annotation: Annotation) -> dict[str, Any]:
    """The block's item (source or pair) that a slot is for."""
    item_id = annotation.item.item_id
    return next(it for it in block.params["items"] if it["item_id"] == item_id)


def answered_rows(scope: ExportScope, block_id: str) -> Any:
    """(annotation, item row, participant, response) of every answered page of a block, for
    the participants in ``scope``."""
    from sqlalchemy import and_
    from sqlalchemy.orm import selectinload

    query = (
        select(Annotation, AnnotationItem, Participant, TaskResponse)
        .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
        .join(Participant, Participant.id == Annotation.participant_id)
        .join(
            TaskResponse,
            and_(
                TaskResponse.participant_id == Annotation.participant_id,
                TaskResponse.block_id == AnnotationItem.block_id,
                TaskResponse.step == Annotation.trial_index,
            ),
        )
        .where(
            AnnotationItem.study_id == scope.study.id,
            AnnotationItem.block_id == block_id,
            Annotation.answered_at.is_not(None),
        )
        .options(selectinload(Participant.identity))
        .order_by(Participant.id, Annotation.trial_index)
    )
    return db.session.execute(scope.where(query))


def answer_cells(scope: ExportScope, a: Annotation, p: Participant) -> dict[str, Any]:
    """The cells of a long-table row both types share: who answered, the slot, the time."""
    return {
        **scope.who(p),
        "trial_index": a.trial_index,
        "surplus": int(a.surplus),
        "rt_ms": a.rt_ms,
        "answered_at": iso_time(a.answered_at),
    }
