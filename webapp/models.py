"""Database models (SQLAlchemy 2, typed).

Responses live in typed tables (``ChoiceResponse``, ``QuizAttempt``) plus one generic
``TaskResponse`` with a JSON payload for task types that need no columns of their own.
Raw recruiter IDs live only in ``PlatformIdentity``; every response refers to the
pseudonymous ``Participant``. Column ``comment`` texts are the codebook's source.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from flask import current_app, has_app_context
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship, validates
from sqlalchemy.sql.expression import false
from sqlalchemy.types import TypeDecorator

from webapp.extensions import db


def utcnow() -> datetime:
    """Return the current time in UTC (timezone-aware).

    Inside an app whose ``CLOCK`` setting holds a clock (a callable returning an aware
    datetime, e.g. :class:`webapp.clock.SimulatedClock`), that clock's time: every time the
    server records then comes from one injected source.
    """
    clock = current_app.config.get("CLOCK") if has_app_context() else None
    return clock() if clock is not None else datetime.now(UTC)


def definition_hash(definition: Mapping[str, Any]) -> str:
    """Return a SHA-256 hex digest of the canonical JSON of a study definition.

    It lives with the models (not in :mod:`webapp.studydef`) because a stored study keeps its
    hash in step with its definition; the models then need nothing of the definition reader.
    """
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class ParticipantStatus(enum.Enum):
    """Where a participant's session stands; the one status enumeration of the platform."""

    started = "started"
    screened_out = "screened_out"
    completed = "completed"
    returned = "returned"
    timed_out = "timed_out"


class Platform(enum.Enum):
    """How the participant arrived."""

    prolific = "prolific"
    mturk = "mturk"
    link = "link"
    mturk_batch = "mturk_batch"  # labels imported from a native MTurk batch (no web session)


class StudyState(enum.Enum):
    """A study's lifecycle: draft → live → paused → closed (paused may go live again)."""

    draft = "draft"
    live = "live"
    paused = "paused"
    closed = "closed"


# Stored as strings (native_enum=False) so adding a value never needs an ALTER TYPE.
_status_type = Enum(ParticipantStatus, native_enum=False, length=20, validate_strings=True)
_platform_type = Enum(Platform, native_enum=False, length=20, validate_strings=True)
_state_type = Enum(StudyState, native_enum=False, length=10, validate_strings=True)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC timestamps on every backend.

    SQLite has no time zone type and returns naive values; normalising here keeps comparisons
    (activity windows, durations) correct on both SQLite and PostgreSQL.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


class Study(db.Model):
    """A study loaded from a YAML definition in ``stimuli/studies/``."""

    __tablename__ = "study"

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(80), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    definition: Mapped[dict[str, Any]] = mapped_column(
        JSON, comment="validated study definition (YAML with referenced files inlined)"
    )
    definition_hash: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer, default=1)
    export_salt: Mapped[str] = mapped_column(String(64), comment="HMAC key of participant_id")
    source_path: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
    # Console: studies loaded from the command line are live and unowned (admins see them).
    state: Mapped[StudyState] = mapped_column(
        _state_type, default=StudyState.live, server_default=StudyState.live.value
    )
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("researcher.id"), index=True)

    participants: Mapped[list[Participant]] = relationship(back_populates="study")

    @validates("definition")
    def _hash_follows_definition(self, key: str, value: dict[str, Any]) -> dict[str, Any]:
        """Keep ``definition_hash`` describing ``definition`` whoever assigns it.

        The per-process definition cache (:func:`webapp.services.studies.get_study`) is keyed
        on the hash, so a definition stored under a stale hash would never be seen.
        """
        self.definition_hash = definition_hash(value)
        return value


