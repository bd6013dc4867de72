"""Scripted participants that drive the real pages, in-process or over HTTP (as oTree's bots do).

A bot reads each page's HTML, finds the form and the page kind (``data-page`` on ``<main>``),
answers by its script and posts the form back, CSRF token and page token included. It knows the
study definition (to find the target manufacturer and the quiz answers) but nothing the server
does not send it. Tests use :meth:`Bot.must_fail` for submissions that must be refused.
A bot given the server's ``SECRET_KEY`` (``framelab bots`` always gives it) arrives as a test
participant (:mod:`webapp.services.testmark`); without it, as a real one would (for tests).

Pages are parsed by :mod:`webapp.bot_pages`.
"""

from __future__ import annotations

import functools
import hashlib
import random
import secrets
import ssl
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

from webapp.bot_pages import Page, parse_page
from webapp.definition import StudyDefinition, TaskBlock

# Seconds a bot on a simulated clock spends on a page that reports no response time.
PAGE_S = 5.0


class SubmissionDidNotFail(AssertionError):
    """A submission that should have been refused was accepted."""


class Transport(Protocol):
    """Sends one request without following redirects."""

    def request(
        self, method: str, url: str, data: Mapping[str, str] | None
    ) -> tuple[int, str | None, str]:
        """Return ``(status, location header, body text)``."""
        ...


