"""Building blocks for validating study definitions and their stimulus files.

Located errors (:class:`StudyDefinitionError`, :class:`Where`), typed field readers that check
lengths against the model columns and refuse control characters, reads of a study's bundle, and
the one hardened YAML loader (no anchors, aliases or merge keys; bounded size and nesting). Task
types build their validation from these; :mod:`webapp.studydef` validates a whole study with
them. This module imports no task type, so task types never import the study-level module
that imports their registry.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml

from webapp.bundle import MAX_YAML_BYTES, Bundle, BundleError, safe_name
from webapp.text_rules import forbidden_character, placeholders

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{1,78}[a-z0-9]$")
ID_MAX = 64
ID_RE = re.compile(rf"^[A-Za-z0-9_.-]{{1,{ID_MAX}}}$")
PLATFORMS = ("prolific", "mturk", "link")
# Researcher strings kept only in the definition (JSON) have no column to fit; these bound
# what one page can show. Strings stored in sized columns get the column's length instead
# (:func:`column_length`).
TEXT_MAX = 20_000  # a text of paragraphs (a consent sheet is a few thousand characters)
LINE_MAX = 500  # a one-line label: heading, button, option, name
REASON_MAX = 500  # characters of a reason kept in messages
# Errors reported for one definition: a mistake repeated in every pair is shown each time, up to
# this many, so one upload shows the researcher what to fix; the rest are counted.
ERRORS_MAX = 20
MAX_YAML_DEPTH = 40  # nesting of YAML collections (a study needs about 8)


class StudyDefinitionError(ValueError):
    """A study definition is invalid; ``str()`` reads ``FILE: PATH: REASON (line N)``.

    ``source`` is the YAML file's text when known; :func:`load_bundle` uses it to add the line
    of ``locate`` (a path inside the file; default ``path``). Errors in files that are not
    YAML (CSV, JSONL) carry their ``line`` from the start. ``file`` is a bundle-relative name.
    """

    def __init__(
        self,
        file: str,
        path: str,
        reason: str,
        *,
        line: int | None = None,
        source: str | None = None,
        locate: str | None = None,
    ) -> None:
        if len(reason) > REASON_MAX:  # a 10,000-character value quoted in it: keep both ends
            half = REASON_MAX // 2 - 2
            reason = f"{reason[:half]} … {reason[-half:]}"
        self.file, self.path, self.reason, self.line, self.source = file, path, reason, line, source
        self.locate = path if locate is None else locate
        at = f" (line {line})" if line else ""
        super().__init__(f"{file}: {path or '(top level)'}: {reason}{at}")


class StudyDefinitionErrors(StudyDefinitionError):
    """Several independent errors of one definition, in file order (at most :data:`ERRORS_MAX`).

    The file, path, reason and line are the first error's, so code that shows one error keeps
    working; ``errors`` holds them all and ``more`` counts those left out. ``str()`` is one line
    per error.
    """

    def __init__(self, errors: list[StudyDefinitionError], more: int = 0) -> None:
        first = errors[0]
        super().__init__(
            first.file,
            first.path,
            first.reason,
            line=first.line,
            source=first.source,
            locate=first.locate,
        )
        self.errors, self.more = list(errors), more
        lines = [str(e) for e in self.errors]
        if more:
            lines.append(f"… and {more} more error(s) of the same file(s)")
        self.args = (f"{len(errors) + more} errors:\n" + "\n".join(lines),)

    def lines(self) -> list[str]:
        """One message per error (and one counting those left out)."""
        extra = [f"… and {self.more} more error(s)"] if self.more else []
        return [str(e) for e in self.errors] + extra


def error_lines(exc: StudyDefinitionError) -> list[str]:
    """The messages of ``exc``: one per error it carries."""
    return exc.lines() if isinstance(exc, StudyDefinitionErrors) else [str(exc)]


class Collector:
    """Gather the errors of independent parts of a definition instead of stopping at the first.

    ``collector.run(fn, ...)`` returns ``fn``'s result, or ``None`` after recording its error;
    :meth:`check` raises what was gathered (one error as itself, several together).
    """

    def __init__(self) -> None:
        self.errors: list[StudyDefinitionError] = []
        self.more = 0

    def add(self, exc: StudyDefinitionError) -> None:
        """Record ``exc`` (each of several)."""
        found = exc.errors if isinstance(exc, StudyDefinitionErrors) else [exc]
        room = max(0, ERRORS_MAX - len(self.errors))
        self.errors.extend(found[:room])
        self.more += len(found) - min(len(found), room)
        if isinstance(exc, StudyDefinitionErrors):
            self.more += exc.more

    def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn``; on a definition error record it and return ``None``."""
        try:
            return fn(*args, **kwargs)
        except StudyDefinitionError as exc:
            self.add(exc)
            return None

    def check(self) -> None:
        """Raise the gathered errors, if any."""
        if len(self.errors) == 1 and not self.more:
            raise self.errors[0]
        if self.errors:
            raise StudyDefinitionErrors(self.errors, self.more)


