"""Participants in the study's language: catalogues, the locale of a request, amounts.

The platform's own participant-facing texts are gettext messages (``webapp/translations/``,
Flask-Babel). A study names its language in its YAML (``language: de``); every participant
page of that study is rendered in it, whatever the browser asks for, and the researcher
console stays English. The researcher's own texts (consent, instructions, reviews) are shown
as written.

Block defaults that a study may override (a quiz's heading, the WTP question) are written into
the normalised definition when it is validated, in the study's language
(:func:`default_text`), so a study's stored definition shows what its participants read.

Amounts are written and read in the study's language and currency (``payment.currency``):
``84,50 €`` in a German EUR study, ``$84.50`` in an English USD one.

Compiled catalogues (``.mo``) are build outputs: :func:`compile_catalogues` writes any that
are missing or older than their ``.po`` when the app is created (``make install`` runs
``pybabel compile`` too), so a fresh clone serves every language without a manual step.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import tempfile
from collections.abc import Iterator
from decimal import Decimal
from functools import cache, lru_cache
from pathlib import Path

from babel.numbers import (
    format_currency,
    format_decimal,
    get_currency_name,
    get_currency_symbol,
    get_decimal_symbol,
    get_group_symbol,
)
from babel.support import NullTranslations, Translations
from flask import Flask, g
from flask_babel import Babel, gettext, lazy_gettext, refresh

TRANSLATIONS = Path(__file__).resolve().parent / "translations"
DEFAULT_LANGUAGE = "en"
DOMAIN = "messages"
# The currencies a study may pay and price in (``payment.currency``): those the recruiters
# pay in (Prolific's workspaces: GBP, USD, EUR; MTurk: USD).
CURRENCIES = ("USD", "GBP", "EUR")
DEFAULT_CURRENCY = "USD"

# Jinja's gettext is installed by init_app (below), not by Flask-Babel: Flask-Babel's callables
# resolve the domain, the locale and its cache key on every message, a measurable share of a
# participant page's CPU; ours read the study language's catalogue, loaded once per process.
babel = Babel(configure_jinja=False)

# The language of the study definition being validated (see default_text).
_DEFINITION_LANGUAGE: contextvars.ContextVar[str] = contextvars.ContextVar(
    "definition_language", default=DEFAULT_LANGUAGE
)


def available_languages() -> list[str]:
    """The languages a study may name: English and each catalogue shipped, sorted."""
    shipped = {p.parent.parent.name for p in TRANSLATIONS.glob(f"*/LC_MESSAGES/{DOMAIN}.po")}
    return sorted(shipped | {DEFAULT_LANGUAGE})


def compile_catalogues(directory: Path = TRANSLATIONS) -> list[Path]:
    """Compile every ``.po`` under ``directory`` whose ``.mo`` is missing or older.

    Written to a temporary file and renamed, so processes starting together never read a
    half-written catalogue. Returns the ``.mo`` files written.
    """
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    written = []
    for po in sorted(directory.glob(f"*/LC_MESSAGES/{DOMAIN}.po")):
        mo = po.with_suffix(".mo")
        if mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime:
            continue
        with po.open("rb") as fh:
            catalog = read_po(fh, locale=po.parent.parent.name)
        fd, tmp = tempfile.mkstemp(dir=po.parent, suffix=".mo.tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                write_mo(out, catalog, use_fuzzy=False)
            os.replace(tmp, mo)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(mo)
    return written


def init_app(app: Flask) -> None:
    """Attach Flask-Babel: the locale is the current study's (:func:`use_language`), else en."""
    compile_catalogues()
    babel.init_app(
        app,
        locale_selector=_selected_language,
        default_translation_directories=str(TRANSLATIONS),
        default_domain=DOMAIN,
    )

    app.jinja_env.add_extension("jinja2.ext.i18n")
    app.jinja_env.install_gettext_callables(
        gettext=lambda message: page_translations().gettext(message),
        ngettext=lambda one, many, n: page_translations().ngettext(one, many, n),
        newstyle=True,
    )
    # {% trans %} blocks are extracted and looked up with their whitespace collapsed.
    app.jinja_env.policies["ext.i18n.trimmed"] = True
    app.jinja_env.filters["money"] = lambda value, currency=DEFAULT_CURRENCY: format_money(
        value, _selected_language(), currency
    )

    @app.context_processor
    def _html_lang() -> dict[str, str]:
        return {"html_lang": g.get("framelab_language", DEFAULT_LANGUAGE)}


