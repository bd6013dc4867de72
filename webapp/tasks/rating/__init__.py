"""``summary_rating``: rate several systems' summaries of the same passages on Likert items.

Each page shows one source — its passages, collapsible — and the N summaries of it in an order
drawn from the participant's seed, labelled "Summary 1…N" (system names never reach the page).
Every summary gets one answer per dimension on a ``scale`` (default the five perspective
dimensions on 1–4). Sources are allocated to ``raters_per_item`` raters each with the
sentiment task's reserve → confirm / expire machinery (:mod:`webapp.tasks.evaluation_slots`).

YAML keys: ``items`` (JSONL file), ``raters_per_item`` (3), ``items_per_participant`` (4),
``reservation_minutes`` (30), ``dimensions`` (list of ``id, name, question, definition``),
``scale`` (``min``, ``max``, ``labels``), ``heading``, ``instructions``, ``passages_open``.
"""

from __future__ import annotations

from typing import Any

from flask_babel import lazy_gettext
from wtforms.validators import InputRequired

from webapp.definition import TaskBlock
from webapp.i18n import N_, default_text
from webapp.models import Study, TaskResponse
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
from webapp.tasks.rating import export
from webapp.tasks.widgets import RadioField
from webapp.validation import (
    LINE_MAX,
    Where,
    check_keys,
    check_text,
    get_int,
    get_line,
    get_list,
    get_mapping,
    get_str,
)

RATED = "rated"  # the slot's label: the ratings themselves are in the page's TaskResponse
REQUIRED = lazy_gettext("Please rate every summary on this point.")

# The five dimensions of the political-perspective rating study, defined for the raters.
DEFAULT_DIMENSIONS: tuple[dict[str, str], ...] = (
    {
        "id": "stance",
        "name": N_("Stance"),
        "question": N_("Does the summary convey the position this perspective takes?"),
        "definition": N_("Whether the perspective is for or against, and that this comes across."),
    },
    {
        "id": "object",
        "name": N_("Object"),
        "question": N_("Does the summary say what the position is about?"),
        "definition": N_("The policy, person or event the perspective has an opinion on."),
    },
    {
        "id": "intensity",
        "name": N_("Intensity"),
        "question": N_("Does the summary keep how strongly the view is held?"),
        "definition": N_("Neither softened nor exaggerated compared with the passages."),
    },
    {
        "id": "consensus",
        "name": N_("Consensus"),
        "question": N_("Does the summary reflect what this side's passages agree on?"),
        "definition": N_("The shared core of the perspective rather than one writer's aside."),
    },
    {
        "id": "reasoning",
        "name": N_("Reasoning"),
        "question": N_("Does the summary give the reasons this perspective offers?"),
        "definition": N_("The arguments or evidence behind the position, not only the position."),
    },
)
DEFAULT_SCALE_LABELS = (N_("Not at all"), N_("Slightly"), N_("Mostly"), N_("Completely"))


def _dimensions(raw: Any, where: Where) -> list[dict[str, str]]:
    if raw is None:
        return [
            {k: v if k == "id" else default_text(v) for k, v in d.items()}
            for d in DEFAULT_DIMENSIONS
        ]
    out = []
    seen: set[str] = set()
    for i, entry in enumerate(get_list(raw, where, min_len=1)):
        dw = where.at(i)
        entry = get_mapping(entry, dw)
        check_keys(entry, {"id", "name", "question", "definition"}, dw)
        dim_id = slots.item_id_of(entry.get("id"), dw.at("id"), seen)
        name = get_line(entry, "name", dw, default=dim_id.capitalize())
        out.append(
            {
                "id": dim_id,
                "name": name,
                "question": get_str(
                    entry,
                    "question",
                    dw,
                    default=default_text("How good is it on %(name)s?") % {"name": name},
                ),
                "definition": get_str(entry, "definition", dw, default=""),
            }
        )
    return out


