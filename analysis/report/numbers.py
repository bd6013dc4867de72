"""How the report rounds: one stated rule for every number a reader sees (APA 7, 6.36-6.46).

The rule (also in ``docs/analysis.md``, "How the report rounds"):

- **p-values**: three decimals without the leading zero (``.032``, ``.050``); below .001 as
  ``< .001``; a p that three decimals would print as ``1.000`` as ``> .999``, since no test
  gives certainty. A p that underflowed to 0 is ``< .001``.
- **Quantities that cannot exceed 1 in size** (proportions, rates, shares, correlations,
  Cramér's V, ICCs, agreement coefficients, risk differences): two decimals without the leading
  zero (``.17``, ``−.05``).
- **Other estimates and statistics** (b, SE, odds ratios, z, t, χ², log-likelihoods): two
  decimals, thousands separated by commas from 1,000 (``1,234.57``).
- **Small values**: a nonzero value that two decimals would show as zero keeps two significant
  digits (``0.0031``; ``2.0e−08`` below 0.0001), so that no estimate reads as exactly 0.
- **Significance levels** (α, what a sequential design spends of it): three decimals without
  the leading zero (``.025``), as pre-registered.
- **Counts**: whole numbers, thousands separated (``1,234``).
- **Degrees of freedom**: whole when whole (``1``), else one decimal (Satterthwaite ``37.9``).
- **Negative numbers** carry the minus sign (``−0.53``, U+2212), not a hyphen.
- **Missing or not applicable**: an em dash (``—``) in tables, explained in the table's note;
  ``NA`` in sentences.

Rounding is to the nearest representable value, as Python's ``format`` rounds the binary
number (``0.125`` is stored a little below and prints ``0.12``). Full precision stays in
``results.json`` and the CSV files.
"""

from __future__ import annotations

import math

__all__ = [
    "DASH",
    "MINUS",
    "PADJUST_NAMES",
    "fmt_bounded",
    "fmt_count",
    "fmt_df",
    "fmt_number",
    "fmt_p",
    "format_value",
    "is_missing",
]

MINUS = "\u2212"
DASH = "\u2014"
# The kinds of number a table column can hold (analysis.report.tables decides per column).
KINDS = ("p", "level", "bounded", "count", "df", "number", "text")
# How the report names statsmodels' multiple-comparison methods (``--padjust``).
PADJUST_NAMES = {
    "holm": "Holm",
    "bonferroni": "Bonferroni",
    "fdr_bh": "Benjamini-Hochberg",
    "fdr_by": "Benjamini-Yekutieli",
    "hommel": "Hommel",
    "sidak": "Šidák",
}


def is_missing(value: object) -> bool:
    """True for ``None``, NaN, infinities, pandas' missing markers and non-numbers of no text."""
    if value is None:
        return True
    if isinstance(value, str):
        return False
    try:
        return not math.isfinite(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        # pandas.NA and NaT refuse float(); anything else without a number is not missing.
        return str(value) in ("<NA>", "NaT")


def _minus(text: str) -> str:
    # "-0.00": a negative value that rounds to zero keeps no sign (APA prints 0.00).
    if text.startswith("-") and text.strip("-0.,") == "":
        return text[1:]
    return MINUS + text[1:] if text.startswith("-") else text


def _small(v: float, digits: int = 2) -> str | None:
    """Two significant digits for a nonzero value that ``digits`` decimals would print as 0."""
    if v == 0 or abs(v) >= 0.5 * 10.0**-digits:
        return None
    return (f"{v:.1e}" if abs(v) < 1e-4 else f"{v:.2g}").replace("-", MINUS)


def fmt_p(p: object, missing: str = DASH) -> str:
    """A p-value as APA prints it: ``.032``, ``.050``, ``< .001``, ``> .999``.

    Parameters
    ----------
    p : float
        A probability in [0, 1]; NaN or ``None`` for a p that was not computed.
    missing : str
        What a missing p prints as.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        For a number outside [0, 1]: a p-value there is a bug upstream, not something to round.

    Examples
    --------
    >>> [fmt_p(p) for p in (0.0321, 0.05, 0.0004, 0.0, 1.0, 0.9996, float("nan"))]
    ['.032', '.050', '< .001', '< .001', '> .999', '> .999', '—']
    """
    if is_missing(p):
        return missing
    v = float(p)  # type: ignore[arg-type]
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"a p-value must lie in [0, 1], got {v!r}")
    if v < 0.001:
        return "< .001"
    text = f"{v:.3f}"
    return "> .999" if text == "1.000" else text.removeprefix("0")


def fmt_bounded(v: object, digits: int = 2, missing: str = DASH) -> str:
    """A quantity bounded by 1 in size, without the leading zero: ``.17``, ``−.05``, ``1.00``.

    Examples
    --------
    >>> fmt_bounded(0.171), fmt_bounded(-0.05), fmt_bounded(1.0), fmt_bounded(0.0031)
    ('.17', '−.05', '1.00', '.0031')
    """
    if is_missing(v):
        return missing
    x = float(v)  # type: ignore[arg-type]
    text = _small(x, digits)
    if text is None:
        text = _minus(f"{x:.{digits}f}")
    for zero in ("0.", MINUS + "0."):
        if text.startswith(zero):
            return text.replace("0.", ".", 1)
    return text


def fmt_number(v: object, digits: int = 2, missing: str = DASH) -> str:
    """An estimate or statistic: two decimals, thousands separated, the minus sign.

    Examples
    --------
    >>> fmt_number(-0.5333), fmt_number(1234.567), fmt_number(0.0031), fmt_number(2e-8)
    ('−0.53', '1,234.57', '0.0031', '2.0e−08')
    """
    if is_missing(v):
        return missing
    x = float(v)  # type: ignore[arg-type]
    text = _small(x, digits)
    return text if text is not None else _minus(f"{x:,.{digits}f}")


def fmt_count(v: object, missing: str = DASH) -> str:
    """A count: a whole number with thousands separators (``1,234``)."""
    if is_missing(v):
        return missing
    return _minus(f"{round(float(v)):,}")  # type: ignore[arg-type]


def fmt_df(v: object, missing: str = DASH) -> str:
    """Degrees of freedom: whole when whole (``1``), else one decimal (``37.9``)."""
    if is_missing(v):
        return missing
    x = float(v)  # type: ignore[arg-type]
    return fmt_count(x) if x == round(x) else fmt_number(x, 1)


def format_value(value: object, kind: str) -> str:
    """One table cell by the rule for its kind of number.

    Parameters
    ----------
    value : object
        The cell (a number, a flag, a text or missing).
    kind : {"p", "level", "bounded", "count", "df", "number", "text"}
        What the column holds (``analysis.report.tables.column_kind``).

    Returns
    -------
    str
        Flags print as ``yes``/``no``; missing values as the em dash; text as it is.

    Examples
    --------
    >>> format_value(0.05, "p"), format_value(True, "text"), format_value(None, "number")
    ('.050', 'yes', '—')
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind of number {kind!r}; one of {KINDS}")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if is_missing(value):
        return DASH
    if isinstance(value, str) or kind == "text":
        return str(value)
    if kind == "p":
        return fmt_p(value)
    if kind == "level":
        return fmt_bounded(value, 3)
    if kind == "bounded":
        return fmt_bounded(value)
    if kind == "count":
        return fmt_count(value)
    if kind == "df":
        return fmt_df(value)
    return fmt_number(value)