class FlaskTransport:
    """In-process requests through Flask's test client (cookies kept per bot)."""

    host = "localhost"

    def __init__(self, app: Any, remote_addr: str | None = None) -> None:
        self.client = app.test_client()
        # The client address the app sees (Werkzeug's test default is 127.0.0.1): tests of
        # per-client limits give bots their own or a shared one.
        self.environ = {"REMOTE_ADDR": remote_addr} if remote_addr else {}

    def request(
        self, method: str, url: str, data: Mapping[str, str] | None
    ) -> tuple[int, str | None, str]:
        """Send one request."""
        resp = self.client.open(
            url, method=method, data=dict(data or {}), environ_base=self.environ
        )
        return resp.status_code, resp.headers.get("Location"), resp.get_data(as_text=True)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every bot's HTTP client.

    httpx builds a new context (loading the CA bundle, about 30 ms of CPU) for each client by
    default; a thousand bots arriving in a minute then spent half of their event loop on it,
    which showed up as latency of the server.
    """
    return ssl.create_default_context()


class HttpTransport:
    """Requests to a running server through httpx (cookies kept per bot).

    ``keepalive_s`` stays below gunicorn's default keep-alive timeout (2 s), as in
    ``AsyncHttpTransport`` of ``bench/bots_async.py``: with httpx's default (5 s) a bot that paused
    for 2–5 s reused a connection the server had just closed and its request failed with
    "Server disconnected without sending a response" (seen in the sentiment concurrency test).
    """

    def __init__(self, base_url: str, timeout: float = 30.0, keepalive_s: float = 1.5) -> None:
        import httpx

        self.host = urlsplit(base_url).netloc
        self.client = httpx.Client(
            base_url=base_url,
            follow_redirects=False,
            timeout=timeout,
            limits=httpx.Limits(keepalive_expiry=keepalive_s),
            verify=tls_context(),
        )

    def request(
        self, method: str, url: str, data: Mapping[str, str] | None
    ) -> tuple[int, str | None, str]:
        """Send one request; once more on a new connection if the server closed it unanswered
        (closed or reset).

        The keep-alive margin above is not enough on a starved machine: the server's clock
        starts when it has sent a response, ours when we have read it, so a bot descheduled
        for half a second still reuses a connection the server has closed (seen once in CI,
        label pages at p99 2.5 s). Browsers send the request again in that case, whatever
        its method (Chromium's ``HttpNetworkTransaction::ShouldResendRequest``); a page
        answer the server did get is refused as already answered, so sending it twice is safe.
        """
        import httpx

        body = dict(data) if data is not None else None
        try:
            resp = self.client.request(method, url, data=body)
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            # Closed unanswered: FIN ("without sending a response"), or RST when the request
            # had reached the server's socket as it closed ("reset by peer", seen in CI).
            if not any(s in str(exc) for s in ("without sending a response", "reset by peer")):
                raise
            resp = self.client.request(method, url, data=body)
        return resp.status_code, resp.headers.get("location"), resp.text

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()


@dataclass(frozen=True)
class BotBehaviour:
    """A bot's script.

    ``p_target`` is the probability of choosing the target manufacturer per format name (any
    format of the block, e.g. ``mitigated:self-debias``; 0.5 for a format it does not name), so
    a run can simulate an effect (e.g. 0.837 from summaries vs 0.523 from originals). The premium is
    drawn as a percent of the other product's price, normal with mean ``wtp_mean_pct`` (plus
    ``wtp_target_shift_pct`` when the target was chosen) and sd ``wtp_sd_pct``, cut at 0.
    """

    platform: str = "prolific"
    fail_quiz: bool = False
    abandon_at: int | None = None  # stop after this many accepted submissions
    p_target: Mapping[str, float] = field(default_factory=lambda: {"original": 0.5, "summary": 0.5})
    wtp_mean_pct: float = 10.0
    wtp_target_shift_pct: float = 0.0
    wtp_sd_pct: float = 5.0
    # Sentiment annotation: probability of labelling an item against its base sentiment.
    p_shift: float = 0.3
    # Summary rating: ratings are drawn around this mean (sd 1), rounded into the scale.
    rating_mean: float = 2.5
    # Pairwise preference: probability of choosing the stimulus set's summary ``a``, and the
    # share of pages on which the bot just takes the summary shown first (a position bias).
    p_choose_a: float = 0.5
    p_position: float = 0.0
    # Seconds to wait before looking again on the page that waits for slots held by newcomers
    # (a person leaves it open; it reloads itself every 20 s).
    wait_s: float = 1.0


def parse_format_effects(specs: Iterable[str]) -> dict[str, float]:
    """Per-format probabilities of choosing the target, from ``FORMAT=P`` texts.

    The format name may hold a colon (``mitigated:self-debias=0.6``): the text is split at
    its last ``=``.

    Examples
    --------
    >>> parse_format_effects(["summary=0.8", "mitigated:self-debias=0.6"])
    {'summary': 0.8, 'mitigated:self-debias': 0.6}
    """
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, value = spec.rpartition("=")
        try:
            p = float(value)
        except ValueError:
            p = -1.0
        if not sep or not name or not 0.0 <= p <= 1.0:
            raise ValueError(f"{spec!r}: write FORMAT=P with P between 0 and 1, e.g. summary=0.8")
        out[name] = p
    return out


@dataclass
class BotResult:
    """How a bot's session ended."""

    external_id: str
    outcome: str  # completed | screened_out | abandoned | error
    final_url: str
    pages: int
    completion_code: str | None = None
    error: str | None = None
    # Sentiment annotation: (item_id, label) of every label the server accepted.
    labels: list[tuple[str, str]] = field(default_factory=list)
    # Rating / preference pages: (item or pair id, field name, value) of every accepted answer.
    answers: list[tuple[str, str, str]] = field(default_factory=list)


def platform_id(platform: str, external_id: str) -> str:
    """The bot's ID in the platform's own format (the entry page refuses any other).

    An ID already valid is kept in its canonical spelling; any other name (``"w1"``) maps to a
    valid ID derived from it, the same on every call, so two bots built with one name arrive
    as one person.

    Examples
    --------
    >>> platform_id("prolific", "w1") == platform_id("prolific", "w1")
    True
    >>> len(platform_id("prolific", "w1")), platform_id("mturk", "a1worker")
    (24, 'A1WORKER')
    """
    from webapp.models import Platform
    from webapp.services.entry import canonical_id

    kind = Platform(platform)
    valid = canonical_id(kind, external_id)
    if valid is not None:
        return valid
    digest = hashlib.sha256(external_id.encode()).hexdigest()
    return digest[:24] if kind is Platform.prolific else "A" + digest[:13].upper()


