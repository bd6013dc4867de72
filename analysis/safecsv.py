"""The one CSV writer of the research package: files a researcher may open in a spreadsheet.

Cells of these files carry text from outside: model names, scraped article descriptions, LLM
outputs. A spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula
(``=HYPERLINK(...)`` sends data away, ``=cmd|...`` once ran programs), also after leading spaces
and zero-width characters and in the full-width forms input methods type (OWASP "CSV
injection"); a cell starting with a tab or carriage return is refused by the same rule. Such
text gets a leading ``'``, the mark spreadsheets read as "text, not a formula", the way the
platform's own export does it. A lone carriage return becomes a newline (written unquoted it
would end the row). Numbers stay numbers: numeric columns are never touched, and a text cell
that is just a number (``-0.25``) is no formula either.

Unlike the platform's export, the quoting here is reversible, because the research package
reads some of its own sheets back (``news falsify``'s validation sheet keeps what a researcher
typed in): text that already starts with ``'`` before a formula character gets one more, so
:func:`unquote` returns exactly what was written (carriage returns aside).

Every CSV that ``analysis`` writes goes through :func:`write_csv`, except the annotation item
files of ``framelab generate annotation-items``: they are stimuli the platform reads and shows
to participants verbatim (a ``'`` would reach their screens); the platform's export neutralises
what comes back out of it.
"""

from __future__ import annotations

import datetime as dt
import numbers
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# As the platform's export: ASCII and full-width (＝＋－＠) formula starts; zero-width characters
# and spaces that spreadsheets skip before looking.
FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _would_run(text: str) -> bool:
    if text.startswith(("\t", "\r")):
        return True
    if _NUMBER.fullmatch(text):
        return False  # -0.25 is a number to a spreadsheet, not a formula
    return text.lstrip().lstrip(_INVISIBLE).lstrip().startswith(FORMULA_START)


def spreadsheet_safe(text: str) -> str:
    """Return ``text`` ready for a CSV cell that a spreadsheet may open.

    Examples
    --------
    >>> spreadsheet_safe("=1+1"), spreadsheet_safe(" @SUM(A1)"), spreadsheet_safe("a=b")
    ("'=1+1", "' @SUM(A1)", 'a=b')
    >>> spreadsheet_safe("-0.25"), spreadsheet_safe("-1+2"), spreadsheet_safe("'=x")
    ('-0.25', "'-1+2", "''=x")
    """
    # Line endings first: the check then sees the text as it is written, so a lone "\r" that
    # becomes "\n" is not quoted for a character the cell no longer holds.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if _would_run(text.lstrip("'")):
        text = "'" + text
    return text


def unquote(text: str) -> str:
    """Undo :func:`spreadsheet_safe` (line endings aside): the text as it was before writing.

    Examples
    --------
    >>> [unquote(spreadsheet_safe(t)) for t in ("=1+1", "'=x", "'plain", "-3")]
    ['=1+1', "'=x", "'plain", '-3']
    """
    if text.startswith("'") and _would_run(text[1:].lstrip("'")):
        return text[1:]
    return text


def _cell(value: Any) -> Any:
    if isinstance(value, str):
        return spreadsheet_safe(value)
    if value is None or isinstance(value, numbers.Number | dt.date | dt.time | dt.timedelta):
        return value  # numbers (NaN, numpy and bool included) and dates cannot start a formula
    if type(value).__module__.startswith(("numpy", "pandas")) and not hasattr(value, "__len__"):
        return value  # numpy/pandas scalars: NA, NaT, datetime64, Timestamp
    return spreadsheet_safe(str(value))  # lists, dicts, objects: the text to_csv would write


def _map_text(frame: pd.DataFrame, cell: Any) -> pd.DataFrame:
    """``frame`` with ``cell`` applied to every value of its text-holding columns and to its
    column names; numeric, boolean and datetime columns are left as they are."""
    import pandas as pd

    out = frame.copy()
    for i in range(out.shape[1]):
        values = out.iloc[:, i]
        if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_datetime64_any_dtype(values):
            continue
        mapped = values.astype(object).map(cell)
        # pandas' string columns stay string columns; categories may not hold the new texts
        keep = isinstance(values.dtype, pd.StringDtype)
        out.isetitem(i, mapped.astype(values.dtype) if keep else mapped)
    return out.rename(columns=lambda c: cell(c) if isinstance(c, str) else c)


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells and column names are :func:`spreadsheet_safe`.

    Numeric, boolean and datetime columns are returned as they are.
    """
    return _map_text(frame, _cell)


def write_csv(
    frame: pd.DataFrame, path: str | Path | None = None, *, float_format: str | None = None
) -> str | None:
    """Write ``frame`` as a spreadsheet-safe CSV (UTF-8, header, no index).

    Parameters
    ----------
    frame : pandas.DataFrame
        The table.
    path : str or Path, optional
        Where to write; ``None`` returns the CSV text instead (for printing).
    float_format : str, optional
        As :meth:`pandas.DataFrame.to_csv`; default full (repr) precision.

    Returns
    -------
    str or None
        The CSV text when ``path`` is ``None``.

    Examples
    --------
    >>> import pandas as pd
    >>> print(write_csv(pd.DataFrame({"model": ["=1+1"], "=score": [-0.5]})), end="")
    model,'=score
    '=1+1,-0.5
    """
    return safe_frame(frame).to_csv(
        path, index=False, float_format=float_format, lineterminator="\n"
    )


def read_csv(path: str | Path, **kwargs: Any) -> pd.DataFrame:
    """Read a CSV written by :func:`write_csv` back as it was before writing.

    ``kwargs`` go to :func:`pandas.read_csv`; text cells and column names are :func:`unquote`-d.
    """
    import pandas as pd

    return _map_text(pd.read_csv(path, **kwargs), lambda v: unquote(v) if isinstance(v, str) else v)
