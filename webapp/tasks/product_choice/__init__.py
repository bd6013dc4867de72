"""Product choice with willingness to pay: the task type of the product-choice study.

Each trial is two pages. The *choice* page shows two manufacturers of one product type, each
described by the text of the trial's format (the original review, an LLM summary, a mitigated
summary, … one of the block's ``formats``; :mod:`.pairs`), and asks which one the participant
would buy. The *WTP* page then shows the price of the product not chosen
(X, in the study's ``payment.currency``) and asks how much more than X the participant would
pay for the chosen one.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from flask_babel import gettext, lazy_gettext
from sqlalchemy import Float, bindparam, literal, select, update
from wtforms import ValidationError
from wtforms.fields import Label
from wtforms.validators import InputRequired

from webapp.definition import TaskBlock
from webapp.i18n import (
    DEFAULT_CURRENCY,
    DEFAULT_LANGUAGE,
    N_,
    currency_name,
    default_text,
    format_money,
    money_affixes,
    parse_amount,
)
from webapp.models import ChoiceResponse
from webapp.services.design import FORMATS, Trial, derive_sequence
from webapp.tasks.base import (
    NEXT,
    ExportTable,
    PageContext,
    PageForm,
    SaveResult,
    TaskType,
    insert_row,
)
from webapp.tasks.product_choice import export
from webapp.tasks.product_choice.pairs import (
    check_methods,
    meant_formats,
    product_text,
    validate_formats,
    validate_labels,
    validate_pairs,
)
from webapp.tasks.widgets import NUMBER_MAX_CHARS, RadioField, StringField
from webapp.text_rules import fill
from webapp.validation import (
    Collector,
    StudyDefinitionError,
    Where,
    check_keys,
    get_mapping,
    get_number,
    get_str,
    get_template,
    read_yaml,
    stimulus_path,
    written_key,
)

__all__ = [
    "WTP_FIELDS",
    "WTP_QUESTION",
    "ChoiceForm",
    "ProductChoiceTask",
    "WtpForm",
    "parse_premium",
    "validate_pairs",
]

SIDES = ("left", "right")
_CHOICES = ChoiceResponse.__table__


# The columns a choice page writes: all but the key and the WTP page's (``wtp_*``).
_CHOICE_COLUMNS = tuple(
    c.name for c in _CHOICES.c if c.name != "id" and not c.name.startswith("wtp_")
)


# The choice's row (``:c_<column>``).
_INSERT_CHOICE = insert_row(_CHOICES, "c_", _CHOICE_COLUMNS)


# The WTP answer written onto its choice's row (``:w_*`` parameters). ``wtp_premium_pct`` is
# computed by the database as ``100.0 * premium / other_price_usd``, the same IEEE double
# operations in the same order as in Python.
_W_PREMIUM = bindparam("w_usd", type_=Float())
_SET_WTP = (
    update(_CHOICES)
    .where(
        _CHOICES.c.participant_id == bindparam("w_participant"),
        _CHOICES.c.block_id == bindparam("w_block"),
        _CHOICES.c.trial_index == bindparam("w_trial"),
    )
    .values(
        wtp_premium_usd=_W_PREMIUM,
        wtp_premium_pct=literal(100.0, Float()) * _W_PREMIUM / _CHOICES.c.other_price_usd,
        wtp_rt_ms=bindparam("w_rt"),
        wtp_answered_at=bindparam("w_at"),
    )
)


@cache
def _chose_target_query() -> Any:
    """Whether a participant's trial (``:participant``, ``:block``, ``:trial``) chose the target."""
    return select(_CHOICES.c.chose_target).where(
        _CHOICES.c.participant_id == bindparam("participant"),
        _CHOICES.c.block_id == bindparam("block"),
        _CHOICES.c.trial_index == bindparam("trial"),
    )


class ChoiceForm(PageForm):
    """Which of the two products; values are the sides so labels can change freely."""

    side = RadioField(
        lazy_gettext("Which product would you buy?"),
        choices=["left", "right"],
        validators=[InputRequired(lazy_gettext("Please choose one of the two products."))],
    )


class WtpForm(PageForm):
    """The premium over the other product's price, validated against the block's maximum."""

    # The label names the study's currency (set_money); this one is for a form without a study.
    premium = StringField(
        lazy_gettext("Additional amount"),
        validators=[
            InputRequired(lazy_gettext("Please enter an amount (0 if you would pay nothing more)."))
        ],
        render_kw={"maxlength": NUMBER_MAX_CHARS},
    )
    max_premium: float = 0.0
    language: str = DEFAULT_LANGUAGE
    currency: str = DEFAULT_CURRENCY

    def set_money(self, max_premium: float, language: str, currency: str) -> None:
        """Read and label the amount in the study's language and currency."""
        self.max_premium, self.language, self.currency = max_premium, language, currency
        self.premium.label = Label(
            self.premium.id,
            gettext(
                "Additional amount in %(currency)s", currency=currency_name(currency, language)
            ),
        )

    def validate_premium(self, field: StringField) -> None:
        """Attach a clear message for non-numeric, negative or too large amounts."""
        try:
            parse_premium(field.data or "", self.max_premium, self.language, self.currency)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