def _scale(raw: Any, where: Where) -> dict[str, Any]:
    body = get_mapping(raw if raw is not None else {}, where)
    check_keys(body, {"min", "max", "labels"}, where)
    low = get_int(body, "min", where, default=1)
    high = get_int(body, "max", where, default=4)
    if high <= low:
        raise where.at("max").error("must be above min")
    n = high - low + 1
    default = (
        [default_text(x) for x in DEFAULT_SCALE_LABELS]
        if n == len(DEFAULT_SCALE_LABELS)
        else [""] * n
    )
    lw = where.at("labels")
    labels = [
        check_text(str(x), lw.at(i), max_len=LINE_MAX, one_line=True)
        for i, x in enumerate(get_list(body.get("labels", default), lw))
    ]
    if len(labels) != n:
        raise where.at("labels").error(f"needs {n} labels, one per scale point")
    return {"min": low, "max": high, "labels": labels}


def read_sources(raw: Any, where: Where) -> list[dict[str, Any]]:
    """Read a rating set (JSONL, one source per line; ``stimuli/studies/evaluation/README.md``).

    Returns
    -------
    list of dict
        ``item_id``, ``text`` (the passages joined, for the item table), ``perspective``,
        ``topic``, ``passages`` (``label``, ``text``) and ``summaries`` (``summary_id``,
        ``system``, ``text``).
    """
    name, records = slots.read_jsonl(raw, where)
    sources = []
    seen: set[str] = set()
    for n, rec in records:
        rw = Where(name, f"line {n}", line=n)
        item_id = slots.item_id_of(rec.get("item_id"), rw.at("item_id"), seen)
        passages = []
        for i, p in enumerate(get_list(rec.get("passages"), rw.at("passages"), min_len=1)):
            pw = rw.at("passages").at(i)
            p = get_mapping(p, pw)
            label = str(p.get("label") or f"Passage {i + 1}")
            check_text(label, pw.at("label"), max_len=LINE_MAX, one_line=True)
            passages.append({"label": label, "text": slots.text_of(p.get("text"), pw.at("text"))})
        summaries = []
        ids: set[str] = set()
        systems: set[str] = set()
        for i, s in enumerate(get_list(rec.get("summaries"), rw.at("summaries"), min_len=2)):
            sw = rw.at("summaries").at(i)
            s = get_mapping(s, sw)
            system = get_line(s, "system", sw)
            if system in systems:
                raise sw.at("system").error(f"system {system!r} has two summaries of this source")
            systems.add(system)
            summary_id = s.get("summary_id") or f"{item_id}.{system}"
            summaries.append(
                {
                    "summary_id": slots.item_id_of(summary_id, sw.at("summary_id"), ids),
                    "system": system,
                    "text": slots.text_of(s.get("text"), sw.at("text")),
                }
            )
        sources.append(
            {
                "item_id": item_id,
                "text": "\n\n".join(p["text"] for p in passages),
                "perspective": check_text(
                    str(rec.get("perspective") or ""),
                    rw.at("perspective"),
                    max_len=LINE_MAX,
                    one_line=True,
                ),
                "topic": check_text(
                    str(rec.get("topic") or ""), rw.at("topic"), max_len=LINE_MAX, one_line=True
                ),
                "passages": passages,
                "summaries": summaries,
            }
        )
    return sources


