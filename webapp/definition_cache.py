"""The typed definitions of stored studies, kept per web process.

Below the services and the task types (it needs only the models), so that every one of them,
and the shared export helpers, read a study's definition without an import circle.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict

from flask import current_app
from sqlalchemy import Text, cast, func, select
from sqlalchemy import inspect as sa_inspect

from webapp.definition import StudyDefinition
from webapp.extensions import db
from webapp.models import Study


class DefinitionCache:
    """Typed study definitions of one web process, the least recently used dropped first.

    Bounded by the definitions' size as stored (their JSON text), not by their number:
    anonymous visitors to entry links decide which studies get loaded, and one study may be
    a thousand times another's size. The definition just stored always stays, so a study
    larger than the whole bound is still read once, not on every request. Safe across threads.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size_bytes = 0
        self._entries: OrderedDict[tuple[int, str], tuple[StudyDefinition, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[int, str]) -> StudyDefinition | None:
        """The definition cached under ``key`` (``(study id, definition hash)``), if any."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: tuple[int, str], definition: StudyDefinition, size_bytes: int) -> None:
        """Keep ``definition`` (``size_bytes`` of JSON), dropping the least recently used."""
        with self._lock:
            old = self._entries.pop(key, None)
            self.size_bytes += size_bytes - (old[1] if old else 0)
            self._entries[key] = (definition, size_bytes)
            while self.size_bytes > self.max_bytes and len(self._entries) > 1:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.size_bytes -= dropped


def definition_cache() -> DefinitionCache:
    """The current app's definition cache, of ``DEFINITION_CACHE_MB`` (made at first use)."""
    cache: DefinitionCache | None = current_app.extensions.get("framelab_definitions")
    if cache is None:
        size = int(float(current_app.config["DEFINITION_CACHE_MB"]) * 1024 * 1024)
        cache = current_app.extensions.setdefault("framelab_definitions", DefinitionCache(size))
    return cache


def study_definition(study: Study) -> StudyDefinition:
    """The study's typed definition, from the app's :class:`DefinitionCache`.

    Keyed by the row's id and ``definition_hash``, which the row itself carries, so a changed
    definition is never served from the cache. A row loaded without its definition
    (:func:`get_study`) has it read once per process.

    Raises
    ------
    webapp.definition.DefinitionVersionError
        The stored definition is of another schema version (``flask db upgrade`` migrates it).
    """
    if study.id is None:  # not stored yet: nothing to key it by
        return StudyDefinition.from_json(study.definition)
    cache = definition_cache()
    found = cache.get((study.id, study.definition_hash))
    if found is not None:
        return found
    if "definition" in sa_inspect(study).unloaded:
        row = db.session.execute(
            select(
                Study.definition,
                Study.definition_hash,
                func.length(cast(Study.definition, Text)).label("size"),
            ).where(Study.id == study.id)
        ).one()
        stored, key, size = row.definition, row.definition_hash, int(row.size or 0)
    else:
        stored, key = study.definition, study.definition_hash
        size = len(json.dumps(stored))
    found = StudyDefinition.from_json(stored)
    cache.put((study.id, key), found, size)
    return found