def parse_premium(
    text: str,
    max_premium: float,
    language: str = DEFAULT_LANGUAGE,
    currency: str = DEFAULT_CURRENCY,
) -> float:
    """Parse a typed amount such as ``"12.50"``, ``"$3"`` or ``"12,50"``.

    The study's language decides the decimal mark (:func:`webapp.i18n.parse_amount`): in
    English a comma followed by one or two digits is a decimal comma and ``"1,000"`` (a
    thousands separator, which could also be a mistyped decimal) is refused with its own
    message; in German or Spanish the comma is the decimal mark and ``"1.000"`` is refused.

    Parameters
    ----------
    text : str
        What the participant typed.
    max_premium : float
        The configured maximum premium.
    language : str
        The study's language (``en``, ``de``, ...).
    currency : str
        The study's currency (``payment.currency``): its symbol may be typed with the amount.

    Returns
    -------
    float
        The amount in the study's currency, 0 ≤ amount ≤ ``max_premium``.

    Raises
    ------
    ValueError
        With a message meant for the participant.

    Examples
    --------
    >>> parse_premium(" $12.5 ", 100)
    12.5
    >>> parse_premium("12,50", 100)
    12.5
    >>> parse_premium("12,50 €", 100, "de", "EUR")
    12.5
    """
    value = parse_amount(text, language, currency)
    if value > max_premium:
        raise ValueError(
            gettext(
                "Please enter at most %(amount)s.",
                amount=format_money(max_premium, language, currency),
            )
        )
    return value


# What the WTP question may name: the other product's price, the two manufacturers and the
# product type. Filled by text_rules.fill (never str.format on researcher text).
WTP_FIELDS = ("price", "chosen", "other", "product")
WTP_QUESTION = N_(
    "The other product costs {price}. How much more than {price} would you pay for the one "
    "you chose?"
)


# A participant's trials, re-derived once per process (each choice and WTP page asks for them
# two or three times). derive_sequence is pure, and the definition
# hash names the definition, so the key says everything the trials depend on; cleared when full.
_TRIALS: dict[tuple[str, int, str, str], tuple[Trial, ...]] = {}
_TRIALS_MAX = 20_000


