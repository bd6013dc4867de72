"""Pre-registrations and interim looks of a study: recorded by the commands, shown by the console.

The web app never fits a model: ``framelab prereg`` and ``framelab looks`` (the ``framelab``
package, which may use both halves) compute with the research package and record the results
here. The console then shows the frozen hash, each look's statistic against its bound, and,
when a bound was crossed, offers to pause recruitment: nothing is paused until the researcher
confirms (:func:`pause_for_look`), and every step is in the audit log.

Once data collection has begun (a participant who is not a test participant entered, or a
look was recorded), a new pre-registration is recorded only as an amendment: its record names
the pre-registrations it amends, the researcher's reason and what had been seen, and the
console shows the whole history (:func:`preregistration_history`). The console's record is
what ``framelab analyze --prereg`` compares a document with (:func:`console_record`), since a
plain hash can be recomputed by whoever edits the document.

The bundle hash is the research package's (``docs/analysis.md``): SHA-256 of the manifest
``"<sha256>  <name>\\n"`` per stored file of the study's current version, sorted by name.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select

from framelab_schema.analysis_block import AnalysisBlock
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import (
    InterimLook,
    Participant,
    ParticipantStatus,
    Preregistration,
    Researcher,
    Study,
    StudyFile,
    StudyState,
    utcnow,
)
from webapp.services import audit


class LookError(RuntimeError):
    """A pre-registration or look cannot be recorded, or a pause cannot be done; says why."""


def bundle_sha256(study: Study) -> str | None:
    """SHA-256 of the manifest of the study's current version (``None``: no files stored)."""
    rows = db.session.execute(
        select(StudyFile.name, StudyFile.sha256).where(
            StudyFile.study_id == study.id, StudyFile.version == study.version
        )
    ).all()
    if not rows:
        return None
    manifest = "".join(f"{digest}  {name}\n" for name, digest in sorted(rows))
    return hashlib.sha256(manifest.encode()).hexdigest()


def record_preregistration(
    study: Study, record: Mapping[str, Any], document: str, actor: Researcher | str
) -> Preregistration:
    """Store a frozen pre-registration of the study's current version and commit (audited).

    Parameters
    ----------
    study : Study
    record : Mapping
        The document's frozen record (``prereg_sha256``, ``bundle_sha256``, ...).
    document : str
        The document's file name.
    actor : Researcher or str
        For the audit log.

    Returns
    -------
    Preregistration
        The new row, or the existing one for the same hash.

    Raises
    ------
    LookError
        The record is of other files than the study's current version; or data collection
        has begun and the record is no amendment, or amends other pre-registrations than the
        recorded ones.
    """
    current = bundle_sha256(study)
    if record.get("bundle_sha256") != current:
        raise LookError(
            f"the pre-registration freezes other files than {study.slug} version "
            f"{study.version} (bundle {str(record.get('bundle_sha256'))[:12]}, stored "
            f"{str(current)[:12]}); load the study file it was written from first"
        )
    history = preregistration_history(study)
    existing = next((r for r in history if r.prereg_sha256 == record["prereg_sha256"]), None)
    if existing is not None:
        return existing
    amendment = record.get("amendment")
    seen = data_seen(study)
    if seen and amendment is None:
        raise LookError(
            f"data collection of {study.slug} has begun ({seen}): a new pre-registration is "
            f"an amendment; write it with `framelab prereg {study.slug} --amend REASON`"
        )
    recorded = [r.prereg_sha256 for r in history]
    if amendment is not None and list(amendment.get("amends") or []) != recorded:
        named = ", ".join(str(h)[:12] for h in amendment.get("amends") or []) or "none"
        raise LookError(
            f"the amendment amends {named}, but the console recorded "
            f"{', '.join(h[:12] for h in recorded) or 'none'} for {study.slug}: write it again "
            f"with `framelab prereg {study.slug} --amend REASON`"
        )
    row = Preregistration(
        study_id=study.id,
        study_version=study.version,
        prereg_sha256=record["prereg_sha256"],
        bundle_sha256=record["bundle_sha256"],
        document=document[:200],
        record=dict(record),
        created_by=str(getattr(actor, "username", actor))[:80],
        created_at=utcnow(),
    )
    db.session.add(row)
    detail = {"prereg_sha256": row.prereg_sha256, "document": row.document}
    if amendment is not None:
        detail["reason"] = str(amendment.get("reason", ""))[:500]
    action = "prereg.amend" if amendment is not None else "prereg.freeze"
    audit.record(actor, action, study=study, detail=detail, commit=False)
    db.session.commit()
    return row


def preregistration_history(study: Study) -> list[Preregistration]:
    """Every pre-registration recorded for the study, oldest first (amendments after)."""
    return list(
        db.session.scalars(
            select(Preregistration)
            .where(Preregistration.study_id == study.id)
            .order_by(Preregistration.id)
        )
    )


