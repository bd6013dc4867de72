"""A pooled PostgreSQL connection's liveness, checked without a round trip to the server.

SQLAlchemy's ``pool_pre_ping`` sends ``SELECT 1`` every time a connection leaves the pool: one
round trip per request, about 6 % of a participant page's CPU on the benchmark machine
(docs/benchmarks.md, issue 21). What it is there for is a connection the server has ended
(PostgreSQL restarted, ``pg_terminate_backend``, an idle timeout): the server then sends its
``FATAL`` message and closes the socket, so an idle connection's socket becomes readable. An
idle connection in good health has nothing to read (the server speaks only when asked, except
for notifications, which FrameLab does not subscribe to). So the check is a zero-timeout
``poll`` of the socket, a system call, and the pre-ping's ``SELECT 1`` is sent only when the
poll says something arrived. A connection that fails the ping is discarded by raising
:class:`~sqlalchemy.exc.DisconnectionError`, SQLAlchemy's documented way for a ``checkout``
listener to have the pool replace a connection (it retries with a fresh one).

A peer that vanished without closing (a cut network) is not seen by either check before the
first statement; that statement fails, the pool is invalidated and the participant sees the
retry page, as with the pre-ping.
"""

from __future__ import annotations

import select
from typing import Any

from sqlalchemy.exc import DisconnectionError


def _has_input(fileno: int) -> bool:
    poller = select.poll()
    poller.register(fileno, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def check_on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Pool ``checkout`` listener (psycopg 3): refuse a connection the server has ended."""
    if dbapi_connection.closed or dbapi_connection.broken:
        raise DisconnectionError("the connection is closed")
    try:
        unexpected = _has_input(dbapi_connection.fileno())
    except (OSError, ValueError) as exc:  # no socket any more
        raise DisconnectionError(str(exc)) from exc
    if not unexpected:
        return
    # Something arrived on an idle connection: usually the server's goodbye. Ask it.
    try:
        was_autocommit = dbapi_connection.autocommit
        dbapi_connection.autocommit = True
        try:
            dbapi_connection.execute("SELECT 1")
        finally:
            dbapi_connection.autocommit = was_autocommit
    except Exception as exc:  # any failure: the pool replaces the connection
        raise DisconnectionError(str(exc)) from exc