@dataclass(frozen=True)
class Where:
    """A position inside a definition file, used to build error messages.

    ``file`` is the file's name inside ``bundle``, which holds the files it may name. ``line``
    is set for files whose lines are known while reading (a CSV row, a JSONL record); children
    inherit it. YAML positions leave it unset: :func:`load_bundle` finds it.
    """

    file: str
    path: str = ""
    bundle: Bundle | None = None
    line: int | None = None

    def at(self, key: str | int) -> Where:
        """Return the position of a child key or list index."""
        if isinstance(key, int):
            return Where(self.file, f"{self.path}[{key}]", self.bundle, self.line)
        path = f"{self.path}.{key}" if self.path else key
        return Where(self.file, path, self.bundle, self.line)

    def error(self, reason: str, *, locate: str | None = None) -> StudyDefinitionError:
        """Return an error located here (raise it); ``locate`` is a path whose line to report."""
        source = None
        if self.bundle is not None and self.line is None:
            data = self.bundle.cached(self.file)
            source = data.decode("utf-8", errors="replace") if data is not None else None
        return StudyDefinitionError(
            self.file, self.path, reason, line=self.line, source=source, locate=locate
        )


def get_mapping(raw: Any, where: Where) -> dict[str, Any]:
    """Return ``raw`` if it is a mapping with string keys, else raise."""
    if not isinstance(raw, Mapping):
        raise where.error(f"expected a mapping, got {type(raw).__name__}")
    return dict(raw)


def get_list(raw: Any, where: Where, *, min_len: int = 0) -> list[Any]:
    """Return ``raw`` if it is a list of at least ``min_len`` items, else raise."""
    if not isinstance(raw, list):
        raise where.error(f"expected a list, got {type(raw).__name__}")
    if len(raw) < min_len:
        raise where.error(f"expected at least {min_len} item(s), got {len(raw)}")
    return raw


def column_length(attribute: Any) -> int:
    """The declared length of a ``String`` model column, e.g. ``column_length(Study.title)``.

    Researcher strings that land in a column are checked against this at validation, so the
    limit has one source: the model (PostgreSQL refuses longer values with a 500).
    """
    length = attribute.property.columns[0].type.length
    if not isinstance(length, int):
        raise TypeError(f"{attribute} is not a String column with a length")
    return length


_CHARACTER_NAMES = {"U+0000": "a NUL character", "U+0009": "a tab"}


def check_text(value: str, where: Where, *, max_len: int = TEXT_MAX, one_line: bool = False) -> str:
    """Return ``value`` if it fits ``max_len`` and has only characters a page can show.

    Parameters
    ----------
    value : str
        A researcher-supplied string (already stripped).
    where : Where
        Its position; the error is raised there.
    max_len : int
        At most this many characters (a column's length, or :data:`TEXT_MAX`/:data:`LINE_MAX`).
    one_line : bool
        Refuse tabs and line breaks too (ids, codes, names, labels).

    Raises
    ------
    StudyDefinitionError
        Too long, or a NUL, control character or unpaired surrogate (see
        :func:`webapp.text_rules.forbidden_character`).
    """
    if len(value) > max_len:
        raise where.error(f"is {len(value):,} characters long; at most {max_len:,} fit here")
    bad = forbidden_character(value, line_breaks=not one_line)
    if bad is not None:
        index, code = bad
        if code in ("U+000A", "U+000D"):
            what = "a line break"
        elif 0xD800 <= int(code[2:], 16) <= 0xDFFF:
            what = f"an unpaired surrogate {code} (not a character)"
        else:
            what = _CHARACTER_NAMES.get(code, f"the control character {code}")
        rule = (
            "; this must be one line" if one_line and code in ("U+0009", "U+000A", "U+000D") else ""
        )
        raise where.error(f"contains {what} at character {index + 1}{rule}: remove it")
    return value


