"""Researcher accounts (passwords hashed with werkzeug) and the console's study operations."""

from __future__ import annotations

import functools
import re
import secrets
import statistics
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from flask import current_app
from sqlalchemy import func, select
from werkzeug.security import check_password_hash, generate_password_hash

from webapp.bundle import Bundle
from webapp.definition import StudyDefinition
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import (
    ChoiceResponse,
    Participant,
    ParticipantStatus,
    Researcher,
    Study,
    StudyState,
    utcnow,
)
from webapp.services import audit
from webapp.services.accounts import can_access, end_sessions
from webapp.services.design import study_formats
from webapp.services.studies import LoadResult, get_study, status_counts, store_definition
from webapp.studydef import folder_bundle, load_bundle
from webapp.text_rules import forbidden_character
from webapp.validation import SLUG_RE


def set_researcher(username: str, password: str, *, is_admin: bool | None = None) -> Researcher:
    """Create the account or reset its password (and, if given, set the admin role); commit."""
    if not username.strip() or len(password) < 8:
        raise ValueError("a username and a password of at least 8 characters are required")
    longest = Researcher.__table__.c.username.type.length
    if len(username) > longest:
        raise ValueError(f"a username is at most {longest} characters")
    if forbidden_character(username) is not None or forbidden_character(password) is not None:
        raise ValueError("a username or password cannot contain control characters")
    researcher = db.session.scalar(select(Researcher).where(Researcher.username == username))
    if researcher is None:
        researcher = Researcher(username=username, password_hash="")
        db.session.add(researcher)
    else:
        end_sessions(researcher, commit=False)  # a new password logs out every session
    researcher.password_hash = _password_hash(password)
    if is_admin is not None:
        researcher.is_admin = is_admin
    db.session.commit()
    return researcher


def _password_hash(password: str, method: str | None = None) -> str:
    """werkzeug's salted hash of ``password`` by the app's ``ACCOUNT_HASH_METHOD``."""
    return generate_password_hash(
        password, method=method or current_app.config["ACCOUNT_HASH_METHOD"]
    )


@functools.cache
def _dummy_hash(method: str) -> str:
    """A hash of a random password, made with the same method and cost as real ones."""
    return _password_hash(secrets.token_hex(16), method)


def authenticate(username: str, password: str) -> Researcher | None:
    """Return the researcher if the password matches, else ``None``.

    A password hash is checked whether or not the account exists (against a dummy hash for
    unknown names), so the time a login takes does not tell which usernames exist.
    """
    researcher = db.session.scalar(select(Researcher).where(Researcher.username == username))
    stored = (
        researcher.password_hash
        if researcher is not None
        else _dummy_hash(current_app.config["ACCOUNT_HASH_METHOD"])
    )
    if not check_password_hash(stored, password) or researcher is None:
        return None
    return researcher


# -- console: lifecycle, uploads, live progress, participant actions, recruitment links --------


class ConsoleError(ValueError):
    """A console action that cannot be done; ``str()`` is shown to the researcher."""


class SlugTaken(ConsoleError):
    """The study file's slug belongs to someone else; ``suggestion`` is a free one."""

    def __init__(self, message: str, suggestion: str) -> None:
        super().__init__(message)
        self.suggestion = suggestion


TRANSITIONS: dict[StudyState, frozenset[StudyState]] = {
    StudyState.draft: frozenset({StudyState.live}),
    StudyState.live: frozenset({StudyState.paused, StudyState.closed}),
    StudyState.paused: frozenset({StudyState.live, StudyState.closed}),
    # Reopening is allowed: closing by mistake must not end a paid study for good.
    # It is audited like every transition, with ``reopen`` in the detail.
    StudyState.closed: frozenset({StudyState.live, StudyState.paused}),
}


