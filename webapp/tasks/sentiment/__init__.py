"""Sentiment annotation: a qualification block and the five-annotator labelling block.

``sentiment_qualification`` shows a set of unframed statements on one page; the participant
must reach ``required_accuracy`` (default 100%). The result is remembered per platform ID,
qualification name and study owner (:func:`webapp.models.qualification_scope`), so a person who
passed once skips the block in every later study of the same qualification *by the same
researcher*, and one who failed is screened out at once. Another researcher's study that picks
the same name shares nothing: it can neither fail nor pass anyone here.

``sentiment_annotation`` shows a batch of items one per page. When the participant reaches
the block, :func:`webapp.services.allocation.reserve_batch` reserves the first
``RESERVE_AHEAD`` items that still need labels and that this person has never seen, and the
next ones each time the participant has labelled what they hold, up to
``items_per_participant``; gold items with known answers are interleaved at ``gold_rate``.
Someone who enters and never labels therefore holds only a couple of slots, for
``first_label_minutes`` (a newcomer's reservations are tentative until their first label). Each
label confirms its slot
(:func:`~webapp.services.allocation.record_label`). With no item left, the participant gets
the "study full" page and its own code; while the only free slots are held tentatively by
other newcomers, a page that waits for them instead.
"""

from __future__ import annotations

import random
from typing import Any

from flask_babel import lazy_gettext
from sqlalchemy import select
from wtforms.fields.choices import SelectChoice
from wtforms.validators import InputRequired

from webapp.definition import TaskBlock
from webapp.i18n import default_text
from webapp.models import (
    Annotation,
    AnnotationItem,
    QualificationResult,
    Study,
    TaskResponse,
    qualification_scope,
)
from webapp.tasks.base import (
    NEXT,
    ExportTable,
    Outcome,
    PageContext,
    PageForm,
    SaveResult,
    TaskType,
    reservation_keys,
    waiting_context,
)
from webapp.tasks.sentiment import export
from webapp.tasks.sentiment.items import LABELS, read_items
from webapp.tasks.widgets import RadioField
from webapp.validation import (
    Where,
    check_keys,
    column_length,
    get_int,
    get_line,
    get_list,
    get_number,
    get_str,
)

REQUIRED = lazy_gettext("Please choose a label.")
# The labels as participants read them (the export keeps the lower-case values).
LABEL_TEXT = {
    "positive": lazy_gettext("Positive"),
    "negative": lazy_gettext("Negative"),
    "neutral": lazy_gettext("Neutral"),
}
STUDY_FULL = "study_full"
QUALIFICATION_FAILED = "qualification_failed"


def opposite(sentiment: str) -> str:
    """The other base sentiment."""
    return "negative" if sentiment == "positive" else "positive"


def validate_labels(raw: Any, where: Where) -> list[str]:
    """Return the block's labels in lower case (default positive, negative; neutral optional)."""
    values = get_list(raw if raw is not None else ["Positive", "Negative"], where, min_len=2)
    labels = []
    for i, value in enumerate(values):
        label = str(value).strip().lower()
        if label not in LABELS:
            raise where.at(i).error(f"{value!r} is not one of {[x.title() for x in LABELS]}")
        labels.append(label)
    if len(set(labels)) != len(labels) or not {"positive", "negative"} <= set(labels):
        raise where.error("labels must be distinct and include Positive and Negative")
    return labels


def _choices(labels: list[str]) -> list[SelectChoice]:
    # Values stay lower-case (the export's categories); participants read "Positive".
    return [SelectChoice(x, LABEL_TEXT.get(x, x.title())) for x in labels]


def label_form(labels: list[str], formdata: Any, name: str = "label") -> PageForm:
    """A form with one radio group whose values are the lower-case labels."""

    class _Form(PageForm):
        pass

    choices = _choices(labels)
    setattr(
        _Form,
        name,
        RadioField(lazy_gettext("Label"), choices=choices, validators=[InputRequired(REQUIRED)]),
    )
    return _Form(formdata=formdata)


