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
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value

from webapp.config import AUTOCOMMIT_BIND
from webapp.extensions import IN_AUTOCOMMIT, db
from webapp.models import (
    MTurkAssignment,
    Participant,
    ParticipantStatus,
    Platform,
    Study,
)
from webapp.services import flow_driver, flow_sql
from webapp.tasks import get_task_type, prefetching_task_types
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
# participant sends the same one with every page (itsdangerous' key derivation, HMAC and JSON
# parsing were 3 % of a page's CPU). Only tokens that verified are kept: they are ours, so short,
# and a flood of made-up ones cannot grow the cache; at the bound it starts again.
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


def participant_from_token(token: str, secret: str, *, lock: bool = False) -> Participant | None:
    """Return the participant of a URL token, or ``None`` if it does not verify.

    ``lock=True`` reads the row under the lock :func:`submit` needs, so a submitted page reads
    its participant once.
    """
    ids = _token_ids(token, secret)
    if ids is None:
        return None
    if lock:
        return _lock_participant(ids[0])
    return db.session.get(Participant, ids[0])


class Unread(enum.Enum):
    """Marks a value that was not read (``None`` is a value: a page never shown)."""

    UNREAD = "unread"


UNREAD = Unread.UNREAD


@dataclass(frozen=True)
class PageRows:
    """What a page URL names: the participant and their study (see :func:`participant_in_study`).

    ``shown_at``: when the participant's current page was shown, read with the row lock
    (``UNREAD`` without it); :func:`submit` takes it instead of reading it again.
    """

    participant: Participant
    study: Study
    shown_at: datetime | None | Unread = UNREAD
    prefetched: dict[str, Any] = field(default_factory=dict)  # task type name -> value


def read_in_autocommit() -> bool:
    """PostgreSQL: run this request's statements without a transaction, until one needs it.

    For showing a page: its lookup is one read and its visit record one statement (atomic by
    itself), so a transaction only cost two round trips more (``BEGIN`` and ``COMMIT``, about
    a twentieth of a page's CPU). Reads see committed data either way (PostgreSQL's default
    isolation, READ COMMITTED, gives each statement its own snapshot too). A page whose task
    acts on entry takes its row lock in a transaction again (:func:`enter`). Call it before
    the request's first statement; otherwise, and on other databases, it does nothing and
    returns False. An answer of a task with ``answers_by_write`` is one statement in
    autocommit too (:func:`submit`).

    The statements run on the autocommit engine (:class:`webapp.extensions.Session`), whose
    connections never leave autocommit; the app has one on PostgreSQL through psycopg
    (:func:`webapp.config.resolve_config`), the driver :mod:`webapp.services.flow_driver`
    sends statements through. Without it (SQLite, another driver) requests keep their
    transaction.
    """
    session = db.session()
    if session.info.get(IN_AUTOCOMMIT):
        return True
    if session.in_transaction() or AUTOCOMMIT_BIND not in db.engines:
        return False
    session.info[IN_AUTOCOMMIT] = True
    session.connection()
    return True


def end_autocommit() -> None:
    """Leave :func:`read_in_autocommit`: the session's next statement begins a transaction.

    Before a row lock (:func:`enter`, :func:`submit`) or writes that must land together (an
    MTurk settlement after an answer); it does nothing outside autocommit.
    """
    session = db.session()
    if session.info.pop(IN_AUTOCOMMIT, False):
        session.commit()  # nothing to commit: it hands the connection back


def _commit() -> None:
    """Commit; in autocommit with nothing pending, leave the connection to the teardown.

    Each statement of an autocommit request committed itself, so ``Session.commit`` would only
    hand the connection back, which the request's teardown does anyway (the commit was 2.7 % of
    a sampled profile; skipping it measured 1.01x in process, issue 21). The session stays in
    autocommit: a lazy load while the page renders is one more read.
    """
    session = db.session()
    if _in_autocommit() and not (session.new or session.dirty or session.deleted):
        return
    session.commit()


