"""Polite article fetching and main-text extraction.

Politeness, as a crawler of other people's servers owes it:

- robots.txt is read once per host (``urllib.robotparser``) and obeyed for our user agent,
  on every redirect hop too; per RFC 9309 a robots.txt answering 4xx allows everything and one
  that cannot be fetched (5xx, network error) disallows everything;
- one request per host at a time, at least ``delay`` seconds apart (or the host's
  ``Crawl-delay``), several hosts in parallel;
- a user agent naming the project and a contact URL, a size cap read as a stream, at most
  ``max_redirects`` redirects, only ``http``/``https``, only HTML.

Safety, because the URLs come from outside (:mod:`analysis.news.outbound`): every hop's host must
be a trusted outlet (or a subdomain of one) and resolve to public addresses only, the connection
goes to the address that was checked, and ``timeout`` bounds the whole fetch (robots.txt and
every hop together), not each read.

Text is decoded by the charset the server declares, else by trafilatura's own detection (the
``<meta charset>`` and charset_normalizer), so Latin-1 or Windows-1252 pages are not mangled.
Main text and the page's metadata come from trafilatura. A page that cannot be used says why
in ``fetch_status``; its record keeps the API description.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from urllib.robotparser import RobotFileParser

import httpx

from analysis.news.outbound import DEADLINE, DestinationRefused, OutboundPolicy, guarded_client

DEFAULT_USER_AGENT = "FrameLab-NewsLens/0.1 (+https://github.com/framelab/framelab; research)"
ROBOTS_AGENT = "FrameLab-NewsLens"

# The fetch_status of a page fetched and extracted (docs/newslens.md lists the others).
STATUS_OK = "ok"

# Phrases of paywall and consent stubs; a short page carrying one is reported as paywalled.
PAYWALL_CUES = (
    "subscribe to continue",
    "subscribe to read",
    "subscribers only",
    "for subscribers",
    "create a free account",
    "sign in to continue",
    "log in to continue",
    "already a subscriber",
    "start your subscription",
    "this content is available",
)


@dataclass(frozen=True)
class FetchOptions:
    """How pages are fetched and what counts as an article.

    Attributes
    ----------
    user_agent : str
        Sent with every request; names the project.
    timeout : float
        Seconds one page may take in all: robots.txt, every redirect hop, connecting, reading
        (waits between requests to a host are not counted).
    max_bytes : int
        Pages larger than this are abandoned (``too_large``).
    max_redirects : int
        Redirect hops followed.
    delay : float
        Minimum seconds between two requests to one host (a larger ``Crawl-delay`` wins).
    workers : int
        Hosts fetched in parallel (one request per host at a time whatever this is).
    min_words : int
        Main text shorter than this is a stub (``too_short`` or ``paywalled``).
    lead_words : int
        The scraped description is the article's opening paragraphs up to about this many words.
    """

    user_agent: str = DEFAULT_USER_AGENT
    timeout: float = 20.0
    max_bytes: int = 5_000_000
    max_redirects: int = 5
    delay: float = 1.0
    workers: int = 4
    min_words: int = 60
    lead_words: int = 80


@dataclass
class Page:
    """What fetching and extracting one URL gave."""

    url: str
    final_url: str | None = None
    http_status: int | None = None
    fetch_status: str = "not_fetched"
    fetch_reason: str | None = None
    encoding: str | None = None
    article_text: str | None = None
    webscraped_description: str | None = None
    page_description: str | None = None
    n_words: int = 0

    def fields(self) -> dict[str, Any]:
        """The dataset columns of this page."""
        return {
            "final_url": self.final_url,
            "http_status": self.http_status,
            "fetch_status": self.fetch_status,
            "fetch_reason": self.fetch_reason,
            "encoding": self.encoding,
            "article_text": self.article_text,
            "webscraped_description": self.webscraped_description,
            "page_description": self.page_description,
            "n_words": self.n_words,
        }


class _TooLarge(Exception):
    pass


class _Budget:
    """Network seconds left to one page fetch, shared by its robots.txt and redirect hops."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds

    @contextmanager
    def spend(self) -> Iterator[float]:
        """Time one request; yield its deadline (a :func:`time.monotonic` time)."""
        started = time.monotonic()
        try:
            yield started + self.left
        finally:
            self.left -= time.monotonic() - started


