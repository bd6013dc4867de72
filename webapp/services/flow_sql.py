"""The participant path's statements, built once per process with bound parameters.

Every participant request runs the same three or four statements with different values.
Building a statement (``select(...).join(...).where(...)``) and computing its cache key took
about 0.12 ms of CPU each time on the benchmark machine, before SQLAlchemy's compiled cache
could even be consulted; a statement built once keeps its cache key, so only the values travel.
The statements are immutable and shared by all threads (SQLAlchemy statements are safe to
reuse); each is built on first use (``functools.cache``: a race builds it twice, harmlessly).

The writes are Core statements on the tables, not ORM-enabled ones on the classes: an
ORM-enabled ``UPDATE`` first runs the ORM's bulk-update machinery and an autoflush (about a
tenth of a page's CPU on the benchmark machine, issue 21), and these statements need neither.
Callers mark what they wrote on the loaded rows (``set_committed_value``) themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, exists, select, update
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import defer

from webapp.models import PageVisit, Participant, Study
from webapp.services.driver_sql import DriverStatement, compile_for_driver

if TYPE_CHECKING:
    from webapp.tasks.base import RowWrite

_PARTICIPANT = Participant.__table__
_VISIT = PageVisit.__table__


# Columns no participant page reads, left out of the page's lookup: each column read costs the
# driver and the ORM per row (a tenth of the lookup's CPU for these ten). Anything that does
# read one loads it on first use, as SQLAlchemy does for deferred columns.
_NOT_ON_A_PAGE = (
    Study.definition,  # from the per-process cache, keyed on definition_hash
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


def _shown_at() -> Any:
    """When the participant's current page was shown: a scalar subquery correlated with the
    participant's row (see :func:`page_rows` on why not a join)."""
    return (
        select(PageVisit.shown_at)
        .where(
            PageVisit.participant_id == Participant.id,
            PageVisit.page_seq == Participant.page_seq,
        )
        .scalar_subquery()
    )


def _page_extra(shown: bool, prefetch: tuple[Any, ...]) -> tuple[Any, ...]:
    """The page lookup's columns after the two rows: when the page was shown (``shown``), or
    the values the task types read with every page (``page_prefetch``)."""
    if shown:
        return (_shown_at(),)
    return tuple(t.page_prefetch().label(f"prefetch_{t.name}") for t in prefetch)


def _of_participant_in_study(query: Any) -> Any:
    """``query`` on the participant ``:participant_id`` joined with their study ``:slug``."""
    return query.join(Study, Study.id == Participant.study_id).where(
        Participant.id == bindparam("participant_id"), Study.slug == bindparam("slug")
    )


@cache
def page_rows(*, lock: bool, shown: bool = False, prefetch: tuple[Any, ...] = ()) -> Any:
    """A participant (``:participant_id``) with their study (``:slug``), in one row.

    ``prefetch``: task types whose :meth:`~webapp.tasks.base.TaskType.page_prefetch` values
    are read too (columns ``prefetch_<name>``), without ``shown`` only.

    ``shown``: with it, when the participant's current page was shown (a submission needs it).
    That is a scalar subquery, not a join: a join on ``page_seq`` would drop the row when
    PostgreSQL re-checks it after waiting for the lock behind a concurrent copy of the same
    POST (which moves ``page_seq``), where the copy must be told "already answered".

    ``lock``: ``FOR UPDATE OF participant`` (PostgreSQL; SQLite transactions are immediate),
    re-reading the row even if the session had it.
    """
    query = _of_participant_in_study(select(Participant, Study, *_page_extra(shown, prefetch)))
    query = query.options(*(defer(c) for c in _NOT_ON_A_PAGE))
    if lock:
        query = query.with_for_update(of=Participant).execution_options(populate_existing=True)
    return query


@dataclass(frozen=True)
class DriverPageRows:
    """:func:`page_rows` without a lock as columns, for :mod:`webapp.services.driver_sql`:
    the statement, then the attribute names of the participant's and the study's columns, in
    the order selected (the extra column, when the page was shown or the prefetched values,
    follow them)."""

    statement: DriverStatement
    participant_keys: tuple[str, ...]
    study_keys: tuple[str, ...]


@lru_cache(maxsize=64)  # per dialect: one per engine (tests make many)
def page_rows_for_driver(
    dialect: Dialect, *, shown: bool = False, prefetch: tuple[Any, ...] = ()
) -> DriverPageRows:
    """:func:`page_rows` (``lock=False``) selecting the two rows' columns instead of the
    entities (the same columns the ORM statement reads), compiled for ``dialect``."""
    keys = {}
    for entity in (Participant, Study):
        mapper = sa_inspect(entity)
        left_out = {a.key for a in _NOT_ON_A_PAGE if a.class_ is entity}
        keys[entity] = tuple(a.key for a in mapper.column_attrs if a.key not in left_out)
    columns = tuple(getattr(e, k) for e in (Participant, Study) for k in keys[e])
    extra = _page_extra(shown, prefetch)
    query = _of_participant_in_study(select(*columns, *extra))
    return DriverPageRows(compile_for_driver(query, dialect), keys[Participant], keys[Study])


@cache
def locked_participant() -> Any:
    """A participant (``:participant_id``) under its row lock, re-read even if the session had
    it, with when their current page was shown (see :func:`page_rows` on why a subquery)."""
    return (
        select(Participant, _shown_at())
        .where(Participant.id == bindparam("participant_id"))
        .options(*(defer(c) for c in _NOT_ON_A_PAGE if c.class_ is Participant))
        .with_for_update(of=Participant)
        .execution_options(populate_existing=True)
    )


