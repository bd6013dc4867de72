"""Pieces every export table shares: timestamps, participant scope, the test and ID columns.

Both the study-level export (:mod:`webapp.services.export`) and the task types' own tables
(``webapp.tasks.<name>.export``) use them; they live apart from both so that a task type's
table never imports the service that assembles the tables.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from webapp.models import Participant

PLATFORM_ID_COLUMNS = ("platform_participant_id", "platform_study_id", "platform_session_id")
# Only in exports that include test participants (bots, researcher previews), last.
TEST_COLUMN = "is_test"


def iso_time(ts: datetime | None) -> str | None:
    """Format a UTC timestamp as the exports write it (microseconds, ``Z``), or ``None``."""
    return None if ts is None else ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def scope_participants(query: Any, include_test: bool, include_excluded: bool) -> Any:
    """Leave out test participants and excluded ones unless asked to keep them."""
    if not include_test:
        query = query.where(Participant.is_test.is_(False))
    if not include_excluded:
        query = query.where(Participant.excluded.is_(False))
    return query


def with_test_column(columns: list[str], include_test: bool) -> list[str]:
    """Add ``is_test`` to a table's columns when it may hold test participants."""
    return [*columns, TEST_COLUMN] if include_test else columns
