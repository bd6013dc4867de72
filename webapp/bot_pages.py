"""What a bot sees of a page: its kind, its error code and its forms, parsed from the HTML.

The standard library's parser is enough: the pages are ours and simple, and a browser-automation
stack would make in-process bots slow and the base install heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any


@dataclass
class FormSpec:
    """A parsed ``<form>``: where it posts and its fields in document order."""

    action: str
    method: str
    fields: list[dict[str, Any]] = field(default_factory=list)

    def hidden(self) -> dict[str, str]:
        """The hidden inputs (CSRF token, page token, rt_ms, entry parameters)."""
        return {
            f["name"]: f.get("value") or ""
            for f in self.fields
            if f["tag"] == "input" and f.get("type") == "hidden" and f.get("name")
        }

    def radios(self, name: str) -> list[dict[str, Any]]:
        """The radio inputs of one group."""
        return [f for f in self.fields if f.get("type") == "radio" and f.get("name") == name]

    def names(self) -> list[str]:
        """Distinct field names, in order."""
        out: list[str] = []
        for f in self.fields:
            if f.get("name") and f["name"] not in out:
                out.append(f["name"])
        return out


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.main: dict[str, str] = {}
        self.forms: list[FormSpec] = []
        self._in_form = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "main":
            self.main = a
        elif tag == "form":
            self.forms.append(FormSpec(a.get("action", ""), a.get("method", "get").lower()))
            self._in_form = True
        elif self._in_form and tag in {"input", "button", "textarea", "select"}:
            self.forms[-1].fields.append({"tag": tag, **a})

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False


@dataclass
class Page:
    """A response as a bot sees it."""

    status: int
    url: str
    text: str
    external: bool = False  # a redirect left the site (e.g. to Prolific)
    main: dict[str, str] = field(default_factory=dict)
    forms: list[FormSpec] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """The page kind (``data-page``), ``external`` or ``unknown``."""
        if self.external:
            return "external"
        return self.main.get("data-page", "unknown")

    @property
    def error_code(self) -> str | None:
        """The error code of an error page."""
        return self.main.get("data-error-code")

    @property
    def invalid(self) -> bool:
        """True when the page shows a refused submission's messages (after post/redirect/get)."""
        return self.main.get("data-invalid") == "1" or self.status == 422


def parse_page(status: int, url: str, text: str) -> Page:
    """Parse a response body into the :class:`Page` a bot acts on."""
    parser = _PageParser()
    parser.feed(text)
    return Page(status, url, text, main=parser.main, forms=parser.forms)
