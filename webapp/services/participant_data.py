"""The participant path's data access: one seam, one SQL implementation.

A participant request does four things with the database: it looks up the page its URL names
(the participant with their study), records that a page was shown, saves an answer, and moves
the participant on. :class:`ParticipantData` names those operations; :class:`SqlParticipantData`
does them with SQLAlchemy Core statements built once at import (only the values travel per
request), on the request's session, so that a task's own writes share the answer's
transaction. :func:`webapp.create_app` chooses the implementation once (:func:`install`) and
:func:`participant_data` hands it to :mod:`webapp.services.flow`.

An answer is one transaction that holds the participant's row lock from its first statement,
the page's lookup (``page(..., lock=True)``, or :meth:`ParticipantData.lock`):
``SELECT ... FOR UPDATE OF participant`` on PostgreSQL; on SQLite every transaction begins
``IMMEDIATE`` (:func:`webapp.create_app`) and so holds the database's write lock, and
SQLAlchemy renders no ``FOR UPDATE``. Concurrent copies of one answer therefore queue, and
each reads the position the previous one left.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from flask import Flask, current_app
from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import defer
from sqlalchemy.orm.attributes import set_committed_value

from webapp.extensions import db
from webapp.models import PageVisit, Participant, ParticipantStatus, Study
from webapp.services.authenticity import PAGE_COLUMNS, PageSignals
from webapp.tasks.base import SETTABLE_PARTICIPANT_COLUMNS

if TYPE_CHECKING:
    from webapp.tasks.base import RowWrite

EXTENSION = "framelab_participant_data"
_HELD = "framelab_participant_lock"  # Session.info: the lock this session's transaction holds

_PARTICIPANT = Participant.__table__
_VISIT = PageVisit.__table__


@dataclass
class Position:
    """Where a participant is: the columns an answer (or a task acting on entry) moves."""

    page_seq: int
    last_seen_at: datetime | None
    block_index: int
    step: int
    status: ParticipantStatus
    finished_at: datetime | None

    @classmethod
    def of(cls, participant: Participant) -> Position:
        """The participant's position as loaded."""
        return cls(*(getattr(participant, name) for name in _POSITION))

    def values(self) -> dict[str, Any]:
        """Column name -> value."""
        return {name: getattr(self, name) for name in _POSITION}


_POSITION = tuple(f.name for f in fields(Position))


@dataclass(frozen=True)
class Answer:
    """What saving one page writes: the visit's stamp (with the page's authenticity signals),
    the task's rows, the participant's columns the task set (``PageContext.set_participant``)
    and their new position."""

    submitted_at: datetime
    rt_ms: int | None
    writes: tuple[tuple[RowWrite, dict[str, Any]], ...]
    columns: dict[str, Any]
    position: Position
    signals: PageSignals = PageSignals()


@dataclass(frozen=True)
class Locked:
    """The participant read under their row lock, with when their current page was shown
    (``None``: no visit recorded for it)."""

    participant: Participant
    shown_at: datetime | None


class ParticipantData(Protocol):
    """The participant path's data access (see the module docstring)."""

    def page(
        self, participant_id: int, slug: str, *, lock: bool = False
    ) -> tuple[Participant, Study] | None:
        """The participant with their study ``slug`` (``None``: no such participant there).

        ``lock``: begin an answer, taking the participant's row lock in the same statement
        (:meth:`lock` then reads nothing more in this transaction)."""

    def record_visit(
        self, participant: Participant, page: str, now: datetime, words: int | None = None
    ) -> None:
        """Note that the participant's current page was shown with ``words`` words of text
        (the first time is kept), move their ``last_seen_at``, and commit."""

    def lock(self, participant_id: int) -> Locked | None:
        """Begin an answer: the participant read under their row lock (``None``: gone)."""

    def save_answer(self, participant: Participant, answer: Answer) -> None:
        """Write the answer and the move under the lock taken by :meth:`lock`, and commit.

        Raises ``IntegrityError`` when a row of the answer exists already (the caller calls
        :meth:`release` and reports a replay)."""

    def save_entry(self, participant: Participant, position: Position | None) -> None:
        """Commit what a page's task did on entry, under the lock taken by :meth:`lock`,
        moving the participant to ``position`` when it is given."""

    def release(self) -> None:
        """End the transaction without writing anything of it."""


# The lookup leaves out columns no participant page reads (they load on first use, as
# deferred columns do); the study's definition comes from the per-process cache
# (webapp.services.studies.study_definition).
_NOT_ON_A_PAGE = (
    Study.definition,
    Study.export_salt,
    Study.source_path,
    Study.created_at,
    Study.updated_at,
    Participant.started_at,
    Participant.study_version,
    Participant.excluded,
    Participant.exclusion_reason,
    Participant.platform_status,
    Participant.reconcile_note,
)

_PAGE = (
    select(Participant, Study)
    .join(Study, Study.id == Participant.study_id)
    .where(Participant.id == bindparam("participant_id"), Study.slug == bindparam("slug"))
    .options(*(defer(c) for c in _NOT_ON_A_PAGE))
)

# When the current page was shown: a correlated scalar subquery, not a join. A join on
# page_seq would drop the row when PostgreSQL re-checks it after waiting for the lock behind a
# concurrent copy of the same answer (which moved page_seq), where that copy must be told
# "already answered".
_SHOWN_AT = (
    select(PageVisit.shown_at)
    .where(PageVisit.participant_id == Participant.id, PageVisit.page_seq == Participant.page_seq)
    .scalar_subquery()
)

