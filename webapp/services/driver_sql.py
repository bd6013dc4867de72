"""SQLAlchemy Core statements sent through the database driver directly.

For the three statements a participant's page and answer run on PostgreSQL
(:mod:`webapp.services.flow_driver`): the page lookup, the visit record and the one-statement
answer. On the benchmark machine SQLAlchemy's execution of a cached statement cost some 60 µs
of client CPU more than psycopg's own ``cursor.execute`` (the execution context, the result's
metadata, 25 driver-side column descriptions, ``Row`` objects), and the ORM's loading of the
lookup's two rows some 90 µs more again; sending the three through the driver cut FrameLab's
CPU per request under gunicorn 1.11x, from 2.27x to 2.02x the floor of its stack (issue 21,
docs/benchmarks.md "seventh pass"). SQLAlchemy has no public way to run a compiled statement
without that machinery, so this module does that one thing by hand.

What SQLAlchemy's execution gives is kept: the SQL is SQLAlchemy's own compilation of the Core
statement for the connection's dialect (once per process and statement); parameters and
result values go through the column types' own bind and result processors (``Enum`` columns
come back as Python enums, ``UTCDateTime`` as aware datetimes, exactly as through the ORM);
a failed statement goes through SQLAlchemy's own error handling (its exception classes,
``IntegrityError``, ``OperationalError``, ...; a lost connection invalidated with the pool's
older ones), so callers and the error pages see what they saw. What is not kept: SQLAlchemy's
``before/after_cursor_execute`` events and echo logging do not see these statements
(:func:`observing` shows them to tests and benchmarks).

:func:`as_loaded` makes a row read this way an ORM object of a session, as the ORM's own
loading makes one (the constructor's attribute events and SQLAlchemy's documented way for
objects built by hand, ``make_transient_to_detached`` and ``Session.add``, cost a tenth of
a page's CPU more; issue 21, docs/benchmarks.md "eighth pass").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, TypeVar

from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import ArgumentError, InvalidRequestError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import instance_state
from sqlalchemy.types import Float, Numeric

Processor = Callable[[Any], Any] | None
T = TypeVar("T")


@dataclass(frozen=True)
class DriverStatement:
    """A Core statement compiled for one dialect, with its types' processors."""

    sql: str
    defaults: dict[str, Any]  # the statement's own bound values (e.g. a literal's parameter)
    required: frozenset[str]  # the parameters the caller must give
    bind: dict[str, Callable[[Any], Any]]  # parameter name -> bind processor (only those with one)
    result: tuple[Processor, ...]  # per column it returns (none: it returns no rows)


@lru_cache(maxsize=256)
def compile_for_driver(statement: Any, dialect: Dialect) -> DriverStatement:
    """Compile ``statement`` (a Core ``SELECT``, or ``INSERT``/``UPDATE`` with or without
    ``RETURNING``) for ``dialect``, with its processors; once per statement object and
    dialect (pass statements built once, as :mod:`webapp.services.flow_sql` builds them).

    Refuses (``ArgumentError``) what SQLAlchemy would do per execution and this path cannot:
    Python-side column defaults (``default=``, ``onupdate=``: give every value), parameters
    whose value is computed (``callable_``), expanded (``IN``) or rendered into the SQL, names
    SQLAlchemy has to escape, and numeric results (psycopg's processor for them needs the
    driver's type code)."""
    compiled = statement.compile(dialect=dialect)
    refused = []
    if compiled.insert_prefetch or compiled.update_prefetch:
        refused.append("Python-side column defaults")
    if getattr(compiled, "escaped_bind_names", None):
        refused.append("parameter names SQLAlchemy escapes")
    params = compiled.params
    bind = {}
    for name, param in compiled.binds.items():
        if param.callable is not None or param.expanding or param.literal_execute:
            refused.append(f"the computed, expanding or literal parameter {name!r}")
        processor = param.type.dialect_impl(dialect).bind_processor(dialect)
        if processor is not None and name in params:
            bind[name] = processor
    columns = getattr(statement, "selected_columns", None)
    if columns is None:  # DML: what its RETURNING clause returns, if it has one
        columns = statement.exported_columns
    types = [c.type.dialect_impl(dialect) for c in columns]
    if any(isinstance(t, (Numeric, Float)) for t in types):
        refused.append("numeric result columns")
    if refused:
        raise ArgumentError(f"not through the driver: {', '.join(refused)}")
    result = tuple(t.result_processor(dialect, None) for t in types)
    required = frozenset(n for n, p in compiled.binds.items() if p.required and n in params)
    defaults = {n: v for n, v in params.items() if n not in required}
    return DriverStatement(str(compiled), defaults, required, bind, result)


