"""The resumable JSONL result store and the run manifest beside it.

Each finished result is appended as one line and flushed, so a crash loses only what was in
flight. A crash in the middle of a write leaves at most a partial last line: reading tolerates it
and the next run cuts it off before appending. A JSON-lines file rather than a database keeps the
results readable by ``pandas.read_json(lines=True)`` and by the metrics with no extra dependency.

Each record also carries ``input_hash`` (:func:`input_hash`), a hash of the item it was generated
from. A re-run whose item has changed under the same resume key (a field added to the input file,
a text corrected) does not count the old record as done: :meth:`ResultStore.retire_changed` moves
it to ``<out>.stale.jsonl`` and the item is generated again. Records written before the hash
existed have none and resume as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KEY_FIELDS = ("model", "task", "method", "template_hash", "item_id", "variant")


def result_key(record: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the resume key of a record: (model, task, method, template_hash, item_id, variant)."""
    return tuple(str(record.get(f) or "") for f in KEY_FIELDS)


def input_hash(item: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex) of an item's content: every field, as they go into the record.

    The whole item is hashed because every field of it is copied into the record's ``input`` (and
    the prompt reads some of them): a changed ``truth`` matters as much as a changed ``text``.
    Integral floats hash as integers, so an ID read as ``3.0`` from a table is the same as ``3``.

    Examples
    --------
    >>> input_hash({"item_id": "a", "n": 3}) == input_hash({"n": 3.0, "item_id": "a"})
    True
    """
    blob = json.dumps(_canonical(item), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def stale_path(out: str | Path) -> Path:
    """Where records superseded by a changed input are kept: ``<out>.stale.jsonl``."""
    out = Path(out)
    return out.with_name(out.stem + ".stale.jsonl")


def utc_now() -> str:
    """Return the current time as ISO 8601 UTC with a ``Z`` suffix."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def read_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL file, tolerating a partial last line.

    A malformed line anywhere but at the end is corruption, not a crash artefact, and raises
    ``ValueError`` naming the line.
    """
    path = Path(path)
    if not path.exists():
        return
    with path.open("rb") as fh:
        data = fh.read()
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield json.loads(raw)
        except json.JSONDecodeError as exc:
            if number == len(lines):  # no newline after it: an interrupted write
                log.warning("%s: ignoring a partial last line (interrupted write)", path)
                return
            raise ValueError(f"{path}:{number}: not a JSON record ({exc.msg})") from exc


class ResultStore:
    """Append-only JSONL results with resume keys.

    Parameters
    ----------
    path : str or Path
        The output ``.jsonl``; created with its parent directory if missing.
    fsync : bool
        ``os.fsync`` after each record (survives power loss, not just a process crash).
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.done: set[tuple[str, ...]] = set()
        # The input hash of each stored key (None for records written before the hash existed).
        self.hashes: dict[tuple[str, ...], str | None] = {}
        for record in read_records(self.path):
            key = result_key(record)
            self.done.add(key)
            self.hashes[key] = record.get("input_hash")
        self._fh: Any = None

    def __contains__(self, key: tuple[str, ...]) -> bool:
        return key in self.done

    def __len__(self) -> int:
        return len(self.done)

    def changed(self, key: tuple[str, ...], hash_: str) -> bool:
        """Whether ``key`` is stored with another input hash (never for records without one)."""
        stored = self.hashes.get(key)
        return key in self.done and stored is not None and stored != hash_

    def retire_changed(self, expected: Mapping[tuple[str, ...], str]) -> list[tuple[str, ...]]:
        """Move the records whose input changed out of the file, so their items run again.

        Parameters
        ----------
        expected : mapping
            ``{resume key: input_hash}`` of this run's items.

        Returns
        -------
        list of tuple
            The keys retired (no longer done). Their records are appended to
            ``<out>.stale.jsonl`` (nothing is deleted) and the output is rewritten without them
            through a temporary file and ``os.replace``, so a crash leaves the old or the new
            file whole: readers never see two records under one key.
        """
        gone = [k for k, h in expected.items() if self.changed(k, h)]
        if not gone:
            return []
        self.close()
        drop = set(gone)
        keep, stale = [], []
        for record in read_records(self.path):
            (stale if result_key(record) in drop else keep).append(record)
        with stale_path(self.path).open("a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in stale)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep), encoding="utf-8"
        )
        os.replace(tmp, self.path)
        for key in gone:
            self.done.discard(key)
            self.hashes.pop(key, None)
        items = sorted({k[KEY_FIELDS.index("item_id")] for k in gone})
        log.warning(
            "%s: the input of %d item(s) changed since their records were written (%s%s); "
            "the old records moved to %s and the items run again",
            self.path, len(items), ", ".join(items[:5]), ", …" if len(items) > 5 else "",
            stale_path(self.path).name,
        )  # fmt: skip
        return gone

    def _open(self) -> Any:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._truncate_partial_tail()
            self._fh = self.path.open("a", encoding="utf-8")
        return self._fh

    def _truncate_partial_tail(self) -> None:
        """Cut an interrupted last line so the next record starts on a line of its own."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open("rb+") as fh:
            data = fh.read()
            if data.endswith(b"\n"):
                return
            cut = data.rfind(b"\n") + 1
            fh.truncate(cut)
        log.warning("%s: removed a partial last line of %d bytes", self.path, len(data) - cut)

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record as a line and flush it; its key is then done."""
        fh = self._open()
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()
        if self.fsync:
            os.fsync(fh.fileno())
        key = result_key(record)
        self.done.add(key)
        self.hashes[key] = record.get("input_hash")

    def close(self) -> None:
        """Close the file (appending again reopens it)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def manifest_path(out: str | Path) -> Path:
    """Return the manifest path beside an output file: ``OUT.manifest.json``."""
    out = Path(out)
    return out.with_name(out.name + ".manifest.json")


def write_manifest(out: str | Path, run: Mapping[str, Any]) -> Path:
    """Append this run's description to the manifest beside ``out`` (all runs are kept).

    The manifest is rewritten whole through a temporary file and ``os.replace``, so a crash
    leaves either the old or the new manifest, never half of one.
    """
    path = manifest_path(out)
    runs: list[Any] = []
    if path.exists():
        runs = json.loads(path.read_text(encoding="utf-8")).get("runs", [])
    runs.append(dict(run))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(
        json.dumps({"output": Path(out).name, "runs": runs}, indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    os.replace(tmp, path)
    return path
