"""What every export table shares: the scope (which participants, which extra columns),
timestamps, and the participant-level cells.

Both the study-level export (:mod:`webapp.services.export`) and the task types' own tables
(``TaskType.tables``) use them; they live apart from both so that a task type's table never
imports the service that assembles the tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from webapp.definition import TaskBlock
from webapp.definition_cache import study_definition
from webapp.models import Participant, ParticipantStatus, Study

PLATFORM_ID_COLUMNS = ("platform_participant_id", "platform_study_id", "platform_session_id")
# Only in exports that include test participants (bots, researcher previews), last.
TEST_COLUMN = "is_test"


def iso_time(ts: datetime | None) -> str | None:
    """Format a UTC timestamp as the exports write it (microseconds, ``Z``), or ``None``."""
    return None if ts is None else ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def column_name(raw: str) -> str:
    """Make an ID usable in a column name (snake_case, identifier-safe).

    Examples
    --------
    >>> column_name("Pair-01.b")
    'pair_01_b'
    """
    return re.sub(r"[^a-z0-9_]", "_", raw.lower())


def with_test_column(columns: list[str], include_test: bool) -> list[str]:
    """Add ``is_test`` to a table's columns when it may hold test participants."""
    return [*columns, TEST_COLUMN] if include_test else columns


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class ExportScope:
    """One export of a study: which participants it covers and whether it adds raw IDs.

    Test participants (bots, researcher previews) and participants a researcher excluded are
    left out unless asked for; raw recruiter IDs are added only on request (payments).
    """

    study: Study
    include_test: bool = False
    include_excluded: bool = False
    include_platform_ids: bool = False

    @property
    def extra_columns(self) -> tuple[str, ...]:
        """Participant-level columns :meth:`who` adds to every answer row: none here; the
        export service's scope adds the authenticity columns, and lists them after the
        columns of whichever type's ``long`` table the study exports."""
        return ()

    def extra_cells(self, p: Participant) -> Mapping[str, Any]:
        """The cells of :attr:`extra_columns` of one participant."""
        return {}

    def where(self, query: Any) -> Any:
        """``query`` (over :class:`Participant`) limited to the participants in scope."""
        if not self.include_test:
            query = query.where(Participant.is_test.is_(False))
        if not self.include_excluded:
            query = query.where(Participant.excluded.is_(False))
        return query

    def blocks(self, type_name: str) -> list[TaskBlock]:
        """The study's blocks of one task type, in study order."""
        return [b for b in study_definition(self.study).tasks if b.type == type_name]

    def who(self, p: Participant) -> dict[str, Any]:
        """The cells naming the participant that every answer table starts with (and ends
        with: :attr:`extra_columns`, ``is_test``, and the raw recruiter IDs on request; load
        ``identity`` for them)."""
        row = {
            "study_slug": self.study.slug,
            "participant_id": p.code,
            "platform": p.platform.value,
            "status": p.status.value,
            TEST_COLUMN: int(p.is_test),
            **self.extra_cells(p),
        }
        if self.include_platform_ids:
            ident = p.identity
            row["platform_participant_id"] = ident.external_id if ident else None
            row["platform_study_id"] = ident.external_study_id if ident else None
            row["platform_session_id"] = ident.external_session_id if ident else None
        return row

    def participant(self, p: Participant) -> dict[str, Any]:
        """:meth:`who` with the participant-level columns of the long and wide exports."""
        duration = None
        if p.status is ParticipantStatus.completed and p.finished_at is not None:
            duration = round((p.finished_at - p.started_at).total_seconds(), 3)
        return {
            **self.who(p),
            "sequence": p.sequence,
            "seed": p.seed,
            "quiz_passed": _flag(p.quiz_passed),
            "quiz_attempts": p.quiz_attempts,
            # Set by attention-check blocks only: empty in a study without one.
            "attention_passed": _flag(p.attention_passed),
            "duration_s": duration,
            # When the participant completed: the order in which interim looks count them.
            "finished_at": iso_time(p.finished_at) if duration is not None else None,
        }
