"""Which characters FrameLab accepts in text: one rule for requests and study definitions.

PostgreSQL's ``text`` and ``varchar`` cannot hold NUL, and no UTF-8 database can hold a lone
surrogate (YAML and JSON escapes such as ``"\\ud800"`` produce one); either one reaching a query
is a driver error, i.e. a 500. The other control characters are stored fine but are invisible
on a page and never typed by a person, so they are refused too: in a link or an identifier
always, in free text except tab and the line breaks. This module imports nothing of the app,
so :mod:`webapp.studydef` (imported by the models) can use it.
"""

from __future__ import annotations

import re

# Unicode category Cc (C0, DEL, C1) plus the surrogates.
_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# The same without tab, line feed and carriage return.
_CONTROL_BUT_LINE_BREAKS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def forbidden_character(text: str, *, line_breaks: bool = False) -> tuple[int, str] | None:
    """Return ``(index, "U+XXXX")`` of the first character ``text`` may not contain, or ``None``.

    Parameters
    ----------
    text : str
    line_breaks : bool
        Whether tab, line feed and carriage return are allowed (free text) or not (links,
        identifiers, one-line labels).

    Examples
    --------
    >>> forbidden_character("a\\x00b")
    (1, 'U+0000')
    >>> forbidden_character("two\\nlines", line_breaks=True) is None
    True
    """
    pattern = _CONTROL_BUT_LINE_BREAKS if line_breaks else _ANY_CONTROL
    match = pattern.search(text)
    if match is None:
        return None
    return match.start(), f"U+{ord(match.group()):04X}"


# ``{name}`` in a researcher's text: the only template syntax there is. Anything between
# braces is a candidate, so ``{0}`` or ``{price.__class__}`` is found (and refused at
# validation), never interpreted.
PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")


def placeholders(template: str) -> list[str]:
    """The names between braces in ``template``, in order.

    Examples
    --------
    >>> placeholders("costs {price}, not {0} or {price.__class__}")
    ['price', '0', 'price.__class__']
    """
    return PLACEHOLDER_RE.findall(template)


def fill(template: str, values: dict[str, str]) -> str:
    """Replace each ``{name}`` of ``values`` in ``template``; leave everything else as it is.

    Unlike ``str.format`` this reads no attributes or indexes and cannot fail: an unknown
    ``{...}`` (from a definition stored before validation refused it) stays literal text,
    and a value containing braces is not expanded again.

    Examples
    --------
    >>> fill("{price} or {0} or {price.real}", {"price": "$5.00"})
    '$5.00 or {0} or {price.real}'
    """
    return PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), m.group(0)), template)
