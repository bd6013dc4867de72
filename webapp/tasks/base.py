"""What a task type is: a YAML schema, pages, a form, a save service, a bot's answer, slots and
export tables, in one unit.

A study is a list of blocks; each block has a task type. The participant flow
(:mod:`webapp.services.flow`) asks the block's task type how many pages it has, which form and
template a page uses, and how to save a valid submission; the bots (:mod:`webapp.bots`) ask it
what to answer, the allocation (:mod:`webapp.services.allocation`) whether it hands out slots,
and the export (:mod:`webapp.services.export`) which tables and columns it adds. A task type is
one folder (``docs/development.md``, "Adding a task type").
"""

from __future__ import annotations

import enum
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from flask_wtf import FlaskForm
from wtforms import HiddenField

from webapp.definition import StudyDefinition, TaskBlock

if TYPE_CHECKING:
    from webapp.export_common import ExportScope
    from webapp.models import Participant, Study
    from webapp.validation import Where

# The participant's columns a task may set with its answer (PageContext.set_participant).
SETTABLE_PARTICIPANT_COLUMNS = frozenset({"quiz_attempts", "quiz_passed", "attention_passed"})

# What one page's form may send: more is refused before it is parsed (webapp.request_limits).
# A typed character is at most ENCODED_CHAR_BYTES once urlencoded (four UTF-8 bytes, each
# written %XX); a task type refuses a block whose page could need more when it is validated.
PAGE_FORM_BYTES = 256 * 1024
PAGE_FORM_FIELDS = 256
ENCODED_CHAR_BYTES = 12
# Room in a page's form for what every page sends (the page token, rt_ms, a submit button).
PAGE_FORM_OWN_BYTES = 4 * 1024
PAGE_FORM_OWN_FIELDS = 8

# A row a task's ``save`` has written with the answer: a Core ``INSERT`` or ``UPDATE``
# (see PageContext.write).
RowWrite = Any


def insert_row(table: Any, prefix: str, columns: tuple[str, ...] | None = None) -> RowWrite:
    """A Core ``INSERT`` of one row of ``table`` (``columns``: default all but the primary key)
    from parameters ``:<prefix><column>``, for :meth:`PageContext.write`.

    Every column must be given a value: a missing one is an error of SQLAlchemy's, not a
    silent NULL or a Python-side default. Create it once, at import.
    """
    from sqlalchemy import bindparam, insert

    names = columns or tuple(c.name for c in table.c if not c.primary_key)
    return insert(table).values({n: bindparam(prefix + n, type_=table.c[n].type) for n in names})


class PageForm(FlaskForm):
    """Fields every participant form carries: the page token and the client-measured time.

    The page token is the form's anti-forgery token: an HMAC (server secret) of the
    participant and their count of answered pages, checked again where the answer is saved and
    spent by the answer it carries (:func:`webapp.services.flow.submit`). A cross-site page cannot
    read it, and the page's URL, which names the participant, is itself a secret capability, so
    Flask-WTF's session-bound CSRF token adds no protection here; without it, the pages after
    consent need no cookie and open no signed session (docs/security.md; the consent form
    keeps its session token).
    """

    class Meta:
        csrf = False

        def get_translations(self, form: Any) -> Any:
            """WTForms' own messages in the study's language (webapp.i18n)."""
            from webapp.i18n import form_translations

            return form_translations()

    page = HiddenField()
    rt_ms = HiddenField()
    # The study's canary word that the page shows to machine readers only (or None).
    canary: str | None = None