def change_state(study: Study, target: StudyState, actor: Researcher | str) -> None:
    """Move a study along draft → live → paused → closed and commit (audited).

    Raises
    ------
    ConsoleError
        The transition is not allowed (e.g. a draft cannot be closed).
    """
    if target not in TRANSITIONS[study.state]:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[study.state])) or "none"
        raise ConsoleError(
            f"a {study.state.value} study cannot become {target.value} (allowed: {allowed})"
        )
    before = study.state
    study.state = target
    audit.record(
        actor,
        "study.state",
        study=study,
        detail={
            "from": before.value,
            "to": target.value,
            **({"reopen": True} if before is StudyState.closed else {}),
        },
        commit=False,
    )
    db.session.commit()


def participant_gate(study: Study, *, starting: bool, preview: bool) -> StudyState | None:
    """Return why a participant may not proceed, or ``None`` when they may.

    Only live studies take new participants. People already in a paused study may finish (a
    pause stops recruitment, not work in progress); a closed or draft study takes nobody.
    Researchers with access may always preview.

    Parameters
    ----------
    study : Study
    starting : bool
        The request would enrol a new participant (entry or consent pages).
    preview : bool
        A logged-in researcher with access to the study is asking.

    Returns
    -------
    StudyState or None
        The blocking state.
    """
    if preview or study.state is StudyState.live:
        return None
    if study.state is StudyState.paused and not starting:
        return None
    return study.state


def load_uploaded_study(
    bundle: Bundle, owner: Researcher, *, force: bool = False, slug: str | None = None
) -> LoadResult:
    """Validate an uploaded study bundle and store it as the owner's draft (audited).

    The study file can name only files of its bundle (:mod:`webapp.bundle`); the bundle is
    stored with the study version.

    Parameters
    ----------
    bundle : webapp.bundle.Bundle
        From :func:`webapp.bundle.bundle_from_upload`.
    owner : Researcher
    force : bool
        Replace task blocks even if participants exist.
    slug : str, optional
        Store it under this slug instead of the file's own (e.g. a demo someone else loaded).

    Returns
    -------
    LoadResult

    Raises
    ------
    webapp.validation.StudyDefinitionError
        Invalid YAML or definition (file, path, reason).
    ConsoleError
        The slug belongs to another researcher's study.
    webapp.services.studies.StudyLoadError
        Tasks changed while participants exist.
    """
    notes: list[str] = []
    definition = with_slug(load_bundle(bundle, notes), slug)
    source = f"upload:{bundle.study_name}"
    return replace(_store_owned(definition, source, owner, force, bundle), notes=tuple(notes))


def load_study_for(
    path: Path, owner: Researcher, *, force: bool = False, slug: str | None = None
) -> LoadResult:
    """Load a study file from the studies folder as the owner's draft (audited).

    Like the command line, it reads only files of the study file's own folder. ``slug``
    stores it under another slug than the file's own.
    """
    bundle = folder_bundle(path)
    notes: list[str] = []
    definition = with_slug(load_bundle(bundle, notes), slug)
    return replace(_store_owned(definition, str(path), owner, force, bundle), notes=tuple(notes))


def with_slug(definition: StudyDefinition, slug: str | None) -> StudyDefinition:
    """Return the definition under another slug (checked like a study file's), or unchanged."""
    if not slug or slug == definition.slug:
        return definition
    slug = slug.strip()
    if not SLUG_RE.match(slug):
        raise ConsoleError(
            f"{slug!r} is not a usable slug: 3 to 80 lower-case letters, digits and dashes, "
            "starting and ending with a letter or digit"
        )
    return replace(definition, slug=slug)


def free_slug(base: str, owner: Researcher) -> str:
    """Suggest a slug no study has yet: ``base-USERNAME``, then ``-2``, ``-3``, …"""
    stem = re.sub(r"[^a-z0-9-]+", "-", f"{base}-{owner.username}".lower())[:74].strip("-")
    candidate, n = stem, 1
    while get_study(candidate) is not None:
        n += 1
        candidate = f"{stem}-{n}"
    return candidate


