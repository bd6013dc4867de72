"""Study bundles: a study YAML and the stimulus files it names, and nothing else.

A researcher is trusted with their own study, never with the server's files. So a study file
can only name files *inside its bundle*: a bundle maps safe, relative POSIX names
(``product_pairs/demo.yaml``) to bytes, and every read goes through it. A bundle comes from

* an upload (:meth:`Bundle.from_zip`, :meth:`Bundle.from_files`): the files are held in memory,
  having been checked and counted while they were read; or
* a folder on disk (:meth:`Bundle.from_folder`, used by ``framelab study load`` and the
  console's "load from the studies folder"): rooted at the study YAML's own folder; each name is
  opened one path component at a time, relative to the folder, refusing symbolic links and
  anything that is not a regular file *before* a byte is read (``O_NOFOLLOW | O_NONBLOCK`` and
  ``fstat``, so a FIFO or a device never blocks or floods a worker).

Names that could leave the bundle (absolute, ``..``, backslashes, drive letters, NUL and other
control characters) are refused by their text alone, before anything is opened, so the answer
for ``/etc/passwd`` is the same whether or not such a file exists. Every read is bounded
(:data:`MAX_FILE_BYTES` per file, :data:`MAX_BUNDLE_BYTES` per bundle, counting the bytes actually
read or decompressed, never a size a header claims). Refusals are :class:`BundleError`; their
text names only bundle-relative names, never a server path or a file's content.
"""

from __future__ import annotations

import errno
import hashlib
import io
import lzma
import os
import re
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

MAX_FILE_BYTES = 8 * 1024 * 1024  # one stimulus file
MAX_BUNDLE_BYTES = 16 * 1024 * 1024  # all files of a bundle together (decompressed)
MAX_YAML_BYTES = 1024 * 1024  # a study or pairs YAML (parsing is pure Python)
MAX_FILES = 200  # entries of an upload (zip entries or form files), folders included
MAX_NAME_CHARS = 200  # a bundle-relative name
MAX_NAME_DEPTH = 8  # folders in a name
# A zip's central directory is read whole before its entries can be counted: bound it first
# (room for MAX_FILES entries with long names and extra fields).
MAX_ZIP_DIRECTORY_BYTES = MAX_FILES * (46 + MAX_NAME_CHARS + 200)
YAML_SUFFIXES = (".yaml", ".yml")
# What tells a study YAML from a stimulus YAML beside it in a zip (a pairs file has none).
_STUDY_KEY = re.compile(rb"^tasks[ \t]*:", re.MULTILINE)


class BundleError(ValueError):
    """A bundle or a name in it is refused; ``str()`` is safe to show to the researcher."""


def safe_name(raw: object) -> str:
    """Return ``raw`` as a normalised bundle-relative name, or raise :class:`BundleError`.

    Only the text is looked at, never the file system. ``./a//b.csv`` becomes ``a/b.csv``.

    Examples
    --------
    >>> safe_name("./sentiment//items.csv")
    'sentiment/items.csv'
    >>> safe_name("../secret")
    Traceback (most recent call last):
    ...
    webapp.bundle.BundleError: '../secret' is not a file of the study bundle: '..' is not allowed
    """
    if not isinstance(raw, str) or not raw.strip():
        raise BundleError("an empty file name")
    shown = raw if len(raw) <= 60 else f"{raw[:57]}..."

    def refuse(why: str) -> BundleError:
        return BundleError(f"{shown!r} is not a file of the study bundle: {why}")

    if "\x00" in raw:
        raise refuse("it contains a NUL character")
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise refuse("it contains a control character")
    if "\\" in raw:
        raise refuse("use '/' between folders, not '\\'")
    if raw.startswith("/"):
        raise refuse("absolute paths are not allowed; name files relative to the study file")
    parts = [p for p in raw.strip().split("/") if p not in ("", ".")]
    if ".." in parts:
        raise refuse("'..' is not allowed")
    if not parts:
        raise refuse("it is a folder, not a file")
    if ":" in parts[0]:
        raise refuse("drive letters and URLs are not allowed")
    name = "/".join(parts)
    if len(name) > MAX_NAME_CHARS:
        raise refuse(f"names are at most {MAX_NAME_CHARS} characters")
    if len(parts) > MAX_NAME_DEPTH + 1:
        raise refuse(f"at most {MAX_NAME_DEPTH} folders deep")
    return name