@dataclass
class PageContext:
    """Everything a task type needs to render or save one page (no request object)."""

    study: Study
    definition: StudyDefinition  # the study's, typed
    participant: Participant
    block: TaskBlock
    block_index: int
    step: int
    now: datetime
    shown_at: datetime | None = None  # when this page was first served (server timing)
    # Rows a task's ``save`` asks to be written with the answer (see :meth:`write`).
    writes: list[tuple[RowWrite, dict[str, Any]]] = field(default_factory=list)
    # Columns of the participant's own row a task's ``save`` sets (see :meth:`set_participant`).
    participant_values: dict[str, Any] = field(default_factory=dict)

    def write(self, statement: RowWrite, params: dict[str, Any]) -> None:
        """Have a row written with the answer, in the answer's transaction.

        ``statement`` is a Core ``INSERT`` or ``UPDATE`` built once (at import), ``params``
        its values. It runs after the visit's stamp and before the participant's move, under
        the participant's row lock; a duplicate row refuses the whole answer. A task may also
        use the ORM (``db.session.add``): that is flushed at the commit.
        """
        self.writes.append((statement, params))

    def set_participant(self, **values: Any) -> None:
        """Have columns of the participant's row (e.g. ``quiz_passed``) written with the answer.

        They are written by the statement that moves the participant, and the loaded row holds
        them afterwards. The position columns (``page_seq``, ``block_index``, ...) are the
        flow's and cannot be set here.
        """
        if not SETTABLE_PARTICIPANT_COLUMNS.issuperset(values):
            wrong = sorted(set(values) - SETTABLE_PARTICIPANT_COLUMNS)
            raise ValueError(f"a task may not set the participant's {wrong}")
        self.participant_values.update(values)


class Outcome(enum.Enum):
    """What the flow does after a page was saved."""

    next = "next"  # go to the following page
    retry = "retry"  # show this page again (e.g. another quiz attempt)
    screen_out = "screen_out"  # end the session as screened out
    end_block = "end_block"  # skip this block's remaining pages (e.g. a partial batch)


@dataclass(frozen=True)
class SaveResult:
    """The outcome of saving a page, with an optional message for the next page view."""

    outcome: Outcome
    message: str | None = None


NEXT = SaveResult(Outcome.next)


# How long a newcomer's first reservations last before their first label, unless the block sets
# ``first_label_minutes`` (never longer than its ``reservation_minutes``). Reading one item and
# choosing a label takes seconds; a made-up ID that never labels gives its slots back this soon.
FIRST_LABEL_MINUTES = 3.0


def first_label_minutes(block: TaskBlock) -> float:
    """Minutes a reservation lasts while its holder has labelled nothing yet.

    The allocation (:mod:`webapp.services.allocation`) reserves for that long and the waiting
    page promises a slot within it; both read the block's keys here, beside their validation.

    Examples
    --------
    >>> def block(**body):
    ...     return TaskBlock.of("s", "sentiment_annotation", body)
    >>> first_label_minutes(block(reservation_minutes=20.0))
    3.0
    >>> first_label_minutes(block(reservation_minutes=0.5))
    0.5
    >>> first_label_minutes(block(reservation_minutes=20.0, first_label_minutes=8.0))
    8.0
    """
    minutes = block.params.get("first_label_minutes") or FIRST_LABEL_MINUTES
    return min(float(minutes), float(block.params["reservation_minutes"]))


def reservation_keys(body: dict[str, Any], where: Where) -> dict[str, float]:
    """A slot-limited block's ``reservation_minutes`` (default 30) and, when given,
    ``first_label_minutes``.

    ``first_label_minutes`` is how long a newcomer's reservations last before their first
    answer (:func:`first_label_minutes`; by default :data:`FIRST_LABEL_MINUTES`, or
    ``reservation_minutes`` if that is shorter) and may not exceed ``reservation_minutes``. It
    is left out of the normalised block when the study does not set
    it, so the definitions of studies loaded before it existed stay the same.
    """
    from webapp.validation import get_number

    minutes = get_number(body, "reservation_minutes", where, default=30.0, minimum=0.001)
    keys = {"reservation_minutes": minutes}
    if body.get("first_label_minutes") is not None:
        first = get_number(body, "first_label_minutes", where, minimum=0.001)
        if first > minutes:
            raise where.at("first_label_minutes").error(
                f"must be at most reservation_minutes ({minutes:g}), got {first:g}"
            )
        keys["first_label_minutes"] = first
    return keys


# Seconds between the looks of the page that waits for slots newcomers hold tentatively.
WAIT_RETRY_S = 20


