"""``pairwise_preference``: which of two summaries of a source is better, and why (optional).

Pairs (human vs generated, or any two systems) are allocated to ``raters_per_item`` raters
each with the sentiment task's reserve → confirm / expire machinery. Each rater sees a pair in
one order, fixed when the pair is reserved: the order that fewer of the pair's current slot
holders (confirmed or live reservations) have, so both orders are collected equally often
(exactly when ``raters_per_item`` is even and every reservation is answered; an expired
reservation gives its order back). The count is taken under the pair's row lock, which
:func:`webapp.services.allocation.reserve_batch` holds until the transaction commits.

YAML keys: ``items`` (JSONL file), ``raters_per_item`` (4), ``items_per_participant`` (4),
``reservation_minutes`` (30), ``heading``, ``instructions``, ``question``, ``ask_reason``
(true), ``reason_required`` (false), ``show_source`` (true).
"""

from __future__ import annotations

from typing import Any

from flask_babel import lazy_gettext
from sqlalchemy import and_, or_, select
from wtforms import TextAreaField
from wtforms.validators import InputRequired, Length, Optional

from webapp.definition import TaskBlock
from webapp.i18n import default_text
from webapp.models import Annotation, AnnotationState, Participant, Study, TaskResponse
from webapp.tasks import evaluation_slots as slots
from webapp.tasks.base import (
    NEXT,
    ExportTable,
    Outcome,
    PageContext,
    PageForm,
    SaveResult,
    TaskType,
    waiting_context,
)
from webapp.tasks.preference import export
from webapp.tasks.widgets import RadioField
from webapp.validation import (
    LINE_MAX,
    Where,
    check_keys,
    check_text,
    get_bool,
    get_line,
    get_mapping,
    get_str,
)

ORDERS = ("a_first", "b_first")
REQUIRED = lazy_gettext("Please choose one of the two summaries.")
REASON_MAX = 1000


def read_pairs(raw: Any, where: Where) -> list[dict[str, Any]]:
    """Read a preference set (JSONL, one pair per line; ``stimuli/studies/evaluation/README.md``).

    Returns
    -------
    list of dict
        ``item_id`` (the pair ID), ``source_id``, ``text`` (the source, may be empty),
        ``a`` and ``b`` (``system``, ``text``).
    """
    name, records = slots.read_jsonl(raw, where)
    pairs = []
    seen: set[str] = set()
    for n, rec in records:
        rw = Where(name, f"line {n}", line=n)
        pair_id = slots.item_id_of(rec.get("pair_id"), rw.at("pair_id"), seen)
        sides = {}
        for side in ("a", "b"):
            sw = rw.at(side)
            body = get_mapping(rec.get(side), sw)
            sides[side] = {
                "system": get_line(body, "system", sw),
                "text": slots.text_of(body.get("text"), sw.at("text")),
            }
        if sides["a"]["system"] == sides["b"]["system"]:
            raise rw.at("b").at("system").error("the two summaries need different system names")
        pairs.append(
            {
                "item_id": pair_id,
                "source_id": check_text(
                    str(rec.get("source_id") or pair_id),
                    rw.at("source_id"),
                    max_len=LINE_MAX,
                    one_line=True,
                ),
                "text": check_text(str(rec.get("source") or "").strip(), rw.at("source")),
                "a": sides["a"],
                "b": sides["b"],
            }
        )
    return pairs


def balanced_order(annotation: Annotation, block_id: str, now: Any, rng: Any) -> str:
    """The order that fewer current holders of this pair's slots see (ties: ``rng``).

    Call with the pair's row locked (as :func:`~webapp.services.allocation.reserve_batch`
    leaves it), so the count is exact.
    """
    from webapp.extensions import db

    holding = or_(
        Annotation.state == AnnotationState.confirmed,
        and_(Annotation.state == AnnotationState.reserved, Annotation.expires_at > now),
    )
    payloads = db.session.scalars(
        select(TaskResponse.payload)
        .join(
            Annotation,
            and_(
                Annotation.participant_id == TaskResponse.participant_id,
                Annotation.trial_index == TaskResponse.step,
            ),
        )
        .join(Participant, Participant.id == Annotation.participant_id)
        .where(
            TaskResponse.block_id == block_id,
            Annotation.item_pk == annotation.item_pk,
            Annotation.id != annotation.id,
            Participant.is_test.is_(False),  # test participants hold no slots
            holding,
        )
    )
    counts = dict.fromkeys(ORDERS, 0)
    for payload in payloads:
        if payload.get("order") in counts:
            counts[payload["order"]] += 1
    if counts["a_first"] == counts["b_first"]:
        return rng.choice(ORDERS)
    return min(ORDERS, key=counts.__getitem__)


