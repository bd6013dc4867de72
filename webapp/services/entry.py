"""Entry into a study from Prolific, MTurk or a plain link, and enrolment of new participants."""

from __future__ import annotations

import hashlib
import hmac
import random
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from flask_babel import lazy_gettext
from sqlalchemy import func, or_, select
from sqlalchemy.exc import IntegrityError

from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.i18n import N_
from webapp.models import (
    Participant,
    ParticipantStatus,
    Platform,
    PlatformIdentity,
    Recruitment,
    Study,
)
from webapp.services import testmark
from webapp.services.assignments import record_assignment
from webapp.services.design import choose_sequence, study_sequences
from webapp.tasks import get_task_type

_ID_RE = re.compile(r"^[A-Za-z0-9_.@:-]{1,128}$")
# Recruiters' own ID formats. Prolific IDs are 24 hex digits (MongoDB object IDs) and MTurk IDs
# upper-case alphanumerics; both platforms ignore case, so each has one canonical spelling here
# (Prolific lower case, MTurk upper case): `5F1A…` and `5f1a…` are one person, not two.
_SPACES = re.compile(r"\s+")
_PROLIFIC_RE = re.compile(r"^[0-9a-f]{24}$")
# Workers of an imported native batch are only ever compared, never sent to MTurk.
_MTURK_BATCH_RE = re.compile(r"^[A-Z0-9]{1,64}$")
# (pattern, min, max length) of botocore's MTurk service model: a WorkerId is a CustomerId,
# HITId and AssignmentId are EntityIds. MTurk refuses any other value in every call, so a
# worker entering with one could never be kept out, approved or paid.
MTURK_ID_PATTERNS = {
    "WorkerId": ("^A[A-Z0-9]+$", 1, 64),
    "HITId": ("^[A-Z0-9]+$", 1, 64),
    "AssignmentId": ("^[A-Z0-9]+$", 1, 64),
}
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
MTURK_HOSTS = {"www.mturk.com", "workersandbox.mturk.com"}