def waiting_context(block: TaskBlock) -> dict[str, Any]:
    """Template variables of the page shown instead of "study full" while the only free slots
    are held tentatively by newcomers (:func:`webapp.services.allocation.held_by_newcomers`).

    The participant route renders ``participant/waiting.html`` for them; the page looks again
    every :data:`WAIT_RETRY_S` seconds and continues on its own once a slot is free.
    """
    return {
        "block": block,
        "waiting": True,
        "retry_s": WAIT_RETRY_S,
        "within_minutes": max(1, math.ceil(first_label_minutes(block))),
    }


# An export table's rows and columns, built for one scope from the study's blocks of its type.
TableRows = Callable[["ExportScope", list[TaskBlock]], tuple[list[dict[str, Any]], list[str]]]


@dataclass(frozen=True)
class ExportTable:
    """A table a task type adds to its study's export (:mod:`webapp.services.export`).

    ``build(scope, blocks)`` returns the rows and the table's own columns. A study has one
    ``long`` table: that of the type with the highest ``rank`` among its blocks' types (with
    the platform-ID and ``is_test`` columns added on request); any other name (``items``,
    ``pairs``) is an export format of the studies that have a block of the type.
    """

    name: str
    build: TableRows
    rank: int = 0


@dataclass(frozen=True)
class SlotRules:
    """What the allocation, the slot report and the MTurk batch read of a block of a
    :attr:`TaskType.limits_slots` type, as its type validated them."""

    labels: Sequence[str]  # the answers a slot may be confirmed with, lower-case
    annotators_per_item: int  # k: the answers each item needs
    items_per_participant: int  # non-gold items in one participant's batch
    n_gold: int  # gold items mixed into one participant's batch
    reservation_minutes: float
    items: Sequence[Mapping[str, Any]]  # the non-gold items (``item_id``, ``text``, ...)
    prompt: str  # the question on an item ("" where the type has none)
    instructions: str


# A codebook entry: column -> (type: int|float|str, meaning, allowed values).
Codebook = Mapping[str, tuple[str, str, str]]