class SummaryRatingTask(TaskType):
    """A reserved batch of sources, one page each: every summary rated on every dimension."""

    name = "summary_rating"
    template = "summary_rating.html"
    acts_on_entry = True
    limits_slots = True
    tables = (ExportTable("long", export.long_table, rank=3),)
    codebook = export.CODEBOOK

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        check_keys(body, {*slots.COMMON_KEYS, "dimensions", "scale", "passages_open"}, where)
        items = read_sources(body.get("items"), where.at("items"))
        open_ = body.get("passages_open", True)
        if not isinstance(open_, bool):
            raise where.at("passages_open").error("expected true or false")
        return {
            "items": items,
            **slots.allocation_keys(body, where, len(items)),
            "labels": [RATED],
            "dimensions": _dimensions(body.get("dimensions"), where.at("dimensions")),
            "scale": _scale(body.get("scale"), where.at("scale")),
            "heading": get_line(body, "heading", where, default=default_text("Rate the summaries")),
            "instructions": get_str(body, "instructions", where, default=""),
            "passages_open": open_,
        }

    def sync_slots(self, study: Study, block: TaskBlock) -> bool:
        return slots.sync_block_items(study, block)

    def n_steps(self, block: TaskBlock) -> int:
        return block.params["items_per_participant"]

    def page_name(self, block: TaskBlock, step: int) -> str:
        return f"{block.id}/{step}/rate"

    def enter(self, ctx: PageContext) -> SaveResult | None:
        result = slots.reserve(ctx)
        return result if isinstance(result, SaveResult) else None

    def _order(self, ctx: PageContext, item: dict[str, Any]) -> list[dict[str, Any]]:
        """The summaries in this participant's order (re-derivable from the seed)."""
        summaries = list(item["summaries"])
        slots.block_rng(ctx, "order", item["item_id"]).shuffle(summaries)
        return summaries

    def build_form(self, ctx: PageContext, formdata: Any) -> PageForm:
        annotation = slots.slot(ctx, ctx.step)
        if annotation is None:  # a page waiting for a slot asks nothing
            return PageForm(formdata=formdata)
        n = len(slots.item_of(ctx.block, annotation)["summaries"])
        scale = ctx.block.params["scale"]
        # Plain-string choices (value = label): tuples are deprecated in WTForms 3.2.
        choices = [str(v) for v in range(scale["min"], scale["max"] + 1)]

        class _Form(PageForm):
            pass

        for pos in range(n):
            for dim in ctx.block.params["dimensions"]:
                required = [InputRequired(REQUIRED)]
                # The label names the row in the error summary ("Summary 2, Stance").
                label = f"Summary {pos + 1}, {dim['name']}"
                field = RadioField(label, choices=choices, validators=required)
                setattr(_Form, f"r{pos}_{dim['id']}", field)
        return _Form(formdata=formdata)

    def context(self, ctx: PageContext) -> dict[str, Any]:
        annotation = slots.slot(ctx, ctx.step)
        if annotation is None:  # enter found only slots that newcomers hold for now
            return waiting_context(ctx.block)
        item = slots.item_of(ctx.block, annotation)
        scale = ctx.block.params["scale"]
        points = list(range(scale["min"], scale["max"] + 1))
        return {
            "block": ctx.block,
            "item": item,
            "summaries": self._order(ctx, item),
            "points": list(zip(points, scale["labels"], strict=True)),
            "position": ctx.step + 1,
            # The planned length: the batch is reserved in parts as answers come in.
            "n_items": ctx.block.params["items_per_participant"],
        }

    def save(self, ctx: PageContext, form: PageForm, rt_ms: int | None) -> SaveResult:
        from webapp.extensions import db
        from webapp.services import allocation

        annotation = slots.slot(ctx, ctx.step)
        if annotation is None:  # a waiting page shows no form: nothing to rate here
            return SaveResult(Outcome.retry)
        item = slots.item_of(ctx.block, annotation)
        order = self._order(ctx, item)
        ratings = {
            s["summary_id"]: {
                d["id"]: int(form[f"r{pos}_{d['id']}"].data) for d in ctx.block.params["dimensions"]
            }
            for pos, s in enumerate(order)
        }
        allocation.record_label(
            annotation,
            RATED,
            participant=ctx.participant,
            block=ctx.block,
            rt_ms=rt_ms,
            now=ctx.now,
        )
        db.session.add(
            TaskResponse(
                participant_id=ctx.participant.id,
                block_id=ctx.block.id,
                task_type=self.name,
                step=ctx.step,
                payload={
                    "item_id": item["item_id"],
                    "order": [s["summary_id"] for s in order],
                    "ratings": ratings,
                },
                rt_ms=rt_ms,
                created_at=ctx.now,
            )
        )
        # The next page reserves the next part of the batch on entry (or ends a partial batch).
        return NEXT

    def bot_answer(self, bot: Any, page: Any, block: TaskBlock) -> dict[str, str]:
        """Each rating drawn around ``rating_mean`` (sd 1), rounded into the scale."""
        form, out = page.forms[0], {}
        for name in form.names():
            values = [int(r["value"]) for r in form.radios(name)]
            if values:
                drawn = round(bot.rng.gauss(bot.behaviour.rating_mean, 1.0))
                out[name] = str(min(max(drawn, min(values)), max(values)))
        return out

    def bot_saved(self, bot: Any, page: Any, data: dict[str, str]) -> None:
        rated = [k for k in data if k[:1] == "r" and k[1:].split("_")[0].isdigit()]
        bot.answers += [(page.main["data-item"], k, data[k]) for k in rated]
