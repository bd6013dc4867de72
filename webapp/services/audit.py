"""The audit log of researcher actions: who did what to which study, and when."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import or_, select

from webapp.extensions import db
from webapp.models import AuditEvent, Researcher, Study, utcnow


def record(
    actor: Researcher | str,
    action: str,
    *,
    study: Study | None = None,
    detail: Mapping[str, Any] | None = None,
    commit: bool = True,
) -> AuditEvent:
    """Append one event to the audit log.

    Parameters
    ----------
    actor : Researcher or str
        The logged-in researcher, or a name such as ``"cli"`` for commands.
    action : str
        A short verb phrase, e.g. ``"study.state"`` or ``"bonus.issue"``.
    study : Study, optional
        The study acted on.
    detail : Mapping, optional
        JSON-serialisable specifics (never passwords or raw platform IDs).
    commit : bool
        Commit now; pass ``False`` to commit together with the action itself.

    Returns
    -------
    AuditEvent
    """
    researcher = actor if isinstance(actor, Researcher) else None
    event = AuditEvent(
        researcher_id=researcher.id if researcher else None,
        actor=researcher.username if researcher else str(actor),
        action=action,
        study_id=study.id if study is not None else None,
        detail=dict(detail or {}),
        created_at=utcnow(),
    )
    db.session.add(event)
    if commit:
        db.session.commit()
    return event


def events_for(researcher: Researcher, *, limit: int = 200) -> list[AuditEvent]:
    """Return the newest events a researcher may read (admins: all; others: own and own studies').

    Parameters
    ----------
    researcher : Researcher
    limit : int
        At most this many events, newest first.

    Returns
    -------
    list of AuditEvent
    """
    query = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit)
    if not researcher.is_admin:
        own_studies = select(Study.id).where(Study.owner_id == researcher.id)
        query = query.where(
            or_(AuditEvent.researcher_id == researcher.id, AuditEvent.study_id.in_(own_studies))
        )
    return list(db.session.scalars(query))
