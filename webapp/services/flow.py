"""The participant's path through a study: current page, page tokens, saving and advancing.

The position (block, step) is held on the server. Every form carries a *page token*: the
participant's count of accepted submissions, signed. A submission whose token is older than the
current count is a replay (back button, double click, resubmitted POST) and changes nothing;
a token that does not verify was tampered with.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy.exc import IntegrityError

from webapp.definition import StudyDefinition
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import (
    MTurkAssignment,
    Participant,
    ParticipantStatus,
    Platform,
    Study,
)
from webapp.services.assignments import current_assignment
from webapp.services.authenticity import PageSignals
from webapp.services.participant_data import Answer, Position, participant_data
from webapp.tasks import get_task_type
from webapp.tasks.base import Outcome, PageContext, PageForm, TaskType

MAX_RT_MS = 24 * 3600 * 1000


class TokenState(enum.Enum):
    """How a submitted page token relates to the participant's position."""

    current = "current"
    replay = "replay"
    tampered = "tampered"


def participant_token(participant_id: int, secret: str, assignment: int | None = None) -> str:
    """Return the URL token that identifies a participant's session.

    ``assignment`` (an :class:`~webapp.models.MTurkAssignment` key) binds the URL to the MTurk
    assignment the visit arrived with: the completion form of that URL posts that assignment,
    whatever other visits of the same worker ID brought.
    """
    payload: int | list[int] = (
        participant_id if assignment is None else [participant_id, assignment]
    )
    return URLSafeSerializer(secret, salt="framelab-participant").dumps(payload)


# Verified URL tokens -> their ids. A token is a pure function of its ids and the secret, and a
# participant sends the same one with every page, so its key derivation, HMAC and JSON parsing
# need not be repeated. Only tokens that verified are kept: they are ours, so short, and a
# flood of made-up ones cannot grow the cache; at the bound it starts again.
_VERIFIED: dict[tuple[str, str], tuple[int, int | None]] = {}
_VERIFIED_MAX = 16384


def _token_ids(token: str, secret: str) -> tuple[int, int | None] | None:
    """``(participant id, assignment key or None)`` of a token, or ``None`` if it is not ours."""
    known = _VERIFIED.get((token, secret))
    if known is not None:
        return known
    ids = _verify_token(token, secret)
    if ids is not None:
        if len(_VERIFIED) >= _VERIFIED_MAX:
            _VERIFIED.clear()
        _VERIFIED[token, secret] = ids
    return ids


def _verify_token(token: str, secret: str) -> tuple[int, int | None] | None:
    try:
        value = URLSafeSerializer(secret, salt="framelab-participant").loads(token)
    except BadSignature:
        return None
    if type(value) is int:
        return value, None
    if isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
        return value[0], value[1]
    return None


def participant_from_token(token: str, secret: str) -> Participant | None:
    """Return the participant of a URL token, or ``None`` if it does not verify."""
    ids = _token_ids(token, secret)
    if ids is None:
        return None
    return db.session.get(Participant, ids[0])


@dataclass(frozen=True)
class PageRows:
    """What a page URL names: the participant and their study (:func:`participant_in_study`)."""

    participant: Participant
    study: Study


def participant_in_study(
    token: str, secret: str, slug: str, *, lock: bool = False
) -> PageRows | None:
    """Return the participant of a URL token and their study, read in one statement.

    ``None`` when the token does not verify or its participant is not in the study ``slug``
    (the caller then looks the study up alone, to say why). ``lock=True`` (a submission)
    begins the answer's transaction with the participant's row lock, which :func:`submit`
    then holds. The study's definition comes from the per-process cache
    (:func:`webapp.services.studies.study_definition`).
    """
    ids = _token_ids(token, secret)
    if ids is None:
        return None
    found = participant_data().page(ids[0], slug, lock=lock)
    if found is None:
        return None
    participant, study = found
    return PageRows(participant, study)


def assignment_from_token(token: str, secret: str) -> MTurkAssignment | None:
    """Return the MTurk assignment a URL token is bound to (only one of its own participant)."""
    ids = _token_ids(token, secret)
    if ids is None or ids[1] is None:
        return None
    row = db.session.get(MTurkAssignment, ids[1])
    return row if row is not None and row.participant_id == ids[0] else None


def _sign(participant_id: int, page_seq: int, secret: str) -> str:
    msg = f"{participant_id}.{page_seq}".encode()
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()[:20]


def page_token(participant: Participant, secret: str) -> str:
    """Return the token that the current page's form must send back."""
    return f"{participant.page_seq}.{_sign(participant.id, participant.page_seq, secret)}"