def participant_in_study(
    token: str, secret: str, slug: str, *, lock: bool = False, shown: bool = False
) -> PageRows | None:
    """Return the participant of a URL token and their study, read in one statement.

    ``None`` when the token does not verify or its participant is not in the study ``slug``
    (the caller then looks the study up alone, to say why). ``shown=True`` (a submission)
    reads when the current page was shown too; ``lock=True`` takes the participant's row lock
    (``FOR UPDATE OF participant``: locking the study row would serialise every answer of the
    study), which :func:`submit` needs outside autocommit. Without ``shown`` the task types'
    prefetched values are read. The study's definition comes from the per-process cache
    (:func:`webapp.services.studies.with_cached_definition`). In autocommit (PostgreSQL) the
    statement goes through the driver (:func:`webapp.services.flow_driver.page_rows`).
    """
    from webapp.services.studies import with_cached_definition

    ids = _token_ids(token, secret)
    if ids is None:
        return None
    prefetch = () if shown else prefetching_task_types()
    if not lock and _in_autocommit():
        found = flow_driver.page_rows(ids[0], slug, shown=shown, prefetch=prefetch)
        if found is None:
            return None
        if found is not flow_driver.HELD:
            participant, study, extra = found
            if shown:
                return PageRows(participant, study, extra[0])
            prefetched = {t.name: v for t, v in zip(prefetch, extra, strict=True)}
            return PageRows(participant, study, prefetched=prefetched)
    row = db.session.execute(
        flow_sql.page_rows(lock=lock, shown=shown, prefetch=prefetch),
        {"participant_id": ids[0], "slug": slug},
    ).one_or_none()
    if row is None:
        return None
    study = with_cached_definition(row[1])
    if shown:
        return PageRows(row[0], study, row[2])
    return PageRows(
        row[0], study, prefetched={t.name: v for t, v in zip(prefetch, row[2:], strict=True)}
    )


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


def current_page(
    participant: Participant,
    study: Study,
    now: datetime,
    prefetched: dict[str, Any] | None = None,
) -> PageContext | None:
    """Return the page the participant is on, or ``None`` once they have finished.

    ``prefetched``: :attr:`PageRows.prefetched` (each task type reads its own name).
    """
    if participant.status is not ParticipantStatus.started:
        return None
    blocks = study.definition["tasks"]
    if participant.block_index >= len(blocks):
        return None
    block = blocks[participant.block_index]
    return PageContext(
        study=study,
        participant=participant,
        block=block,
        block_index=participant.block_index,
        step=participant.step,
        now=now,
        prefetched=prefetched or {},
    )


def task_of(ctx: PageContext) -> TaskType:
    """The task type of the page's block."""
    task = get_task_type(ctx.block["type"])
    if task is None:  # only possible if a task type was removed after the study was loaded
        raise LookupError(f"unknown task type {ctx.block['type']!r}")
    return task


def record_visit(ctx: PageContext) -> None:
    """Note when this page was first shown (reloads keep the first time) and commit.

    One ``INSERT ... ON CONFLICT DO NOTHING`` on the unique (participant, page) pair, so a
    reload, or two concurrent loads of the page, keep the first time without a read first.
    On PostgreSQL the participant's ``last_seen_at`` is moved by the same statement (the
    insert rides in a ``WITH`` clause of the ``UPDATE``; PostgreSQL runs a data-modifying
    ``WITH`` to completion whether or not the main statement reads it), sent through the driver
    (:func:`webapp.services.flow_driver.send`); SQLite has no such clause and takes the two
    statements.
    """
    p = ctx.participant
    visit = {
        "v_participant": p.id,
        "v_seq": p.page_seq,
        "v_page": task_of(ctx).page_name(ctx.block, ctx.step),
        "v_shown": ctx.now,
    }
    dialect = db.session.get_bind().dialect.name
    if dialect == "postgresql":
        flow_driver.send(flow_sql.visit_and_last_seen(), {**visit, "p_id": p.id, "p_seen": ctx.now})
        set_committed_value(p, "last_seen_at", ctx.now)  # written: nothing left to flush
    else:
        db.session.execute(flow_sql.visit_insert(dialect), visit)
        p.last_seen_at = ctx.now
    _commit()


@dataclass(frozen=True)
class SubmitResult:
    """What happened to a submission."""

    accepted: bool
    outcome: Outcome | None = None
    message: str | None = None


@dataclass
class _Position:
    """Where a participant is, as plain values: a submission moves this, not the ORM row.

    On PostgreSQL the new position is written by one Core statement (:func:`submit`)
    and only then set on the loaded row as already written; moving the row's attributes
    directly would mark it changed and cost a (fruitless) ORM flush on every answer.
    """

    page_seq: int
    last_seen_at: datetime | None
    block_index: int
    step: int
    status: ParticipantStatus
    finished_at: datetime | None

    @classmethod
    def of(cls, p: Participant) -> _Position:
        return cls(*(getattr(p, name) for name in _POSITION))

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _POSITION}


_POSITION = tuple(f.name for f in fields(_Position))  # the participant's columns it holds


