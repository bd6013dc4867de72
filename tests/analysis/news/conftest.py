"""Loopback stand-ins for the network: a fake NewsAPI and a small news site, both real HTTP.

The fake NewsAPI follows NewsAPI's documentation of ``/v2/everything``
(https://newsapi.org/docs/endpoints/everything, https://newsapi.org/docs/errors): the key in
``X-Api-Key`` or ``apiKey``; ``q`` required (``parametersMissing``); ``pageSize`` 1..100
(``parameterInvalid``); ``domains``, ``from``, ``language``, ``sortBy=publishedAt`` (newest first)
and ``page``; answers ``{"status", "totalResults", "articles"}``; a developer plan's result
ceiling answers HTTP 426 ``maximumResultsReached``; scripted 429 ``rateLimited`` and 5xx answers
test the retries. Its clock (``today``) decides which articles exist yet, so "the next day" is
one assignment.

The news site serves articles wrapped in navigation and footer boilerplate, a paywall stub, a
Windows-1252 page without a charset header, redirects, a robots.txt that disallows
``/private/``, an oversized page and a PDF; it records the requests each host saw and the
largest number in flight at once per host.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

API_KEY = "test-key-0123456789"
NAV = (
    '<header><nav><a href="/">Home</a> | <a href="/politics">Politics</a> | '
    '<a href="/world">World</a> | <a href="/login">Sign in</a></nav></header>'
)
FOOTER = (
    "<footer><p>© 2026 Loopback News. All rights reserved. Terms of use. Privacy policy. "
    "Cookie settings. Contact us. Advertise with us.</p></footer>"
)


def article_html(title: str, paragraphs: list[str], *, charset: str = "utf-8") -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="{charset}">'
        f"<title>{title} - Loopback News</title>"
        f'<meta name="description" content="{paragraphs[0][:80]}"></head><body>{NAV}'
        f'<aside class="sidebar"><h3>Most read</h3><ul><li><a href="/x">Another story</a></li>'
        f'<li><a href="/y">Yet another story</a></li></ul></aside>'
        f"<main><article><h1>{title}</h1>{body}</article></main>{FOOTER}</body></html>"
    )


def paragraphs_for(topic: str) -> list[str]:
    """Three paragraphs of plain news prose (about 90 words) about ``topic``."""
    return [
        f"Lawmakers voted on Tuesday on {topic}, ending weeks of negotiations between the two "
        "parties in the chamber.",
        f"Supporters of {topic} said the measure would help families in every state, while "
        "critics warned about its cost and about how quickly it had been drafted.",
        "The vote followed a long debate in which members of both parties proposed changes, "
        "most of which were rejected before the final count was announced late in the evening.",
    ]


@dataclass
class FakeNewsAPI:
    """State of the fake NewsAPI: its articles, clock, plan ceiling and scripted failures."""

    articles: list[dict[str, Any]] = field(default_factory=list)
    today: str = "2026-03-01"
    max_results: int = 100
    fail_next: list[tuple[int, str]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def answer(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, dict]:
        self.requests.append({"path": path, "query": dict(query), "headers": dict(headers)})
        if path != "/v2/everything":
            return 404, {"status": "error", "code": "notFound", "message": path}
        if self.fail_next:
            status, code = self.fail_next.pop(0)
            return status, {"status": "error", "code": code, "message": f"scripted {code}"}
        key = headers.get("x-api-key") or query.get("apiKey")
        if not key:
            return 401, {"status": "error", "code": "apiKeyMissing", "message": "no key"}
        if key != API_KEY:
            return 401, {"status": "error", "code": "apiKeyInvalid", "message": "bad key"}
        if not query.get("q"):
            return 400, {"status": "error", "code": "parametersMissing", "message": "q"}
        size, page = int(query.get("pageSize", 100)), int(query.get("page", 1))
        if not 1 <= size <= 100 or page < 1:
            return 400, {"status": "error", "code": "parameterInvalid", "message": "pageSize"}
        if page * size > max(self.max_results, size):
            return 426, {
                "status": "error",
                "code": "maximumResultsReached",
                "message": f"Developer accounts are limited to {self.max_results} results.",
            }
        domains = [d for d in query.get("domains", "").split(",") if d]
        start = query.get("from", "0000")
        found = [
            a
            for a in self.articles
            if a["publishedAt"][:10] <= self.today
            and a["publishedAt"] >= start
            and (
                # NewsAPI keeps taken-down articles as "[Removed]" placeholders in results
                a["title"] == "[Removed]"
                or (
                    query["q"].lower() in (a["title"] + " " + (a["description"] or "")).lower()
                    and (not domains or any(d in a["url"] for d in domains))
                )
            )
        ]
        found.sort(key=lambda a: a["publishedAt"], reverse=True)
        return 200, {
            "status": "ok",
            "totalResults": len(found),
            "articles": found[(page - 1) * size : page * size],
        }


@dataclass
class FakeSite:
    """The news site: pages by path, and what each host saw."""

    pages: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    hits: list[tuple[str, str]] = field(default_factory=list)
    in_flight: dict[str, int] = field(default_factory=dict)
    max_in_flight: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    def html(self, path: str, text: str, *, charset: str | None = "utf-8") -> None:
        ctype = "text/html" + (f"; charset={charset}" if charset else "")
        self.pages[path] = (200, {"Content-Type": ctype}, text.encode(charset or "utf-8"))

    def raw(self, path: str, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.pages[path] = (status, headers, body)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback servers must be reached directly, whatever proxy the machine sets."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def _serve(handler_cls: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fake_newsapi() -> Iterator[FakeNewsAPI]:
    """A fake NewsAPI on a loopback port; ``.url`` is its base URL."""
    state = FakeNewsAPI()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, body = state.answer(parts.path, query, headers)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            if status == 429:
                self.send_header("Retry-After", "0")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    for server in _serve(Handler):
        state.url = f"http://127.0.0.1:{server.server_address[1]}"
        yield state


@pytest.fixture
def fake_site() -> Iterator[FakeSite]:
    """The loopback news site, reachable as ``127.0.0.1`` and ``localhost`` (two hosts)."""
    site = FakeSite()
    site.raw(
        "/robots.txt",
        200,
        {"Content-Type": "text/plain"},
        b"User-agent: *\nDisallow: /private/\n",
    )

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            host = self.headers.get("Host", "")
            with site.lock:
                site.hits.append((host, self.path))
                site.in_flight[host] = site.in_flight.get(host, 0) + 1
                site.max_in_flight[host] = max(
                    site.max_in_flight.get(host, 0), site.in_flight[host]
                )
            done = False

            def leave() -> None:
                # Before the response's last bytes: once the client has them it may send the
                # next request, which must not find this one still counted (a loaded machine
                # can run it before this thread gets back to a later decrement).
                nonlocal done
                if not done:
                    done = True
                    with site.lock:
                        site.in_flight[host] -= 1

            try:
                time.sleep(0.01)  # long enough for overlapping requests to show
                status, headers, body = site.pages.get(
                    urlsplit(self.path).path,
                    (404, {"Content-Type": "text/html"}, b"<html><body>Not found</body></html>"),
                )
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                leave()
                self.end_headers()  # the buffered status line and headers go out here
                self.wfile.write(body)
            finally:
                leave()

    for server in _serve(Handler):
        site.port = server.server_address[1]
        yield site


def api_article(url: str, title: str, published: str, *, source: str = "Loopback News") -> dict:
    """A NewsAPI article object as the API documents it (description truncated, content cut)."""
    return {
        "source": {"id": None, "name": source},
        "author": "A. Reporter",
        "title": title,
        "description": f"{title}: politics as lawmakers voted on Tuesday…",
        "url": url,
        "urlToImage": None,
        "publishedAt": published,
        "content": f"{title}. Lawmakers voted on Tuesday… [+2048 chars]",
    }