class SentimentQualificationTask(TaskType):
    """Unframed statements on one page; accuracy below the requirement screens out."""

    name = "sentiment_qualification"
    template = "sentiment_qualification.html"
    acts_on_entry = True

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        check_keys(
            body,
            {"qualification", "items", "labels", "required_accuracy", "heading", "text"},
            where,
        )
        labels = validate_labels(body.get("labels"), where.at("labels"))
        items = read_items(body.get("items"), where.at("items"))
        return {
            # Results are stored (and shared across studies) under this name.
            "qualification": get_line(
                body,
                "qualification",
                where,
                max_len=column_length(QualificationResult.qualification),
            ),
            "items": [{k: it[k] for k in ("item_id", "text", "base_sentiment")} for it in items],
            "labels": labels,
            "required_accuracy": get_number(
                body, "required_accuracy", where, default=1.0, minimum=0.0, maximum=1.0
            ),
            "heading": get_line(body, "heading", where, default=default_text("Qualification")),
            "text": get_str(
                body,
                "text",
                where,
                default=default_text("Please label each statement by its sentiment."),
            ),
        }

    def _result(self, ctx: PageContext) -> QualificationResult | None:
        from webapp.extensions import db

        ident = ctx.participant.identity
        if ident is None:
            return None
        return db.session.scalar(
            select(QualificationResult).where(
                QualificationResult.scope == qualification_scope(ctx.study.owner_id),
                QualificationResult.qualification == ctx.block.params["qualification"],
                QualificationResult.platform == ident.platform,
                QualificationResult.external_id == ident.external_id,
            )
        )

    def enter(self, ctx: PageContext) -> SaveResult | None:
        if ctx.participant.is_preview:
            return None  # researchers always see the qualification
        earlier = self._result(ctx)
        if earlier is None:
            return None
        if earlier.passed:
            return NEXT
        ctx.participant.end_reason = QUALIFICATION_FAILED
        return SaveResult(Outcome.screen_out)

    def item_order(self, ctx: PageContext) -> list[dict[str, Any]]:
        """The items in this participant's order: shuffled by their recorded seed.

        In file order the items were the same sequence for everyone (and the demo's strictly
        alternated positive/negative), so the answers were guessable; the seed re-derives the
        order for the export and for a reloaded page.
        """
        items = list(ctx.block.params["items"])
        random.Random(f"{ctx.participant.seed}:{ctx.block.id}:order").shuffle(items)
        return items

    def context(self, ctx: PageContext) -> dict[str, Any]:
        return {"block": ctx.block, "items": self.item_order(ctx)}

    def build_form(self, ctx: PageContext, formdata: Any) -> PageForm:
        class _Form(PageForm):
            pass

        choices = _choices(ctx.block.params["labels"])
        for it in ctx.block.params["items"]:
            field = RadioField(it["text"], choices=choices, validators=[InputRequired(REQUIRED)])
            setattr(_Form, f"q_{it['item_id']}", field)
        return _Form(formdata=formdata)

    def save(self, ctx: PageContext, form: PageForm, rt_ms: int | None) -> SaveResult:
        from webapp.extensions import db

        items = ctx.block.params["items"]
        answers = {it["item_id"]: form[f"q_{it['item_id']}"].data for it in items}
        n_correct = sum(answers[it["item_id"]] == it["base_sentiment"] for it in items)
        # Compare counts, not floats: 19/20 must fail a 100% requirement exactly.
        passed = n_correct >= ctx.block.params["required_accuracy"] * len(items) - 1e-9
        p = ctx.participant
        db.session.add(
            TaskResponse(
                participant_id=p.id,
                block_id=ctx.block.id,
                task_type=self.name,
                step=ctx.step,
                payload={
                    "answers": answers,
                    "n_correct": n_correct,
                    "passed": passed,
                    "order": [it["item_id"] for it in self.item_order(ctx)],
                },
                rt_ms=rt_ms,
                created_at=ctx.now,
            )
        )
        ident = p.identity
        if ident is not None and not p.is_test and self._result(ctx) is None:
            db.session.add(
                QualificationResult(
                    scope=qualification_scope(ctx.study.owner_id),
                    qualification=ctx.block.params["qualification"],
                    platform=ident.platform,
                    external_id=ident.external_id,
                    passed=passed,
                    n_correct=n_correct,
                    n_items=len(items),
                    study_id=ctx.study.id,
                    participant_id=p.id,
                    created_at=ctx.now,
                )
            )
        if passed:
            return NEXT
        p.end_reason = QUALIFICATION_FAILED
        return SaveResult(Outcome.screen_out)

    def bot_answer(self, bot: Any, page: Any, block: TaskBlock) -> dict[str, str]:
        """Every base sentiment, one of them wrong when the bot is to fail."""
        items = block.params["items"]
        wrong = bot.rng.randrange(len(items)) if bot.behaviour.fail_quiz else -1
        return {
            f"q_{it['item_id']}": opposite(it["base_sentiment"])
            if i == wrong
            else it["base_sentiment"]
            for i, it in enumerate(items)
        }