def get_str(
    raw: Mapping[str, Any],
    key: str,
    where: Where,
    default: str | None = None,
    *,
    max_len: int = TEXT_MAX,
    one_line: bool = False,
) -> str:
    """Return the non-empty string ``raw[key]`` (or ``default`` when absent).

    The value is checked by :func:`check_text` with ``max_len`` and ``one_line``.
    """
    if key not in raw or raw[key] is None:
        if default is None:
            raise where.at(key).error("is required")
        return default
    value = raw[key]
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)  # YAML turns codes like 1234 into numbers
    if not isinstance(value, str) or not value.strip():
        raise where.at(key).error("expected a non-empty string")
    return check_text(value.strip(), where.at(key), max_len=max_len, one_line=one_line)


def get_line(
    raw: Mapping[str, Any],
    key: str,
    where: Where,
    default: str | None = None,
    *,
    max_len: int = LINE_MAX,
) -> str:
    """:func:`get_str` for a one-line label (heading, button, name): no line breaks."""
    return get_str(raw, key, where, default, max_len=max_len, one_line=True)


def get_number(
    raw: Mapping[str, Any],
    key: str,
    where: Where,
    *,
    default: float | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float:
    """Return the number ``raw[key]`` within [minimum, maximum] (or ``default``)."""
    if key not in raw or raw[key] is None:
        if default is None:
            raise where.at(key).error("is required")
        return default
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise where.at(key).error(f"expected a number, got {value!r}")
    if not math.isfinite(value):  # YAML's .nan/.inf: no JSON column can store them
        raise where.at(key).error(f"expected a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise where.at(key).error(f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise where.at(key).error(f"must be at most {maximum}, got {value}")
    return float(value)


class WrittenFloat(float):
    """A YAML float that keeps the text it was written as (:attr:`text`), so an amount of money
    is read as written (``0.1`` is ten cents, ``1.005`` half a cent too many), not as the
    nearest binary float."""

    text: str

    def __new__(cls, value: float, text: str) -> WrittenFloat:
        made = super().__new__(cls, value)
        made.text = text
        return made

    def __getnewargs__(self) -> tuple[float, str]:  # type: ignore[override]  # copies keep text
        return float(self), self.text


# The most any amount of money in a study may be (in its currency): a slip of the decimal
# point is refused at load, not paid.
MAX_AMOUNT = Decimal(100_000)


def get_money(
    raw: Mapping[str, Any],
    key: str,
    where: Where,
    *,
    default: float | None = None,
    minimum: Decimal = Decimal(0),
) -> float:
    """Return the amount of money ``raw[key]`` (or ``default``), in the study's currency.

    Read as written (a YAML float's text as a :class:`~decimal.Decimal`), it must be a whole
    number of cents, at least ``minimum`` and at most :data:`MAX_AMOUNT`: a sub-cent amount is
    refused, never rounded. Stored as a float, exact in cents (``round(value * 100)``).
    """
    value = get_number(raw, key, where, default=default)
    if key not in raw or raw[key] is None:
        return value
    written = getattr(raw[key], "text", None) or repr(raw[key])
    try:
        amount = Decimal(written.replace("_", ""))
    except InvalidOperation:
        raise where.at(key).error(
            f"write the amount as a plain decimal number, e.g. 0.10 (got {written})"
        ) from None
    if amount < minimum or amount > MAX_AMOUNT:
        raise where.at(key).error(
            f"must be at least {minimum} and at most {MAX_AMOUNT}, got {written}"
        )
    if amount != amount.quantize(Decimal("0.01")):
        raise where.at(key).error(
            f"must be a whole number of cents (e.g. 0.01), got {written}: it would not be paid "
            "as written"
        )
    return float(amount)


def get_int(
    raw: Mapping[str, Any], key: str, where: Where, *, default: int, minimum: int = 0
) -> int:
    """Return the integer ``raw[key]`` ≥ ``minimum`` (or ``default``)."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.at(key).error(f"expected an integer, got {value!r}")
    if value < minimum:
        raise where.at(key).error(f"must be at least {minimum}, got {value}")
    return value


def get_bool(raw: Mapping[str, Any], key: str, where: Where, *, default: bool) -> bool:
    """Return ``raw[key]`` when it is ``true`` or ``false`` (or ``default``)."""
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise where.at(key).error(f"expected true or false, got {value!r}")
    return value


def get_template(
    raw: Mapping[str, Any], key: str, where: Where, fields: tuple[str, ...], default: str
) -> str:
    """:func:`get_str` for a text with ``{name}`` placeholders, each one of ``fields``.

    Filled by :func:`webapp.text_rules.fill`, never ``str.format``: researcher text must not
    reach format-string semantics (``{0}`` failed every page, ``{price.__class__}`` showed
    object internals to participants).
    """
    value = get_str(raw, key, where, default)
    unknown = [name for name in placeholders(value) if name not in fields]
    if unknown:
        known = ", ".join(f"{{{f}}}" for f in fields)
        raise where.at(key).error(
            f"unknown placeholder {{{unknown[0]}}}; this text may use {known}"
        )
    return value


def get_id(raw: Mapping[str, Any], key: str, where: Where) -> str:
    """Return an identifier (letters, digits, ``_.-``; at most :data:`ID_MAX` characters).

    Ids are stored in ``String(64)`` columns (block, pair and item ids); a test holds
    :data:`ID_MAX` to those columns' lengths.
    """
    value = get_line(raw, key, where, max_len=ID_MAX)
    if not ID_RE.match(value):
        raise where.at(key).error(f"{value!r} is not a valid id (letters, digits, _ . -)")
    return value


def check_strings(value: Any, where: Where) -> None:
    """Refuse any string or key in a normalised definition that :func:`check_text` refuses.

    The safety net behind the per-key checks: texts taken from stimulus files, extra CSV
    columns and values read with ``str()`` all pass here before the definition is stored, so
    no NUL or control character reaches the database or a page whichever reader let it in.
    Lengths are the per-key checks' business (the joined passages of a source are long).
    """
    if isinstance(value, str):
        check_text(value, where, max_len=len(value))
    elif isinstance(value, Mapping):
        for key, child in value.items():
            if isinstance(key, str):
                check_text(key, where, max_len=len(key), one_line=True)
            check_strings(child, where.at(key if isinstance(key, str) else str(key)))
    elif isinstance(value, list | tuple):
        for i, child in enumerate(value):
            check_strings(child, where.at(i))


def check_keys(raw: Mapping[str, Any], allowed: set[str], where: Where) -> None:
    """Reject unknown keys, which are nearly always typos (the line is the first one's)."""
    # YAML keys may be numbers, dates or None: sort by their text.
    unknown = sorted(set(raw) - allowed, key=str)
    if unknown:
        raise where.error(
            f"unknown key(s) {unknown}; allowed: {sorted(allowed)}",
            locate=where.at(str(unknown[0])).path,
        )


# Notes on a definition that loads: a key spelled the older way. Gathered while a definition is
# validated (collect_notes) and printed with the load's result; one per file and key.
_NOTES: contextvars.ContextVar[dict[tuple[str, str], list[Any]] | None] = contextvars.ContextVar(
    "definition_notes", default=None
)


@contextlib.contextmanager
def collect_notes() -> Iterator[list[tuple[StudyDefinitionError, int]]]:
    """Gather the notes of the definitions validated inside: ``(first note, how many more)``
    per file and key, in the order first seen (the list is filled when the block ends)."""
    found: dict[tuple[str, str], list[Any]] = {}
    out: list[tuple[StudyDefinitionError, int]] = []
    token = _NOTES.set(found)
    try:
        yield out
    finally:
        _NOTES.reset(token)
        out.extend((first, more) for first, more in found.values())


def written_key(raw: Mapping[str, Any], new: str, old: str, where: Where) -> str:
    """The spelling of a key that ``raw`` uses: ``new``, or its older name ``old`` (noted as
    deprecated); giving both is refused. Errors about the value then name the key as written.

    Amounts were once named in dollars (``price_usd``); they are now in the study's
    ``payment.currency`` and their keys do not name one. The older files keep loading.
    """
    if old not in raw:
        return new
    if new in raw:
        raise where.at(old).error(f"give {new!r} or the older {old!r}, not both")
    found = _NOTES.get()
    if found is not None:
        key = (where.file, old)
        if key in found:
            found[key][1] += 1
        else:
            reason = (
                f"{old!r} is deprecated: write {new!r} (amounts are in the study's "
                "payment.currency, USD unless it says otherwise)"
            )
            found[key] = [where.at(old).error(reason), 0]
    return old


def stimulus_path(raw: Any, where: Where, what: str) -> str:
    """Return the bundle-relative name of the file named by ``raw`` (a study key).

    Names are relative to the study file and must stay inside its bundle: absolute paths,
    ``..``, backslashes and control characters are refused here, by their text, before
    anything is opened.
    """
    if not isinstance(raw, str) or not raw.strip():
        raise where.error(f"expected the path of {what} (relative to the study file)")
    if where.bundle is None:
        raise where.error(f"{what} needs the study's bundle")
    try:
        name = safe_name(raw.strip())
    except BundleError as exc:
        raise where.error(str(exc)) from None
    folder = where.file.rpartition("/")[0]  # names are relative to the naming file
    return f"{folder}/{name}" if folder else name


def line_at(data: bytes, offset: int) -> int:
    """The 1-based line of byte ``offset`` (lines end with LF, CRLF or CR)."""
    head = data[:offset]
    return head.count(b"\n") + head.count(b"\r") - head.count(b"\r\n") + 1


def read_text(name: str, where: Where, *, encoding: str = "utf-8", limit: int | None = None) -> str:
    """Return the text of the bundle file ``name`` (from :func:`stimulus_path`).

    A file that is not in the bundle, not a regular file or too large is refused at ``where``
    (the key naming it); bytes that are not UTF-8 are refused naming the file and their line.
    """
    if where.bundle is None:
        raise where.error("needs the study's bundle")
    try:
        data = where.bundle.read(name, **({"limit": limit} if limit is not None else {}))
    except BundleError as exc:
        raise where.error(str(exc)) from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = line_at(data, exc.start)
        raise Where(name, "", where.bundle, line).error(
            f"not UTF-8 text at line {line}: save the file as UTF-8"
        ) from None


def n_lines(text: str) -> int:
    """How many lines ``text`` has as an editor shows them (at least 1)."""
    return max(1, len(text.splitlines()))


# libyaml scans and parses about six times faster than PyYAML's pure-Python scanner, which
# took 20 of the 21 s of CPU that a 16 MiB upload of product pairs cost; the events it produces
# are composed and constructed by PyYAML's own classes below, so every check of the loader
# applies to both. PyYAML's wheels carry libyaml; the pure-Python parser is the fallback.
_EVENT_SOURCE: tuple[type, ...] = (
    (yaml.cyaml.CParser,)
    if yaml.__with_libyaml__
    else (yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser)
)


class HardenedLoader(
    yaml.composer.Composer,
    *_EVENT_SOURCE,
    yaml.constructor.SafeConstructor,
    yaml.resolver.Resolver,
):
    """The one YAML loader of study files: ``SafeLoader``'s composer, constructor and resolver
    over libyaml's parser, hardened.

    * Duplicate keys are refused with both lines (PyYAML would keep the last one silently).
    * Anchors, aliases and merge keys are refused with their line: a few hundred bytes of
      nested aliases expand to hundreds of megabytes (a "billion laughs"), and a study file
      gains nothing from them that writing the value out does not give.
    * Collections nest at most :data:`MAX_YAML_DEPTH` deep (the composer recurses).
    * Scalar conversion errors are YAML errors with a position: PyYAML raises a bare
      ``ValueError`` for ``2001-02-30`` or an integer of 5,000 digits.

    The size is bounded before parsing (:data:`webapp.bundle.MAX_YAML_BYTES`).
    """

    _depth = 0

    def __init__(self, stream: str) -> None:
        first, *rest = _EVENT_SOURCE
        first.__init__(self, stream)
        for base in rest:
            base.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.composer.ComposerError(
                None,
                None,
                "anchors and aliases (& and *) are not allowed in a study file; "
                "write the value out",
                event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", event.start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    "merge keys (<<) are not allowed in a study file; write the keys out",
                    key_node.start_mark,
                )
            # PyYAML keeps the last of two equal keys: a pasted second `completion_codes:` or
            # `base:` would silently replace the first.
            if isinstance(key_node, yaml.ScalarNode):
                line = key_node.start_mark.line + 1
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"key {key_node.value!r} appears twice (lines {seen[key_node.value]} "
                        f"and {line}); keep one",
                        key_node.start_mark,
                    )
                seen[key_node.value] = line
        super().flatten_mapping(node)

    def construct_written_float(self, node: yaml.ScalarNode) -> float:
        """A float that keeps its text (:class:`WrittenFloat`) for amounts of money."""
        value = self.construct_yaml_float(node)
        return WrittenFloat(value, str(node.value)) if math.isfinite(value) else value

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, OverflowError) as exc:
            value = str(node.value)
            value = value if len(value) <= 40 else f"{value[:37]}..."
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {value!r}: {str(exc)[:200]}", node.start_mark
            ) from None