class TaskType:
    """Base class of task types; subclasses set ``name`` and override what they need."""

    name: ClassVar[str]
    # The page's template: a file in the ``templates/`` folder beside the type's module,
    # found as ``<name>/<template>`` (:attr:`template_name`) through the registry's loader.
    template: ClassVar[str]
    form: ClassVar[type[PageForm]] = PageForm
    # The tables this type adds to the export, and the codebook entries of their columns.
    tables: ClassVar[tuple[ExportTable, ...]] = ()
    codebook: ClassVar[Codebook] = {}

    @classmethod
    def folder(cls) -> Path:
        """The folder of the type's module: its ``templates/`` live there."""
        return Path(inspect.getfile(cls)).resolve().parent

    @property
    def template_name(self) -> str:
        """The page template's name for ``render_template``."""
        return f"{self.name}/{self.template}"

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        """Validate the block's keys (without ``id``/``type``) and return them normalised."""
        return {}

    def meant_formats(self, body: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The formats a block that :meth:`validate` refused was meant to show, so the rest of
        the study (its ``analysis:`` block) is checked in the same round; ``()`` for a type
        without formats, ``None`` when they cannot be told."""
        return ()

    def n_steps(self, block: TaskBlock) -> int:
        """Number of pages this block shows."""
        return 1

    def page_name(self, block: TaskBlock, step: int) -> str:
        """A readable page name for timing records (``block_id/step``)."""
        return f"{block.id}/{step}"

    def build_form(self, ctx: PageContext, formdata: Any) -> PageForm:
        """Return the page's form bound to ``formdata`` (``None`` on GET)."""
        return self.form(formdata=formdata)

    def context(self, ctx: PageContext) -> dict[str, Any]:
        """Template variables for the page."""
        return {"block": ctx.block}

    def save(self, ctx: PageContext, form: PageForm, rt_ms: int | None) -> SaveResult:
        """Store a valid submission (inside the caller's transaction) and say what follows."""
        return NEXT

    # Task types that must act before a page is shown (reserve items, skip a qualification
    # passed in another study) set this; the flow then locks the participant and calls enter.
    acts_on_entry: ClassVar[bool] = False
    # True for task types that hand out a limited number of slots (their study can be full).
    limits_slots: ClassVar[bool] = False
    # True for task types whose items people label, k per item (sentiment annotation): the
    # MTurk batch, the label imports and the console's item pages are theirs.
    labels_items: ClassVar[bool] = False
    # True for task types whose answers are keyed without their block (a second block of the
    # type would collide with the first's answers): a study may hold one such block.
    once_per_study: ClassVar[bool] = False
    # "first" or "last" for the types a study must begin or end with (consent, debrief).
    position: ClassVar[str | None] = None

    def bonus_answers(self, block: TaskBlock) -> int:
        """How many of the block's answers ``payment.bonus`` may reward, at most."""
        return 0

    def slot_rules(self, block: TaskBlock) -> SlotRules:
        """How a :attr:`limits_slots` block hands out its items: every such type validates
        the keys read here (:func:`reservation_keys`, ...); other types have no slots."""
        if not self.limits_slots:
            raise TypeError(f"a {self.name!r} block has no slots")
        body = block.params
        return SlotRules(
            labels=body["labels"],
            annotators_per_item=body["annotators_per_item"],
            items_per_participant=body["items_per_participant"],
            n_gold=body.get("n_gold", 0),
            reservation_minutes=body["reservation_minutes"],
            items=body["items"],
            prompt=body.get("prompt", ""),
            instructions=body.get("instructions", ""),
        )

    def pair_ids(self, block: TaskBlock) -> tuple[str, ...]:
        """The ids of the pairs whose :meth:`formats` the Latin square balances, in the
        block's order (:func:`webapp.services.design.derive_sequence`); none by default."""
        return ()

    def check_with_blocks(self, block: TaskBlock, earlier: list[TaskBlock], where: Where) -> None:
        """Refuse a validated ``block`` that cannot run beside the ``earlier`` blocks.

        By default only a second block of a :attr:`once_per_study` type is refused.
        """
        if self.once_per_study and any(b.type == self.name for b in earlier):
            raise where.at("type").error(
                f"a study may have only one {self.name!r} block; put all its items in that one"
            )

    def enter(self, ctx: PageContext) -> SaveResult | None:
        """Act before the page is shown (inside the caller's transaction).

        Return ``None`` to show the page, or a result to apply as if the page were submitted
        (``next`` skips it, ``screen_out`` ends the session).
        """
        return None

    def sync_slots(self, study: Study, block: TaskBlock) -> bool:
        """Make a :attr:`limits_slots` block's item rows match the definition (the caller
        commits); return True when rows changed."""
        return False

    def formats(self, block: TaskBlock) -> tuple[str, ...]:
        """The formats the block's trials are balanced over by the Latin square
        (:mod:`webapp.services.design`); none for a type without formats."""
        return ()

    def images(self, block: TaskBlock) -> list[dict[str, Any]]:
        """The bundle's images the block shows (``file``, ``sha256``, ...): only these are
        served (:func:`webapp.services.studies.study_image`)."""
        return []

    def wide(
        self, scope: ExportScope, blocks: list[TaskBlock]
    ) -> tuple[list[str], Callable[[Participant], dict[str, Any]]]:
        """Columns this type adds to the one-row-per-participant ``wide`` export, and a
        participant's cells. Asked of every registered type, with its blocks in the study
        (maybe none)."""
        return [], lambda p: {}

    def bot_answer(self, bot: Any, page: Any, block: TaskBlock) -> dict[str, str]:
        """The fields a scripted participant (``bot``, a :class:`webapp.bots.Bot`) fills in on
        this type's page (``page``, a :class:`webapp.bot_pages.Page`); the form's hidden fields
        are sent as they are."""
        return {}

    def bot_saved(self, bot: Any, page: Any, data: dict[str, str]) -> None:
        """Note on the bot what the server accepted of this page (``labels``, ``answers``)."""