def _advance(participant: Participant | _Position, study: Study, now: datetime) -> None:
    blocks = study.definition["tasks"]
    participant.step += 1
    while participant.block_index < len(blocks):
        task = get_task_type(blocks[participant.block_index]["type"])
        if task is not None and participant.step < task.n_steps(blocks[participant.block_index]):
            return
        participant.block_index += 1
        participant.step = 0
    participant.status = ParticipantStatus.completed
    participant.finished_at = now


def _lock_participant(participant_id: int) -> Participant | None:
    """Re-read the participant under a row lock (``FOR UPDATE``; SQLite: immediate tx)."""
    return db.session.scalars(
        select(Participant)
        .where(Participant.id == participant_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one_or_none()


def _in_autocommit() -> bool:
    return bool(db.session().info.get(IN_AUTOCOMMIT))


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
    shown_at: datetime | None | Unread = UNREAD,
) -> SubmitResult:
    """Save a validated page and move the participant on, atomically, exactly once.

    ``shown_at``: when the page was shown, if it was read with the participant
    (:attr:`PageRows.shown_at`); otherwise it is read where the visit is stamped.

    Two ways, one guarantee (of concurrent copies of the same POST, exactly one saves):

    - **PostgreSQL, read in autocommit** (:func:`read_in_autocommit`), a task with
      ``answers_by_write``: the answer is one statement without a transaction
      (:func:`webapp.services.flow_sql.answer`), which moves the participant only if they are
      still on the page they were read at and writes the task's rows only if it moved them.
    - **Otherwise** a transaction under the participant's row lock (``FOR UPDATE`` on
      PostgreSQL, taken here if the lookup did not; SQLite transactions are immediate), with
      the token checked again under the lock. On PostgreSQL the visit's stamp and the task's
      ``PageContext.write`` rows ride in the statement that moves the participant.

    Unique constraints are the last line of defence either way (a duplicate is a replay).

    Returns
    -------
    SubmitResult
        ``accepted`` false for replays; otherwise the outcome and an optional message.
    """
    p = ctx.participant
    if _refused(p, token, secret):
        db.session.rollback()
        return SubmitResult(accepted=False)
    task = task_of(ctx)
    if _in_autocommit():
        if task.answers_by_write and shown_at is not UNREAD:
            return _answer_unlocked(ctx, task, form, rt_ms, shown_at)
        end_autocommit()  # the lock below needs a transaction
        row = db.session.execute(
            flow_sql.locked_participant(), {"participant_id": p.id}
        ).one_or_none()
        if row is None or _refused(p, token, secret):  # gone or moved on since the read
            db.session.rollback()
            return SubmitResult(accepted=False)
        shown_at = row[1]  # when the page was shown, read under the lock
    stamp = _stamp(p, ctx, rt_ms)
    together = shown_at is not UNREAD and db.session.get_bind().dialect.name == "postgresql"
    if together:
        ctx.shown_at = shown_at  # type: ignore[assignment]  (not UNREAD here)
    else:  # stamp the page's visit and read when it was shown, in one statement
        ctx.shown_at = db.session.scalar(flow_sql.stamp_visit(), stamp)
    try:  # a duplicate answer raises here (unique constraints), at a write or the commit
        result = task.save(ctx, form, rt_ms)
        moved = _moved(p, ctx, result.outcome)
        if together:  # the task's rows ride in the statement that moves the participant
            statement = flow_sql.position_stamp_and(*_shape(ctx))
            db.session.execute(statement, _answer_params(p, moved, stamp, ctx))
            for name, value in _written(moved, ctx).items():
                set_committed_value(p, name, value)
        else:  # the task's rows, then the move through the ORM (the commit's flush)
            for build, params in ctx.writes:
                db.session.execute(build(None), params)
            for name, value in _written(moved, ctx).items():
                setattr(p, name, value)
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        return SubmitResult(accepted=False)
    return SubmitResult(accepted=True, outcome=result.outcome, message=result.message)


def _answer_unlocked(
    ctx: PageContext, task: TaskType, form: PageForm, rt_ms: int | None, shown_at: datetime | None
) -> SubmitResult:
    """:func:`submit` in one statement without a transaction (PostgreSQL, autocommit), sent
    through the driver (:func:`webapp.services.flow_driver.send`)."""
    p = ctx.participant
    ctx.shown_at = shown_at
    result = task.save(ctx, form, rt_ms)
    moved = _moved(p, ctx, result.outcome)
    params = _answer_params(p, moved, _stamp(p, ctx, rt_ms), ctx)
    params.update(r_seq=p.page_seq, r_status=ParticipantStatus.started)
    try:
        row = flow_driver.send(flow_sql.answer(*_shape(ctx)), params)
    except IntegrityError:  # a duplicate: nothing of the statement was written
        db.session.rollback()
        end_autocommit()  # the rollback ended the autocommit connection's use
        return SubmitResult(accepted=False)
    if row is None:  # a concurrent copy of this answer moved them first
        return SubmitResult(accepted=False)
    for name, value in _written(moved, ctx).items():
        set_committed_value(p, name, value)
    return SubmitResult(accepted=True, outcome=result.outcome, message=result.message)


def _stamp(p: Participant, ctx: PageContext, rt_ms: int | None) -> dict[str, Any]:
    """The visit's stamp's parameters (:func:`webapp.services.flow_sql.stamp_visit`)."""
    return {"s_participant": p.id, "s_seq": p.page_seq, "submitted": ctx.now, "rt": rt_ms}


def _moved(p: Participant, ctx: PageContext, outcome: Outcome) -> _Position:
    """Where a saved page's outcome takes the participant (one page further at least)."""
    moved = _Position.of(p)
    moved.page_seq += 1
    moved.last_seen_at = ctx.now
    _apply(moved, ctx, outcome)
    return moved


def _shape(ctx: PageContext) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """What the answer's statement is built from: the task's writes and the participant's
    columns it sets (the statement is built once per shape)."""
    return tuple(w for w, _ in ctx.writes), tuple(sorted(ctx.participant_values))


def _written(moved: _Position, ctx: PageContext) -> dict[str, Any]:
    """The participant's columns the answer writes: its new position and the task's."""
    return {**ctx.participant_values, **moved.values()}


def _answer_params(
    p: Participant, moved: _Position, stamp: dict[str, Any], ctx: PageContext
) -> dict[str, Any]:
    """Parameters of the statement that moves the participant, stamps the visit and writes
    the task's rows (the rows' own parameters first: the flow's names win)."""
    values = moved.values()
    return {
        **{k: v for _, params in ctx.writes for k, v in params.items()},
        **stamp,
        "p_id": p.id,
        "n_page_seq": values["page_seq"],
        "n_last_seen": values["last_seen_at"],
        "n_block": values["block_index"],
        "n_step": values["step"],
        "n_status": values["status"],
        "n_finished": values["finished_at"],
        **{f"n_{name}": value for name, value in ctx.participant_values.items()},
    }


def _apply(p: Participant | _Position, ctx: PageContext, outcome: Outcome) -> None:
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
    end_autocommit()  # the lock below needs a transaction
    p = _lock_participant(ctx.participant.id)
    if (
        p is None
        or p.status is not ParticipantStatus.started
        or (p.block_index, p.step) != (ctx.block_index, ctx.step)
    ):
        db.session.rollback()  # moved on concurrently: the caller re-reads the position
        return True
    result = task.enter(ctx)
    if result is not None:
        p.page_seq += 1
        p.last_seen_at = ctx.now
        _apply(p, ctx, result.outcome)
    db.session.commit()
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
    codes = study.definition["recruitment"]["completion_codes"]
    status = participant.status
    if status not in (ParticipantStatus.completed, ParticipantStatus.screened_out):
        return Finish("repeat", None)
    code = codes["completed" if status is ParticipantStatus.completed else "screened_out"]
    if participant.end_reason == "study_full" and codes.get("study_full"):
        code = codes["study_full"]  # turned away because no item needed labels: own code
    if participant.platform is Platform.prolific and status is ParticipantStatus.completed:
        return Finish("prolific", code, f"{prolific_url}?cc={code}")
    if participant.platform is Platform.mturk and status is ParticipantStatus.completed:
        from webapp.services.mturk import current_assignment

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


def progress(definition: dict[str, Any], block_index: int, step: int) -> dict[str, int]:
    """Where a page lies in the participant's path, counted in pages (every trial is one).

    The consent page (seen before enrolment) is not counted; the last page is "page N of N"
    with N - 1 pages done, so the bar reaches 100% only when the study has ended.

    Returns
    -------
    dict
        ``page`` (1-based), ``total``, ``done`` (pages answered) and ``percent`` (of done).
    """
    blocks = definition["tasks"]
    first = 1 if blocks and blocks[0]["type"] == "consent" else 0
    sizes = []
    for block in blocks[first:]:
        task = get_task_type(block["type"])
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