class EntryError(Exception):
    """The entry link cannot be used; ``code`` is shown to the participant."""

    def __init__(self, code: str, message: Any, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


@dataclass(frozen=True)
class Entry:
    """Validated entry parameters (raw platform IDs; stored only in ``PlatformIdentity``)."""

    platform: Platform
    external_id: str
    external_study_id: str | None = None
    external_session_id: str | None = None
    return_url: str | None = None
    preview: bool = False
    # A test participant's entry key (webapp.services.testmark): set only once it was checked.
    test_key: str | None = None

    @property
    def test(self) -> bool:
        """True for a bot's (or other test participant's) checked test entry."""
        return self.test_key is not None

    def params(self) -> dict[str, str]:
        """The query parameters that reproduce this entry (for the consent form)."""
        extra = {testmark.TEST_KEY_PARAM: self.test_key} if self.test_key else {}
        if self.platform is Platform.prolific:
            return {
                "PROLIFIC_PID": self.external_id,
                "STUDY_ID": self.external_study_id or "",
                "SESSION_ID": self.external_session_id or "",
                **extra,
            }
        if self.platform is Platform.mturk:
            return {
                "workerId": self.external_id,
                "hitId": self.external_study_id or "",
                "assignmentId": self.external_session_id or "",
                "turkSubmitTo": self.return_url or "",
                **extra,
            }
        return {"participant": self.external_id, **extra}

    @property
    def sandbox(self) -> bool:
        """True for the MTurk sandbox."""
        return "sandbox" in (self.return_url or "")


def canonical_spelling(platform: Platform, raw: str) -> str:
    """Return a recruiter ID spelled the one way the platform means it (no format check).

    Prolific IDs are lower case, MTurk IDs upper case, both without whitespace; link IDs are
    the researcher's own and only lose surrounding whitespace. Entry, reconciliation and
    payments all compare IDs in this spelling, so ``5f1a…`` and ``5F1A…`` are one person.

    Examples
    --------
    >>> canonical_spelling(Platform.prolific, " 5F1A2B3C4D5E6F7A8B9C0D1E ")
    '5f1a2b3c4d5e6f7a8b9c0d1e'
    >>> canonical_spelling(Platform.mturk, "a1b2c3d4e5f6g7")
    'A1B2C3D4E5F6G7'
    """
    if platform is Platform.prolific:
        return _SPACES.sub("", raw).lower()
    if platform in (Platform.mturk, Platform.mturk_batch):
        return _SPACES.sub("", raw).upper()
    return raw.strip()


def mturk_id(name: str, raw: str) -> str | None:
    """Return an MTurk ID in its canonical spelling, or ``None`` when MTurk would refuse it.

    ``name`` is the parameter MTurk's API calls it (a key of :data:`MTURK_ID_PATTERNS`).

    Examples
    --------
    >>> mturk_id("WorkerId", "a1b2c3d4e5f6g7")
    'A1B2C3D4E5F6G7'
    >>> mturk_id("WorkerId", "B1B2C3D4E5F6G7") is None
    True
    >>> mturk_id("AssignmentId", "3asg0")
    '3ASG0'
    """
    value = canonical_spelling(Platform.mturk, raw)
    pattern, least, most = MTURK_ID_PATTERNS[name]
    return value if least <= len(value) <= most and re.search(pattern, value) else None


def canonical_id(platform: Platform, raw: str) -> str | None:
    """Return a recruiter ID in its canonical spelling, or ``None`` when it is malformed.

    Prolific IDs: 24 hex digits, lower case. MTurk worker IDs: as MTurk takes them
    (:func:`mturk_id`); MTurk batch IDs: upper-case letters and digits. Link IDs are the
    researcher's own and kept as given (``_ID_RE``).

    Examples
    --------
    >>> canonical_id(Platform.prolific, "5F1A2B3C4D5E6F708192A3B4")
    '5f1a2b3c4d5e6f708192a3b4'
    >>> canonical_id(Platform.mturk, "a1b2c3d4e5f6g7")
    'A1B2C3D4E5F6G7'
    >>> canonical_id(Platform.prolific, "not-an-id") is None
    True
    """
    if platform is Platform.mturk:
        return mturk_id("WorkerId", raw)
    value = canonical_spelling(platform, raw)
    if platform is Platform.prolific:
        pattern = _PROLIFIC_RE
    elif platform is Platform.mturk_batch:
        pattern = _MTURK_BATCH_RE
    else:
        pattern = _ID_RE
    return value if pattern.match(value) else None


# Every refused link says what to do; a researcher trying the Prolific link by hand learns why.
def _again(problem: Any) -> Any:
    """``problem`` and what to do about it, in the participant's language when shown."""
    return lazy_gettext(
        "%(problem)s Please open the study again from the link or button on the platform you "
        "came from, without changing it.",
        problem=problem,
    )


_PLACEHOLDER = N_(
    "The study link still holds Prolific's placeholder %(value)s: Prolific fills it in only "
    "when a participant opens the study from Prolific. To try the study yourself, use Preview "
    "on the study's page in the researcher console, or Prolific's own preview."
)


def _need(
    args: Mapping[str, str], name: str, platform: Platform = Platform.link, mturk: str = ""
) -> str:
    """The parameter ``name`` canonical, as ``platform``'s participant ID or, with ``mturk``,
    as the MTurk ID of that API name."""
    raw = (args.get(name) or "").strip()
    if not raw:
        raise EntryError(
            "E400-PARAMS",
            _again(lazy_gettext("The study link is missing the parameter %(name)s.", name=name)),
        )
    if testmark.is_test_id(raw) and testmark.valid_test_id(raw):
        return canonical_spelling(platform, raw)  # parse_entry checks it against its key
    value = mturk_id(mturk, raw) if mturk else canonical_id(platform, raw)
    if value is None:
        if raw.startswith("{{%") and raw.endswith("%}}") and len(raw) < 40:
            raise EntryError("E400-PARAMS", lazy_gettext(_PLACEHOLDER, value=raw))
        raise EntryError(
            "E400-PARAMS",
            _again(lazy_gettext("The study link has a malformed %(name)s.", name=name)),
        )
    return value


def parse_entry(args: Mapping[str, str], *, slug: str = "", secret: str = "") -> Entry:
    """Recognise the recruitment platform from the query parameters and validate them.

    A participant ID in the reserved test form (:mod:`webapp.services.testmark`) is accepted
    only with its ``test_key`` for this study under ``secret``; the entry is then a test entry.

    Parameters
    ----------
    args : Mapping
        Query (or form) parameters.
    slug : str
        The study the link is for (test entry keys are per study).
    secret : str
        The server's ``SECRET_KEY`` (empty: no test entry is accepted).

    Returns
    -------
    Entry

    Raises
    ------
    EntryError
        ``E400-PARAMS`` when parameters are missing or malformed, or a test ID comes without
        its key.

    Examples
    --------
    >>> parse_entry({"participant": "abc"}).platform.value
    'link'
    """
    entry = _parse_platform(args)
    if entry.preview or not testmark.is_test_id(entry.external_id):
        return entry  # a key beside a real ID changes nothing: real stays real
    key = args.get(testmark.TEST_KEY_PARAM) or ""
    if not testmark.entry_key_matches(key, secret, slug, entry.platform.value, entry.external_id):
        raise EntryError(
            "E400-PARAMS",
            _again(
                lazy_gettext(
                    "This participant ID is reserved for test runs of the study, and the link "
                    "does not carry a valid test key for it."
                )
            ),
        )
    return replace(entry, test_key=key)


def _parse_platform(args: Mapping[str, str]) -> Entry:
    if "PROLIFIC_PID" in args:
        return Entry(
            Platform.prolific,
            _need(args, "PROLIFIC_PID", Platform.prolific),
            _need(args, "STUDY_ID"),
            _need(args, "SESSION_ID"),
        )
    if any(k in args for k in ("assignmentId", "hitId", "workerId", "turkSubmitTo")):
        if args.get("assignmentId") == MTURK_PREVIEW:
            return Entry(Platform.mturk, "preview", preview=True)
        submit_to = _need_url(args.get("turkSubmitTo") or "")
        return Entry(
            Platform.mturk,
            _need(args, "workerId", Platform.mturk),
            _need(args, "hitId", mturk="HITId"),
            _need(args, "assignmentId", mturk="AssignmentId"),
            return_url=submit_to,
        )
    if "participant" in args:
        return Entry(Platform.link, _need(args, "participant"))
    raise EntryError(
        "E400-PARAMS",
        lazy_gettext(
            "This study link is incomplete: it does not say who you are. Please use the link "
            "exactly as you received it."
        ),
    )


def _need_url(url: str) -> str:
    """Accept only MTurk's own submit hosts (the completion form posts there)."""
    parts = urlsplit(url.strip())
    if parts.scheme != "https" or parts.hostname not in MTURK_HOSTS:
        raise EntryError(
            "E400-PARAMS",
            _again(lazy_gettext("The study link has a malformed %(name)s.", name="turkSubmitTo")),
        )
    return f"https://{parts.hostname}"


def pseudonym(salt: str, platform: Platform, external_id: str) -> str:
    """Return the export's ``participant_id``: ``p_`` + 16 hex of HMAC-SHA256.

    Examples
    --------
    >>> pseudonym("salt", Platform.link, "x")
    'p_a31bf75d47d7fdb0'
    """
    digest = hmac.new(salt.encode(), f"{platform.value}:{external_id}".encode(), hashlib.sha256)
    return "p_" + digest.hexdigest()[:16]


def find_participant(study: Study, entry: Entry) -> Participant | None:
    """Return the participant this platform ID already has in the study, if any."""
    return db.session.scalar(
        select(Participant)
        .join(PlatformIdentity, PlatformIdentity.participant_id == Participant.id)
        .where(
            PlatformIdentity.study_id == study.id,
            PlatformIdentity.platform == entry.platform,
            PlatformIdentity.external_id == entry.external_id,
        )
    )


def record_visit(participant: Participant, entry: Entry, now: datetime) -> int | None:
    """Record the MTurk assignment a (returning or new) visit arrived with; commit.

    Returns
    -------
    int or None
        The key of the assignment to bind the visit's page URL to (``None`` off MTurk).
    """
    if entry.platform is not Platform.mturk or participant.platform is not Platform.mturk:
        return None
    row = record_assignment(
        participant,
        assignment_id=entry.external_session_id or "",
        hit_id=entry.external_study_id or "",
        return_url=entry.return_url or "",
        now=now,
    )
    db.session.commit()
    return row.id


def check_verified(study: Study, entry: Entry) -> None:
    """Refuse an entry that does not come through the listing FrameLab created for the study.

    For a study with ``recruitment: verified_entry: true`` (validation keeps that to a
    study whose ``recruiter:`` creates its one listing). A Prolific entry must carry the
    ``STUDY_ID`` of the Prolific study FrameLab created and recorded, an MTurk entry the
    ``hitId`` of its HIT; until the listing exists nobody enters. Without it, an MTurk entry
    must still carry the ``hitId`` of the study's HIT once FrameLab has recorded one: the
    recruiter approves and pays the study's participants through that HIT, so a worker of
    another HIT could not be paid as one. Test entries (bots, previews)
    carry a key of their own and an MTurk preview enrols nobody. The platform's session and
    assignment IDs cannot be checked here: neither platform confirms one before submission
    without a call to its API.

    Raises
    ------
    EntryError
        ``E403-UNVERIFIED``.
    """
    if entry.test or entry.preview:
        return
    verified = study_definition(study).recruitment.verified_entry
    if not verified and entry.platform is not Platform.mturk:
        return
    row = db.session.scalar(
        select(Recruitment).where(
            Recruitment.study_id == study.id, Recruitment.platform == entry.platform
        )
    )
    # An MTurk listing's id is its HIT type's until the HIT is posted; entries carry the HIT's.
    mturk = entry.platform is Platform.mturk
    listing = row and ((row.extra or {}).get("hit_id") if mturk else row.external_id)
    issued = canonical_spelling(entry.platform, listing or "")
    if not issued and not verified:
        return  # a HIT the researcher posted by hand: no HIT of FrameLab's to compare with
    if not issued or canonical_spelling(entry.platform, entry.external_study_id or "") != issued:
        raise EntryError(
            "E403-UNVERIFIED",
            _again(
                lazy_gettext(
                    "This link does not come from the study's own listing on the recruitment "
                    "platform."
                )
            ),
            403,
        )


def is_excluded(study: Study, entry: Entry) -> bool:
    """True when the platform ID is on the study's exclusion list (compared canonically)."""
    listed = study_definition(study).recruitment.exclude_ids
    return entry.external_id in {canonical_id(entry.platform, str(x)) for x in listed}


# A started participant who has answered no page since consent counts toward balance only this
# long after enrolling: long enough to spread a burst of real arrivals over the sequences, too
# short for made-up IDs that enrol and never answer (reloading a page keeps nobody counted) to
# steer later arrivals into one sequence.
UNANSWERED_WINDOW = timedelta(minutes=5)


def balance_counts(
    study: Study, now: datetime, active_window: timedelta, *, test: bool = False
) -> dict[str, int]:
    """Participants per sequence (one per format of the study's design) that count towards balance.

    Completed participants count, and so do started ones seen within ``active_window`` who
    have answered a page since consent or enrolled within :data:`UNANSWERED_WINDOW`;
    screened-out, returned, timed-out, long-idle (abandoned) and never-answering ones do
    not, so dropouts are refilled. Test participants (bots, researcher previews) are balanced
    among themselves (``test``): a pilot run is balanced as a real one would be, and never
    steers the sequences of real arrivals.
    """
    since = now - active_window
    rows = db.session.execute(
        select(Participant.sequence, func.count())
        .where(
            Participant.study_id == study.id,
            Participant.is_test.is_(test),
            or_(
                Participant.status == ParticipantStatus.completed,
                (Participant.status == ParticipantStatus.started)
                & (Participant.last_seen_at >= since)
                & (
                    (Participant.page_seq > 0) | (Participant.started_at >= now - UNANSWERED_WINDOW)
                ),
            ),
        )
        .group_by(Participant.sequence)
    )
    counts = dict.fromkeys(study_sequences(study_definition(study).tasks), 0)
    counts.update({seq: n for seq, n in rows})
    return counts


def add_participant(
    study: Study,
    *,
    platform: Platform,
    external_id: str,
    now: datetime,
    seed: int,
    sequence: str,
    status: ParticipantStatus = ParticipantStatus.started,
    block_index: int = 0,
    finished_at: datetime | None = None,
    is_preview: bool = False,
    is_test: bool = False,
    external_study_id: str | None = None,
    external_session_id: str | None = None,
    return_url: str | None = None,
) -> Participant:
    """Add a participant and its platform identity (kept apart from responses); flush, no commit.

    The one place a participant row is created, for link entries and for imported MTurk batch
    workers alike, so the pseudonym and the identity row can never drift apart. A preview is
    always a test participant.
    """
    participant = Participant(
        study_id=study.id,
        code=pseudonym(study.export_salt, platform, external_id),
        platform=platform,
        seed=seed,
        sequence=sequence,
        status=status,
        block_index=block_index,
        step=0,
        page_seq=0,
        quiz_attempts=0,
        is_preview=is_preview,
        is_test=is_test or is_preview,
        study_version=study.version,
        started_at=now,
        last_seen_at=now,
        finished_at=finished_at,
    )
    db.session.add(participant)
    db.session.flush()
    db.session.add(
        PlatformIdentity(
            participant_id=participant.id,
            study_id=study.id,
            platform=platform,
            external_id=external_id,
            external_study_id=external_study_id,
            external_session_id=external_session_id,
            return_url=return_url,
            created_at=now,
        )
    )
    if platform is Platform.mturk and external_session_id and external_study_id and return_url:
        # The first visit's assignment starts the history in the same transaction.
        record_assignment(
            participant,
            assignment_id=external_session_id,
            hit_id=external_study_id,
            return_url=return_url,
            now=now,
        )
    return participant


def assignment_rng(seed: int | None, study: Study, entry: Entry) -> random.Random:
    """The randomness that draws an arriving participant's seed and breaks sequence ties.

    Without ``seed`` (the ``ASSIGNMENT_SEED`` setting) it is drawn from :mod:`secrets`, so no
    one can predict a condition; with one it is derived from the seed, the study and the
    participant's platform ID, so a bot run (or a test) assigns the same way every time, in
    whatever order its participants arrive. Either way :func:`enroll` records the participant's
    own seed, from which their sequence's order is re-derived.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> study, entry = NS(slug="s"), NS(platform=Platform.prolific, external_id="p1")
    >>> assignment_rng(7, study, entry).random() == assignment_rng(7, study, entry).random()
    True
    """
    if seed is None:
        return random.Random(secrets.randbits(64))
    return random.Random(f"{seed}:{study.slug}:{entry.platform.value}:{entry.external_id}")


def enroll(
    study: Study,
    entry: Entry,
    *,
    rng: random.Random,
    now: datetime,
    active_window: timedelta,
    is_preview: bool = False,
    is_test: bool = False,
) -> Participant:
    """Create the participant for a consenting arrival, choosing a balanced sequence.

    The choice runs in one short transaction that serialises arrivals: on PostgreSQL it
    locks the study row (``SELECT … FOR UPDATE``); on SQLite every transaction is
    ``BEGIN IMMEDIATE`` (see ``webapp/__init__.py``). Two arrivals therefore never both see
    the same counts. A second enrolment of the same platform ID returns the first one (the
    unique platform identity refuses the second insert).

    Only what the choice needs runs under the lock (lock, count, two inserts, commit): when
    a thousand people arrive in a minute every statement held under it is paid by everyone
    queued behind it.

    Parameters
    ----------
    study : Study
    entry : Entry
        Validated entry parameters (not a preview).
    rng : random.Random
        Draws the seed and breaks ties between sequences.
    now : datetime
        Current time (UTC).
    active_window : timedelta
        How long after their last page view a started participant still counts as active.
    is_preview : bool
        A researcher trying the study (always a test participant).
    is_test : bool
        A test participant: left out of balance, counts, payments and exports. Set from a
        checked test entry (``entry.test``) or for a preview, never from anything else in a link.

    Returns
    -------
    Participant
        Committed, positioned on the block after consent.
    """
    # Consent was given by submitting the entry form: start on the block after it.
    blocks = study_definition(study).tasks
    first_block = 1 if get_task_type(blocks[0].type).position == "first" else 0
    db.session.execute(select(Study.id).where(Study.id == study.id).with_for_update())
    counts = balance_counts(study, now, active_window, test=is_test or is_preview)
    sequence = choose_sequence(counts, rng, study_sequences(study_definition(study).tasks))
    try:
        participant = add_participant(
            study,
            platform=entry.platform,
            external_id=entry.external_id,
            now=now,
            seed=rng.randrange(2**31),
            sequence=sequence,
            block_index=first_block,
            is_preview=is_preview,
            is_test=is_test,
            external_study_id=entry.external_study_id,
            external_session_id=entry.external_session_id,
            return_url=entry.return_url,
        )
        db.session.commit()
    except IntegrityError:  # the same ID enrolled first (double click): use that one
        db.session.rollback()
        existing = find_participant(study, entry)
        if existing is None:
            raise
        return existing
    return participant
