"""What a task type is: a YAML schema, a form, a template and a save service, in one unit.

A study is a list of blocks; each block has a task type. The participant flow
(:mod:`webapp.services.flow`) asks the block's task type how many pages it has, which form and
template a page uses, and how to save a valid submission. Adding a task type means adding one
module here, one template in ``templates/tasks/`` and one line in ``webapp/tasks/__init__.py``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from flask_wtf import FlaskForm
from wtforms import HiddenField

if TYPE_CHECKING:
    from webapp.models import Participant, Study
    from webapp.validation import Where


class PageForm(FlaskForm):
    """Fields every participant form carries: the page token and the client-measured time.

    The page token is the form's anti-forgery token: an HMAC (server secret) of the
    participant and their count of answered pages, checked under the participant's row lock and
    spent by the answer it carries (:mod:`webapp.services.flow`). A cross-site page cannot
    read it, and the page's URL, which names the participant, is itself a secret capability, so
    Flask-WTF's session-bound CSRF token adds no protection here; without it, the pages after
    consent need no cookie and open no signed session (docs/security.md; the consent form
    keeps its session token).
    """

    class Meta:
        csrf = False

    page = HiddenField()
    rt_ms = HiddenField()


@dataclass
class PageContext:
    """Everything a task type needs to render or save one page (no request object)."""

    study: Study
    participant: Participant
    block: dict[str, Any]
    block_index: int
    step: int
    now: datetime
    shown_at: datetime | None = None  # when this page was first served (server timing)
    # Rows a task's ``save`` asks to be written with the answer (see :meth:`write`).
    writes: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    # What this page's task type asked to be read with the page's lookup
    # (:meth:`TaskType.page_prefetch`); absent when the lookup did not read it (a POST).
    prefetched: dict[str, Any] = field(default_factory=dict)

    @property
    def definition(self) -> dict[str, Any]:
        """The study's normalised definition."""
        return self.study.definition

    def write(self, statement: Any, params: dict[str, Any]) -> None:
        """Have a Core ``INSERT`` written in the same transaction as the participant's move.

        ``statement`` must be built once (the same object every time) with its own
        ``bindparam`` names, prefixed so that they cannot collide with another write's or the
        flow's. On PostgreSQL it rides as a ``WITH`` clause in the statement that moves the
        participant (one statement per answer instead of two); elsewhere it runs on its own.
        A task may equally use the ORM (``db.session.add``): that is flushed at the commit.
        """
        self.writes.append((statement, params))


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


class TaskType:
    """Base class of task types; subclasses set ``name`` and override what they need."""

    name: ClassVar[str]
    template: ClassVar[str]
    form: ClassVar[type[PageForm]] = PageForm

    def validate(self, body: dict[str, Any], where: Where) -> dict[str, Any]:
        """Validate the block's keys (without ``id``/``type``) and return them normalised."""
        return {}

    def n_steps(self, block: dict[str, Any]) -> int:
        """Number of pages this block shows."""
        return 1

    def page_name(self, block: dict[str, Any], step: int) -> str:
        """A readable page name for timing records (``block_id/step``)."""
        return f"{block['id']}/{step}"

    def page_prefetch(self) -> Any | None:
        """A scalar subquery correlated with the participant's row, or ``None``.

        Read in the same statement as the page's lookup (participant and study) when a page is
        shown, so a page that needs one more value of the database costs no statement of its
        own; the value reaches ``ctx.prefetched[name]`` for this task type's pages. It is read
        on every page of every study, so it must be cheap (an index lookup), and the task must
        still work without it (``ctx.prefetched`` is empty when it was not read).
        """
        return None

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
    # True for task types whose answers are keyed without their block (a second block of the
    # type would collide with the first's answers): a study may hold one such block.
    once_per_study: ClassVar[bool] = False

    def enter(self, ctx: PageContext) -> SaveResult | None:
        """Act before the page is shown (inside the caller's transaction).

        Return ``None`` to show the page, or a result to apply as if the page were submitted
        (``next`` skips it, ``screen_out`` ends the session).
        """
        return None