def _selected_language() -> str:
    return g.get("framelab_language", DEFAULT_LANGUAGE)


def page_translations() -> NullTranslations:
    """The platform's catalogue in the language of this request (see :func:`use_language`)."""
    return _catalogue(g.get("framelab_language", DEFAULT_LANGUAGE))


def form_translations() -> NullTranslations:
    """WTForms' own messages ("Not a valid choice.") in the language of this request.

    Flask-WTF's i18n (``WTF_I18N_ENABLED``, off in :mod:`webapp.config`) would parse WTForms'
    catalogue again on every request; this one is loaded once per process and language.
    """
    return _wtforms_catalogue(g.get("framelab_language", DEFAULT_LANGUAGE))


@cache
def _wtforms_catalogue(language: str) -> NullTranslations:
    from wtforms.i18n import messages_path

    return Translations.load(messages_path(), [language], domain="wtforms")


def use_language(language: str) -> None:
    """Render the rest of this request in ``language`` (a participant page of a study)."""
    if g.get("framelab_language") != language:
        g.framelab_language = language
        refresh()


# -- block defaults, translated when a definition is validated ---------------------------------


@contextlib.contextmanager
def definition_language(language: str) -> Iterator[None]:
    """Have :func:`default_text` translate into ``language`` while a definition is validated."""
    token = _DEFINITION_LANGUAGE.set(language)
    try:
        yield
    finally:
        _DEFINITION_LANGUAGE.reset(token)


@cache
def _catalogue(language: str) -> NullTranslations:
    compile_catalogues()
    return Translations.load(str(TRANSLATIONS), [language], domain=DOMAIN)


def N_(message: str) -> str:  # noqa: N802 - gettext's conventional name for a no-op marker
    """Mark ``message`` for the catalogue where it is defined; :func:`default_text` or
    ``gettext`` translates it where it is used."""
    return message


def default_text(message: str) -> str:
    """``message`` (a default a study may override) in the language being validated."""
    return _catalogue(_DEFINITION_LANGUAGE.get()).gettext(message)


# -- amounts and numbers ----------------------------------------------------------------------


@cache
def money_affixes(language: str, currency: str = DEFAULT_CURRENCY) -> tuple[str, str]:
    """What stands before and after an amount in ``language`` (``("$", "")``, ``("", "€")``)."""
    sample = format_currency(1, currency, locale=language)
    number = format_decimal(1, format="0.00", locale=language)
    before, _, after = sample.partition(number)
    return before.strip(), after.strip()


@lru_cache(maxsize=4096)  # babel formats in about 0.1 ms; a study has few distinct prices
def format_money(value: float | Decimal, language: str, currency: str = DEFAULT_CURRENCY) -> str:
    """An amount as written in ``language``: ``$1,234.50``, ``1.234,50 €``.

    Examples
    --------
    >>> format_money(84.5, "de", "EUR"), format_money(84.5, "en", "GBP")
    ('84,50\xa0€', '£84.50')
    """
    return format_currency(value, currency, locale=language)


def format_cents(amount: int, currency: str = DEFAULT_CURRENCY) -> str:
    """Whole cents (pence) as the console writes them, in English: ``1234`` → ``'€12.34'``."""
    return format_money(Decimal(amount) / 100, DEFAULT_LANGUAGE, currency)


@cache
def currency_name(currency: str, language: str) -> str:
    """The currency's name for amounts in ``language``: ``US dollars``, ``Euro``, ``euros``."""
    return get_currency_name(currency, count=2, locale=language)


@lru_cache(maxsize=4096)
def format_number(value: float | int, language: str) -> str:
    """A number as written in ``language``: ``1,000,000`` or ``1.000.000``."""
    return format_decimal(value, locale=language)