def latest_preregistration(study: Study) -> Preregistration | None:
    """The study's most recent pre-registration, if any."""
    history = preregistration_history(study)
    return history[-1] if history else None


def data_seen(study: Study) -> str | None:
    """What of the study's data exists to be seen, in words; ``None`` before data collection.

    Data collection has begun once a participant who is not a test participant entered (gave
    consent, whatever became of the session), or a look was recorded (test participants,
    bots and previews, are no data). For example ``"look 1 recorded 2025-01-06 11:00 UTC (35
    analysed, continue); 40 participant(s) entered, the first at 2025-01-06 09:00 UTC; 36
    completed"``.
    """
    entered, completed, first = db.session.execute(
        select(
            func.count(),
            func.count().filter(Participant.status == ParticipantStatus.completed),
            func.min(Participant.started_at),
        ).where(Participant.study_id == study.id, Participant.is_test.is_(False))
    ).one()
    looks = recorded_looks(study)
    if not entered and not looks:
        return None
    parts = [
        f"look {row.look} recorded {row.computed_at:%Y-%m-%d %H:%M} UTC "
        f"({row.n_analysed} analysed, {row.decision})"
        for row in looks
    ]
    if entered:
        parts.append(
            f"{entered} participant(s) entered, the first at {first:%Y-%m-%d %H:%M} UTC; "
            f"{completed} completed"
        )
    return "; ".join(parts)


def console_record(study: Study) -> dict[str, Any]:
    """The pre-registrations the console recorded for a study, as plain data.

    Returns
    -------
    dict
        ``preregistrations`` (oldest first: ``prereg_sha256``, ``recorded_at``
        (``YYYY-MM-DD HH:MM UTC``), ``recorded_by``, ``document``, ``study_version``,
        ``amendment``), ``bundle_sha256`` (of the stored files of the current version) and
        ``study_version``: what ``analysis.plan.prereg.check_console`` compares a document
        with.
    """
    return {
        "preregistrations": [
            {
                "prereg_sha256": row.prereg_sha256,
                "recorded_at": row.created_at.strftime("%Y-%m-%d %H:%M UTC"),
                "recorded_by": row.created_by,
                "document": row.document,
                "study_version": row.study_version,
                "amendment": row.record.get("amendment"),
            }
            for row in preregistration_history(study)
        ],
        "bundle_sha256": bundle_sha256(study),
        "study_version": study.version,
    }


def recorded_looks(study: Study) -> list[InterimLook]:
    """The study's recorded looks, in order."""
    return list(
        db.session.scalars(
            select(InterimLook).where(InterimLook.study_id == study.id).order_by(InterimLook.look)
        )
    )


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def record_looks(
    study: Study, looks: Iterable[Mapping[str, Any]], actor: Researcher | str
) -> list[InterimLook]:
    """Record the looks that are reached and not yet recorded, and commit (audited).

    Parameters
    ----------
    study : Study
    looks : iterable of Mapping
        One mapping per look (``analysis.plan.looks.evaluate_looks`` rows): ``look``,
        ``reached``, ``n_planned``, ``n_analysed``, ``fraction``, ``z``, ``estimate``, ``se``,
        ``p_val``, ``efficacy_z``, ``futility_z``, ``decision``, ``crossed``,
        ``participants`` (space-separated ids), ``notes``.
    actor : Researcher or str
        For the audit log.

    Returns
    -------
    list of InterimLook
        The looks recorded now. A look already recorded is never changed: it is what the
        researcher was shown. A crossed bound is also logged as ``look.boundary_crossed``.
    """
    have = {row.look for row in recorded_looks(study)}
    prereg = latest_preregistration(study)
    new = []
    for look in looks:
        if not look.get("reached") or int(look["look"]) in have:
            continue
        ids = "\n".join(sorted(str(look.get("participants", "")).split()))
        row = InterimLook(
            study_id=study.id,
            look=int(look["look"]),
            n_planned=int(look["n_planned"]),
            n_analysed=int(look["n_analysed"]),
            fraction=float(look["fraction"]),
            z=_number(look.get("z")),
            estimate=_number(look.get("estimate")),
            se=_number(look.get("se")),
            p_val=_number(look.get("p_val")),
            efficacy_z=float(look["efficacy_z"]),
            futility_z=_number(look.get("futility_z")),
            decision=str(look.get("decision") or "continue")[:20],
            crossed=bool(look.get("crossed")),
            prereg_sha256=prereg.prereg_sha256 if prereg else None,
            participants_sha256=hashlib.sha256(ids.encode()).hexdigest(),
            detail={"notes": str(look.get("notes") or "")[:500]},
            computed_by=str(getattr(actor, "username", actor))[:80],
            computed_at=utcnow(),
        )
        db.session.add(row)
        detail = {
            "look": row.look,
            "n_analysed": row.n_analysed,
            "z": row.z,
            "efficacy_z": row.efficacy_z,
            "futility_z": row.futility_z,
            "decision": row.decision,
        }
        audit.record(actor, "look.recorded", study=study, detail=detail, commit=False)
        if row.crossed:
            audit.record(actor, "look.boundary_crossed", study=study, detail=detail, commit=False)
        new.append(row)
    db.session.commit()
    return new


