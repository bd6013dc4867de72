"""Asynchronous bots over HTTP, for the load and fault tests (``bench/loadtest.py``).

An :class:`AsyncBot` is a :class:`webapp.bots.Bot` (same scripts, same HTML parsing) that talks
to a running server through ``httpx.AsyncClient``, logs every submission the server
acknowledged (:class:`Ack`) and times every request by route class (:class:`Timing`), so an
audit can compare the database with what participants were told was saved.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from webapp.bots import Bot, BotBehaviour, BotResult, Page, tls_context

RETRYABLE_STATUSES = frozenset({502, 503, 504})


def route_class(method: str, url: str, kind: str | None = None) -> str:
    """Name the route of a request for latency tables, e.g. ``POST page:choice``.

    ``kind`` is the page kind (of the submitted page for POSTs, of the shown page for GETs).
    """
    parts = urlsplit(url).path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "s":
        name = "entry"
    elif len(parts) == 3 and parts[2] == "start":
        name = "start"
    elif len(parts) == 4 and parts[2] == "p":
        name = "page"
    else:
        name = "other"
    return f"{method} {name}:{kind}" if kind and name == "page" else f"{method} {name}"


@dataclass(frozen=True)
class Ack:
    """A submission the server acknowledged with its redirect: the bots' log for audits."""

    external_id: str
    kind: str  # page kind: consent, quiz, choice, wtp, ...
    block: str | None
    pair: str | None
    page_token: str
    answer: dict[str, str]
    item: str | None = None  # annotation pages: the item labelled


@dataclass(frozen=True)
class Timing:
    """One HTTP request as the bot timed it."""

    route: str
    status: int  # 0: no response (connection refused, reset or timed out)
    ms: float
    error: str = ""  # status 0: the exception's class, e.g. ReadTimeout, RemoteProtocolError


class AsyncHttpTransport:
    """Requests through one ``httpx.AsyncClient`` per bot (its own cookies).

    ``keepalive_s`` must stay below the server's keep-alive timeout (gunicorn: 2 s by
    default): otherwise a bot that thought for longer reuses a connection the server is just
    closing, and its POST fails with "server disconnected" (httpx does not retry it).
    """

    def __init__(self, base_url: str, timeout: float = 30.0, keepalive_s: float = 1.5) -> None:
        import httpx

        self.host = urlsplit(base_url).netloc
        self.client = httpx.AsyncClient(
            base_url=base_url,
            follow_redirects=False,
            timeout=timeout,
            limits=httpx.Limits(keepalive_expiry=keepalive_s),
            verify=tls_context(),
        )

    async def request(
        self, method: str, url: str, data: Mapping[str, str] | None
    ) -> tuple[int, str | None, str]:
        """Send one request."""
        resp = await self.client.request(method, url, data=dict(data) if data is not None else None)
        return resp.status_code, resp.headers.get("location"), resp.text

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()


