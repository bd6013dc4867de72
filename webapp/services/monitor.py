"""What the console shows of a running study: progress toward the target, the dropout funnel,
time per page, choice shares, the paged participant table and one participant's record.

Every function here reads; none changes a row. Test participants (bots, previews) are always
left out of the numbers (they are shown in the table, flagged). Queries are aggregated in the
database and the table is paged there too, so a study with thousands of participants costs a
handful of indexed queries per refresh, never one per participant.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, func, or_, select

from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import (
    Annotation,
    AnnotationItem,
    ChoiceResponse,
    PageVisit,
    Participant,
    ParticipantStatus,
    Platform,
    PlatformIdentity,
    QuizAttempt,
    Study,
    TaskResponse,
)
from webapp.services import authenticity
from webapp.services.design import study_formats
from webapp.services.entry import canonical_id, pseudonym

PER_PAGE = 50
# Sort keys of the participant table: each is served by an index on (study_id, column).
# Ties are broken by id in the same direction, so the index's own order serves both keys.
SORTS: dict[str, tuple[Any, ...]] = {
    "newest": (Participant.id.desc(),),
    "oldest": (Participant.id.asc(),),
    "last_seen": (Participant.last_seen_at.desc(), Participant.id.desc()),
    "started": (Participant.started_at.asc(), Participant.id.asc()),
}
STATUS_FILTERS = ("all", *(s.value for s in ParticipantStatus), "excluded")
# The table's authenticity filter: everyone, the flagged, those without signals, or a reason.
FLAG_FILTERS = ("all", "flagged", "no_signals", *authenticity.WEIGHTS)


def _real(study: Study) -> Any:
    return and_(Participant.study_id == study.id, Participant.is_test.is_(False))


# -- overview -----------------------------------------------------------------------------


def target_progress(study: Study) -> dict[str, Any]:
    """Completed (not excluded) participants against ``recruitment.target_n``.

    Returns
    -------
    dict
        ``completed``, ``target`` (``None`` when the study sets none) and ``pct`` (0–100,
        capped; ``None`` without a target).
    """
    done = db.session.scalar(
        select(func.count()).where(
            _real(study),
            Participant.status == ParticipantStatus.completed,
            Participant.excluded.is_(False),
        )
    )
    target = study_definition(study).recruitment.target_n
    pct = None if not target else min(100, round(100 * done / target, 1))
    return {"completed": done, "target": target, "pct": pct}


def _page_key(study: Study, page: str) -> tuple[Any, ...]:
    """Study order of a page name ``block/step[/part]``: block position, then the steps."""
    block, _, rest = page.partition("/")
    order = {b.id: i for i, b in enumerate(study_definition(study).tasks)}
    parts = tuple((0, int(x), "") if x.isdigit() else (1, 0, x) for x in rest.split("/"))
    return (order.get(block, len(order)), parts)


def funnel(study: Study, now: datetime, active_window: timedelta) -> list[dict[str, Any]]:
    """Per page, in study order: how many reached it, how many left there, and time on it.

    A participant *left* at a page when it is the last page they were shown and they are not
    completed and not in progress (returned, timed out, or started but idle beyond
    ``active_window``); screened-out participants are counted apart (``screened_out``): the
    study ended their session there.

    Returns
    -------
    list of dict
        ``page``, ``reached`` (distinct participants shown it), ``left``, ``screened_out``,
        ``in_progress`` (people on it now) and ``median_s`` (median seconds from shown to
        submitted; ``None`` before anyone submitted it).
    """
    since = now - active_window
    reached = dict(
        db.session.execute(
            select(PageVisit.page, func.count(func.distinct(PageVisit.participant_id)))
            .join(Participant, Participant.id == PageVisit.participant_id)
            .where(_real(study))
            .group_by(PageVisit.page)
        ).all()
    )
    last_seq = (
        select(PageVisit.participant_id, func.max(PageVisit.page_seq).label("seq"))
        .join(Participant, Participant.id == PageVisit.participant_id)
        .where(_real(study))
        .group_by(PageVisit.participant_id)
        .subquery()
    )
    started = Participant.status == ParticipantStatus.started
    outcome = case(
        (Participant.status == ParticipantStatus.screened_out, "screened_out"),
        (started & (Participant.last_seen_at >= since), "in_progress"),
        (Participant.status == ParticipantStatus.completed, "completed"),
        else_="left",
    )
    last: dict[str, dict[str, int]] = {}
    rows = db.session.execute(
        select(PageVisit.page, outcome, func.count())
        .join(
            last_seq,
            and_(
                last_seq.c.participant_id == PageVisit.participant_id,
                last_seq.c.seq == PageVisit.page_seq,
            ),
        )
        .join(Participant, Participant.id == PageVisit.participant_id)
        .group_by(PageVisit.page, outcome)
    )
    for page, kind, n in rows:
        last.setdefault(page, {})[kind] = n
    medians = _median_seconds(study)
    return [
        {
            "page": page,
            "reached": reached[page],
            "left": last.get(page, {}).get("left", 0),
            "screened_out": last.get(page, {}).get("screened_out", 0),
            "in_progress": last.get(page, {}).get("in_progress", 0),
            "median_s": medians.get(page),
        }
        for page in sorted(reached, key=lambda p: _page_key(study, p))
    ]


def _median_seconds(study: Study) -> dict[str, float]:
    """Median seconds from shown to submitted, per page (submitted pages only).

    PostgreSQL computes it (``percentile_cont``); SQLite has no median, so the durations
    come back and :func:`statistics.median` takes it (development and test databases).
    """
    seconds = PageVisit.submitted_at - PageVisit.shown_at
    base = (
        select(PageVisit.page)
        .join(Participant, Participant.id == PageVisit.participant_id)
        .where(_real(study), PageVisit.submitted_at.is_not(None))
    )
    if db.engine.dialect.name == "postgresql":
        median = func.percentile_cont(0.5).within_group(func.extract("epoch", seconds))
        rows = db.session.execute(base.add_columns(median).group_by(PageVisit.page))
        return {page: round(float(m), 1) for page, m in rows}
    spans: dict[str, list[float]] = {}
    rows = db.session.execute(base.add_columns(PageVisit.shown_at, PageVisit.submitted_at))
    for page, shown, submitted in rows:
        spans.setdefault(page, []).append((submitted - shown).total_seconds())
    return {page: round(statistics.median(v), 1) for page, v in spans.items()}


def choice_shares(study: Study) -> list[dict[str, Any]]:
    """Share of choices for the target product, per pair and format (completed or not).

    Returns
    -------
    list of dict
        ``pair``, then per format of the study (``original``, ``summary``, …):
        ``{"n": choices, "target": choices of the target, "share": target / n or None}``.
    """
    formats = study_formats(study_definition(study).tasks)
    rows = db.session.execute(
        select(
            ChoiceResponse.pair_id,
            ChoiceResponse.format,
            func.count(),
            func.sum(case((ChoiceResponse.chose_target, 1), else_=0)),
        )
        .join(Participant, Participant.id == ChoiceResponse.participant_id)
        .where(_real(study), Participant.excluded.is_(False))
        .group_by(ChoiceResponse.pair_id, ChoiceResponse.format)
    )
    out: dict[str, dict[str, Any]] = {}
    for pair, fmt, n, hits in rows:
        cell = out.setdefault(
            pair, {"pair": pair, **{f: {"n": 0, "target": 0, "share": None} for f in formats}}
        )
        cell[fmt] = {"n": n, "target": int(hits), "share": round(int(hits) / n, 3)}
    return [out[p] for p in sorted(out)]


class OverviewCache:
    """The last overview computed per study in this process, reused for ``ttl_s`` seconds.

    A 63,000-item study costs its overview a few hundred milliseconds of database work; with
    every open tab polling every 2 s that was paid once per tab and poll. Now it is paid at
    most once per study per ``ttl_s`` in each web process, and tabs that ask while it is
    being computed wait for that one computation instead of starting their own. The numbers
    carry the time they were computed (``updated_at``).
    """

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._values: dict[Any, tuple[float, dict[str, Any]]] = {}
        self._computing: dict[Any, threading.Lock] = {}

    def _fresh(self, key: Any) -> dict[str, Any] | None:
        hit = self._values.get(key)
        if hit is not None and time.monotonic() - hit[0] < self.ttl_s:
            return hit[1]
        return None

    def get(self, key: Any, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The value for ``key`` computed within ``ttl_s``, else ``compute()`` (stored)."""
        with self._lock:
            value = self._fresh(key)
            if value is not None:
                return value
            one_at_a_time = self._computing.setdefault(key, threading.Lock())
        with one_at_a_time:
            with self._lock:
                value = self._fresh(key)
            if value is None:
                value = compute()
                self.put(key, value)
        return value

    def put(self, key: Any, value: dict[str, Any]) -> None:
        """Store ``value`` as computed now."""
        with self._lock:
            self._values[key] = (time.monotonic(), value)

    def clear(self) -> None:
        """Forget every stored value."""
        with self._lock:
            self._values.clear()