class PairwisePreferenceTask(TaskType):
    """A reserved batch of pairs, one page each: choose the better summary."""

    name = "pairwise_preference"
    template = "pairwise_preference.html"
    acts_on_entry = True
    limits_slots = True
    tables = (
        ExportTable("long", export.long_table, rank=2),
        ExportTable("pairs", export.pairs_table),
    )
    codebook = export.CODEBOOK

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        own = {"question", "ask_reason", "reason_required", "show_source"}
        check_keys(body, {*slots.COMMON_KEYS, *own}, where)
        items = read_pairs(body.get("items"), where.at("items"))
        keys = slots.allocation_keys({"raters_per_item": 4, **body}, where, len(items))
        return {
            "items": items,
            **keys,
            "labels": ["a", "b"],
            "heading": get_line(
                body, "heading", where, default=default_text("Compare two summaries")
            ),
            "instructions": get_str(body, "instructions", where, default=""),
            "question": get_str(
                body, "question", where, default=default_text("Which summary is better?")
            ),
            "ask_reason": get_bool(body, "ask_reason", where, default=True),
            "reason_required": get_bool(body, "reason_required", where, default=False),
            "show_source": get_bool(body, "show_source", where, default=True),
        }

    def sync_slots(self, study: Study, block: TaskBlock) -> bool:
        return slots.sync_block_items(study, block)

    def n_steps(self, block: TaskBlock) -> int:
        return block.params["items_per_participant"]

    def page_name(self, block: TaskBlock, step: int) -> str:
        return f"{block.id}/{step}/prefer"

    def enter(self, ctx: PageContext) -> SaveResult | None:
        from webapp.extensions import db

        result = slots.reserve(ctx)
        if not isinstance(result, list):
            return result
        for annotation in result:
            rng = slots.block_rng(ctx, "side", annotation.trial_index)
            order = balanced_order(annotation, ctx.block.id, ctx.now, rng)
            item_id = slots.item_of(ctx.block, annotation)["item_id"]
            # The order is fixed at reservation: the page shows it and the export reads it.
            db.session.add(
                TaskResponse(
                    participant_id=ctx.participant.id,
                    block_id=ctx.block.id,
                    task_type=self.name,
                    step=annotation.trial_index,
                    payload={"pair_id": item_id, "order": order},
                    created_at=ctx.now,
                )
            )
            db.session.flush()  # the next pair's count must see this one
        return None

    def build_form(self, ctx: PageContext, formdata: Any) -> PageForm:
        block = ctx.block

        class _Form(PageForm):
            choice = RadioField(
                block.params["question"],
                choices=["first", "second"],  # the template writes "Summary 1/2 is better"
                validators=[InputRequired(REQUIRED)],
            )

        if block.params["ask_reason"]:
            first = (
                InputRequired(lazy_gettext("Please give a reason."))
                if block.params["reason_required"]
                else None
            )
            checks = [first or Optional(), Length(max=REASON_MAX)]
            _Form.reason = TextAreaField(lazy_gettext("Why? (optional)"), validators=checks)
        return _Form(formdata=formdata)

    def _shown(self, ctx: PageContext) -> tuple[dict[str, Any], TaskResponse, list[dict]]:
        annotation = slots.slot(ctx, ctx.step)
        response = slots.response(ctx, ctx.step)
        assert annotation is not None and response is not None, "pages exist for reserved pairs"
        pair = slots.item_of(ctx.block, annotation)
        sides = ["a", "b"] if response.payload["order"] == "a_first" else ["b", "a"]
        return pair, response, [{"side": s, **pair[s]} for s in sides]

    def context(self, ctx: PageContext) -> dict[str, Any]:
        if slots.slot(ctx, ctx.step) is None:  # enter found only slots newcomers hold for now
            return waiting_context(ctx.block)
        pair, response, shown = self._shown(ctx)
        return {
            "block": ctx.block,
            "pair": pair,
            "order": response.payload["order"],
            "shown": [s["text"] for s in shown],
            "position": ctx.step + 1,
            # The planned length: the batch is reserved in parts as answers come in.
            "n_items": ctx.block.params["items_per_participant"],
        }

    def save(self, ctx: PageContext, form: PageForm, rt_ms: int | None) -> SaveResult:
        from webapp.services import allocation

        if slots.slot(ctx, ctx.step) is None:  # a waiting page shows no form
            return SaveResult(Outcome.retry)
        pair, response, shown = self._shown(ctx)
        position = form["choice"].data
        chosen = shown[0] if position == "first" else shown[1]
        reason = ""
        if ctx.block.params["ask_reason"]:
            reason = (form["reason"].data or "").strip()
        annotation = slots.slot(ctx, ctx.step)
        assert annotation is not None
        allocation.record_label(
            annotation,
            chosen["side"],
            participant=ctx.participant,
            block=ctx.block,
            rt_ms=rt_ms,
            now=ctx.now,
        )
        # A new dict: JSON columns do not track in-place changes.
        response.payload = {
            **response.payload,
            "chosen": chosen["side"],
            "chosen_position": position,
            "reason": reason,
        }
        response.rt_ms = rt_ms
        # The next page reserves the next part of the batch on entry (or ends a partial batch).
        return NEXT

    def bot_answer(self, bot: Any, page: Any, block: TaskBlock) -> dict[str, str]:
        """Summary ``a`` with ``p_choose_a``, or the first shown with ``p_position``."""
        b = bot.behaviour
        a_first = page.main["data-order"] == "a_first"
        if bot.rng.random() < b.p_position:
            choice = "first"
        else:
            chose_a = bot.rng.random() < b.p_choose_a
            choice = "first" if chose_a == a_first else "second"
        return {"choice": choice, "reason": "bot reason" if bot.rng.random() < 0.5 else ""}

    def bot_saved(self, bot: Any, page: Any, data: dict[str, str]) -> None:
        bot.answers.append((page.main["data-pair"], page.main["data-order"], data["choice"]))