def duplicate_study(study: Study, slug: str, owner: Researcher) -> LoadResult:
    """Copy a study's current version (definition and bundle) into a new draft and commit.

    The copy starts at version 1 with its own export salt and no participants, so it is a
    new study (a new version of the design), not a continuation; both studies' audit logs
    record the copy.

    Raises
    ------
    ConsoleError
        The slug is malformed or already used.
    """
    from webapp.bundle import BundleFile
    from webapp.models import StudyFile

    definition = with_slug(study_definition(study), slug)
    if definition.slug == study.slug or get_study(definition.slug) is not None:
        raise ConsoleError(
            f"the slug {definition.slug!r} is already used; try {free_slug(study.slug, owner)!r}"
        )
    files = [
        BundleFile(f.name, f.content)
        for f in db.session.scalars(
            select(StudyFile).where(
                StudyFile.study_id == study.id, StudyFile.version == study.version
            )
        )
    ]
    result = store_definition(
        definition,
        f"copy:{study.slug}@{study.version}",
        owner_id=owner.id,
        state=StudyState.draft,
        files=files,
    )
    detail = {"from": study.slug, "from_version": study.version, "to": result.study.slug}
    audit.record(owner, "study.duplicate", study=study, detail=detail, commit=False)
    audit.record(owner, "study.load", study=result.study, detail={**detail, "action": "copy"})
    return result


def _store_owned(
    definition: StudyDefinition,
    source: str,
    owner: Researcher,
    force: bool,
    bundle: Bundle,
) -> LoadResult:
    from webapp.services.payments import check_payment_rule

    check_payment_rule(definition, bundle.study_name)  # never a server path in a message
    existing = get_study(definition.slug)
    if existing is not None and not can_access(owner, existing):
        raise SlugTaken(
            f"the slug {definition.slug!r} is taken by another researcher's study; "
            "load it under another slug (suggested below)",
            free_slug(definition.slug, owner),
        )
    result = store_definition(
        definition,
        source,
        force=force,
        owner_id=owner.id,
        state=StudyState.draft,
        files=bundle.files(),
    )
    if result.study.owner_id is None:  # loaded earlier from the command line: adopt it
        result.study.owner_id = owner.id
    audit.record(
        owner,
        "study.load",
        study=result.study,
        detail={"source": source, "action": result.action, "version": result.study.version},
    )
    return result