class Bot:
    """One simulated participant.

    Parameters
    ----------
    transport : Transport
        :class:`FlaskTransport` or :class:`HttpTransport`.
    definition : StudyDefinition
        The study's definition.
    behaviour : BotBehaviour
    rng : random.Random
        The bot's own randomness (choices, premiums, response times).
    external_id : str
        The platform ID the bot arrives with (a name is mapped to a valid ID).
    test_secret : str, optional
        The server's ``SECRET_KEY``: the bot arrives as a test participant.
    clock : object with ``sleep(seconds)``, optional
        The server's simulated clock (:class:`webapp.clock.SimulatedClock`, in-process runs):
        the bot spends its think time on each page on it (the response time it reports, else
        ``PAGE_S``), so the durations the server records are the script's, not the machine's.
        Without it the bot answers at once and waits on the slot page in real time.
    """

    def __init__(
        self,
        transport: Transport,
        definition: StudyDefinition,
        behaviour: BotBehaviour | None = None,
        *,
        rng: random.Random | None = None,
        external_id: str | None = None,
        test_secret: str | None = None,
        clock: Any = None,
    ) -> None:
        from webapp.services.testmark import reserved_id

        self.clock = clock
        self.transport = transport
        self.definition = definition
        self.behaviour = behaviour or BotBehaviour()
        self.rng = rng or random.Random()
        self.test_secret = test_secret
        mapped = platform_id if test_secret is None else reserved_id
        self.external_id = mapped(
            self.behaviour.platform, external_id or f"BOT{secrets.token_hex(6)}"
        )
        self.page: Page | None = None
        self.submitted = 0
        self.last_chose_target: bool | None = None
        self.history: list[str] = []
        self.labels: list[tuple[str, str]] = []
        self.answers: list[tuple[str, str, str]] = []

    # -- navigation -------------------------------------------------------------------------
    def entry_url(self, extra: Mapping[str, str] | None = None) -> str:
        """The study link for the bot's platform."""
        from webapp.services.testmark import entry_params

        slug = self.definition.slug
        plain_id = self.external_id.replace("-", "")  # session IDs: letters and digits only
        if self.behaviour.platform == "prolific":
            params = {
                "PROLIFIC_PID": self.external_id,
                "STUDY_ID": "BOTSTUDY",
                "SESSION_ID": f"S{plain_id}",
            }
        elif self.behaviour.platform == "mturk":
            params = {
                "workerId": self.external_id,
                "hitId": "BOTHIT",
                "assignmentId": f"A{plain_id}",
                "turkSubmitTo": "https://workersandbox.mturk.com",
            }
        else:
            params = {"participant": self.external_id}
        params.update(
            entry_params(self.test_secret, slug, self.behaviour.platform, self.external_id)
        )
        params.update(extra or {})
        return f"/s/{slug}?{urlencode(params)}"

    def _hop(self, status: int, location: str | None, url: str, text: str) -> str | None:
        """Return the on-site URL to GET next, or ``None`` once ``self.page`` is set."""
        if status in (301, 302, 303, 307, 308) and location:
            parts = urlsplit(location)
            if parts.netloc and parts.netloc != self.transport.host:
                self.page = Page(status, location, "", external=True)
                return None
            return (
                location
                if not parts.netloc
                else (parts.path + ("?" + parts.query if parts.query else ""))
            )
        self.page = parse_page(status, url, text)
        self.history.append(self.page.kind)
        return None

    def _fetch(self, method: str, url: str, data: Mapping[str, str] | None = None) -> Page:
        for _ in range(10):
            status, location, text = self.transport.request(method, url, data)
            next_url = self._hop(status, location, url, text)
            if next_url is None:
                assert self.page is not None
                return self.page
            url, method, data = next_url, "GET", None
        raise RuntimeError("too many redirects")

    def open(self, url: str | None = None) -> Page:
        """GET the study link (or ``url``), following redirects on the site."""
        return self._fetch("GET", url or self.entry_url())

    def reload(self) -> Page:
        """GET the current page's URL again."""
        assert self.page is not None
        return self._fetch("GET", self.page.url)

    def post(self, data: Mapping[str, str], form_index: int = 0) -> Page:
        """POST ``data`` to the current page's form (no automatic fields added)."""
        assert self.page is not None and self.page.forms, "no form on the current page"
        form = self.page.forms[form_index]
        return self._fetch("POST", form.action or self.page.url, data)

    # -- answering ----------------------------------------------------------------------------
    def block(self, page: Page | None = None) -> TaskBlock | None:
        """The study block of ``page`` (default the current one), named by its ``data-block``."""
        page = page or self.page
        block_id = page.main.get("data-block") if page is not None else None
        return self.definition.block(block_id) if block_id is not None else None

    def answer(self) -> dict[str, str]:
        """The form data this bot would submit on the current page: the hidden fields, a
        response time, and what the block's task type answers (``TaskType.bot_answer``)."""
        from webapp.tasks import get_task_type

        page = self.page
        assert page is not None and page.forms
        data = page.forms[0].hidden()
        if "rt_ms" in data:
            data["rt_ms"] = str(self.rng.randint(900, 12_000))  # as rt.js would
        block = self.block()
        if block is not None:
            data.update(get_task_type(block.type).bot_answer(self, page, block))
        return data

    def step(self) -> Page:
        """Answer the current page and return the next one (on a page that waits for a slot:
        wait ``behaviour.wait_s`` and look again, as the page does by itself)."""
        if self.page is not None and self.page.kind == "waiting":
            (self.clock or time).sleep(self.behaviour.wait_s)
            return self.reload()
        before = self.page
        data = self.answer()
        if self.clock is not None:
            self.clock.sleep(int(data["rt_ms"]) / 1000 if "rt_ms" in data else PAGE_S)
        page = self.post(data)
        if page.status < 400 and page.kind not in {"error"} and not page.invalid:
            self.submitted += 1
            block = self.block(before)
            if before is not None and block is not None:
                from webapp.tasks import get_task_type

                get_task_type(block.type).bot_saved(self, before, data)
        return page

    def must_fail(
        self,
        overrides: Mapping[str, str | None],
        *,
        expect_code: str | None = None,
        expect_status: int | None = None,
        expect_invalid: bool = False,
    ) -> Page:
        """Submit the current page with some fields changed (``None`` drops a field).

        The submission must be refused: an error page, or the same page again with a
        message (shown after a redirect, or in place with status 422 when too large to keep).
        Raises :class:`SubmissionDidNotFail` otherwise.
        """
        before = self.page
        assert before is not None
        data = {**self.answer(), **overrides}
        data = {k: v for k, v in data.items() if v is not None}
        page = self.post(data)

        def shown(p: Page) -> dict[str, str]:
            return {k: v for k, v in p.main.items() if k != "data-invalid"}

        same = shown(page) == shown(before)
        if page.status < 400 and page.kind == before.kind and same:
            pass  # redirected to the same page: refused (a validation message, or a replay)
        elif page.status < 400:
            raise SubmissionDidNotFail(
                f"{before.kind} accepted {dict(overrides)}: now on {page.kind} ({page.status})"
            )
        if expect_code is not None and page.error_code != expect_code:
            raise SubmissionDidNotFail(f"expected {expect_code}, got {page.error_code}")
        if expect_status is not None and page.status != expect_status:
            raise SubmissionDidNotFail(f"expected HTTP {expect_status}, got {page.status}")
        if expect_invalid and not page.invalid:
            raise SubmissionDidNotFail(f"expected a validation message, got {page.kind}")
        return page

    def verdict(self, page: Page) -> BotResult | None:
        """Return the result if ``page`` ends the session (or the script stops here)."""
        kind = page.kind
        if kind == "external":
            code = dict(
                p.split("=", 1) for p in urlsplit(page.url).query.split("&") if "=" in p
            ).get("cc")
            return BotResult(self.external_id, "completed", page.url, self.submitted, code)
        if kind in {"completed", "screened_out", "study_full"}:
            code_at = page.text.find('data-completion-code="')
            code = None
            if code_at >= 0:
                start = code_at + len('data-completion-code="')
                code = page.text[start : page.text.find('"', start)]
            return BotResult(self.external_id, kind, page.url, self.submitted, code)
        if page.invalid:  # a validation message: our script answered badly
            return BotResult(
                self.external_id,
                "error",
                page.url,
                self.submitted,
                error=f"validation error on {page.main}",
            )
        if kind in {"error", "unknown"} or page.status >= 400:
            return BotResult(
                self.external_id,
                "error",
                page.url,
                self.submitted,
                error=f"{page.status} {page.error_code or kind}",
            )
        if self.behaviour.abandon_at is not None and self.submitted >= self.behaviour.abandon_at:
            return BotResult(self.external_id, "abandoned", page.url, self.submitted)
        return None

    def run(self, max_pages: int = 500) -> BotResult:
        """Go from the study link to the end (or to ``abandon_at``)."""
        page = self.open()
        for _ in range(max_pages):
            result = self.verdict(page)
            if result is not None:
                result.labels = list(self.labels)
                result.answers = list(self.answers)
                return result
            page = self.step()
        return BotResult(
            self.external_id, "error", page.url, self.submitted, error="too many pages"
        )