class ProductChoiceTask(TaskType):
    """Ten (or any number of) product pairs, each a choice page and a WTP page."""

    name = "product_choice"
    template = "product_choice.html"
    # Rank 0: the long table of a study whose blocks have no other (an empty one).
    tables = (ExportTable("long", export.long_table),)
    codebook = export.CODEBOOK
    # Choices are keyed by (participant, block, trial_index) and analysed by pair: several
    # blocks may run in one study when no pair is in two of them (check_with_blocks).

    def bonus_answers(self, block: TaskBlock) -> int:
        return len(block.params.get("pairs", []))

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        check_keys(body, {"pairs", "formats", "labels", "prompt", "wtp"}, where)
        # A block without ``formats:`` keeps the two-format shape of earlier definitions.
        legacy = "formats" not in body
        fw = where.at("formats")
        formats = list(FORMATS) if legacy else validate_formats(body["formats"], fw)
        # The block's parts are independent: their errors are reported together.
        found = Collector()
        found.run(check_methods, formats, fw)
        meant = meant_formats(formats)  # a misspelt method: one message, at `formats:`
        pairs = found.run(self._pairs, body.get("pairs"), where, meant, legacy)
        labels = found.run(validate_labels, body.get("labels"), where.at("labels"), meant)
        ww = where.at("wtp")
        wtp = get_mapping(body.get("wtp") or {}, ww)
        max_premium = written_key(wtp, "max_premium", "max_premium_usd", ww)
        check_keys(wtp, {max_premium, "question"}, ww)
        prompt = default_text("Which product would you buy?")
        out = {
            **({} if legacy else {"formats": formats}),
            "pairs": pairs,
            "labels": labels,
            "prompt": found.run(get_str, body, "prompt", where, default=prompt),
            "wtp": {
                "max_premium": found.run(
                    get_number, wtp, max_premium, ww, default=100.0, minimum=0.01
                ),
                "question": found.run(
                    get_template, wtp, "question", ww, WTP_FIELDS, default_text(WTP_QUESTION)
                ),
            },
        }
        found.check()
        return out

    def meant_formats(self, body: Mapping[str, Any]) -> tuple[str, ...] | None:
        if "formats" not in body:
            return FORMATS
        try:
            return tuple(meant_formats(validate_formats(body["formats"], Where(""))))
        except StudyDefinitionError:
            return None

    @staticmethod
    def _pairs(raw: Any, where: Where, formats: list[str], legacy: bool) -> list[dict[str, Any]]:
        """The block's pairs: inline, or from a pairs file of the study's bundle."""
        pw = where.at("pairs")
        named_at = None if legacy else where.at("formats")
        if not isinstance(raw, str):
            return validate_pairs(raw, pw, formats, legacy=legacy, named_at=named_at)
        name = stimulus_path(raw, pw, "a pairs file")
        # Errors inside it name the pairs file; load_bundle adds their line there.
        file_where = Where(name, "", pw.bundle)
        doc = get_mapping(read_yaml(name, pw), file_where)
        return validate_pairs(
            doc.get("pairs"), file_where.at("pairs"), formats, legacy=legacy, named_at=named_at
        )

    def check_with_blocks(self, block: TaskBlock, earlier: list[TaskBlock], where: Where) -> None:
        """Refuse a second block that shares pairs with, or has other formats than, an earlier one.

        Answers are analysed by pair (the wide export has a column per pair), and a
        participant's one sequence picks the Latin-square row of every block, so every block
        needs as many formats.
        """
        mine = {p["id"] for p in block.params["pairs"]}
        k = len(self.formats(block))
        for other in earlier:
            if other.type != self.name:
                continue
            shared = sorted(mine & {p["id"] for p in other.params["pairs"]})
            if shared:
                raise where.at("pairs").error(
                    f"pair id(s) {shared[:5]} are also in block {other.id!r}: each pair may "
                    "be in only one 'product_choice' block (answers are analysed by pair); give "
                    "this block other pairs or put them all in one block"
                )
            if len(self.formats(other)) != k:
                raise where.at("formats").error(
                    f"{k} formats here but {len(self.formats(other))} in block {other.id!r}: "
                    "every product_choice block of a study needs the same number of formats "
                    "(each participant's sequence is one row of the Latin square in every block)"
                )

    def formats(self, block: TaskBlock) -> tuple[str, ...]:
        """The block's formats (``original``, ``summary`` by default).

        Examples
        --------
        >>> ProductChoiceTask().formats(TaskBlock.of("c", "product_choice", {"pairs": []}))
        ('original', 'summary')
        >>> body = {"formats": ["original", "m"]}
        >>> ProductChoiceTask().formats(TaskBlock.of("c", "product_choice", body))
        ('original', 'm')
        """
        return tuple(block.params.get("formats") or FORMATS)

    def pair_ids(self, block: TaskBlock) -> tuple[str, ...]:
        return tuple(p["id"] for p in block.params["pairs"])

    def images(self, block: TaskBlock) -> list[dict[str, Any]]:
        products = [pair[side] for pair in block.params["pairs"] for side in ("target", "control")]
        return [prod["image"] for prod in products if prod.get("image") is not None]

    def wide(self, scope: Any, blocks: list[TaskBlock]) -> tuple[list[str], Any]:
        return export.wide(scope, blocks)

    def n_steps(self, block: TaskBlock) -> int:
        return 2 * len(block.params["pairs"])

    def page_name(self, block: TaskBlock, step: int) -> str:
        return f"{block.id}/{step // 2}/{'wtp' if step % 2 else 'choice'}"

    # -- helpers ------------------------------------------------------------------------------
    def trial(self, ctx: PageContext) -> Trial:
        """The trial this page belongs to, re-derived from the participant's seed."""
        p = ctx.participant
        key = (ctx.study.definition_hash, p.seed, p.sequence, ctx.block.id)
        trials = _TRIALS.get(key)
        if trials is None:
            if len(_TRIALS) >= _TRIALS_MAX:
                _TRIALS.clear()
            trials = _TRIALS[key] = tuple(
                derive_sequence(ctx.definition.tasks, p.seed, p.sequence, ctx.block.id)
            )
        return trials[ctx.step // 2]

    def _pair(self, ctx: PageContext, pair_id: str) -> dict[str, Any]:
        return next(p for p in ctx.block.params["pairs"] if p["id"] == pair_id)

    def _chose_target(self, ctx: PageContext, trial_index: int) -> bool | None:
        from webapp.extensions import db

        return db.session.scalar(
            _chose_target_query(),
            {"participant": ctx.participant.id, "block": ctx.block.id, "trial": trial_index},
        )

    # -- the TaskType interface ---------------------------------------------------------------
    def build_form(self, ctx: PageContext, formdata: Any) -> PageForm:
        if ctx.step % 2 == 0:
            return ChoiceForm(formdata=formdata)
        form = WtpForm(formdata=formdata)
        form.set_money(
            ctx.block.params["wtp"]["max_premium"],
            ctx.definition.language,
            ctx.definition.payment.currency,
        )
        return form

    def context(self, ctx: PageContext) -> dict[str, Any]:
        trial = self.trial(ctx)
        pair = self._pair(ctx, trial.pair_id)
        n = len(ctx.block.params["pairs"])
        base = {"block": ctx.block, "trial": trial, "pair": pair, "n_trials": n}
        if ctx.step % 2 == 0:
            target, control = pair["target"], pair["control"]
            left, right = (target, control) if trial.target_side == "left" else (control, target)
            products = [
                {
                    "side": side,
                    "manufacturer": prod["manufacturer"],
                    "text": product_text(prod, trial.format),
                    "image": prod.get("image"),
                }
                for side, prod in (("left", left), ("right", right))
            ]
            return {
                **base,
                "kind": "choice",
                "products": products,
                "label": ctx.block.params["labels"][trial.format],
            }
        chose_target = self._chose_target(ctx, trial.trial_index)
        assert chose_target is not None, "the WTP page always follows a saved choice"
        chosen = pair["target"] if chose_target else pair["control"]
        other = pair["control"] if chose_target else pair["target"]
        language, currency = ctx.definition.language, ctx.definition.payment.currency
        values = {
            "price": format_money(other["price"], language, currency),
            "chosen": chosen["manufacturer"],
            "other": other["manufacturer"],
            "product": pair["product_type"],
        }
        return {
            **base,
            "kind": "wtp",
            "chosen": chosen,
            "other": other,
            "other_price": other["price"],
            "question": fill(ctx.block.params["wtp"]["question"], values),
            "max_premium": ctx.block.params["wtp"]["max_premium"],
            "max_text": format_money(ctx.block.params["wtp"]["max_premium"], language, currency),
            "money_affixes": money_affixes(language, currency),
        }

    def save(self, ctx: PageContext, form: PageForm, rt_ms: int | None) -> SaveResult:
        trial = self.trial(ctx)
        pair = self._pair(ctx, trial.pair_id)
        if ctx.step % 2 == 0:
            side = form["side"].data
            chose_target = side == trial.target_side
            other = pair["control"] if chose_target else pair["target"]
            server_ms = None
            if ctx.shown_at is not None:
                server_ms = int((ctx.now - ctx.shown_at).total_seconds() * 1000)
            row = {
                "participant_id": ctx.participant.id,
                "block_id": ctx.block.id,
                "trial_index": trial.trial_index,
                "pair_id": trial.pair_id,
                "format": trial.format,
                "target_side": trial.target_side,
                "chosen_side": side,
                "chose_target": chose_target,
                "other_price_usd": other["price"],
                "rt_ms": rt_ms,
                "server_rt_ms": server_ms,
                "answered_at": ctx.now,
            }
            ctx.write(_INSERT_CHOICE, {f"c_{k}": v for k, v in row.items()})
            return NEXT
        premium = parse_premium(
            form["premium"].data,
            ctx.block.params["wtp"]["max_premium"],
            ctx.definition.language,
            ctx.definition.payment.currency,
        )
        # The choice's row exists: the WTP page is only shown after it (its template reads it).
        ctx.write(
            _SET_WTP,
            {
                "w_participant": ctx.participant.id,
                "w_block": ctx.block.id,
                "w_trial": trial.trial_index,
                "w_usd": premium,
                "w_rt": rt_ms,
                "w_at": ctx.now,
            },
        )
        return NEXT

    def bot_answer(self, bot: Any, page: Any, block: TaskBlock) -> dict[str, str]:
        """The target with the bot's probability for the page's format; on the WTP page a
        premium drawn as a percent of the other price (``BotBehaviour``)."""
        b = bot.behaviour
        if page.kind == "wtp":
            price, maximum = float(page.main["data-other-price"]), float(page.main["data-max"])
            mean = b.wtp_mean_pct + (b.wtp_target_shift_pct if bot.last_chose_target else 0.0)
            pct = max(0.0, bot.rng.gauss(mean, b.wtp_sd_pct))
            return {"premium": f"{min(maximum, price * pct / 100):.2f}"}
        pair = next(p for p in block.params["pairs"] if p["id"] == page.main["data-pair"])
        radios = page.forms[0].radios("side")
        target = next(
            r for r in radios if r.get("data-manufacturer") == pair["target"]["manufacturer"]
        )
        other = next(r for r in radios if r is not target)
        bot.last_chose_target = bot.rng.random() < b.p_target.get(page.main["data-format"], 0.5)
        return {"side": (target if bot.last_chose_target else other)["value"]}