def _shown(name: str) -> str:
    return repr(name if len(name) <= 60 else f"{name[:57]}...")


@dataclass(frozen=True)
class BundleFile:
    """One stored file of a bundle."""

    name: str
    content: bytes

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the content."""
        return hashlib.sha256(self.content).hexdigest()


class Bundle:
    """The files of one study; build with :meth:`from_zip`, :meth:`from_files` or
    :meth:`from_folder`.

    Attributes
    ----------
    study_name : str
        The bundle-relative name of the study YAML.
    """

    def __init__(self, study_name: str, files: dict[str, bytes], folder: Path | None = None):
        self.study_name = study_name
        self._files = dict(files)  # read so far (a folder bundle reads on demand)
        self._folder = folder
        self._read_total = sum(len(b) for b in files.values())
        self._found: dict[Hashable, Any] = {}  # what checks of its files found (see once)

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_folder(cls, study_file: Path) -> Bundle:
        """The bundle of a study YAML on disk: its own folder, read on demand.

        ``study_file`` itself is named by the operator (command line, the studies folder);
        the files it names are read from its folder only.
        """
        study_file = Path(study_file)
        bundle = cls(safe_name(study_file.name), {}, folder=study_file.parent.resolve())
        return bundle

    @classmethod
    def from_files(cls, files: Iterable[tuple[str, bytes]], *, study_name: str) -> Bundle:
        """A bundle of uploaded files (``(name, content)``; ``study_name`` is the YAML)."""
        out: dict[str, bytes] = {}
        total = 0
        for i, (raw, content) in enumerate(files):
            if i >= MAX_FILES:
                raise BundleError(f"a study bundle holds at most {MAX_FILES} files")
            name = safe_name(raw)
            if name in out:
                raise BundleError(f"{_shown(name)} is in the bundle twice")
            if len(content) > MAX_FILE_BYTES:
                raise BundleError(f"{_shown(name)} is larger than {size_text(MAX_FILE_BYTES)}")
            total += len(content)
            if total > MAX_BUNDLE_BYTES:
                raise BundleError(f"the files add up to more than {size_text(MAX_BUNDLE_BYTES)}")
            out[name] = content
        study_name = safe_name(study_name)
        if study_name not in out:
            raise BundleError(f"the study file {_shown(study_name)} is not in the bundle")
        return cls(study_name, out)

    @classmethod
    def from_zip(cls, data: bytes) -> Bundle:
        """A bundle from the bytes of a zip file.

        The study file is the one YAML file at the top of the zip (or, when everything sits in
        one folder, at the top of that folder); the stimulus files it names sit next to it or
        in sub-folders. Symbolic links, encrypted entries, unsafe names, too many entries and
        more than the size limits (counted while decompressing) are refused.
        """
        _check_zip_directory(data)
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
            infos = archive.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError):
            raise BundleError("not a readable zip file") from None
        if len(infos) > MAX_FILES:
            raise BundleError(f"a study bundle holds at most {MAX_FILES} files")
        entries: list[tuple[str, zipfile.ZipInfo]] = []
        for info in infos:
            if info.is_dir():
                continue
            mode = info.external_attr >> 16
            if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                raise BundleError(f"{_shown(info.filename)} in the zip is {kind}")
            if info.flag_bits & 0x1:
                raise BundleError(f"{_shown(info.filename)} in the zip is encrypted")
            entries.append((safe_name(info.filename), info))
        entries = _strip_common_folder(entries)
        files: dict[str, bytes] = {}
        total = 0
        for name, info in entries:
            if name in files:
                raise BundleError(f"{_shown(name)} is in the zip twice")
            content = _read_member(archive, info, name, MAX_BUNDLE_BYTES - total)
            total += len(content)
            files[name] = content
        return cls(_study_file(files), files)

    # -- reading --------------------------------------------------------------------------
    def read(self, raw: object, *, limit: int = MAX_FILE_BYTES) -> bytes:
        """The bytes of the file named ``raw`` (bundle-relative), at most ``limit`` of them.

        Raises
        ------
        BundleError
            An unsafe name, a file that is not in the bundle (the same words whether or not
            such a file exists elsewhere), not a regular file, a symbolic link, or too large.
        """
        name = safe_name(raw)
        data = self._files.get(name)
        if data is None:
            if self._folder is None:
                if any(n.startswith(f"{name}/") for n in self._files):
                    raise BundleError(f"{_shown(name)} is a folder, not a file")
                # Names from the researcher's own upload: a hint when a browser sent bare names.
                held = sorted(n for n in self._files if n != self.study_name)
                has = ", ".join(map(_shown, held[:5])) + (", ..." if len(held) > 5 else "")
                # Say what to do when only the folder is in the way (as for the demos' pairs).
                base = name.rsplit("/", 1)[-1]
                fix = (
                    f"; files picked together arrive without their folders: write "
                    f"{_shown(base)} in the YAML, or upload a zip of the study's folder"
                    if base != name and base in held
                    else ""
                )
                raise BundleError(
                    f"file not found in the study bundle: {_shown(name)} "
                    f"(it holds {has or 'only the study file'}){fix}"
                )
            data = self._read_from_folder(name, min(limit, MAX_FILE_BYTES))
            self._files[name] = data
        if len(data) > limit:
            raise BundleError(f"{_shown(name)} is larger than {size_text(limit)}")
        return data

    def cached(self, name: str) -> bytes | None:
        """The bytes of ``name`` if it was read (or uploaded) already; never reads."""
        return self._files.get(name)

    def once(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, run once per bundle for ``key`` (e.g. a check and a file name).

        A file's bytes never change once read, so a costly check of a file that several places
        name (an image several products show: decoding is most of an upload's time) runs once;
        each place still reports what it found.
        """
        if key not in self._found:
            self._found[key] = compute()
        return self._found[key]

    def files(self) -> list[BundleFile]:
        """The files to store with the study: all uploaded ones, or those read from a folder."""
        return [BundleFile(n, b) for n, b in sorted(self._files.items())]

    def _read_from_folder(self, name: str, limit: int) -> bytes:
        assert self._folder is not None
        parts = name.split("/")
        flags = getattr(os, "O_CLOEXEC", 0)
        try:
            dir_fd = os.open(self._folder, os.O_RDONLY | flags)
        except OSError:
            raise BundleError("the study's folder cannot be read") from None
        fds = [dir_fd]
        try:
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                shown = _shown("/".join(parts[: i + 1]))
                try:
                    st = os.stat(part, dir_fd=fds[-1], follow_symlinks=False)
                except FileNotFoundError:
                    raise BundleError(
                        f"file not found in the study bundle: {_shown(name)}"
                    ) from None
                except NotADirectoryError:
                    raise BundleError(
                        f"file not found in the study bundle: {_shown(name)}"
                    ) from None
                except OSError as exc:
                    raise BundleError(f"{shown} cannot be read ({exc.strerror})") from None
                if stat.S_ISLNK(st.st_mode):
                    raise BundleError(
                        f"{shown} is a symbolic link; a study bundle holds the files themselves"
                    )
                if not last:
                    if not stat.S_ISDIR(st.st_mode):
                        raise BundleError(f"file not found in the study bundle: {_shown(name)}")
                    mode = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | flags
                else:
                    if stat.S_ISDIR(st.st_mode):
                        raise BundleError(f"{shown} is a folder, not a file")
                    if not stat.S_ISREG(st.st_mode):
                        raise BundleError(f"{shown} is not a regular file (a device or a pipe)")
                    mode = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | flags
                try:
                    fds.append(os.open(part, mode, dir_fd=fds[-1]))
                except OSError as exc:  # replaced between stat and open
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise BundleError(f"{shown} is a symbolic link") from None
                    raise BundleError(f"{shown} cannot be read ({exc.strerror})") from None
            fd = fds[-1]
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # what was opened, not what was stat'ed
                raise BundleError(f"{_shown(name)} is not a regular file (a device or a pipe)")
            room = MAX_BUNDLE_BYTES - self._read_total
            data = _read_bounded(fd, min(limit, room) + 1)
        finally:
            for fd in reversed(fds):
                os.close(fd)
        if len(data) > limit:
            raise BundleError(f"{_shown(name)} is larger than {size_text(limit)}")
        if len(data) > room:
            raise BundleError(
                f"the study's files add up to more than {size_text(MAX_BUNDLE_BYTES)}"
            )
        self._read_total += len(data)
        return data