@dataclass
class BotRunSummary:
    """Results of :func:`run_bots`."""

    results: list[BotResult]

    @property
    def counts(self) -> dict[str, int]:
        """Bots per outcome."""
        return dict(Counter(r.outcome for r in self.results))

    @property
    def errors(self) -> list[str]:
        """Error messages of bots that ended in an error."""
        return [f"{r.external_id}: {r.error}" for r in self.results if r.outcome == "error"]


def run_bots(
    app: Any | None,
    definition: StudyDefinition,
    *,
    n: int,
    behaviour: BotBehaviour | None = None,
    url: str | None = None,
    concurrency: int = 1,
    fail_quiz_share: float = 0.0,
    abandon_share: float = 0.0,
    seed: int | None = None,
    test_secret: str | None = None,
) -> BotRunSummary:
    """Run ``n`` bots, in-process on ``app`` or over HTTP against ``url``.

    Parameters
    ----------
    app : Flask or None
        The app for in-process runs (ignored when ``url`` is given).
    definition : StudyDefinition
        The study's definition.
    n : int
        Number of bots.
    behaviour : BotBehaviour, optional
        The script shared by all bots.
    url : str, optional
        Base URL of a running server. In-process bots share ``app``'s ``CLOCK`` when it is
        set (:class:`webapp.clock.SimulatedClock`): they spend their think time on it.
    concurrency : int
        Bots running at once (threads).
    fail_quiz_share, abandon_share : float
        Shares of bots that fail the quiz or abandon at a random page.
    seed : int, optional
        Makes the bots' own choices reproducible.
    test_secret : str, optional
        As for :class:`Bot`.

    Returns
    -------
    BotRunSummary
    """
    import dataclasses

    base = behaviour or BotBehaviour()
    master = random.Random(seed)
    run_id = f"{master.getrandbits(32):08x}"
    indices = list(range(n))
    failing = set(master.sample(indices, round(n * fail_quiz_share)))
    rest = [i for i in indices if i not in failing]
    abandoning = set(master.sample(rest, min(len(rest), round(n * abandon_share))))
    seeds = [master.getrandbits(32) for _ in indices]

    def one(i: int) -> BotResult:
        script = dataclasses.replace(
            base,
            fail_quiz=i in failing,
            abandon_at=random.Random(seeds[i]).randint(2, 12) if i in abandoning else None,
        )
        transport: Any = HttpTransport(url) if url else FlaskTransport(app)
        bot = Bot(
            transport,
            definition,
            script,
            rng=random.Random(seeds[i]),
            external_id=f"BOT{run_id}x{i:05d}",
            test_secret=test_secret,
            clock=None if url else app.config.get("CLOCK"),
        )
        try:
            return bot.run()
        except Exception as exc:  # report, do not stop the other bots
            return BotResult(bot.external_id, "error", "", bot.submitted, error=repr(exc))
        finally:
            if isinstance(transport, HttpTransport):
                transport.close()

    # Threads even for concurrency 1: each bot's requests then get their own app contexts
    # instead of sharing the caller's (e.g. the CLI's) database session.
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(one, indices))
    return BotRunSummary(results)