class StudyFile(db.Model):
    """One file of a study's bundle as it was loaded (the study YAML and its stimulus files).

    The definition already inlines the stimuli; these rows record what was uploaded (or read
    from the studies folder) for each version, so it can be downloaded again from any host.
    """

    __tablename__ = "study_file"
    __table_args__ = (UniqueConstraint("study_id", "version", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"), index=True)
    version: Mapped[int] = mapped_column(Integer, comment="study version loaded with this file")
    name: Mapped[str] = mapped_column(String(200), comment="bundle-relative POSIX name")
    size_bytes: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    content: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Participant(db.Model):
    """One person's session in one study (pseudonymous; raw IDs are in ``PlatformIdentity``)."""

    __tablename__ = "participant"
    __table_args__ = (
        UniqueConstraint("study_id", "code"),
        # The console's participant table filters by status and sorts by time, paged in the
        # database; these keep each page an index range scan at thousands of participants.
        Index("ix_participant_study_status", "study_id", "status"),
        Index("ix_participant_study_started", "study_id", "started_at"),
        Index("ix_participant_study_last_seen", "study_id", "last_seen_at"),
        # Clearing a study's test data finds its few test rows among the real ones.
        Index("ix_participant_study_test", "study_id", "is_test"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"), index=True)
    code: Mapped[str] = mapped_column(
        String(20), comment="pseudonymous participant_id: p_ + 16 hex of an HMAC"
    )
    platform: Mapped[Platform] = mapped_column(_platform_type)
    seed: Mapped[int] = mapped_column(BigInteger, comment="randomisation seed (re-derives order)")
    sequence: Mapped[str] = mapped_column(
        String(1), comment="format sequence A, B, …: a Latin-square row, one per format"
    )
    status: Mapped[ParticipantStatus] = mapped_column(
        _status_type, default=ParticipantStatus.started, index=True
    )
    block_index: Mapped[int] = mapped_column(Integer, default=0, comment="current task block")
    step: Mapped[int] = mapped_column(Integer, default=0, comment="current page within the block")
    page_seq: Mapped[int] = mapped_column(
        Integer, default=0, comment="count of accepted submissions; the page token's counter"
    )
    quiz_attempts: Mapped[int] = mapped_column(Integer, default=0)
    quiz_passed: Mapped[bool | None] = mapped_column(Boolean)
    attention_passed: Mapped[bool | None] = mapped_column(Boolean)
    is_preview: Mapped[bool] = mapped_column(Boolean, default=False)
    is_test: Mapped[bool] = mapped_column(
        Boolean,
        default=False,
        server_default=false(),
        comment="a bot or a researcher preview: left out of counts, payments and exports",
    )
    study_version: Mapped[int] = mapped_column(Integer, default=1)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    end_reason: Mapped[str | None] = mapped_column(
        String(40), comment="why a session ended early: qualification_failed, study_full"
    )
    excluded: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=false(), comment="excluded by a researcher"
    )
    exclusion_reason: Mapped[str | None] = mapped_column(String(500))
    platform_status: Mapped[str | None] = mapped_column(
        String(20), comment="status on Prolific/MTurk from the last reconciliation import"
    )
    reconcile_note: Mapped[str | None] = mapped_column(
        String(200), comment="mismatch between this platform and the recruiter, if any"
    )

    study: Mapped[Study] = relationship(back_populates="participants")
    identity: Mapped[PlatformIdentity | None] = relationship(back_populates="participant")
    choices: Mapped[list[ChoiceResponse]] = relationship(
        # Answer order: the blocks in study order, each block's trials in trial order.
        back_populates="participant",
        order_by="ChoiceResponse.id",
    )


class PlatformIdentity(db.Model):
    """Recruiter identifiers, kept apart from responses and scrubbed from exports by default."""

    __tablename__ = "platform_identity"
    __table_args__ = (UniqueConstraint("study_id", "platform", "external_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participant.id"), unique=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"))
    platform: Mapped[Platform] = mapped_column(_platform_type)
    external_id: Mapped[str] = mapped_column(
        String(128), comment="PROLIFIC_PID, MTurk workerId or the link's participant"
    )
    external_study_id: Mapped[str | None] = mapped_column(String(128))  # STUDY_ID / hitId
    external_session_id: Mapped[str | None] = mapped_column(
        String(128)
    )  # SESSION_ID / assignmentId
    return_url: Mapped[str | None] = mapped_column(String(500))  # MTurk turkSubmitTo
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    participant: Mapped[Participant] = relationship(back_populates="identity")


class ChoiceResponse(db.Model):
    """One product-choice trial: what was shown, what was chosen, and the WTP answer."""

    __tablename__ = "choice_response"
    __table_args__ = (UniqueConstraint("participant_id", "block_id", "trial_index"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participant.id"), index=True)
    block_id: Mapped[str] = mapped_column(String(64))
    trial_index: Mapped[int] = mapped_column(Integer, comment="0-based position in the sequence")
    pair_id: Mapped[str] = mapped_column(String(64))
    format: Mapped[str] = mapped_column(
        String(64), comment="format name: original | summary | another format of the block"
    )
    target_side: Mapped[str] = mapped_column(String(5), comment="left | right")
    chosen_side: Mapped[str] = mapped_column(String(5), comment="left | right")
    chose_target: Mapped[bool] = mapped_column(Boolean)
    other_price_usd: Mapped[float] = mapped_column(Float, comment="price of the product not chosen")
    wtp_premium_usd: Mapped[float | None] = mapped_column(Float, comment="premium over $X, >= 0")
    wtp_premium_pct: Mapped[float | None] = mapped_column(Float, comment="100 * premium / $X")
    rt_ms: Mapped[int | None] = mapped_column(Integer, comment="client time to choose, ms")
    wtp_rt_ms: Mapped[int | None] = mapped_column(Integer, comment="client time on WTP page, ms")
    server_rt_ms: Mapped[int | None] = mapped_column(Integer, comment="server time to choose, ms")
    answered_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    wtp_answered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    participant: Mapped[Participant] = relationship(back_populates="choices")


class QuizAttempt(db.Model):
    """One submission of a comprehension quiz."""

    __tablename__ = "quiz_attempt"
    __table_args__ = (UniqueConstraint("participant_id", "block_id", "attempt"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participant.id"), index=True)
    block_id: Mapped[str] = mapped_column(String(64))
    attempt: Mapped[int] = mapped_column(Integer, comment="1-based attempt number")
    answers: Mapped[dict[str, Any]] = mapped_column(JSON)
    n_correct: Mapped[int] = mapped_column(Integer)
    passed: Mapped[bool] = mapped_column(Boolean)
    rt_ms: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class TaskResponse(db.Model):
    """Answers of task types without typed tables (attention checks, demographics, …)."""

    __tablename__ = "task_response"
    __table_args__ = (UniqueConstraint("participant_id", "block_id", "step"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participant.id"), index=True)
    block_id: Mapped[str] = mapped_column(String(64))
    task_type: Mapped[str] = mapped_column(String(40))
    step: Mapped[int] = mapped_column(Integer, default=0)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    rt_ms: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class PageVisit(db.Model):
    """Server timing of one page (one per page token): first shown and submitted."""

    __tablename__ = "page_visit"
    __table_args__ = (UniqueConstraint("participant_id", "page_seq"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participant.id"), index=True)
    page_seq: Mapped[int] = mapped_column(Integer)
    page: Mapped[str] = mapped_column(String(100), comment="block id / page name")
    shown_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    rt_ms: Mapped[int | None] = mapped_column(Integer, comment="client-measured, ms")
    # Authenticity signals (webapp.services.authenticity): counts only, never what was typed.
    words: Mapped[int | None] = mapped_column(Integer, comment="words of text on the page")
    signals: Mapped[str | None] = mapped_column(
        String(7), comment="the page script's signals: js, none (no JavaScript) or invalid"
    )
    paste_count: Mapped[int | None] = mapped_column(Integer, comment="paste events in text fields")
    pasted_chars: Mapped[int | None] = mapped_column(Integer, comment="characters pasted")
    keystrokes: Mapped[int | None] = mapped_column(Integer, comment="key presses in text fields")
    text_chars: Mapped[int | None] = mapped_column(Integer, comment="characters in text fields")
    hidden_count: Mapped[int | None] = mapped_column(Integer, comment="times the page was hidden")
    hidden_ms: Mapped[int | None] = mapped_column(Integer, comment="time the page was hidden, ms")
    interacted: Mapped[bool | None] = mapped_column(
        Boolean, comment="a trusted pointer or key event before the submit"
    )
    automation: Mapped[int | None] = mapped_column(Integer, comment="automation hint bits")
    honeypot: Mapped[bool | None] = mapped_column(Boolean, comment="the invisible field was filled")
    canary: Mapped[bool | None] = mapped_column(Boolean, comment="an answer has the canary word")
    device_hint: Mapped[str | None] = mapped_column(
        String(16), comment="keyed hash of User-Agent, screen, time zone and languages"
    )
    grid_items: Mapped[int | None] = mapped_column(Integer, comment="single-choice questions")
    straightlined: Mapped[bool | None] = mapped_column(
        Boolean, comment="every single-choice question answered alike"
    )
    text_hash: Mapped[str | None] = mapped_column(
        String(16), comment="hash of the page's normalised free-text answers"
    )


class Researcher(db.Model):
    """A researcher account for the console (werkzeug-hashed password)."""

    __tablename__ = "researcher"

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(80), unique=True)
    password_hash: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    session_version: Mapped[int] = mapped_column(
        Integer,
        default=0,
        server_default="0",
        comment="stored in the console session at login; logout and password changes bump it",
    )


class AuditEvent(db.Model):
    """One researcher action (who, what, when); written by :mod:`webapp.services.audit`."""

    __tablename__ = "audit_event"

    id: Mapped[int] = mapped_column(primary_key=True)
    researcher_id: Mapped[int | None] = mapped_column(ForeignKey("researcher.id"), index=True)
    actor: Mapped[str] = mapped_column(String(80), comment="username, or cli:<user> for commands")
    action: Mapped[str] = mapped_column(String(60))
    study_id: Mapped[int | None] = mapped_column(ForeignKey("study.id"), index=True)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)


class LoginAttempt(db.Model):
    """A failed console login, or a client an account logged in from, kept for rate limiting
    (no raw IP: an HMAC of it; see :mod:`webapp.services.accounts`)."""

    __tablename__ = "login_attempt"

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(80), index=True)
    client_hash: Mapped[str] = mapped_column(String(32), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    succeeded: Mapped[bool] = mapped_column(
        Boolean,
        default=False,
        server_default=false(),
        comment="a login that succeeded: the account's known client, not a failure",
    )


class EnrolmentAttempt(db.Model):
    """An enrolment in a study from one client network, kept for rate limiting while it counts
    (no raw IP: an HMAC of the address's network; see :mod:`webapp.services.enrol_limit`)."""

    __tablename__ = "enrolment_attempt"
    __table_args__ = (
        # The limiter counts one client's recent rows, and drops a study's old ones.
        Index("ix_enrolment_attempt_client", "study_id", "client_hash", "created_at"),
        Index("ix_enrolment_attempt_age", "study_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"))
    client_hash: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class BonusPayment(db.Model):
    """The bonus ledger: one row per bonus issued; the unique key refuses a second issue."""

    __tablename__ = "bonus_payment"
    __table_args__ = (UniqueConstraint("participant_id", "rule"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"), index=True)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participant.id"))
    rule: Mapped[str] = mapped_column(String(40))
    amount_cents: Mapped[int] = mapped_column(Integer)
    platform: Mapped[Platform] = mapped_column(_platform_type)
    request_token: Mapped[str] = mapped_column(String(64), unique=True)
    reason: Mapped[str] = mapped_column(String(200))
    issued_by: Mapped[str] = mapped_column(String(80))
    issued_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Paying through a recruiter's API (webapp.recruit.ledger holds the state machine): what
    # the platform calls this payment (Prolific's bulk bonus id; MTurk: the
    # UniqueRequestToken), how far it got, and when the platform was seen to have paid it.
    platform_payment_id: Mapped[str | None] = mapped_column(
        String(64), comment="Prolific bulk bonus id / MTurk UniqueRequestToken of the payment"
    )
    platform_state: Mapped[str | None] = mapped_column(
        String(12),
        comment="claimed, set_up, paying (outcome unknown), sent, paid or refused, through the API",
    )
    paid_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Every change of platform_state is an UPDATE conditional on the claim the run holds, so a
    # run whose claim was taken over (it stalled past the expiry) changes nothing and pays
    # nothing.
    claim_token: Mapped[str | None] = mapped_column(
        String(32), comment="the run that holds this row while it sets it up or pays it"
    )
    claimed_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime(), comment="when that run took the row; another may take it an hour later"
    )
    sent_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime(), comment="when the pay call was sent (settle waits before judging it)"
    )
    platform_note: Mapped[str | None] = mapped_column(
        String(300), comment="why the platform refused or has not settled this payment"
    )


class Recruitment(db.Model):
    """A study's listing on a recruiter (one Prolific study or MTurk HIT per study and platform)."""

    __tablename__ = "recruitment"
    __table_args__ = (UniqueConstraint("study_id", "platform"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"), index=True)
    platform: Mapped[Platform] = mapped_column(_platform_type)
    external_id: Mapped[str | None] = mapped_column(
        String(128), comment="Prolific study id or MTurk HIT id; empty while being created"
    )
    sandbox: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(40), comment="last status the platform reported")
    external_url: Mapped[str] = mapped_column(String(1000), comment="the URL given to the platform")
    extra: Mapped[dict[str, Any]] = mapped_column(
        JSON, default=dict, comment="platform specifics: MTurk HIT type and qualification type ids"
    )
    created_by: Mapped[str] = mapped_column(String(80))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
    # A create whose answer was lost keeps its row (and the reference it sent) so the next
    # create looks the listing up instead of making a second one; the claim keeps two runs
    # from doing that at once.
    claim_token: Mapped[str | None] = mapped_column(
        String(32), comment="the run creating the listing while its platform id is unknown"
    )
    claimed_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime(), comment="when that run started; another may take over later"
    )


class AnnotationState(enum.Enum):
    """Where one (item, participant) slot of an annotation task stands.

    ``reserved`` holds one of the item's slots until ``expires_at``; a label in time makes it
    ``confirmed``. An expired or released reservation becomes ``expired`` (its slot is free
    again); a label that arrives after that is kept as ``surplus`` and never counted.
    """

    reserved = "reserved"
    confirmed = "confirmed"
    expired = "expired"
    surplus = "surplus"


_annotation_state_type = Enum(AnnotationState, native_enum=False, length=20, validate_strings=True)


class AnnotationItem(db.Model):
    """One statement of an annotation block, synced from the study definition's item CSV."""

    __tablename__ = "annotation_item"
    __table_args__ = (
        UniqueConstraint("study_id", "block_id", "item_id"),
        # A block's items in position order: the console pages through them, and allocation
        # looks for free ones, as an index range whatever the number of items.
        Index("ix_annotation_item_block_position", "study_id", "block_id", "is_gold", "position"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"), index=True)
    block_id: Mapped[str] = mapped_column(String(64))
    item_id: Mapped[str] = mapped_column(String(64), comment="item ID from the item CSV")
    position: Mapped[int] = mapped_column(Integer, comment="0-based row in the item CSV")
    text: Mapped[str] = mapped_column(Text, comment="the text shown")
    base_sentiment: Mapped[str] = mapped_column(String(10), comment="positive | negative")
    is_gold: Mapped[bool] = mapped_column(Boolean, default=False, comment="gold/attention item")
    gold_label: Mapped[str | None] = mapped_column(String(10), comment="answer of a gold item")
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, comment="extra CSV columns")
    study_version: Mapped[int] = mapped_column(Integer, comment="study version last synced")


class Annotation(db.Model):
    """One item's slot for one participant: a reservation, and the label once it arrives."""

    __tablename__ = "annotation"
    __table_args__ = (UniqueConstraint("item_pk", "participant_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    item_pk: Mapped[int] = mapped_column(ForeignKey("annotation_item.id"), index=True)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participant.id"), index=True)
    trial_index: Mapped[int] = mapped_column(Integer, comment="0-based position in the batch")
    state: Mapped[AnnotationState] = mapped_column(_annotation_state_type, index=True)
    reserved_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    label: Mapped[str | None] = mapped_column(String(10), comment="positive | negative | neutral")
    surplus: Mapped[bool] = mapped_column(
        Boolean, default=False, comment="label arrived after its reservation expired"
    )
    rt_ms: Mapped[int | None] = mapped_column(Integer, comment="client time to label, ms")
    answered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    external_ref: Mapped[str | None] = mapped_column(
        String(128), index=True, comment="MTurk AssignmentId of an imported label"
    )

    item: Mapped[AnnotationItem] = relationship()


def qualification_scope(owner_id: int | None) -> str:
    """The scope of a study's qualification results: its owner, or the server's own studies.

    Results are shared only inside one scope, so another researcher's study that uses the
    same qualification name can neither fail nor pass anyone here.

    Examples
    --------
    >>> qualification_scope(7), qualification_scope(None)
    ('researcher:7', 'server')
    """
    return "server" if owner_id is None else f"researcher:{owner_id}"


class QualificationResult(db.Model):
    """A qualification outcome per platform ID, reused by the studies of the same qualification
    name *and* the same owner (``scope``).

    Holds the raw platform ID (like ``PlatformIdentity``) and is never exported.
    """

    __tablename__ = "qualification_result"
    __table_args__ = (
        UniqueConstraint(
            "scope",
            "qualification",
            "platform",
            "external_id",
            name="uq_qualification_result_scope",
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    scope: Mapped[str] = mapped_column(
        String(40), comment="who shares the result: researcher:<owner id> or server"
    )
    qualification: Mapped[str] = mapped_column(String(64), comment="qualification name")
    platform: Mapped[Platform] = mapped_column(_platform_type)
    external_id: Mapped[str] = mapped_column(String(128))
    passed: Mapped[bool] = mapped_column(Boolean)
    n_correct: Mapped[int] = mapped_column(Integer)
    n_items: Mapped[int] = mapped_column(Integer)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"), comment="where it was taken")
    participant_id: Mapped[int | None] = mapped_column(ForeignKey("participant.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class MTurkAssignment(db.Model):
    """One MTurk assignment a worker's session arrived with: the history of their HITs.

    A worker may come back through a new assignment (the first one expired or was returned);
    each visit's page URL names the assignment it arrived with, and the completion form posts
    that one. ``submitted_at`` marks the assignments the completion form was shown for. Raw
    MTurk IDs, like ``PlatformIdentity``; never exported.
    """

    __tablename__ = "mturk_assignment"
    __table_args__ = (UniqueConstraint("participant_id", "assignment_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participant.id"), index=True)
    assignment_id: Mapped[str] = mapped_column(String(128), comment="MTurk assignmentId")
    hit_id: Mapped[str] = mapped_column(String(128), comment="MTurk hitId")
    return_url: Mapped[str] = mapped_column(String(500), comment="turkSubmitTo (MTurk host)")
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    submitted_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime(), comment="last time the completion form was shown for this assignment"
    )


__all__ = [
    "Annotation",
    "AnnotationItem",
    "AnnotationState",
    "AuditEvent",
    "BonusPayment",
    "ChoiceResponse",
    "LoginAttempt",
    "MTurkAssignment",
    "PageVisit",
    "Participant",
    "ParticipantStatus",
    "Platform",
    "PlatformIdentity",
    "QualificationResult",
    "QuizAttempt",
    "Researcher",
    "Study",
    "StudyState",
    "TaskResponse",
    "qualification_scope",
    "utcnow",
]


class Preregistration(db.Model):
    """A study's frozen pre-registration, as ``framelab prereg`` recorded it.

    The hash is the analysis package's (``docs/analysis.md``): of the whole frozen record
    (design, bundle manifest, ``analysis:`` block, command, ...), which ``record`` holds; an
    amendment's record says what it amends and why. The console compares ``bundle_sha256``
    with the stored files of the study's current version.
    """

    __tablename__ = "preregistration"
    __table_args__ = (UniqueConstraint("study_id", "prereg_sha256"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"), index=True)
    study_version: Mapped[int] = mapped_column(Integer, comment="study version it was frozen on")
    prereg_sha256: Mapped[str] = mapped_column(String(64), comment="the pre-registration hash")
    bundle_sha256: Mapped[str] = mapped_column(String(64), comment="SHA-256 of the manifest")
    document: Mapped[str] = mapped_column(String(200), comment="file name of the document")
    record: Mapped[dict[str, Any]] = mapped_column(JSON, comment="the document's frozen record")
    created_by: Mapped[str] = mapped_column(String(80))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class InterimLook(db.Model):
    """One look of a group-sequential study: the pre-registered test as ``framelab looks`` ran it.

    A look is recorded once, when its count of completed, non-excluded participants is reached,
    and never recomputed (the unique key): it is what the researcher was shown. A pause offered
    because a bound was crossed is recorded here once the researcher confirms it.
    """

    __tablename__ = "interim_look"
    __table_args__ = (UniqueConstraint("study_id", "look"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"), index=True)
    look: Mapped[int] = mapped_column(Integer, comment="1-based look")
    n_planned: Mapped[int] = mapped_column(Integer)
    n_analysed: Mapped[int] = mapped_column(Integer)
    fraction: Mapped[float] = mapped_column(Float, comment="analysed / planned N")
    z: Mapped[float | None] = mapped_column(Float, comment="oriented statistic; empty: no fit")
    estimate: Mapped[float | None] = mapped_column(Float)
    se: Mapped[float | None] = mapped_column(Float)
    p_val: Mapped[float | None] = mapped_column(Float, comment="fixed-design p (not adjusted)")
    efficacy_z: Mapped[float] = mapped_column(Float)
    futility_z: Mapped[float | None] = mapped_column(Float)
    decision: Mapped[str] = mapped_column(
        String(20), comment="efficacy, futility, not rejected or continue"
    )
    crossed: Mapped[bool] = mapped_column(Boolean, default=False)
    prereg_sha256: Mapped[str | None] = mapped_column(String(64))
    participants_sha256: Mapped[str] = mapped_column(
        String(64), comment="SHA-256 of the analysed participant ids, sorted, one per line"
    )
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    computed_by: Mapped[str] = mapped_column(String(80))
    computed_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    paused_by: Mapped[str | None] = mapped_column(String(80))
    paused_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