def check_token(participant: Participant, token: str | None, secret: str) -> TokenState:
    """Classify a submitted page token (see the module docstring)."""
    seq_text, _, sig = (token or "").partition(".")
    seq = _ascii_int(seq_text)
    if seq is None or not hmac.compare_digest(sig, _sign(participant.id, seq, secret)):
        return TokenState.tampered
    if seq == participant.page_seq:
        return TokenState.current
    return TokenState.replay if seq < participant.page_seq else TokenState.tampered


def parse_rt_ms(raw: str | None) -> int | None:
    """Parse the client-measured milliseconds; absent or implausible values become ``None``."""
    value = _ascii_int((raw or "").strip())
    return value if value is not None and 0 <= value <= MAX_RT_MS else None


def _ascii_int(text: str, max_digits: int = 12) -> int | None:
    """Parse plain ASCII digits, else ``None``.

    ``str.isdigit`` accepts "²" (which ``int`` refuses) and ``int`` refuses more than 4,300
    digits: both raised a 500 from a tampered hidden field.
    """
    if not (text.isascii() and text.isdigit() and len(text) <= max_digits):
        return None
    return int(text)


def current_page(participant: Participant, study: Study, now: datetime) -> PageContext | None:
    """Return the page the participant is on, or ``None`` once they have finished."""
    if participant.status is not ParticipantStatus.started:
        return None
    definition = study_definition(study)
    if participant.block_index >= len(definition.tasks):
        return None
    block = definition.tasks[participant.block_index]
    return PageContext(
        study=study,
        definition=definition,
        participant=participant,
        block=block,
        block_index=participant.block_index,
        step=participant.step,
        now=now,
    )


def task_of(ctx: PageContext) -> TaskType:
    """The task type of the page's block."""
    task = get_task_type(ctx.block.type)
    if task is None:  # only possible if a task type was removed after the study was loaded
        raise LookupError(f"unknown task type {ctx.block.type!r}")
    return task


def record_visit(ctx: PageContext, words: int | None = None) -> None:
    """Note when this page was first shown, with ``words`` words of text on it (reloads keep
    the first time), and commit."""
    page = task_of(ctx).page_name(ctx.block, ctx.step)
    participant_data().record_visit(ctx.participant, page, ctx.now, words)


@dataclass(frozen=True)
class SubmitResult:
    """What happened to a submission."""

    accepted: bool
    outcome: Outcome | None = None
    message: str | None = None


def _advance(participant: Participant | Position, study: Study, now: datetime) -> None:
    blocks = study_definition(study).tasks
    participant.step += 1
    while participant.block_index < len(blocks):
        task = get_task_type(blocks[participant.block_index].type)
        if task is not None and participant.step < task.n_steps(blocks[participant.block_index]):
            return
        participant.block_index += 1
        participant.step = 0
    participant.status = ParticipantStatus.completed
    participant.finished_at = now


def _refused(p: Participant, token: str | None, secret: str) -> bool:
    """True when ``p`` (as read) cannot take this answer: not taking part, or moved on."""
    return p.status is not ParticipantStatus.started or (
        check_token(p, token, secret) is not TokenState.current
    )


def submit(
    ctx: PageContext,
    form: PageForm,
    *,
    token: str | None,
    secret: str,
    rt_ms: int | None,
    signals: PageSignals | None = None,
) -> SubmitResult:
    """Save a validated page and move the participant on, atomically, exactly once.

    One transaction under the participant's row lock (:meth:`ParticipantData.lock
    <webapp.services.participant_data.ParticipantData.lock>`, taken by the page's lookup when
    it read with ``lock=True``): the token is checked again on the row read under the lock, so
    of concurrent copies of the same POST exactly one saves and the others find the page
    answered. Unique constraints are the last line of defence (a
    duplicate row is a replay).

    Returns
    -------
    SubmitResult
        ``accepted`` false for replays; otherwise the outcome and an optional message.
    """
    data = participant_data()
    p = ctx.participant
    locked = None if _refused(p, token, secret) else data.lock(p.id)
    if locked is None or _refused(locked.participant, token, secret):
        data.release()
        return SubmitResult(accepted=False)
    ctx.shown_at = locked.shown_at
    task = task_of(ctx)
    try:  # a duplicate answer raises here (unique constraints), at a write or the commit
        result = task.save(ctx, form, rt_ms)
        moved = Position.of(p)
        moved.page_seq += 1
        moved.last_seen_at = ctx.now
        _apply(moved, ctx, result.outcome)
        answer = Answer(
            ctx.now,
            rt_ms,
            tuple(ctx.writes),
            dict(ctx.participant_values),
            moved,
            signals or PageSignals(),
        )
        data.save_answer(p, answer)
    except IntegrityError:
        data.release()
        return SubmitResult(accepted=False)
    return SubmitResult(accepted=True, outcome=result.outcome, message=result.message)


