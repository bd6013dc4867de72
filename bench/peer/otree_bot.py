"""An asynchronous participant for the oTree version of the product-choice study.

The counterpart of :class:`bots_async.AsyncBot` for ``bench/peer/otree_project``: it
arrives through the session-wide link with its Prolific ID as ``participant_label`` (as oTree's
documentation connects Prolific), answers every page over HTTP the way the FrameLab bot does
(correct quiz and attention answers, a random side, a premium drawn as a share of the price,
optional demographics), thinks before each submission with the same exponential think time,
logs every submission the server acknowledged with its redirect, and times every request by
page, so the peer benchmark can audit oTree's database exactly as it audits FrameLab's.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from bots_async import Timing, ms_since

_PAGE = re.compile(r"^/p/[^/]+/[^/]+/(?P<page>[A-Za-z]+)/\d+$")
_ROUND = re.compile(r"Product (\d+) of")


@dataclass(frozen=True)
class OTreeAck:
    """A submission oTree acknowledged by redirecting to the next page."""

    external_id: str
    page: str
    round: int
    answer: dict[str, str]
    kind: str = ""  # the page in FrameLab's words, for shared tables


@dataclass
class OTreeResult:
    external_id: str
    outcome: str  # completed | error
    final_url: str
    pages: int
    error: str | None = None


@dataclass
class OTreeBot:
    """One simulated participant of the oTree study.

    Parameters
    ----------
    client : httpx.AsyncClient
        Its own client (its own cookies), with ``base_url`` set to the server.
    join_path : str
        The session-wide link, ``/join/<anonymous code>``.
    study : Mapping
        FrameLab's study definition (the same file the oTree app reads its texts from).
    external_id : str
        The Prolific ID it arrives with.
    rng : random.Random
    think_s : float
        Mean (exponential) think time before each submission; 0 for none.
    """

    client: httpx.AsyncClient
    join_path: str
    study: dict[str, Any]
    external_id: str
    rng: random.Random
    think_s: float = 0.0
    acks: list[OTreeAck] = field(default_factory=list)
    timings: list[Timing] = field(default_factory=list)
    recoveries: int = 0

    async def _request(self, method: str, url: str, page: str, **kw: Any) -> httpx.Response:
        route = f"{method} page:{page.lower()}" if page else f"{method} entry"
        t0 = time.perf_counter()
        try:
            response = await self.client.request(method, url, **kw)
        except httpx.HTTPError as exc:
            self.timings.append(Timing(route, 0, ms_since(t0), type(exc).__name__))
            raise
        self.timings.append(Timing(route, response.status_code, ms_since(t0)))
        return response

    async def _follow(self, response: httpx.Response) -> httpx.Response:
        while response.status_code in (301, 302, 303, 307):
            target = response.headers["location"]
            response = await self._request("GET", target, _page_of(target))
        return response

    def _answer(self, page: str, html: str) -> dict[str, str]:
        blocks = {b["id"]: b for b in self.study["tasks"]}
        if page == "Quiz":
            return {q["id"]: q["correct"] for q in blocks["quiz"]["questions"]}
        if page == "Choice":
            return {"side": self.rng.choice(["left", "right"])}
        if page == "Wtp":
            return {"premium": f"{max(0.0, self.rng.gauss(8.0, 4.0)):.2f}"}
        if page == "Attention":
            q = blocks["attention"]["questions"][0]
            return {q["id"]: q["correct"]}
        if page == "Demographics":
            shopping = next(q for q in blocks["demographics"]["questions"] if q["id"] == "shopping")
            return {
                "age": str(self.rng.randint(18, 80)),
                "shopping": self.rng.choice(shopping["options"]),
            }
        return {}

    async def arun(self, max_pages: int = 200) -> OTreeResult:
        """Take part from the link to the last page; never raises."""
        url = f"{self.join_path}?participant_label={self.external_id}"
        pages, round_ = 0, 1
        try:
            response = await self._follow(await self._request("GET", url, ""))
            while pages < max_pages:
                path = urlsplit(str(response.url)).path
                page = _page_of(path)
                if response.status_code != 200 or not page:
                    return OTreeResult(
                        self.external_id, "error", path, pages, f"status {response.status_code}"
                    )
                if page == "Finished":
                    return OTreeResult(self.external_id, "completed", path, pages)
                answer = self._answer(page, response.text)
                # Round-1 pages come before the first pair, last-round pages after the last.
                round_ = _round_of(page, response.text) or round_
                if self.think_s > 0:
                    await asyncio.sleep(self.rng.expovariate(1 / self.think_s))
                posted = await self._request("POST", path, page, data=answer)
                if posted.status_code not in (302, 303):
                    return OTreeResult(
                        self.external_id, "error", path, pages, f"POST {page}: {posted.status_code}"
                    )
                self.acks.append(
                    OTreeAck(self.external_id, page, round_, answer, _KINDS.get(page, page.lower()))
                )
                pages += 1
                response = await self._follow(posted)
            return OTreeResult(self.external_id, "error", "", pages, "too many pages")
        except Exception as exc:  # report it; the other bots go on
            return OTreeResult(self.external_id, "error", "", pages, repr(exc))


_KINDS = {"Choice": "choice", "Wtp": "wtp", "Quiz": "quiz"}


def _page_of(path: str) -> str:
    m = _PAGE.match(urlsplit(path).path)
    return m.group("page") if m else ""


def _round_of(page: str, html: str) -> int:
    """The round a pair page shows (its title says "Product R of 10"); 0 on other pages."""
    if page in ("Choice", "Wtp"):
        m = _ROUND.search(html)
        if m:
            return int(m.group(1))
    return 0
