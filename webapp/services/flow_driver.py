"""The participant path's PostgreSQL statements sent through the driver.

:mod:`webapp.services.driver_sql` says why (SQLAlchemy's execution and the ORM's loading were
the largest single cost of a participant request) and what of SQLAlchemy's execution is kept.
This module applies it to :mod:`webapp.services.flow`'s statements on the request's session:
:func:`send` for the visit record and the one-statement answer, :func:`page_rows` for the page
lookup, whose two rows it makes ORM objects of the session.
"""

from __future__ import annotations

from typing import Any

from webapp.extensions import db
from webapp.models import Participant, Study
from webapp.services import driver_sql, flow_sql

HELD = object()  # page_rows: the session holds one of the rows already (use the ORM's lookup)


def send(statement: Any, params: dict[str, Any]) -> tuple | None:
    """Run one of :mod:`webapp.services.flow_sql`'s Core statements on the session's
    connection through the driver; its first row (``None``: none)."""
    conn = db.session.connection()
    return driver_sql.fetch_one(
        conn, driver_sql.compile_for_driver(statement, conn.dialect), params
    )


def page_rows(
    participant_id: int, slug: str, *, shown: bool, prefetch: tuple[Any, ...]
) -> tuple[Participant, Study, tuple[Any, ...]] | None | object:
    """The page lookup without a lock (:func:`webapp.services.flow_sql.page_rows_for_driver`):
    the participant and the study as ORM objects of this session, then the statement's extra
    columns (when the page was shown, or the prefetched values); ``None`` when there is no such
    participant in the study ``slug``.

    The rows become ORM objects of the session as the ORM's loading would make them
    (:func:`webapp.services.driver_sql.as_loaded`), the study with its definition from the
    per-process cache; columns the lookup leaves out load on first use. :data:`HELD` when the
    session already holds either row, or something listens to the loading of either class:
    the caller then runs the ORM's lookup, which refreshes nothing it should not and fires
    the ORM's events.
    """
    from webapp.services.studies import cached_definition, with_cached_definition

    session = db.session()
    held = session.identity_map
    if Participant.__mapper__.identity_key_from_primary_key((participant_id,)) in held:
        return HELD
    if not driver_sql.loads_plainly(session, Participant, Study):
        return HELD
    conn = session.connection()
    shape = flow_sql.page_rows_for_driver(conn.dialect, shown=shown, prefetch=prefetch)
    row = driver_sql.fetch_one(
        conn, shape.statement, {"participant_id": participant_id, "slug": slug}
    )
    if row is None:
        return None
    n, m = len(shape.participant_keys), len(shape.study_keys)
    study_values = dict(zip(shape.study_keys, row[n : n + m], strict=True))
    if Study.__mapper__.identity_key_from_primary_key((study_values["id"],)) in held:
        return HELD
    definition = cached_definition(study_values["id"], study_values["definition_hash"])
    if definition is not None:
        study_values["definition"] = definition
    participant = driver_sql.as_loaded(
        session, Participant, dict(zip(shape.participant_keys, row[:n], strict=True))
    )
    study = driver_sql.as_loaded(session, Study, study_values)
    if definition is None:
        with_cached_definition(study)
    return participant, study, row[n + m :]