@dataclass
class LooksPanel:
    """What the study page's "Pre-registration and looks" section shows."""

    plan: AnalysisBlock
    prereg: Preregistration | None
    bundle_matches: bool | None
    history: list[Preregistration] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    crossed: InterimLook | None = None
    can_pause: bool = False
    recruiter: bool = False


def looks_panel(study: Study) -> LooksPanel | None:
    """The pre-registration and looks of a study with an ``analysis:`` block (no computing)."""
    definition = study_definition(study)
    plan = definition.analysis
    if plan is None:
        return None
    history = preregistration_history(study)
    prereg = history[-1] if history else None
    matches = None if prereg is None else prereg.bundle_sha256 == bundle_sha256(study)
    recorded = {row.look: row for row in recorded_looks(study)}
    fractions = plan.looks.at if plan.looks else (1.0,)
    # The bounds are fixed when the plan is frozen: shown for the looks not reached yet too.
    fixed = {look["look"]: look for look in (prereg.record.get("looks") or [])} if prereg else {}
    rows = []
    for k, n in enumerate(plan.look_sizes(), start=1):
        rows.append(
            {
                "look": k,
                "n": n,
                "fraction": fractions[k - 1],
                "row": recorded.get(k),
                "bounds": fixed.get(k),
            }
        )
    crossed = next((r for r in recorded.values() if r.crossed), None)
    return LooksPanel(
        plan=plan,
        prereg=prereg,
        bundle_matches=matches,
        history=history,
        rows=rows,
        crossed=crossed,
        can_pause=crossed is not None
        and crossed.paused_at is None
        and study.state in (StudyState.live, StudyState.paused),
        recruiter=definition.recruiter is not None,
    )


def pause_plan(study: Study, look: InterimLook) -> list[str]:
    """What confirming the pause does, line by line (shown before anything happens)."""
    lines = [
        f"look {look.look}: z = {look.z:.3f} crossed the {look.decision} bound "
        f"({look.efficacy_z if look.decision == 'efficacy' else look.futility_z:.3f}); the "
        "pre-registered rule says stop",
    ]
    if study.state is StudyState.live:
        lines.append(f"pause {study.slug} here: new participants are turned away")
    else:
        lines.append(f"{study.slug} is already paused here")
    recruiter = study_definition(study).recruiter
    if recruiter is not None:
        platform = recruiter.platform
        lines.append(f"pause the {platform} listing (no new places are offered; costs nothing)")
    lines.append("participants already in the study can finish; nothing is closed")
    return lines


def pause_for_look(study: Study, look_number: int, actor: Researcher) -> list[str]:
    """Pause recruitment because a look crossed a bound, once the researcher confirmed it.

    Pauses the study (``live`` → ``paused``) and, when the study has a recruiter, its listing;
    records who paused from which look. Every step is audited.

    Returns
    -------
    list of str
        What was done, for the page.

    Raises
    ------
    LookError
        The look did not cross a bound, was already acted on, or the recruiter refused.
    """
    from webapp.services.researchers import change_state

    look = db.session.scalar(
        select(InterimLook).where(InterimLook.study_id == study.id, InterimLook.look == look_number)
    )
    if look is None or not look.crossed:
        raise LookError(f"look {look_number} crossed no bound: there is nothing to pause for")
    if look.paused_at is not None:
        raise LookError(f"recruitment was already paused for look {look.look} by {look.paused_by}")
    done = []
    audit.record(
        actor,
        "look.pause",
        study=study,
        detail={"look": look.look, "z": look.z, "decision": look.decision},
        commit=False,
    )
    look.paused_by, look.paused_at = actor.username, utcnow()
    if study.state is StudyState.live:
        change_state(study, StudyState.paused, actor)  # commits, with its own audit event
        done.append(f"{study.slug} is now paused")
    else:
        db.session.commit()
    if study_definition(study).recruiter is not None:
        from webapp.recruit import get_recruiter
        from webapp.recruit.base import RecruitError

        try:
            report = get_recruiter(study, actor=actor).pause()
        except RecruitError as exc:
            raise LookError(
                f"{study.slug} is paused here, but the recruiter listing was not: {exc}; "
                "pause it with the recruiter's Pause button"
            ) from None
        done += report.lines
    return done
