"""WTForms fields for the participant pages, rendering the same markup at less CPU.

WTForms writes each attribute of an ``<input>`` as ``Markup('{k}="{v}"').format(k=..., v=...)``,
and ``Markup.format`` runs ``string.Formatter`` in pure Python: on the product-choice study the
inputs of the WTP page and the radio options of the quiz and questionnaires spent 7.5 % of a
request's profiled CPU there (``bench/profile_pages.py --profile``).
``Input.html_params`` is a static method that WTForms lets a widget subclass replace;
:func:`html_params` returns the same string (a property test compares the two) with plain
string operations. The fields below are WTForms' own with these widgets, so a task module
imports them instead of WTForms'.
"""

from __future__ import annotations

from typing import Any

import wtforms
from markupsafe import Markup, escape
from wtforms.widgets.core import clean_key

# The longest number or amount a participant can type or paste (``maxlength``): enough for any
# sane answer, and small enough that a refused page always fits the session for its redirect.
NUMBER_MAX_CHARS = 20


def html_params(**kwargs: Any) -> Markup:
    """WTForms' ``html_params``: attributes sorted by name, ``True`` bare, ``False`` left out,
    ``class_``/``for_`` and ``data_``/``aria_`` names cleaned, values escaped with ``"`` as
    ``&quot;`` (a value already ``Markup`` is not escaped again, as there)."""
    parts = []
    for key, value in sorted(kwargs.items()):
        if value is True:
            parts.append(str(escape(clean_key(key))))
        elif value is not False:
            text = str(escape(value)).replace('"', "&quot;")
            parts.append(f'{escape(clean_key(key))}="{text}"')
    # Every name and value in ``parts`` was escaped above.
    return Markup(" ".join(parts))  # noqa: S704  # nosec B704


class TextInput(wtforms.widgets.TextInput):
    """``<input type="text">`` through :func:`html_params`."""

    html_params = staticmethod(html_params)


class RadioInput(wtforms.widgets.RadioInput):
    """``<input type="radio">`` through :func:`html_params`."""

    html_params = staticmethod(html_params)


class StringField(wtforms.StringField):
    """WTForms' ``StringField`` with :class:`TextInput`."""

    widget = TextInput()


class RadioField(wtforms.RadioField):
    """WTForms' ``RadioField`` whose options render with :class:`RadioInput`."""

    option_widget = RadioInput()