class AsyncBot(Bot):
    """A :class:`Bot` (same scripts, same parsing) that awaits its requests and rides out faults.

    A request that gets no response (connection refused or reset, e.g. a killed worker or a
    restarting database proxy) or a retryable status (502/503/504, the friendly "busy" page)
    is not an error: the bot waits, reloads the page it was on (the study link before it has
    one) and answers whatever page the server now shows, as a person pressing reload would.
    It never re-sends a POST blindly, so a submission that was saved before its response was
    lost is not sent twice. Every acknowledged submission goes to :attr:`acks`, every request
    to :attr:`timings`.

    Parameters
    ----------
    transport : AsyncHttpTransport
    definition, behaviour, rng, external_id, test_secret
        As for :class:`Bot`.
    think_s : float
        Mean think time before each submission (exponential); 0 for none.
    retries : int
        Transient failures tolerated in a row before the bot gives up.
    on_ack : callable, optional
        Awaited with each acknowledged submission before the bot goes on (fault tests strike
        from it, while the run is known to be under way).
    """

    def __init__(
        self,
        transport: AsyncHttpTransport,
        definition: Mapping[str, Any],
        behaviour: BotBehaviour | None = None,
        *,
        rng: random.Random | None = None,
        external_id: str | None = None,
        test_secret: str | None = None,
        think_s: float = 0.0,
        retries: int = 30,
        on_ack: Callable[[Ack], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(  # type: ignore[arg-type]
            transport,
            definition,
            behaviour,
            rng=rng,
            external_id=external_id,
            test_secret=test_secret,
        )
        self.atransport = transport
        self.think_s = think_s
        self.retries = retries
        self.on_ack = on_ack
        self.acks: list[Ack] = []
        self.timings: list[Timing] = []
        self.recoveries = 0
        self._resume_url: str | None = None

    async def _afetch(
        self,
        method: str,
        url: str,
        data: Mapping[str, str] | None = None,
        kind: str | None = None,
    ) -> tuple[Page, int]:
        """Like ``_fetch``; also return the first response's status (a redirect = saved)."""
        import time

        first = None
        for _ in range(10):
            t0 = time.perf_counter()
            try:
                status, location, text = await self.atransport.request(method, url, data)
            except Exception as exc:
                route = route_class(method, url, kind)
                self.timings.append(Timing(route, 0, ms_since(t0), type(exc).__name__))
                raise
            ms = ms_since(t0)
            first = status if first is None else first
            next_url = self._hop(status, location, url, text)
            if method == "GET" and next_url is None and self.page is not None:
                kind = self.page.kind
            self.timings.append(Timing(route_class(method, url, kind), status, ms))
            if next_url is None:
                assert self.page is not None
                if "/p/" in self.page.url and not self.page.external:
                    self._resume_url = self.page.url
                return self.page, first
            url, method, data, kind = next_url, "GET", None, None
        raise RuntimeError("too many redirects")

    async def aopen(self, url: str | None = None) -> Page:
        """GET the study link (or ``url``)."""
        return (await self._afetch("GET", url or self.entry_url()))[0]

    async def astep(self) -> Page:
        """Answer the current page; log the submission if the server acknowledged it."""
        page = self.page
        assert page is not None and page.forms
        data = self.answer()
        form = page.forms[0]
        new, first = await self._afetch("POST", form.action or page.url, data, kind=page.kind)
        if first in (302, 303) and new.status < 400 and not new.invalid:
            self.submitted += 1
            fields = {k: v for k, v in data.items() if k not in {"csrf_token", "page", "rt_ms"}}
            self.acks.append(
                Ack(
                    self.external_id,
                    page.kind,
                    page.main.get("data-block"),
                    page.main.get("data-pair"),
                    data.get("page", ""),
                    fields,
                    page.main.get("data-item"),
                )
            )
            if self.on_ack is not None:
                await self.on_ack(self.acks[-1])
        return new

    async def _recover(self, attempt: int) -> Page | None:
        """Wait, then reload where the bot was; ``None`` when that failed too."""
        import asyncio

        import httpx

        self.recoveries += 1
        await asyncio.sleep(min(0.2 * 2**attempt, 3.0))
        try:
            page, _ = await self._afetch("GET", self._resume_url or self.entry_url())
        except httpx.TransportError:
            return None
        return None if page.status in RETRYABLE_STATUSES else page

    async def arun(self, max_pages: int = 500) -> BotResult:
        """Go from the study link to the end, riding out transient failures."""
        import asyncio

        import httpx

        page: Page | None = None
        failures = 0
        for _ in range(max_pages + self.retries):
            try:
                if page is None:
                    page = (
                        await self.aopen() if failures == 0 else await self._recover(failures - 1)
                    )
                elif page.status in RETRYABLE_STATUSES:
                    page = await self._recover(failures)
                elif page.kind == "waiting":  # a slot held by newcomers: look again later
                    await asyncio.sleep(self.behaviour.wait_s)
                    page = (await self._afetch("GET", page.url))[0]
                else:
                    result = self.verdict(page)
                    if result is not None:
                        return result
                    if self.think_s > 0:
                        await asyncio.sleep(self.rng.expovariate(1 / self.think_s))
                    page = await self.astep()
            except httpx.TransportError:
                page = None
            if page is None or page.status in RETRYABLE_STATUSES:
                failures += 1
                if failures > self.retries:
                    return BotResult(
                        self.external_id,
                        "error",
                        self._resume_url or "",
                        self.submitted,
                        error=f"gave up after {self.retries} transient failures",
                    )
            else:
                failures = 0
        return BotResult(
            self.external_id,
            "error",
            self._resume_url or "",
            self.submitted,
            error="too many pages",
        )


def ms_since(t0: float) -> float:
    """Milliseconds since ``t0`` (a ``time.perf_counter()`` reading)."""
    import time

    return (time.perf_counter() - t0) * 1000.0