class PoliteFetcher:
    """Fetch pages politely (robots.txt, one request per host, caps) and extract their text.

    Parameters
    ----------
    options : FetchOptions
        Limits and manners.
    policy : OutboundPolicy
        The trusted outlets; every request goes through its checks (there is no way around
        them: tests name loopback ports in the policy instead of swapping the transport).
    clock, sleep : callable
        Monotonic time and waiting for the politeness delays (tests pass fakes to skip them).
    ssl_context : ssl.SSLContext, optional
        Certificate checks (default: httpx's, with certifi's roots).
    """

    def __init__(
        self,
        options: FetchOptions | None = None,
        *,
        policy: OutboundPolicy,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.options = options or FetchOptions()
        self.policy = policy
        self.clock = clock
        self.sleep = sleep
        # Redirects are followed by hand so each hop is checked against robots.txt and the policy.
        self._client = guarded_client(
            policy,
            timeout=self.options.timeout,
            headers={
                "User-Agent": self.options.user_agent,
                "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1",
            },
            ssl_context=ssl_context,
        )
        self._robots: dict[str, RobotFileParser] = {}
        self._host_locks: dict[str, threading.Lock] = {}
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> PoliteFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- manners ---

    def _host_lock(self, host: str) -> threading.Lock:
        with self._lock:
            return self._host_locks.setdefault(host, threading.Lock())

    def _get(
        self, url: str, host: str, *, stream_cap: int, budget: _Budget
    ) -> tuple[httpx.Response, bytes]:
        """One GET to ``host``, spaced from the previous one, body read up to ``stream_cap``,
        all of it within what is left of ``budget``."""
        robots = self._robots.get(host)
        crawl_delay = robots.crawl_delay(ROBOTS_AGENT) if robots is not None else None
        delay = max(self.options.delay, float(crawl_delay or 0))
        with self._host_lock(host):
            last = self._last.get(host)
            if last is not None:
                wait = last + delay - self.clock()
                if wait > 0:
                    self.sleep(wait)
            try:
                with (
                    budget.spend() as deadline,
                    self._client.stream("GET", url, extensions={DEADLINE: deadline}) as response,
                ):
                    declared = response.headers.get("Content-Length", "")
                    if declared.isdigit() and int(declared) > stream_cap:
                        raise _TooLarge(f"Content-Length {declared} > {stream_cap} bytes")
                    chunks, size = [], 0
                    for chunk in response.iter_bytes():
                        size += len(chunk)
                        if size > stream_cap:
                            raise _TooLarge(f"more than {stream_cap} bytes")
                        chunks.append(chunk)
                    return response, b"".join(chunks)
            finally:
                self._last[host] = self.clock()

    def _robots_for(self, scheme: str, host: str, budget: _Budget) -> RobotFileParser:
        with self._lock:
            cached = self._robots.get(host)
        if cached is not None:
            return cached
        parser = RobotFileParser()
        try:
            response, body = self._get(
                f"{scheme}://{host}/robots.txt", host, stream_cap=500_000, budget=budget
            )
        except (httpx.HTTPError, _TooLarge):
            parser.disallow_all = True  # unreachable: assume complete disallow (RFC 9309 2.3.1.4)
        else:
            if response.status_code >= 500:
                parser.disallow_all = True
            elif response.status_code >= 400:
                parser.allow_all = True  # unavailable: no rules (RFC 9309 2.3.1.3)
            else:
                parser.parse(body.decode("utf-8", errors="replace").splitlines())
        parser.modified()  # marks the rules as read; can_fetch answers False before that
        with self._lock:
            self._robots[host] = parser
        return parser

    # --- one page ---

    def fetch(self, url: str) -> Page:
        """Fetch one article page and extract its main text and lead."""
        page = Page(url)
        budget = _Budget(self.options.timeout)
        current = url
        for _hop in range(self.options.max_redirects + 1):
            try:
                target = self.policy.check_url(current)
                scheme, host = target.scheme, target.netloc.decode("ascii").lower()
                if not self._robots_for(scheme, host, budget).can_fetch(ROBOTS_AGENT, current):
                    reason = f"robots.txt of {host} disallows {current}"
                    return _fail(page, "robots_disallowed", reason)
                response, body = self._get(
                    current, host, stream_cap=self.options.max_bytes, budget=budget
                )
            except DestinationRefused as exc:
                return _fail(page, exc.status, f"{current}: {exc.reason}")
            except _TooLarge as exc:
                return _fail(page, "too_large", str(exc))
            except httpx.TimeoutException as exc:
                reason = f"more than {self.options.timeout:g} s in all ({type(exc).__name__})"
                return _fail(page, "timeout", reason)
            except httpx.HTTPError as exc:
                return _fail(page, "network_error", f"{type(exc).__name__}: {exc}")
            page.http_status = response.status_code
            if response.is_redirect:
                location = response.headers.get("Location")
                if not location:
                    return _fail(
                        page, "http_error", f"redirect {response.status_code} without Location"
                    )
                try:
                    current = str(target.join(location))
                except httpx.InvalidURL as exc:
                    return _fail(page, "bad_url", f"redirect to {location[:200]!r}: {exc}")
                continue
            break
        else:
            return _fail(
                page, "too_many_redirects", f"more than {self.options.max_redirects} redirects"
            )
        page.final_url = current
        if response.status_code != 200:
            return _fail(page, "http_error", f"HTTP {response.status_code}")
        ctype = response.headers.get("Content-Type", "text/html").split(";")[0].strip().lower()
        if ctype not in ("text/html", "application/xhtml+xml", ""):
            return _fail(page, "not_html", f"Content-Type {ctype}")
        html, page.encoding = decode_html(body, response.charset_encoding)
        extract_into(page, html, self.options)
        return page

    def fetch_many(self, urls: Iterable[str]) -> dict[str, Page]:
        """Fetch URLs, hosts in parallel, each host one at a time.

        Returns
        -------
        dict
            URL -> :class:`Page` (each distinct URL fetched once).
        """
        by_host: dict[str, list[str]] = {}
        for url in dict.fromkeys(urls):
            by_host.setdefault(urlsplit(url).netloc.lower(), []).append(url)
        results: dict[str, Page] = {}

        def run_host(host_urls: list[str]) -> None:
            for url in host_urls:
                results[url] = self.fetch(url)

        with ThreadPoolExecutor(max_workers=max(1, self.options.workers)) as pool:
            for future in [pool.submit(run_host, us) for us in by_host.values()]:
                future.result()
        return results


def _fail(page: Page, status: str, reason: str) -> Page:
    page.fetch_status = status
    page.fetch_reason = reason
    return page


def decode_html(body: bytes, declared: str | None) -> tuple[str, str]:
    """Decode a page: the declared charset if Python knows it, else trafilatura's detection.

    Returns
    -------
    tuple
        The text and the encoding used (``detected`` when trafilatura chose).
    """
    if declared:
        try:
            return body.decode(declared), declared.lower()
        except (LookupError, UnicodeDecodeError):
            pass  # a wrong or unknown label: detect instead
    from trafilatura.utils import decode_file

    return decode_file(body), "detected"


def lead_paragraphs(text: str, words: int) -> str:
    """The opening paragraphs of a text up to about ``words`` words (at least one paragraph).

    Examples
    --------
    >>> lead_paragraphs("One two three.\\nFour five.\\nSix.", 4)
    'One two three.\\nFour five.'
    """
    out: list[str] = []
    count = 0
    for para in (p.strip() for p in text.splitlines()):
        if not para:
            continue
        if out and count >= words:
            break
        out.append(para)
        count += len(para.split())
    return "\n".join(out)


def extract_into(page: Page, html: str, options: FetchOptions) -> Page:
    """Extract main text, lead and meta description from ``html`` with trafilatura."""
    import json

    import trafilatura

    raw = trafilatura.extract(
        html,
        url=page.final_url or page.url,
        output_format="json",
        with_metadata=True,
        include_comments=False,
        include_tables=False,
        favor_precision=True,
        # trafilatura's deduplication remembers text across calls: articles sharing a
        # paragraph with an earlier page would lose it.
        deduplicate=False,
    )
    data = json.loads(raw) if raw else {}
    text = (data.get("text") or "").strip()
    title = (data.get("title") or "").strip()
    first, _, rest = text.partition("\n")
    if title and first.strip() == title:
        text = rest.strip()  # the headline, not part of the description
    page.page_description = (data.get("excerpt") or data.get("description") or "").strip() or None
    page.n_words = len(text.split())
    lowered = f"{text} {html[-20000:] if not text else ''}".lower()
    if page.n_words < options.min_words:
        page.article_text = text or None
        if any(cue in lowered for cue in PAYWALL_CUES):
            return _fail(page, "paywalled", f"{page.n_words} words of text with a paywall notice")
        if not text:
            return _fail(page, "no_text", "no main text found")
        return _fail(page, "too_short", f"{page.n_words} words < {options.min_words}")
    page.article_text = text
    page.webscraped_description = lead_paragraphs(text, options.lead_words)
    page.fetch_status = STATUS_OK
    return page