@cache
def study_by_slug() -> Any:
    """A study (``:slug``) without its definition (it comes from the per-process cache)."""
    return select(Study).where(Study.slug == bindparam("slug")).options(defer(Study.definition))


@cache
def visit_insert(dialect: str) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING`` of a page visit.

    Parameters ``:v_participant``, ``:v_seq``, ``:v_page``, ``:v_shown``.
    """
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return (
        insert(_VISIT)
        .on_conflict_do_nothing(index_elements=["participant_id", "page_seq"])
        .values(
            participant_id=bindparam("v_participant"),
            page_seq=bindparam("v_seq"),
            page=bindparam("v_page"),
            shown_at=bindparam("v_shown"),
        )
    )


@cache
def visit_and_last_seen() -> Any:
    """PostgreSQL: the visit insert in a ``WITH`` clause of the participant's ``last_seen_at``
    update (parameters of :func:`visit_insert` plus ``:p_id``, ``:p_seen``).

    PostgreSQL runs a data-modifying ``WITH`` to completion whether or not the main statement
    reads its result.
    """
    return (
        update(_PARTICIPANT)
        .where(_PARTICIPANT.c.id == bindparam("p_id"))
        .values(last_seen_at=bindparam("p_seen"))
        .add_cte(visit_insert("postgresql").cte("visit"))
    )


def _visit_stamp() -> Any:
    """``UPDATE page_visit`` of a page as submitted (``:s_participant``, ``:s_seq``,
    ``:submitted``, ``:rt``), on its own or as a ``WITH`` clause."""
    return (
        update(_VISIT)
        .where(
            _VISIT.c.participant_id == bindparam("s_participant"),
            _VISIT.c.page_seq == bindparam("s_seq"),
        )
        .values(submitted_at=bindparam("submitted"), rt_ms=bindparam("rt"))
    )


@cache
def stamp_visit() -> Any:
    """Stamp a page's visit as submitted and return when it was shown.

    Parameters ``:s_participant``, ``:s_seq``, ``:submitted``, ``:rt`` (an UPDATE's
    parameters must not be named after its columns).
    """
    return _visit_stamp().returning(_VISIT.c.shown_at)


def _move(extra: tuple[str, ...] = ()) -> Any:
    """The participant's move (``:p_id``; ``:n_page_seq``, ``:n_last_seen``, ``:n_block``,
    ``:n_step``, ``:n_status``, ``:n_finished``), with the columns ``extra`` a task sets
    (``PageContext.set_participant``) from ``:n_<column>``."""
    return (
        update(_PARTICIPANT)
        .where(_PARTICIPANT.c.id == bindparam("p_id"))
        .values(
            page_seq=bindparam("n_page_seq"),
            last_seen_at=bindparam("n_last_seen"),
            block_index=bindparam("n_block"),
            step=bindparam("n_step"),
            status=bindparam("n_status"),
            finished_at=bindparam("n_finished"),
            **{name: bindparam(f"n_{name}") for name in extra},
        )
    )


@cache
def position_and_stamp(extra: tuple[str, ...] = ()) -> Any:
    """PostgreSQL: a submission's move of the participant (:func:`_move`) with the page
    visit's stamp (``:s_participant``, ``:s_seq``, ``:submitted``, ``:rt``) in a ``WITH``
    clause: one statement instead of two."""
    return _move(extra).add_cte(_visit_stamp().cte("stamp"))


@cache
def position_stamp_and(writes: tuple[RowWrite, ...] = (), extra: tuple[str, ...] = ()) -> Any:
    """:func:`position_and_stamp` with the task's rows (``PageContext.write``, ungated) as
    further ``WITH`` clauses: an answer under the row lock is one statement. Keyed by the
    writes themselves (each is built once) and the participant's columns the task sets, so
    each combination is built, and its cache key computed, once."""
    statement = position_and_stamp(extra)
    for i, write in enumerate(writes):
        statement = statement.add_cte(write(None).cte(f"answer_{i}"))
    return statement


@cache
def answer(writes: tuple[RowWrite, ...] = (), extra: tuple[str, ...] = ()) -> Any:
    """PostgreSQL: an answer without a transaction or row lock, in one statement.

    The participant's move (:func:`_move`, with the columns ``extra`` the task sets) happens
    only if they are still on the page the submission was read at (``:r_seq``) and still
    taking part; the visit's stamp and the task's rows (``PageContext.write``) are gated on
    that move (``WITH moved AS (UPDATE ... RETURNING id)``, each write conditional on
    ``EXISTS (SELECT FROM moved)``). The statement returns the participant's id when it moved
    them and no row otherwise.

    Why this is safe without ``FOR UPDATE``: one statement is atomic, and under READ
    COMMITTED an ``UPDATE`` that finds its row changed by a concurrent transaction waits for
    it and re-checks its condition on the new row. Of two concurrent copies of one answer, the
    second finds ``page_seq`` moved, moves nothing and, its writes gated off, writes nothing
    (the caller answers "already answered"); a unique constraint remains the last defence.
    Data-modifying ``WITH`` clauses run once, to completion, and the gated ones read
    ``moved``'s result, so the move is decided before any of them writes.
    """
    moved = (
        _move(extra)
        .where(
            _PARTICIPANT.c.page_seq == bindparam("r_seq"),
            _PARTICIPANT.c.status == bindparam("r_status"),
        )
        .returning(_PARTICIPANT.c.id)
        .cte("moved")
    )
    gate = exists(select(moved.c.id))
    statement = select(moved.c.id).add_cte(_visit_stamp().where(gate).cte("stamp"))
    for i, write in enumerate(writes):
        statement = statement.add_cte(write(gate).cte(f"answer_{i}"))
    return statement