class SentimentAnnotationTask(TaskType):
    """A reserved batch of items (plus gold items), one labelling page each."""

    name = "sentiment_annotation"
    template = "sentiment.html"
    acts_on_entry = True
    limits_slots = True
    labels_items = True
    tables = (
        ExportTable("long", export.long_table, rank=1),
        ExportTable("items", export.items_table),
    )
    codebook = export.CODEBOOK

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        check_keys(
            body,
            {
                "items",
                "labels",
                "annotators_per_item",
                "items_per_participant",
                "gold_items",
                "gold_rate",
                "reservation_minutes",
                "first_label_minutes",
                "heading",
                "instructions",
                "prompt",
            },
            where,
        )
        labels = validate_labels(body.get("labels"), where.at("labels"))
        items = read_items(body.get("items"), where.at("items"))
        batch = get_int(body, "items_per_participant", where, default=10, minimum=1)
        gold_rate = get_number(body, "gold_rate", where, default=0.0, minimum=0.0, maximum=1.0)
        gold: list[dict[str, Any]] = []
        if body.get("gold_items") is not None:
            gold = read_items(
                body["gold_items"], where.at("gold_items"), gold=True, labels=tuple(labels)
            )
        n_gold = round(batch * gold_rate)
        if n_gold > len(gold):
            raise where.at("gold_rate").error(
                f"needs {n_gold} gold item(s) per participant but gold_items has {len(gold)}"
            )
        clash = sorted({i["item_id"] for i in items} & {g["item_id"] for g in gold})
        if clash:
            raise where.at("gold_items").error(f"item ids also used by items: {clash[:5]}")
        return {
            "items": items,
            "gold_items": gold,
            "labels": labels,
            "annotators_per_item": get_int(
                body, "annotators_per_item", where, default=5, minimum=1
            ),
            "items_per_participant": batch,
            "gold_rate": gold_rate,
            "n_gold": n_gold,
            **reservation_keys(body, where),
            "heading": get_line(
                body, "heading", where, default=default_text("Label the statement")
            ),
            "instructions": get_str(body, "instructions", where, default=""),
            "prompt": get_str(
                body,
                "prompt",
                where,
                default=default_text("What is the sentiment of this statement?"),
            ),
        }

    def sync_slots(self, study: Study, block: TaskBlock) -> bool:
        from webapp.services.allocation import sync_block

        body = block.params
        rows = [(it, False) for it in body["items"]] + [(g, True) for g in body["gold_items"]]
        return sync_block(
            study,
            block,
            [
                {
                    "item_id": it["item_id"],
                    "text": it["text"],
                    "base_sentiment": it["base_sentiment"],
                    "is_gold": gold,
                    "gold_label": it["gold_label"] if gold else None,
                    "extra": dict(it["extra"]),
                }
                for it, gold in rows
            ],
        )

    def n_steps(self, block: TaskBlock) -> int:
        return block.params["items_per_participant"] + block.params["n_gold"]

    def page_name(self, block: TaskBlock, step: int) -> str:
        return f"{block.id}/{step}/label"

    def _annotation(self, ctx: PageContext, trial_index: int) -> Annotation | None:
        from webapp.extensions import db

        return db.session.scalar(
            select(Annotation)
            .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
            .where(
                Annotation.participant_id == ctx.participant.id,
                AnnotationItem.block_id == ctx.block.id,
                Annotation.trial_index == trial_index,
            )
        )

    def enter(self, ctx: PageContext) -> SaveResult | None:
        from webapp.services import allocation

        if self._annotation(ctx, ctx.step) is not None:
            return None
        # A first small part of the batch, then the next part whenever the participant has
        # labelled what they hold: someone who never labels holds RESERVE_AHEAD slots, not a
        # whole batch. The plan comes from the participant's recorded seed (and the items got).
        rng = random.Random(f"{ctx.participant.seed}:{ctx.block.id}")
        reserved = allocation.reserve_batch(
            ctx.study,
            ctx.block,
            ctx.participant,
            now=ctx.now,
            rng=rng,
            start=ctx.step,
            limit=allocation.RESERVE_AHEAD,
        )
        if reserved:
            return None
        if ctx.step > 0:
            return SaveResult(Outcome.end_block)  # no item left for them: a partial batch
        if allocation.held_by_newcomers(ctx.study, ctx.block, ctx.participant, ctx.now):
            return None  # not full: the page waits for slots held tentatively (see context)
        ctx.participant.end_reason = STUDY_FULL
        return SaveResult(Outcome.screen_out)

    def build_form(self, ctx: PageContext, formdata: Any) -> PageForm:
        return label_form(ctx.block.params["labels"], formdata)

    def context(self, ctx: PageContext) -> dict[str, Any]:
        annotation = self._annotation(ctx, ctx.step)
        if annotation is None:  # enter found only slots that newcomers hold for now
            return waiting_context(ctx.block)
        # The planned length: the batch is reserved in parts as labels come in.
        n = self.n_steps(ctx.block)
        return {"block": ctx.block, "item": annotation.item, "position": ctx.step + 1, "n_items": n}

    def save(self, ctx: PageContext, form: PageForm, rt_ms: int | None) -> SaveResult:
        from webapp.services import allocation

        annotation = self._annotation(ctx, ctx.step)
        if annotation is None:  # a waiting page shows no form: nothing to label here
            return SaveResult(Outcome.retry)
        allocation.record_label(
            annotation,
            form["label"].data,
            participant=ctx.participant,
            block=ctx.block,
            rt_ms=rt_ms,
            now=ctx.now,
        )
        # The next page reserves the next part of the batch on entry (or ends a partial batch).
        return NEXT

    def bot_answer(self, bot: Any, page: Any, block: TaskBlock) -> dict[str, str]:
        """Gold items as known; others against their base sentiment with ``p_shift``."""
        item_id = page.main["data-item"]
        gold = next((g for g in block.params["gold_items"] if g["item_id"] == item_id), None)
        if gold is not None:
            return {"label": gold["gold_label"]}
        base = next(it for it in block.params["items"] if it["item_id"] == item_id)[
            "base_sentiment"
        ]
        shift = bot.rng.random() < bot.behaviour.p_shift
        return {"label": opposite(base) if shift else base}

    def bot_saved(self, bot: Any, page: Any, data: dict[str, str]) -> None:
        bot.labels.append((page.main["data-item"], data["label"]))