HardenedLoader.add_constructor("tag:yaml.org,2002:float", HardenedLoader.construct_written_float)


def read_yaml(name: str, where: Where) -> Any:
    """Parse a bundle's YAML file; syntax errors are refused naming the file and line.

    ``where`` is the place that names the file (a missing file is reported there).
    """
    text = read_text(name, where, limit=MAX_YAML_BYTES)
    return parse_yaml(text, Where(name, "", where.bundle))


def parse_yaml(text: str, where: Where) -> Any:
    """Parse YAML ``text`` (the file of ``where``) with the hardened loader.

    Raises
    ------
    StudyDefinitionError
        Naming the file and the line, for syntax errors, anchors, aliases, merge keys, deep
        nesting and values Python cannot hold.
    """
    try:
        return yaml.load(text, Loader=HardenedLoader)  # noqa: S506  # nosec B506: SafeLoader's constructor
    except RecursionError:
        raise Where(where.file, "", where.bundle, 1).error(
            "invalid YAML: nested too deeply"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        if mark is not None:
            line = mark.line + 1
        elif isinstance(getattr(exc, "position", None), int):  # a ReaderError
            line = n_lines(text[: exc.position + 1])
        else:
            line = 1
        line = min(line, n_lines(text))  # "end of stream" is after the last line
        reason = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        raise Where(where.file, "", where.bundle, line).error(
            f"invalid YAML at line {line}: {reason}{_quote_hint(text, line, reason)}"
        ) from None


def _quote_hint(text: str, line: int, reason: str) -> str:
    """A hint for the commonest YAML slip in a study: a text with ``?``, ``: `` or `` #`` that
    is not quoted (PyYAML names only the grammar, e.g. "mapping values are not allowed here")."""
    lines = text.splitlines()
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    _, _, value = source.partition(": ")
    if not any(w in reason for w in ("mapping values", "mapping keys", "got '?'")):
        return ""
    if value.lstrip()[:1] in ('"', "'"):
        return ""
    marks = [m for m in ("?", ": ", " #") if m in value or (m == "?" and "?" in source)]
    named = " and ".join(f"'{m.strip()}'" for m in marks) or "a special character"
    return (
        f"; the text on that line contains {named}: put the whole text in double quotes, "
        'e.g. text: "Would you buy it? Yes: maybe"'
    )