def dashboard(study: Study, now: datetime, active_window: timedelta) -> dict[str, Any]:
    """Summarise a study's progress for the live dashboard (JSON-serialisable).

    Parameters
    ----------
    study : Study
    now : datetime
    active_window : timedelta
        Started participants seen within it are "in progress"; older ones are "idle".

    Returns
    -------
    dict
        ``state``, ``counts`` (arrivals, in_progress, idle, completed, screened_out,
        returned, timed_out, excluded), ``median_duration_s`` (completed; ``None`` if none),
        ``by_sequence`` (status → A/B/total), ``per_pair`` (pair → format → choices) and
        ``items`` (annotation studies: the first :data:`OVERVIEW_ITEMS` items' confirmed /
        reserved / needed counts; the items page has them all), ``slots`` (annotation
        studies: their totals over every item, :func:`webapp.services.slot_report.slot_totals`;
        ``None`` otherwise) and ``idle_holds`` (annotation studies: ``slots`` reserved now by
        ``people`` who never labelled anything; ``None`` otherwise).
    """
    # Aggregated in the database, a fixed number of statements whatever the number of people
    # or items (the page polls this every 2 s).
    from webapp.services import slot_report

    since = now - active_window
    real = (Participant.study_id == study.id, Participant.is_test.is_(False))
    counts = dict.fromkeys(
        ("arrivals", "in_progress", "idle", *[s.value for s in ParticipantStatus][1:]), 0
    )
    counts["excluded"] = 0
    active = Participant.last_seen_at >= since
    rows = db.session.execute(
        select(Participant.status, active, Participant.excluded, func.count())
        .where(*real)
        .group_by(Participant.status, active, Participant.excluded)
    )
    for status, is_active, excluded, n in rows:
        counts["arrivals"] += n
        counts["excluded"] += n if excluded else 0
        if status is ParticipantStatus.started:
            counts["in_progress" if is_active else "idle"] += n
        else:
            counts[status.value] += n
    durations = [
        (finished - started).total_seconds()
        for started, finished in db.session.execute(
            select(Participant.started_at, Participant.finished_at).where(
                *real,
                Participant.status == ParticipantStatus.completed,
                Participant.finished_at.is_not(None),
            )
        )
    ]
    per_pair: dict[str, dict[str, int]] = {}
    formats = study_formats(study_definition(study).tasks)
    rows = db.session.execute(
        select(ChoiceResponse.pair_id, ChoiceResponse.format, func.count())
        .join(Participant, Participant.id == ChoiceResponse.participant_id)
        .where(Participant.study_id == study.id, Participant.is_test.is_(False))
        .group_by(ChoiceResponse.pair_id, ChoiceResponse.format)
    )
    for pair_id, fmt, n in rows:
        per_pair.setdefault(pair_id, dict.fromkeys(formats, 0))[fmt] = n
    return {
        "slug": study.slug,
        "state": study.state.value,
        "counts": counts,
        "median_duration_s": round(statistics.median(durations), 1) if durations else None,
        "by_sequence": status_counts(study),
        "has_sequences": uses_sequences(study),
        "per_pair": dict(sorted(per_pair.items())),
        "items": _item_counts(study, now),
        "slots": slot_report.slot_totals(study, now),
        "idle_holds": _idle_holds(study, now),
        "updated_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def uses_sequences(study: Study) -> bool:
    """True when the study counterbalances formats (A/B sequences mean something only then)."""
    return bool(study_formats(study_definition(study).tasks))


# Items the overview lists (the items page pages through all of them).
OVERVIEW_ITEMS = 50


def _item_counts(study: Study, now: datetime) -> list[dict[str, Any]]:
    """The first :data:`OVERVIEW_ITEMS` items' confirmed / reserved / needed counts (annotation
    studies; empty otherwise)."""
    from webapp.services import slot_report

    return [
        {
            "block": st.block_id,
            "item_id": st.item.item_id,
            "confirmed": st.n_labels,
            "reserved": st.n_reserved,
            "needed": st.needed,
            "surplus": st.n_surplus,
        }
        for st in slot_report.item_status(study, now, limit=OVERVIEW_ITEMS)
    ]


def _idle_holds(study: Study, now: datetime) -> dict[str, int] | None:
    """Slots held now by people who never labelled anything (annotation studies only)."""
    from webapp.services import allocation, slot_report

    if not allocation.annotation_blocks(study):
        return None
    held = slot_report.idle_holds(study, now)
    return {"slots": held.slots, "people": held.people}


def _participant(study: Study, code: str) -> Participant:
    p = db.session.scalar(
        select(Participant).where(Participant.study_id == study.id, Participant.code == code)
    )
    if p is None:
        raise ConsoleError(f"no participant {code!r} in this study")
    return p


def release_participant(participant: Participant, status: ParticipantStatus, now: datetime) -> None:
    """Set ``returned`` or ``timed_out`` and free what the participant held (no commit).

    Their sequence slot is freed by the status itself (only completed and active people count
    towards balance); annotation reservations go back to the pool through the allocation
    service.
    """
    from webapp.services import allocation

    allocation.end_participant(participant, status, now)


def mark_participant(
    study: Study, code: str, status: ParticipantStatus, actor: Researcher | str
) -> Participant:
    """Mark a started participant as returned or timed out and commit (audited).

    Raises
    ------
    ConsoleError
        Unknown participant, a status other than returned/timed_out, or a participant who
        already finished.
    """
    if status not in (ParticipantStatus.returned, ParticipantStatus.timed_out):
        raise ConsoleError("participants can only be marked returned or timed out")
    p = _participant(study, code)
    if p.status is not ParticipantStatus.started:
        raise ConsoleError(f"{code} is {p.status.value}; only started participants can be marked")
    release_participant(p, status, utcnow())
    audit.record(
        actor,
        "participant.mark",
        study=study,
        detail={"participant": code, "to": status.value},
        commit=False,
    )
    db.session.commit()
    return p


def exclude_participant(
    study: Study, code: str, reason: str, actor: Researcher | str, *, excluded: bool = True
) -> Participant:
    """Exclude a participant from exports and payments with a reason (or re-include) and commit.

    Raises
    ------
    ConsoleError
        Unknown participant or an empty reason.
    """
    reason = reason.strip()
    if excluded and not reason:
        raise ConsoleError("give a reason for the exclusion")
    p = _participant(study, code)
    p.excluded = excluded
    p.exclusion_reason = reason[:500] if excluded else None
    audit.record(
        actor,
        "participant.exclude" if excluded else "participant.include",
        study=study,
        detail={"participant": code, "reason": reason[:500]},
        commit=False,
    )
    db.session.commit()
    return p


PROLIFIC_PLACEHOLDERS = (
    "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
)


def recruitment_links(study: Study, base_url: str) -> dict[str, str]:
    """Return the study's links: Prolific URL, MTurk ExternalQuestion XML and a generic link.

    Parameters
    ----------
    study : Study
    base_url : str
        The public address of the platform, e.g. ``https://framelab.example.org``.

    Returns
    -------
    dict
        ``prolific``, ``mturk_xml`` and ``link`` (only platforms the study accepts);
        ``mturk_error`` instead of ``mturk_xml`` when the address is not one MTurk frames.
    """

    url = f"{base_url.rstrip('/')}/s/{study.slug}"
    platforms = study_definition(study).recruitment.platforms
    links: dict[str, str] = {}
    if "prolific" in platforms:
        links["prolific"] = f"{url}?{PROLIFIC_PLACEHOLDERS}"
    if "mturk" in platforms:
        from webapp.services.mturk import MTurkError, external_question_xml

        # The same document `framelab mturk external-question` prints, or why there is none.
        try:
            links["mturk_xml"] = external_question_xml(study, base_url)
        except MTurkError as exc:
            links["mturk_error"] = str(exc)
    if "link" in platforms:
        links["link"] = f"{url}?participant=PARTICIPANT_ID"
    return links


def preview_url(study: Study, token: str, secret: str) -> str:
    """Return a participant URL for a researcher preview on a platform the study accepts.

    The preview arrives as a test participant (:mod:`webapp.services.testmark`): an ID in
    the reserved test form with its entry key under ``secret`` (the server's ``SECRET_KEY``).
    """
    from urllib.parse import urlencode

    from webapp.services.testmark import entry_params, reserved_id

    platforms = study_definition(study).recruitment.platforms
    pid = f"PREVIEW{token}"
    kind = next((p for p in ("link", "prolific") if p in platforms), "mturk")
    test_id = reserved_id(kind, f"preview:{token}")
    if kind == "link":
        params = {"participant": test_id}
    elif kind == "prolific":
        params = {"PROLIFIC_PID": test_id, "STUDY_ID": "PREVIEW", "SESSION_ID": pid}
    else:
        params = {
            "workerId": test_id,
            "hitId": "PREVIEW",
            "assignmentId": pid,
            "turkSubmitTo": "https://workersandbox.mturk.com",
        }
    params.update(entry_params(secret, study.slug, kind, test_id))
    return f"/s/{study.slug}?{urlencode(params)}"