def size_text(n: int) -> str:
    """A size limit in words (``8 MiB``)."""
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def _read_bounded(fd: int, at_most: int) -> bytes:
    chunks, got = [], 0
    while got < at_most:
        chunk = os.read(fd, min(1 << 20, at_most - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, room: int) -> bytes:
    """Decompress one entry, stopping as soon as it passes a limit (whatever it claims)."""
    limit = min(MAX_FILE_BYTES, room)
    chunks, got = [], 0
    try:
        with archive.open(info) as fh:
            while got <= limit:
                chunk = fh.read(min(1 << 16, limit + 1 - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
    except (
        zipfile.BadZipFile,  # a CRC that does not match, a damaged header
        NotImplementedError,  # a compression method zipfile lacks
        RuntimeError,
        ValueError,
        EOFError,
        OSError,  # bz2
        zlib.error,
        lzma.LZMAError,
    ):
        raise BundleError(f"{_shown(name)} in the zip cannot be decompressed") from None
    if got > limit:
        if limit < MAX_FILE_BYTES:
            raise BundleError(f"the zip's files add up to more than {size_text(MAX_BUNDLE_BYTES)}")
        raise BundleError(f"{_shown(name)} is larger than {size_text(MAX_FILE_BYTES)}")
    return b"".join(chunks)


def _check_zip_directory(data: bytes) -> None:
    """Refuse a zip whose central directory is too large to read, before reading it."""
    tail = data[-(22 + 0xFFFF) :]
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise BundleError("not a readable zip file")
    if tail[max(at - 20, 0) : at].startswith(b"PK\x06\x07"):  # a ZIP64 locator
        raise BundleError(f"a study bundle holds at most {MAX_FILES} files")
    entries, size = struct.unpack("<xxxxxxxxxxHI", tail[at : at + 16])
    if entries == 0xFFFF or size == 0xFFFFFFFF:  # ZIP64: far beyond any study
        raise BundleError(f"a study bundle holds at most {MAX_FILES} files")
    if entries > MAX_FILES or size > MAX_ZIP_DIRECTORY_BYTES:
        raise BundleError(f"a study bundle holds at most {MAX_FILES} files")


def _strip_common_folder(
    entries: list[tuple[str, zipfile.ZipInfo]],
) -> list[tuple[str, zipfile.ZipInfo]]:
    """Drop one folder that every entry sits in (a zipped folder: ``mystudy/study.yaml``)."""
    tops = {name.split("/", 1)[0] for name, _ in entries}
    if len(tops) == 1 and all("/" in name for name, _ in entries):
        return [(name.split("/", 1)[1], info) for name, info in entries]
    return entries


def is_zip(name: str, content: bytes) -> bool:
    """Whether an uploaded file is a zip (by its first bytes, or its name if it is empty)."""
    return content[:4] in (b"PK\x03\x04", b"PK\x05\x06") or name.lower().endswith(".zip")


def _study_file(files: dict[str, bytes]) -> str:
    """The study YAML of a zip: the one YAML at its top, or, when a stimulus YAML (a pairs
    file) sits beside it, the one of them with a top-level ``tasks:`` key."""
    top = sorted(n for n in files if "/" not in n and n.lower().endswith(YAML_SUFFIXES))
    if len(top) == 1:
        return top[0]
    if not top:
        raise BundleError(
            "put the study YAML at the top of the zip (or of its one folder) and its stimulus "
            "files next to it or in sub-folders; the zip has no YAML file there"
        )
    studies = [n for n in top if _STUDY_KEY.search(files[n])]
    if len(studies) == 1:
        return studies[0]
    shown = ", ".join(map(_shown, (studies or top)[:5]))
    if studies:
        raise BundleError(f"the zip holds several study files ({shown}): upload one at a time")
    raise BundleError(
        f"none of the YAML files at the top of the zip ({shown}) is a study file: a study "
        "file has a top-level 'tasks:' key"
    )


def bundle_from_upload(files: list[tuple[str, bytes]]) -> Bundle:
    """The bundle of a console upload: a zip, or the study YAML first and its files after it.

    Parameters
    ----------
    files : list of (str, bytes)
        The uploaded files with the names the browser gave them (a browser sends the bare file
        name; a folder upload sends ``folder/file``). The first one is the zip or the study
        YAML.

    Raises
    ------
    BundleError
        The bundle is refused (the message names only names from the upload).
    """
    if not files:
        raise BundleError("choose a study YAML file or a zip")
    (name, content), rest = files[0], files[1:]
    if is_zip(name, content):
        if rest:
            raise BundleError(
                "upload either a zip, or the study YAML together with its stimulus files"
            )
        return Bundle.from_zip(content)
    return Bundle.from_files(files, study_name=name)
