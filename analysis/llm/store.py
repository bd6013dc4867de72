"""The resumable JSONL result store and the run manifest beside it.

Each finished result is appended as one line and flushed, so a crash loses only what was in
flight. A crash in the middle of a write leaves at most a partial last line: reading tolerates it
and the next run cuts it off before appending. A JSON-lines file rather than a database keeps the
results readable by ``pandas.read_json(lines=True)`` and by the metrics with no extra dependency.
"""

from __future__ import annotations

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
        self.done: set[tuple[str, ...]] = {result_key(r) for r in read_records(self.path)}
        self._fh: Any = None

    def __contains__(self, key: tuple[str, ...]) -> bool:
        return key in self.done

    def __len__(self) -> int:
        return len(self.done)

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
        self.done.add(result_key(record))

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
