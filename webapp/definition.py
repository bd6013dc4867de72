"""A validated study definition as typed, frozen objects.

:func:`webapp.studydef.validate_definition` returns a :class:`StudyDefinition`; everything
downstream reads its attributes. Its stored form (``Study.definition``, hashed into
``Study.definition_hash``) is :meth:`StudyDefinition.to_json`: every key written (a default or
``null`` when the file leaves it out) and ``schema_version`` :data:`SCHEMA_VERSION`, so a new
key is added by a migration that rewrites the stored definitions once, not by leaving it out.

A task block is an envelope (``id``, ``type``) around the body its task type validated; only
that task type reads the body (:attr:`TaskBlock.params`).

This module is a leaf: no Flask, no models, no task types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

from framelab_schema.analysis_block import AnalysisBlock, parse_analysis_block

SCHEMA_VERSION = 2
DEFAULT_READING_WPM = 1000.0  # faster than skimming: the reading-time floor's speed
# The most bonus one participant may be paid (in the study's currency) unless
# ``payment.bonus.max`` says more: a slip in ``amount`` (10 for 0.10) must be refused at load,
# not paid a hundred times over.
DEFAULT_MAX_BONUS = 10.0


class DefinitionVersionError(ValueError):
    """A stored definition of another schema version (the database needs its migrations)."""


def _json(value: Any) -> Any:
    """A plain JSON value of ``value`` (read-only mappings and tuples become dicts and lists)."""
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class CompletionCodes:
    """The codes appended to the recruiter's completion link."""

    completed: str
    screened_out: str
    study_full: str | None  # for a study with limited slots that has none left

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return asdict(self)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> CompletionCodes:
        """Read the stored form."""
        return cls(**stored)


@dataclass(frozen=True, slots=True)
class Recruitment:
    """Who may take part and how they leave."""

    platforms: tuple[str, ...]
    completion_codes: CompletionCodes
    exclude_ids: tuple[str, ...]
    target_n: int | None  # the console's progress bar
    time_limit_minutes: float | None  # automatic time-outs
    verified_entry: bool  # only the IDs of the listing FrameLab created

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "platforms": list(self.platforms),
            "completion_codes": self.completion_codes.to_json(),
            "exclude_ids": list(self.exclude_ids),
            "target_n": self.target_n,
            "time_limit_minutes": self.time_limit_minutes,
            "verified_entry": self.verified_entry,
        }

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> Recruitment:
        """Read the stored form."""
        return cls(
            platforms=tuple(stored["platforms"]),
            completion_codes=CompletionCodes.from_json(stored["completion_codes"]),
            exclude_ids=tuple(stored["exclude_ids"]),
            target_n=stored["target_n"],
            time_limit_minutes=stored["time_limit_minutes"],
            verified_entry=stored["verified_entry"],
        )


@dataclass(frozen=True, slots=True)
class Bonus:
    """The performance bonus: ``amount`` per rewarded answer under ``rule``, at most ``max``."""

    amount: float
    rule: str
    max: float | None

    @property
    def cap(self) -> float:
        """The most one participant may be paid: ``max``, or :data:`DEFAULT_MAX_BONUS`."""
        return DEFAULT_MAX_BONUS if self.max is None else self.max

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return asdict(self)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> Bonus:
        """Read the stored form."""
        return cls(**stored)


@dataclass(frozen=True, slots=True)
class Payment:
    """What a participant is paid, in ``currency`` (ISO 4217)."""

    currency: str
    base: float
    bonus: Bonus

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return asdict(self)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> Payment:
        """Read the stored form."""
        return cls(stored["currency"], stored["base"], Bonus.from_json(stored["bonus"]))


@dataclass(frozen=True, slots=True)
class AuthenticitySettings:
    """The authenticity signals' settings: a canary word on the pages, the reading floor."""

    canary: bool = False
    reading_wpm: float = DEFAULT_READING_WPM

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return asdict(self)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> AuthenticitySettings:
        """Read the stored form."""
        return cls(**stored)


