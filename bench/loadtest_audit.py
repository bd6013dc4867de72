"""The integrity audit of ``bench/loadtest.py``: the database against the bots' own log.

Kept apart from the orchestration (databases, gunicorn, pgbench, bots, figures) so that what
"lost" and "duplicated" mean can be read in one place. ``run`` is a ``loadtest.BotRun``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

SENTIMENT_TYPE = "sentiment_annotation"
# A loadtest.BotRun (.results, .acks); not imported: loadtest imports this module.
BotRun = Any


def _float_eq(a: float | None, b: str) -> bool:
    return a is not None and abs(a - float(b)) < 0.005


def audit(app: Any, run: BotRun) -> dict[str, Any]:
    """Compare the database with the bots' log of acknowledged submissions.

    ``lost``: acknowledged answers missing or stored with another value. ``duplicated``:
    answers stored more than once, participants enrolled twice, or more saved submissions than
    the bot made (beyond saves whose acknowledgement a fault swallowed, which the bot then
    saw as the next page, and the server's own steps: a full study that ends the session on
    entry, a sentiment batch that ends early, :func:`partial_batches`). ``incomplete``:
    completed participants without every response.

    A run cut by its time bound is audited on what the bots were acknowledged: participants
    still reading when it was cut count neither as lost nor as failures (``cut``); the run
    itself reports ``bound_reached`` apart from this verdict.
    """
    from sqlalchemy import func, select

    from webapp.extensions import db
    from webapp.models import (
        ChoiceResponse,
        Participant,
        ParticipantStatus,
        PlatformIdentity,
        QuizAttempt,
        Study,
        TaskResponse,
    )

    problems: list[str] = []
    lost = duplicated = incomplete = 0
    with app.app_context():
        by_ext: dict[str, Participant] = {}
        for ident, participant in db.session.execute(
            select(PlatformIdentity, Participant).join(
                Participant, Participant.id == PlatformIdentity.participant_id
            )
        ):
            by_ext[ident.external_id] = participant
        studies = {s.id: s for s in db.session.scalars(select(Study))}
        choices: dict[int, list[ChoiceResponse]] = defaultdict(list)
        for c in db.session.scalars(select(ChoiceResponse)):
            choices[c.participant_id].append(c)
        dup_tasks = db.session.scalar(
            select(func.count()).select_from(
                select(TaskResponse.participant_id)
                .group_by(TaskResponse.participant_id, TaskResponse.block_id, TaskResponse.step)
                .having(func.count() > 1)
                .subquery()
            )
        )
        dup_quiz = db.session.scalar(
            select(func.count()).select_from(
                select(QuizAttempt.participant_id)
                .group_by(QuizAttempt.participant_id, QuizAttempt.block_id, QuizAttempt.attempt)
                .having(func.count() > 1)
                .subquery()
            )
        )
        duplicated += (dup_tasks or 0) + (dup_quiz or 0)
        labelled = labels_per_block(db)
        bot_ids = {b.external_id for b in run.bots}
        outcome_of = {r.external_id: r.outcome for r in run.results}
        strangers = sorted(set(by_ext) - bot_ids)
        if strangers:
            duplicated += len(strangers)
            problems.append(f"participants no bot created: {strangers[:5]}")

        for bot in run.bots:
            p = by_ext.get(bot.external_id)
            acks = [a for a in bot.acks if a.kind != "consent"]
            if p is None:
                if bot.acks:
                    lost += len(bot.acks)
                    problems.append(f"{bot.external_id}: acknowledged but not enrolled")
                continue
            rows = choices.get(p.id, [])
            by_pair: dict[str, list[ChoiceResponse]] = defaultdict(list)
            for c in rows:
                by_pair[c.pair_id].append(c)
            for pair, same in by_pair.items():
                if len(same) > 1:
                    duplicated += len(same) - 1
                    problems.append(f"{bot.external_id}: pair {pair} stored {len(same)} times")
            for a in acks:
                stored = by_pair.get(a.pair or "", [])
                if a.kind == "choice" and not (
                    stored and stored[0].chosen_side == a.answer.get("side")
                ):
                    lost += 1
                    problems.append(f"{bot.external_id}: choice {a.pair} lost")
                elif a.kind == "wtp" and not (
                    stored and _float_eq(stored[0].wtp_premium_usd, a.answer.get("premium", "nan"))
                ):
                    lost += 1
                    problems.append(f"{bot.external_id}: WTP {a.pair} lost")
            # Each accepted submission advances page_seq by one: more than the bot's
            # acknowledged ones means a save it never made (or made twice). Allowed extras:
            # saves whose acknowledgement a fault swallowed (the bot then recovered), and the
            # server's own step when a full annotation study ends the session on entry.
            unacked = p.page_seq - len(acks)
            # A bot cut by the bound may have been cancelled with a POST in flight: the server
            # saved it, the bot never read the acknowledgement.
            cut = bot.external_id not in outcome_of
            allowed = (
                bot.recoveries
                + (outcome_of.get(bot.external_id) == "study_full")
                + cut
                + partial_batches(studies[p.study_id].definition, p, labelled)
            )
            if unacked < 0:
                lost += -unacked
                problems.append(f"{bot.external_id}: {-unacked} acknowledged page(s) not saved")
            elif unacked > allowed:
                duplicated += unacked - allowed
                problems.append(f"{bot.external_id}: {unacked} unacknowledged saves")
            if p.status is ParticipantStatus.completed:
                study = studies[p.study_id]
                pairs = {
                    pair["id"]
                    for block in study.definition["tasks"]
                    if block["type"] == "product_choice"
                    for pair in block["pairs"]
                }
                complete = set(by_pair) == pairs and all(
                    c.wtp_premium_usd is not None for c in rows
                )
                if not complete:
                    incomplete += 1
                    problems.append(f"{bot.external_id}: completed without every response")
        outcomes = Counter(r.outcome for r in run.results)
        db_completed = sum(
            1
            for b in run.bots
            if b.external_id in by_ext
            and b.external_id in outcome_of  # a bot cut by the bound has no outcome
            and by_ext[b.external_id].status is ParticipantStatus.completed
        )
        annotation = audit_annotations(db, studies, run)
    if annotation.get("violations"):
        problems.extend(annotation["violations"][:10])
    if outcomes.get("completed", 0) != db_completed:
        problems.append(
            f"bots completed {outcomes.get('completed', 0)}, database completed {db_completed}"
        )
    ok = (
        lost == 0
        and duplicated == 0
        and incomplete == 0
        and outcomes.get("completed", 0) == db_completed
        and outcomes.get("completed", 0) + outcomes.get("study_full", 0) == len(run.results)
        and not annotation.get("violations")
    )
    lost += annotation.get("lost", 0)
    ok = ok and not annotation.get("lost")
    return {
        "ok": ok,
        "lost": lost,
        "duplicated": duplicated,
        "incomplete": incomplete,
        "cut": len(run.bots) - len(run.results),
        "db_completed": db_completed,
        "acknowledged": sum(len(b.acks) for b in run.bots),
        "recoveries": sum(b.recoveries for b in run.bots),
        "annotation": annotation,
        "problems": problems[:50],
    }


def labels_per_block(db: Any) -> Counter[tuple[int, str]]:
    """Labels stored per (participant ID, annotation block ID), gold items included."""
    from sqlalchemy import func, select

    from webapp.models import Annotation, AnnotationItem

    rows = db.session.execute(
        select(Annotation.participant_id, AnnotationItem.block_id, func.count())
        .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
        .where(Annotation.label.is_not(None))
        .group_by(Annotation.participant_id, AnnotationItem.block_id)
    )
    return Counter({(pid, block): n for pid, block, n in rows})


def partial_batches(
    definition: Mapping[str, Any], participant: Any, labelled: Mapping[tuple[int, str], int]
) -> int:
    """Annotation blocks this participant left with a partial batch: one server step each.

    When no item is left for a participant part-way through their batch, the next page's
    entry ends the block (``Outcome.end_block``): the page counter moves on without a
    submission, so the bot has no acknowledgement for that step. A block counts when the
    participant labelled some but fewer than its planned pages and has moved past it.
    """
    from webapp.definition import TaskBlock
    from webapp.models import ParticipantStatus
    from webapp.tasks import get_task_type

    task = get_task_type(SENTIMENT_TYPE)
    n = 0
    for index, block in enumerate(definition["tasks"]):
        if task is None or block["type"] != SENTIMENT_TYPE:
            continue
        got = labelled.get((participant.id, block["id"]), 0)
        planned = task.n_steps(TaskBlock.from_json(block))
        left = participant.status is ParticipantStatus.completed or participant.block_index > index
        n += int(left and 0 < got < planned)
    return n


def audit_annotations(db: Any, studies: Mapping[int, Any], run: BotRun) -> dict[str, Any]:
    """Annotation quotas and labels against the bots' log.

    Per ``sentiment_annotation`` block: no item has more confirmed labels than its
    ``annotators_per_item`` or two labels from one person; when the bots offered at least the
    block's capacity, every item has exactly its quota; every label a bot saw acknowledged is
    stored with its value (else ``lost``).
    """
    if not any(
        b["type"] == SENTIMENT_TYPE for s in studies.values() for b in s.definition["tasks"]
    ):
        return {"checked": False}
    from sqlalchemy import select

    from webapp.models import (
        Annotation,
        AnnotationItem,
        AnnotationState,
        Participant,
        PlatformIdentity,
    )

    violations: list[str] = []
    blocks = []
    lost = 0
    labels: dict[tuple[str, str], str] = {}  # (external id, item id) -> stored label
    rows = db.session.execute(
        select(PlatformIdentity.external_id, AnnotationItem.item_id, Annotation.label)
        .join(Participant, Participant.id == PlatformIdentity.participant_id)
        .join(Annotation, Annotation.participant_id == Participant.id)
        .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
        .where(Annotation.label.is_not(None))
    )
    for ext, item, label in rows:
        labels[(ext, item)] = label
    for bot in run.bots:
        for ack in bot.acks:
            if ack.kind == "sentiment" and labels.get((bot.external_id, ack.item or "")) != (
                ack.answer.get("label")
            ):
                lost += 1
                violations.append(f"{bot.external_id}: label of {ack.item} lost")
    ran = {b.definition.slug for b in run.bots}
    for study in studies.values():
        if study.slug not in ran:
            continue
        for block in study.definition["tasks"]:
            if block["type"] != SENTIMENT_TYPE:
                continue
            quota = int(block["annotators_per_item"])
            items = db.session.scalars(
                select(AnnotationItem).where(
                    AnnotationItem.study_id == study.id,
                    AnnotationItem.block_id == block["id"],
                    AnnotationItem.is_gold.is_(False),
                )
            ).all()
            people: dict[int, list[int]] = {i.id: [] for i in items}
            for item_pk, pid in db.session.execute(
                select(Annotation.item_pk, Annotation.participant_id).where(
                    Annotation.item_pk.in_(list(people)),
                    Annotation.state == AnnotationState.confirmed,
                )
            ):
                people[item_pk].append(pid)
            offered = sum(
                1
                for b in run.bots
                if b.definition.slug == study.slug and any(a.kind == "sentiment" for a in b.acks)
            ) * int(block["items_per_participant"])
            full = offered >= quota * len(items)
            for item in items:
                got = people[item.id]
                if len(got) != len(set(got)):
                    violations.append(f"{study.slug}: item {item.item_id} labelled twice by one")
                if len(set(got)) > quota or (full and len(set(got)) != quota):
                    violations.append(
                        f"{study.slug}: item {item.item_id} has {len(set(got))} of {quota}"
                    )
            blocks.append(
                {
                    "study": study.slug,
                    "block": block["id"],
                    "items": len(items),
                    "quota": quota,
                    "items_at_quota": sum(len(set(v)) == quota for v in people.values()),
                    "labels": sum(len(v) for v in people.values()),
                    "capacity_reached": full,
                }
            )
    return {"checked": True, "blocks": blocks, "lost": lost, "violations": violations}