# -- participants table -------------------------------------------------------------------


@dataclass(frozen=True)
class TablePage:
    """One page of the participant table."""

    rows: list[dict[str, Any]]
    total: int
    page: int
    pages: int
    status: str
    sort: str
    query: str
    flag: str = "all"


def codes_for(study: Study, text: str) -> list[str]:
    """Pseudonyms a search text can mean: a pseudonym itself, or a recruiter ID.

    A recruiter ID is matched through the same salted hash that made the pseudonym
    (:func:`webapp.services.entry.pseudonym` of its canonical spelling), once per platform
    the study takes, so a Prolific ID typed in upper case still finds its participant.
    """
    text = text.strip()
    if not text:
        return []
    codes = [text] if text.startswith("p_") else []
    platforms = [Platform(p) for p in study_definition(study).recruitment.platforms]
    for platform in platforms:
        value = canonical_id(platform, text)
        if value is not None:
            codes.append(pseudonym(study.export_salt, platform, value))
    return codes


def participant_table(
    study: Study,
    *,
    status: str = "all",
    sort: str = "newest",
    page: int = 1,
    query: str = "",
    flag: str = "all",
    assessed: Mapping[int, authenticity.Authenticity] | None = None,
    per_page: int = PER_PAGE,
) -> TablePage:
    """One page of the participant table, filtered, searched and sorted in the database.

    Parameters
    ----------
    status : str
        ``all``, a participant status or ``excluded``.
    sort : str
        A key of :data:`SORTS`.
    page : int
        1-based; clamped to the pages there are.
    query : str
        A pseudonym or a recruiter ID (see :func:`codes_for`).
    flag : str
        A key of :data:`FLAG_FILTERS`: ``flagged`` (score at least
        :data:`~webapp.services.authenticity.FLAG_SCORE`), ``no_signals`` (pages answered,
        none with the page script's signals) or one reason.
    assessed : mapping, optional
        The study's :func:`webapp.services.authenticity.assess` (computed when not given; the
        console passes the one it keeps for a few seconds).

    Returns
    -------
    TablePage
        A count and the page, after the study's authenticity assessment
        (:func:`webapp.services.authenticity.assess`).
    """
    status = status if status in STATUS_FILTERS else "all"
    sort = sort if sort in SORTS else "newest"
    flag = flag if flag in FLAG_FILTERS else "all"
    if assessed is None:
        assessed = authenticity.assess(study)
    where = [Participant.study_id == study.id]
    if flag != "all":
        where.append(Participant.id.in_(_flagged(assessed, flag)))
    if status == "excluded":
        where.append(Participant.excluded.is_(True))
    elif status != "all":
        where.append(Participant.status == ParticipantStatus(status))
    if query.strip():
        where.append(Participant.code.in_(codes_for(study, query)))
    total = db.session.scalar(select(func.count()).select_from(Participant).where(*where)) or 0
    pages = max(1, -(-total // per_page))
    page = min(max(1, page), pages)
    people = db.session.scalars(
        select(Participant)
        .where(*where)
        .order_by(*SORTS[sort])
        .limit(per_page)
        .offset((page - 1) * per_page)
    )
    n_blocks = len(study_definition(study).tasks)
    rows = [row_of(p, n_blocks, assessed.get(p.id)) for p in people]
    return TablePage(rows, total, page, pages, status, sort, query.strip(), flag)


def _flagged(assessed: Mapping[int, authenticity.Authenticity], flag: str) -> list[int]:
    if flag == "flagged":
        return [pid for pid, a in assessed.items() if a.flagged]
    if flag == "no_signals":
        return [pid for pid, a in assessed.items() if a.signal_pages == 0]
    return [pid for pid, a in assessed.items() if flag in a.reasons]


def row_of(
    p: Participant, n_blocks: int, assessed: authenticity.Authenticity | None = None
) -> dict[str, Any]:
    """One participant as a table row (JSON-serialisable); ``n_blocks``: the study's blocks,
    ``assessed``: their authenticity (``None``: no page answered yet).

    Progress is 100 % only for a completed participant: someone who stopped on the debrief
    (or returned, timed out, was screened out) shows the share of blocks they got through.
    """
    completed = p.status is ParticipantStatus.completed
    end = p.finished_at if p.finished_at is not None else p.last_seen_at
    return {
        "participant_id": p.code,
        "platform": p.platform.value,
        "status": p.status.value,
        "sequence": p.sequence,
        "progress_pct": 100 if completed else min(99, round(100 * p.block_index / n_blocks)),
        "started_at": p.started_at.strftime("%Y-%m-%d %H:%M:%S"),
        "last_seen_at": p.last_seen_at.strftime("%Y-%m-%d %H:%M:%S"),
        "duration_s": round((end - p.started_at).total_seconds()),
        "excluded": p.excluded,
        "exclusion_reason": p.exclusion_reason,
        "platform_status": p.platform_status,
        "reconcile_note": p.reconcile_note,
        "is_preview": p.is_preview,
        "is_test": p.is_test,
        "authenticity": _authenticity_text(assessed),
        "auth_score": assessed.score if assessed else 0,
        "auth_reasons": list(assessed.reasons) if assessed else [],
    }


def _authenticity_text(a: authenticity.Authenticity | None) -> str:
    """The table's authenticity cell: ``5: paste, fast``, ``no signals`` or empty."""
    if a is None:
        return ""
    if a.reasons:
        return f"{a.score}: {', '.join(a.reasons)}" + (
            " (no signals)" if not a.signal_pages else ""
        )
    return "no signals" if a.signal_pages == 0 else "0"


def flag_summary(
    study: Study, assessed: Mapping[int, authenticity.Authenticity] | None = None
) -> dict[str, Any]:
    """The live overview's authenticity line over the study's real participants (``assessed``:
    the study's :func:`webapp.services.authenticity.assess`, computed when not given).

    Returns
    -------
    dict
        :func:`webapp.services.authenticity.flag_counts` plus ``text``, e.g.
        "7 sessions flagged: 5 paste, 2 canary" (and how many sent no signals).
    """
    real = db.session.scalars(select(Participant.id).where(_real(study))).all()
    if assessed is None:
        assessed = authenticity.assess(study)
    counts = authenticity.flag_counts(assessed[pid] for pid in real if pid in assessed)
    n = counts["flagged"]
    text = f"{n} session{'s' if n != 1 else ''} flagged"
    if counts["reasons"]:
        text += ": " + ", ".join(f"{k} {r.replace('_', ' ')}" for r, k in counts["reasons"].items())
    if counts["no_signals"]:
        text += f"; {counts['no_signals']} without signals (no JavaScript; not a reason)"
    return {**counts, "text": text}


# -- one participant ----------------------------------------------------------------------


def find_participant(study: Study, text: str) -> Participant | None:
    """The participant a pseudonym or recruiter ID names in this study, or ``None``."""
    codes = codes_for(study, text)
    if not codes:
        return None
    return db.session.scalar(
        select(Participant).where(Participant.study_id == study.id, Participant.code.in_(codes))
    )


def participant_record(study: Study, p: Participant) -> dict[str, Any]:
    """Everything the console shows on a participant's page (for the owning researcher).

    Returns
    -------
    dict
        ``row`` (as in the table), ``platform_id`` (the recruiter's ID, raw: shown to the
        study's researchers only, never exported), ``external_study_id``,
        ``external_session_id``, ``path`` (pages with shown/submitted times and seconds),
        ``choices``, ``quiz``, ``answers`` (other tasks' payloads) and ``labels``
        (annotation labels).
    """
    identity = db.session.scalar(
        select(PlatformIdentity).where(PlatformIdentity.participant_id == p.id)
    )
    path = [
        {
            "page": v.page,
            "shown_at": _ts(v.shown_at),
            "submitted_at": _ts(v.submitted_at),
            "seconds": None
            if v.submitted_at is None
            else round((v.submitted_at - v.shown_at).total_seconds(), 1),
            "client_ms": v.rt_ms,
            "signals": _page_signals_text(v),
        }
        for v in db.session.scalars(
            select(PageVisit).where(PageVisit.participant_id == p.id).order_by(PageVisit.page_seq)
        )
    ]
    choices = [
        {
            "trial": c.trial_index + 1,
            "pair": c.pair_id,
            "format": c.format,
            "chosen": c.chosen_side,
            "chose_target": c.chose_target,
            "wtp_premium": c.wtp_premium_usd,
            "answered_at": _ts(c.answered_at),
        }
        for c in p.choices
    ]
    quiz = list(
        db.session.scalars(
            select(QuizAttempt).where(QuizAttempt.participant_id == p.id).order_by(QuizAttempt.id)
        )
    )
    answers = list(
        db.session.scalars(
            select(TaskResponse)
            .where(TaskResponse.participant_id == p.id)
            .order_by(TaskResponse.id)
        )
    )
    labels = db.session.execute(
        select(AnnotationItem.block_id, AnnotationItem.item_id, Annotation.label, Annotation.state)
        .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
        .where(Annotation.participant_id == p.id, Annotation.label.is_not(None))
        .order_by(Annotation.id)
    ).all()
    n_blocks = len(study_definition(study).tasks)
    assessed = authenticity.assess(study, [p.id]).get(p.id)
    return {
        "row": row_of(p, n_blocks, assessed),
        "authenticity": None if assessed is None else assessed.cells(),
        "platform_id": identity.external_id if identity else None,
        "external_study_id": identity.external_study_id if identity else None,
        "external_session_id": identity.external_session_id if identity else None,
        "end_reason": p.end_reason,
        "path": path,
        "choices": choices,
        "quiz": [
            {"block": q.block_id, "attempt": q.attempt, "correct": q.n_correct, "passed": q.passed}
            for q in quiz
        ],
        "answers": [
            {"block": a.block_id, "type": a.task_type, "step": a.step, "payload": a.payload}
            for a in answers
        ],
        "labels": [
            {"block": b, "item": i, "label": lab, "state": st.value} for b, i, lab, st in labels
        ],
    }


def _page_signals_text(v: PageVisit) -> str:
    """One page's signals in a few words for the participant's path."""
    if v.submitted_at is None or v.signals is None:
        return ""
    parts = [] if v.signals == "js" else [f"signals: {v.signals}"]
    if v.signals == "js":
        parts.append(f"{v.keystrokes} keys / {v.text_chars} chars" if v.text_chars else "")
        parts.append(f"pasted {v.pasted_chars}" if v.paste_count else "")
        parts.append(
            f"hidden {v.hidden_count}x {v.hidden_ms / 1000:.1f} s" if v.hidden_count else ""
        )
        parts.append("" if v.interacted else "no interaction")
    parts.append(f"automation {v.automation}" if v.automation else "")
    parts.append("honeypot" if v.honeypot else "")
    parts.append("canary" if v.canary else "")
    parts.append("one column" if v.straightlined else "")
    parts.append(f"{v.words} words" if v.words else "")
    return "; ".join(part for part in parts if part)


def _ts(value: datetime | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def in_flight(study: Study, now: datetime, active_window: timedelta) -> dict[str, int]:
    """Started participants now: ``active`` (seen within the window) and ``idle``."""
    since = now - active_window
    active, idle = db.session.execute(
        select(
            func.count().filter(Participant.last_seen_at >= since),
            func.count().filter(or_(Participant.last_seen_at < since)),
        ).where(_real(study), Participant.status == ParticipantStatus.started)
    ).one()
    return {"active": active, "idle": idle}