@dataclass(frozen=True, slots=True)
class RecruiterSettings:
    """What a recruiter needs to list the study (amounts in integer cents)."""

    platform: str
    places: int
    reward_cents: int
    estimated_minutes: int
    fee_rate: float
    devices: tuple[str, ...]
    # As the recruiters' APIs take them (sent as JSON): Prolific filters, MTurk requirements.
    eligibility: tuple[dict[str, Any], ...]
    qualifications: tuple[dict[str, Any], ...]
    lifetime_hours: float
    assignment_minutes: int
    keywords: str
    block_screened_out: bool

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return dict(_json(asdict(self)))

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> RecruiterSettings:
        """Read the stored form."""
        lists = ("devices", "eligibility", "qualifications")
        values: dict[str, Any] = {k: tuple(v) if k in lists else v for k, v in stored.items()}
        return cls(**values)


@dataclass(frozen=True, slots=True)
class TaskBlock:
    """One task block: its ``id``, its task ``type`` and the body that type validated.

    ``params`` is read by the task type alone (``webapp/tasks/<type>/``); everyone else asks
    the type (:func:`webapp.tasks.get_task_type`).
    """

    id: str
    type: str
    params: Mapping[str, Any]

    @classmethod
    def of(cls, block_id: str, type_name: str, params: Mapping[str, Any]) -> TaskBlock:
        """A block whose body is a read-only view of a copy of ``params``."""
        return cls(block_id, type_name, MappingProxyType(dict(params)))

    def to_json(self) -> dict[str, Any]:
        """The stored form: the body's keys beside ``id`` and ``type``."""
        return {"id": self.id, "type": self.type, **_json(self.params)}

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> TaskBlock:
        """Read the stored form."""
        body = {k: v for k, v in stored.items() if k not in ("id", "type")}
        return cls.of(stored["id"], stored["type"], body)


@dataclass(frozen=True, slots=True)
class StudyDefinition:
    """A validated study (:func:`webapp.studydef.validate_definition`)."""

    slug: str
    title: str
    description: str
    estimated_minutes: float
    language: str
    recruitment: Recruitment
    payment: Payment
    tasks: tuple[TaskBlock, ...]
    authenticity: AuthenticitySettings
    recruiter: RecruiterSettings | None
    analysis: AnalysisBlock | None

    def block(self, block_id: str) -> TaskBlock | None:
        """The block with this id, or ``None``."""
        return next((b for b in self.tasks if b.id == block_id), None)

    def to_json(self) -> dict[str, Any]:
        """The stored form (``Study.definition``): every key, and the schema version."""
        return {
            "schema_version": SCHEMA_VERSION,
            "slug": self.slug,
            "title": self.title,
            "description": self.description,
            "estimated_minutes": self.estimated_minutes,
            "language": self.language,
            "recruitment": self.recruitment.to_json(),
            "payment": self.payment.to_json(),
            "tasks": [b.to_json() for b in self.tasks],
            "authenticity": self.authenticity.to_json(),
            "recruiter": self.recruiter.to_json() if self.recruiter else None,
            "analysis": self.analysis.as_dict() if self.analysis else None,
        }

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> StudyDefinition:
        """Read a stored definition.

        Raises
        ------
        DefinitionVersionError
            It is of another schema version than :data:`SCHEMA_VERSION`.
        """
        version = stored.get("schema_version", 1)
        if version != SCHEMA_VERSION:
            raise DefinitionVersionError(
                f"study {stored.get('slug')!r} is stored in definition schema version "
                f"{version}; this FrameLab reads version {SCHEMA_VERSION}: run "
                "`flask db upgrade` to migrate the stored studies"
            )
        recruiter = stored["recruiter"]
        analysis = stored["analysis"]
        return cls(
            slug=stored["slug"],
            title=stored["title"],
            description=stored["description"],
            estimated_minutes=stored["estimated_minutes"],
            language=stored["language"],
            recruitment=Recruitment.from_json(stored["recruitment"]),
            payment=Payment.from_json(stored["payment"]),
            tasks=tuple(TaskBlock.from_json(b) for b in stored["tasks"]),
            authenticity=AuthenticitySettings.from_json(stored["authenticity"]),
            recruiter=RecruiterSettings.from_json(recruiter) if recruiter else None,
            analysis=(
                parse_analysis_block(analysis, formats=analysis["levels"]) if analysis else None
            ),
        )