_PAGE_LOCKED = (
    _PAGE.add_columns(_SHOWN_AT)
    .with_for_update(of=Participant)
    .execution_options(populate_existing=True)
)

_LOCK = (
    select(Participant, _SHOWN_AT)
    .where(Participant.id == bindparam("participant_id"))
    .options(*(defer(c) for c in _NOT_ON_A_PAGE if c.class_ is Participant))
    .with_for_update(of=Participant)
    .execution_options(populate_existing=True)
)

_LAST_SEEN = (
    update(_PARTICIPANT)
    .where(_PARTICIPANT.c.id == bindparam("p_id"))
    .values(last_seen_at=bindparam("p_seen"))
)

# The parameters of an UPDATE may not be named after the columns it sets: hence the prefixes.
_STAMP_VISIT = (
    update(_VISIT)
    .where(
        _VISIT.c.participant_id == bindparam("s_participant"),
        _VISIT.c.page_seq == bindparam("s_seq"),
    )
    .values(
        submitted_at=bindparam("s_submitted"),
        rt_ms=bindparam("s_rt"),
        **{name: bindparam(f"s_{name}") for name in PAGE_COLUMNS},
    )
)

# The position and every column a task may set, written together: a task's columns are read
# under the row lock with the position, so those it leaves alone are written back unchanged.
_MOVED_COLUMNS = (*_POSITION, *sorted(SETTABLE_PARTICIPANT_COLUMNS))
_MOVE = (
    update(_PARTICIPANT)
    .where(_PARTICIPANT.c.id == bindparam("p_id"))
    .values({name: bindparam(f"n_{name}") for name in _MOVED_COLUMNS})
)


def _visit_insert(dialect: str) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING`` of a page visit: a reload, or two concurrent
    loads of a page, keep the first time it was shown without reading first."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:
        raise ValueError(f"FrameLab runs on SQLite or PostgreSQL, not {dialect!r}")
    return (
        insert(_VISIT)
        .values(
            participant_id=bindparam("v_participant"),
            page_seq=bindparam("v_seq"),
            page=bindparam("v_page"),
            shown_at=bindparam("v_shown"),
            words=bindparam("v_words"),
        )
        .on_conflict_do_nothing(index_elements=["participant_id", "page_seq"])
    )


class SqlParticipantData:
    """:class:`ParticipantData` on the app's database through the request's session."""

    def __init__(self, dialect: str) -> None:
        self._visit = _visit_insert(dialect)

    def page(
        self, participant_id: int, slug: str, *, lock: bool = False
    ) -> tuple[Participant, Study] | None:
        params = {"participant_id": participant_id, "slug": slug}
        row = db.session.execute(_PAGE_LOCKED if lock else _PAGE, params).first()
        if row is None:
            return None
        if lock:
            self._hold(Locked(row[0], row[2]))
        return row[0], row[1]

    def record_visit(
        self, participant: Participant, page: str, now: datetime, words: int | None = None
    ) -> None:
        session = db.session
        session.execute(
            self._visit,
            {
                "v_participant": participant.id,
                "v_seq": participant.page_seq,
                "v_page": page,
                "v_shown": now,
                "v_words": words,
            },
        )
        session.execute(_LAST_SEEN, {"p_id": participant.id, "p_seen": now})
        set_committed_value(participant, "last_seen_at", now)
        session.commit()

    def lock(self, participant_id: int) -> Locked | None:
        session = db.session()
        transaction, held = session.info.get(_HELD, (None, None))
        current = transaction is not None and transaction is session.get_transaction()
        if current and held.participant.id == participant_id:
            return held
        row = session.execute(_LOCK, {"participant_id": participant_id}).first()
        if row is None:
            return None
        return self._hold(Locked(row[0], row[1]))

    @staticmethod
    def _hold(locked: Locked) -> Locked:
        """Remember the lock with the transaction that holds it: a commit or rollback ends
        that transaction, and the next :meth:`lock` then reads under a new lock."""
        session = db.session()
        session.info[_HELD] = (session.get_transaction(), locked)
        return locked

    def save_answer(self, participant: Participant, answer: Answer) -> None:
        session = db.session
        session.execute(
            _STAMP_VISIT,
            {
                "s_participant": participant.id,
                "s_seq": participant.page_seq,
                "s_submitted": answer.submitted_at,
                "s_rt": answer.rt_ms,
                **{f"s_{k}": v for k, v in answer.signals.columns().items()},
            },
        )
        for statement, params in answer.writes:
            session.execute(statement, params)
        self._move(participant, answer.position, answer.columns)
        session.commit()

    def save_entry(self, participant: Participant, position: Position | None) -> None:
        if position is not None:
            self._move(participant, position, {})
        db.session.commit()

    def release(self) -> None:
        db.session.rollback()

    @staticmethod
    def _move(participant: Participant, position: Position, columns: dict[str, Any]) -> None:
        values = {
            **{name: getattr(participant, name) for name in SETTABLE_PARTICIPANT_COLUMNS},
            **columns,
            **position.values(),
        }
        db.session.execute(
            _MOVE, {"p_id": participant.id, **{f"n_{k}": v for k, v in values.items()}}
        )
        # The row holds what was written: nothing left for the ORM to flush.
        for name, value in values.items():
            set_committed_value(participant, name, value)


def install(app: Flask, implementation: ParticipantData) -> None:
    """Make ``implementation`` the app's participant data access."""
    app.extensions[EXTENSION] = implementation


def participant_data() -> ParticipantData:
    """The current app's participant data access (chosen in :func:`webapp.create_app`)."""
    return current_app.extensions[EXTENSION]