Observer = Callable[[Connection, str], None]
_observers: list[Observer] = []


@contextmanager
def observing(observer: Observer) -> Iterator[None]:
    """Call ``observer(connection, sql)`` before each statement :func:`fetch_one` sends while
    the block runs (SQLAlchemy's ``before_cursor_execute`` listeners do not see them)."""
    _observers.append(observer)
    try:
        yield
    finally:
        _observers.remove(observer)


def fetch_one(conn: Connection, stmt: DriverStatement, params: dict[str, Any]) -> tuple | None:
    """Run ``stmt`` on ``conn``'s driver connection and return its first row, processed
    (``None``: no row, or a statement that returns none).

    An error is handed to SQLAlchemy's own handling of a failed execution
    (``Connection._handle_dbapi_exception``, the one private call here, used as SQLAlchemy's
    ``exec_driver_sql`` uses it): the driver's error raised as SQLAlchemy's class, others as
    ``StatementError``; on a lost connection, or an exit exception mid-statement, the
    connection invalidated and the pool's older connections recycled; ``handle_error``
    listeners and the engine's ``hide_parameters`` honoured."""
    values: dict[str, Any] = dict(params)
    dbapi_connection = conn.connection.driver_connection
    cursor = None
    try:
        missing = stmt.required.difference(params)
        if missing:  # SQLAlchemy's refusal: never a silent NULL
            raise InvalidRequestError(f"a value is required for the parameters {sorted(missing)}")
        values = {**stmt.defaults, **params}
        for name, processor in stmt.bind.items():
            values[name] = processor(values[name])
        for observer in _observers:
            observer(conn, stmt.sql)
        cursor = dbapi_connection.cursor()
        cursor.execute(stmt.sql, values)
        row = cursor.fetchone() if stmt.result else None
    except BaseException as exc:
        conn._handle_dbapi_exception(exc, stmt.sql, values, cursor, None)
    finally:
        if cursor is not None:
            cursor.close()
    if row is None:
        return None
    return tuple(v if p is None else p(v) for p, v in zip(stmt.result, row, strict=True))


def loads_plainly(session: Session, *classes: type) -> bool:
    """True when nothing listens to the loading of ``classes``' objects into ``session``
    (the mapper's ``load`` event, the session's ``loaded_as_persistent``), so that
    :func:`as_loaded` gives what the ORM's loading gives; otherwise load through the ORM."""
    if session.dispatch.loaded_as_persistent:
        return False
    return not any(cls.__mapper__.class_manager.dispatch.load for cls in classes)


@cache
def _row_shape(cls: type, loaded: frozenset[str]) -> tuple[tuple[str, ...], frozenset[str]]:
    """The primary key's attribute names of ``cls``, and the column attributes a row with the
    attributes ``loaded`` leaves out."""
    mapper = cls.__mapper__  # type: ignore[attr-defined]
    manager = mapper.class_manager
    unloaded = frozenset(
        key for key in manager if manager[key].impl.accepts_scalar_loader and key not in loaded
    )
    return tuple(mapper.get_property_by_column(c).key for c in mapper.primary_key), unloaded


def as_loaded(session: Session, cls: type[T], values: dict[str, Any]) -> T:
    """The row ``values`` (attribute name -> value, primary key included) of ``cls`` as a
    persistent object of ``session``, as SQLAlchemy's loading makes one from a result row.

    As the ORM's loader does (``sqlalchemy.orm.loading``, ``_instance``): an instance made
    without its constructor, its values set as loaded (no attribute events, no history), its
    identity key set and the object put in the session's identity map; the attributes the row
    leaves out load on first use, as expired ones do. The caller makes sure that the session
    does not hold the row already and that nothing listens to loading (:func:`loads_plainly`).
    SQLAlchemy has no public call for this (``Session.merge(load=False)`` copies attribute by
    attribute); ``tests/webapp/test_driver_sql.py`` checks that such an object is in the state
    the documented way (constructor, ``make_transient_to_detached``, ``Session.add``) leaves it
    in, and behaves as one: unloaded columns load, changes are flushed, related rows resolve.
    """
    mapper = cls.__mapper__  # type: ignore[attr-defined]
    primary_key, unloaded = _row_shape(cls, frozenset(values))
    instance = mapper.class_manager.new_instance()
    state = instance_state(instance)
    state.dict.update(values)
    key = mapper.identity_key_from_primary_key(tuple(values[k] for k in primary_key))
    state.key = key
    state.identity_token = key[2]
    state.expired_attributes.update(unloaded)
    state.session_id = session.hash_key
    session.identity_map.add(state)
    return instance