def _apply(p: Participant | Position, ctx: PageContext, outcome: Outcome) -> None:
    """Move the participant as a saved page's outcome says (retry stays on the page)."""
    if outcome is Outcome.end_block:
        p.step = task_of(ctx).n_steps(ctx.block) - 1
        outcome = Outcome.next
    if outcome is Outcome.next:
        _advance(p, ctx.study, ctx.now)
    elif outcome is Outcome.screen_out:
        p.status = ParticipantStatus.screened_out
        p.finished_at = ctx.now


def enter(ctx: PageContext) -> bool:
    """Let the page's task act before it is shown; True when the participant was moved on.

    For task types with ``acts_on_entry`` (e.g. reserving a batch of items) the participant
    row is locked first, as in :func:`submit`, so two concurrent loads of the page act once.
    A task that skips its page (a qualification passed before) or ends the session (a full
    study) advances the page counter, so the page's old token becomes a replay.
    """
    task = task_of(ctx)
    if not task.acts_on_entry:
        return False
    data = participant_data()
    locked = data.lock(ctx.participant.id)
    p = None if locked is None else locked.participant
    if (
        p is None
        or p.status is not ParticipantStatus.started
        or (p.block_index, p.step) != (ctx.block_index, ctx.step)
    ):
        data.release()  # moved on concurrently: the caller re-reads the position
        return True
    result = task.enter(ctx)
    moved = None
    if result is not None:
        moved = Position.of(p)
        moved.page_seq += 1
        moved.last_seen_at = ctx.now
        _apply(moved, ctx, result.outcome)
    data.save_entry(p, moved)
    return result is not None


@dataclass(frozen=True)
class Finish:
    """How a finished session ends on its platform."""

    kind: str  # "prolific" | "mturk" | "code" | "repeat"
    code: str | None
    url: str | None = None
    fields: dict[str, str] | None = None


def finish(
    participant: Participant,
    study: Study,
    prolific_url: str,
    assignment: MTurkAssignment | None = None,
) -> Finish:
    """Return where a finished participant goes: Prolific, the MTurk form or a code page.

    Parameters
    ----------
    participant : Participant
        Completed or screened out (other statuses end on a polite "already done" page).
    study : Study
    prolific_url : str
        Prolific's completion URL; ``?cc=CODE`` is appended.
    assignment : MTurkAssignment, optional
        The assignment this visit's URL is bound to: the MTurk form posts it (the worker's
        current HIT). Without one, the assignment the study was finished with, else the
        latest one seen.
    """
    codes = study_definition(study).recruitment.completion_codes
    status = participant.status
    if status not in (ParticipantStatus.completed, ParticipantStatus.screened_out):
        return Finish("repeat", None)
    code = codes.completed if status is ParticipantStatus.completed else codes.screened_out
    if participant.end_reason == "study_full" and codes.study_full:
        code = codes.study_full  # turned away because no item needed labels: own code
    if participant.platform is Platform.prolific and status is ParticipantStatus.completed:
        return Finish("prolific", code, f"{prolific_url}?cc={code}")
    if participant.platform is Platform.mturk and status is ParticipantStatus.completed:
        target = assignment or current_assignment(participant)
        assert target is not None, "every MTurk session has the assignment it arrived with"
        return Finish(
            "mturk",
            code,
            f"{target.return_url}/mturk/externalSubmit",
            {"assignmentId": target.assignment_id, "completion_code": code},
        )
    if participant.platform is Platform.prolific:  # screened out on Prolific
        return Finish("code", code, f"{prolific_url}?cc={code}")
    return Finish("code", code)


def progress(definition: StudyDefinition, block_index: int, step: int) -> dict[str, int]:
    """Where a page lies in the participant's path, counted in pages (every trial is one).

    The consent page (seen before enrolment) is not counted; the last page is "page N of N"
    with N - 1 pages done, so the bar reaches 100% only when the study has ended.

    Returns
    -------
    dict
        ``page`` (1-based), ``total``, ``done`` (pages answered) and ``percent`` (of done).
    """
    blocks = definition.tasks
    opening = get_task_type(blocks[0].type) if blocks else None
    first = 1 if opening is not None and opening.position == "first" else 0
    sizes = []
    for block in blocks[first:]:
        task = get_task_type(block.type)
        sizes.append(task.n_steps(block) if task is not None else 1)
    total = max(1, sum(sizes))
    done = min(total - 1, sum(sizes[: max(0, block_index - first)]) + step)
    return {
        "page": done + 1,
        "total": total,
        "done": done,
        "percent": 100 * done // total,
    }


def page_payload(ctx: PageContext) -> dict[str, Any]:
    """Template variables of the current page (task context plus progress)."""
    where = progress(ctx.definition, ctx.block_index, ctx.step)
    return {**task_of(ctx).context(ctx), "progress": where}
