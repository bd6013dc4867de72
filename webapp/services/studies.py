"""Load study definitions into the database and summarise what is stored."""

from __future__ import annotations

import io
import secrets
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import defer

from webapp.bundle import BundleFile
from webapp.definition import StudyDefinition
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import (
    Participant,
    ParticipantStatus,
    Study,
    StudyFile,
    StudyState,
    definition_hash,
)
from webapp.services.design import study_sequences
from webapp.studydef import folder_bundle, load_bundle
from webapp.tasks import get_task_type


class StudyLoadError(RuntimeError):
    """A valid definition cannot replace the stored one (it would change what people saw)."""


@dataclass(frozen=True)
class LoadResult:
    """What ``load_study`` did."""

    study: Study
    action: str  # "created" | "updated" | "unchanged"
    notes: tuple[str, ...] = ()  # what loads but should change (load_bundle's notes)


def load_study(path: str | Path, *, force: bool = False) -> LoadResult:
    """Create or update a study from its YAML file and commit.

    The files it names are read from its own folder only (:meth:`Bundle.from_folder`) and
    stored with the study version (:class:`webapp.models.StudyFile`).

    Parameters
    ----------
    path : str or Path
        The study definition file.
    force : bool
        Replace the task blocks even when participants exist. Without it, changing the tasks
        of a study that has participants is refused, because their sequences are re-derived
        from the stored definition.

    Returns
    -------
    LoadResult
        The study row and ``"created"``, ``"updated"`` or ``"unchanged"``.

    Raises
    ------
    webapp.validation.StudyDefinitionError
        The file is invalid (message names file, path, reason).
    StudyLoadError
        The tasks changed while participants exist and ``force`` is false.
    """
    bundle = folder_bundle(path)
    notes: list[str] = []
    definition = load_bundle(bundle, notes)
    result = store_definition(definition, str(path), force=force, files=bundle.files())
    return replace(result, notes=tuple(notes))


def store_definition(
    definition: StudyDefinition,
    source: str,
    *,
    force: bool = False,
    owner_id: int | None = None,
    state: StudyState | None = None,
    files: Sequence[BundleFile] = (),
) -> LoadResult:
    """Create or update a study from a validated definition and commit (see :func:`load_study`).

    Parameters
    ----------
    definition : StudyDefinition
        The output of :func:`webapp.studydef.validate_definition`.
    source : str
        Where it came from (a path, or ``upload:NAME`` from the console).
    force : bool
        As in :func:`load_study`.
    owner_id, state : optional
        Owner and lifecycle state of a *new* study (the console creates drafts); ignored
        when the study exists.
    files : sequence of BundleFile
        The bundle it was loaded from, stored with the new version (not when unchanged).

    Returns
    -------
    LoadResult
    """
    path = source[:500]  # the column's width; a path is for people to read
    stored = definition.to_json()
    study = db.session.scalar(select(Study).where(Study.slug == definition.slug))
    if study is None:
        study = Study(
            slug=definition.slug,
            title=definition.title,
            definition=stored,  # sets definition_hash (Study._hash_follows_definition)
            version=1,
            export_salt=secrets.token_hex(32),
            source_path=str(path),
            owner_id=owner_id,
            state=state or StudyState.live,
        )
        db.session.add(study)
        db.session.flush()
        _add_files(study, files)
        db.session.commit()
        return LoadResult(study, "created")
    if study.definition_hash == definition_hash(stored):
        return LoadResult(study, "unchanged")
    n = db.session.scalar(select(func.count()).where(Participant.study_id == study.id)) or 0
    if n and study_definition(study).tasks != definition.tasks and not force:
        raise StudyLoadError(
            f"study {study.slug!r} has {n} participant(s) and its task blocks changed; "
            "use --force to replace them anyway (their sequences will be re-derived from the "
            "new definition), or load it under a new slug"
        )
    study.title = definition.title
    study.definition = stored  # and its hash
    study.version += 1
    study.source_path = str(path)
    _add_files(study, files)
    db.session.commit()
    return LoadResult(study, "updated")


def _add_files(study: Study, files: Sequence[BundleFile]) -> None:
    for f in files:
        db.session.add(
            StudyFile(
                study_id=study.id,
                version=study.version,
                name=f.name,
                size_bytes=len(f.content),
                sha256=f.sha256,
                content=f.content,
            )
        )


def bundle_zip(study: Study) -> bytes | None:
    """The files the study's current version was loaded from, as a zip (``None``: none kept)."""
    files = db.session.scalars(
        select(StudyFile)
        .where(StudyFile.study_id == study.id, StudyFile.version == study.version)
        .order_by(StudyFile.name)
    ).all()
    if not files:
        return None
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for f in files:
            archive.writestr(f.name, f.content)
    return buffer.getvalue()


# A study by slug without its definition (that comes from the per-process cache).
_BY_SLUG = select(Study).where(Study.slug == bindparam("slug")).options(defer(Study.definition))


def get_study(slug: str) -> Study | None:
    """Return the study with this slug, or ``None``.

    The stored definition (about 12 kB of JSON for the demo study, otherwise read and parsed on
    every participant request) is left unread: :func:`webapp.definition_cache
    .study_definition` takes it from the app's cache.
    """
    return db.session.scalar(_BY_SLUG, {"slug": slug})


def status_counts(study: Study, *, include_test: bool = False) -> dict[str, dict[str, int]]:
    """Count participants by status and sequence.

    Returns
    -------
    dict
        ``{status: {"A": n, "B": n, …, "total": n}}`` for every status (zeros included), one
        key per sequence of the study's design.
    """
    query = (
        select(Participant.status, Participant.sequence, func.count())
        .where(Participant.study_id == study.id)
        .group_by(Participant.status, Participant.sequence)
    )
    if not include_test:
        query = query.where(Participant.is_test.is_(False))
    sequences = study_sequences(study_definition(study).tasks)
    counts = {s.value: {**dict.fromkeys(sequences, 0), "total": 0} for s in ParticipantStatus}
    for status, sequence, n in db.session.execute(query):
        counts[status.value][sequence] = n
        counts[status.value]["total"] += n
    return counts


@dataclass(frozen=True)
class StudyImage:
    """A product image of a study's bundle, as validated at load (type from its magic bytes)."""

    content: bytes
    media_type: str
    sha256: str


def study_image(study: Study, digest: str) -> StudyImage | None:
    """The product image of ``study`` whose SHA-256 is ``digest`` (``None``: no such image).

    Only files the definition names as product images are served, never any other file of
    the bundle, and only with the content that was validated (the digest is checked again).
    """
    found = None
    for block in study_definition(study).tasks:
        for image in get_task_type(block.type).images(block):
            if image["sha256"] == digest:
                found = image
    if found is None:
        return None
    content = db.session.scalar(
        select(StudyFile.content).where(
            StudyFile.study_id == study.id,
            StudyFile.version == study.version,
            StudyFile.name == found["file"],
            StudyFile.sha256 == digest,
        )
    )
    if content is None:
        return None
    return StudyImage(content=content, media_type=found["type"], sha256=digest)