# Messages for amounts a participant typed (evaluated in the page's language).
AMOUNT_DIGITS = lazy_gettext("Please type the amount with the digits 0 to 9, for example 12.50.")
AMOUNT_GROUPED = lazy_gettext(
    "Please type the amount without commas, for example 1000 or 12.50 (use a point for cents)."
)


@cache
def _decimal_symbol(language: str) -> str:
    return get_decimal_symbol(language)


@cache
def group_symbol(language: str) -> str:
    """The thousands separator of ``language`` (``,`` in English, ``.`` in German)."""
    return get_group_symbol(language)


@cache
def _amount_patterns(language: str) -> tuple[re.Pattern[str], ...]:
    dec = re.escape(get_decimal_symbol(language))
    grp = get_group_symbol(language)
    # A group symbol that is a space (fr) is removed with the other spaces before matching.
    grp = re.escape(grp) if grp.strip() else r"(?!)"
    other = re.escape("," if get_decimal_symbol(language) == "." else ".")
    # ASCII digits only: \d would also take "٣" or "３", which float() reads as 3.
    return (
        re.compile(rf"^(\d+({dec}\d{{0,2}})?|{dec}\d{{1,2}})$", re.ASCII),
        re.compile(rf"^\d{{1,3}}({grp}\d{{3}})+({dec}\d{{0,2}})?$", re.ASCII),
        # The other mark with one or two digits after it cannot be a group separator, so
        # "12,50" in English or "12.50" in German is read as the decimal it plainly is.
        re.compile(rf"^\d*{other}\d{{1,2}}$", re.ASCII),
    )


def parse_amount(text: str, language: str, currency: str = DEFAULT_CURRENCY) -> float:
    """Read an amount typed in ``language``: ``"12.50"``, ``"$3"``, ``"12,50"`` (en) or
    ``"12,50"``, ``"12,50 €"``, ``"12.5"`` (de). The currency's symbol may stand before or
    after the number.

    The locale's decimal mark is the norm; the other mark followed by one or two digits is
    read as a decimal too (it cannot be a thousands separator). Thousands separators are
    refused with their own message, since ``"1,000"`` could also be a mistyped decimal.

    Raises
    ------
    ValueError
        With a message meant for the participant, in the request's language.

    Examples
    --------
    >>> parse_amount(" $12.5 ", "en"), parse_amount("12,50", "en")
    (12.5, 12.5)
    >>> parse_amount("12,50 €", "de", "EUR"), parse_amount("£3", "en", "GBP")
    (12.5, 3.0)
    """
    amount, grouped, other = _amount_patterns(language)
    decimal = _decimal_symbol(language)
    cleaned = re.sub(r"\s", "", text)
    for symbol in _symbols(language, currency):
        cleaned = cleaned.removeprefix(symbol).removesuffix(symbol)
    if any(ch.isdigit() or ch.isnumeric() for ch in cleaned if not ch.isascii()):
        raise ValueError(str(AMOUNT_DIGITS))
    if cleaned.startswith("-") and (amount.match(cleaned[1:]) or other.match(cleaned[1:])):
        raise ValueError(
            gettext(
                "Please enter an amount of %(amount)s or more.",
                amount=format_money(0, language, currency),
            )
        )
    if grouped.match(cleaned):
        raise ValueError(str(AMOUNT_GROUPED))
    if other.match(cleaned):
        cleaned = cleaned.replace("," if "," in cleaned else ".", decimal)
    if not amount.match(cleaned):
        raise ValueError(
            gettext(
                "Please enter an amount in %(currency)s, for example 5 or 12.50.",
                currency=currency_name(currency, language),
            )
        )
    return float(cleaned.replace(decimal, "."))


@cache
def _symbols(language: str, currency: str) -> tuple[str, ...]:
    """The marks of ``currency`` a participant may type around an amount, longest first
    (``US$`` before ``$``), without spaces (they are removed before matching)."""
    marks = {*money_affixes(language, currency), get_currency_symbol(currency, language)}
    marks |= {get_currency_symbol(currency, DEFAULT_LANGUAGE), currency}
    return tuple(sorted((re.sub(r"\s", "", m) for m in marks if m.strip()), key=len, reverse=True))
