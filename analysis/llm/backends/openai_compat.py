"""The ``openai`` backend: the OpenAI API or any OpenAI-compatible server (e.g. vLLM).

Scale-out beyond one GPU is a vLLM server (tensor parallel) or several replicas, driven by this
backend with bounded concurrency: ``concurrency`` workers take requests from the input one at a
time, so a million prompts never become a million coroutines, and a worker takes the next one
only while fewer than ``2 * concurrency`` are outstanding (in flight, or answered and not yet
stored by the caller). With several base URLs each attempt goes
to the replica with the fewest requests in flight, and one that cannot be reached is taken out
for a cooldown (:mod:`analysis.llm.backends.replicas`). Retries are written here rather than
left to the ``openai`` client, because a retry may go to another replica: 408, 409, 429, 5xx,
timeouts and connection failures are retried with exponential backoff (honouring
``Retry-After``), other statuses are not.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from analysis.llm.backends.base import Completion, GenerationSettings, Request, item_seed
from analysis.llm.backends.replicas import (
    OPENAI_API,
    ReplicaPool,
    check_base_urls,
    connection_cause,
    describe_failure,
    retry_delay,
    retryable_status,
)

_DONE = object()


class _Slots:
    """Outstanding requests between the loop's workers and the caller's thread.

    A worker takes a slot before it reads the next request; the caller gives one back for each
    result it takes, so a caller that stores slowly holds the workers back instead of letting
    answers pile up. ``stop`` (the caller closed the iterator) lets every waiting worker go.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.stopped = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._free: asyncio.Semaphore | None = None

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bind to the running loop (called in it, before the workers start)."""
        self._loop, self._free = loop, asyncio.Semaphore(self.n)

    async def acquire(self) -> bool:
        """Wait for a free slot; ``False`` once stopped."""
        if self._free is None:
            raise RuntimeError("slots used before open()")
        if self.stopped.is_set():
            return False
        await self._free.acquire()
        return not self.stopped.is_set()

    def _call(self, fn: Any) -> None:
        # From the caller's thread; the loop may be gone already, which is fine.
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(fn)

    def release(self) -> None:
        """A result was taken: one slot free (from the caller's thread)."""
        if self._free is not None:
            self._call(self._free.release)

    def stop(self) -> None:
        """Let every worker go (from the caller's thread)."""
        self.stopped.set()
        free = self._free
        if free is not None:
            self._call(lambda: [free.release() for _ in range(self.n)])


class OpenAIBackend:
    """Chat completions over HTTP, at most ``concurrency`` requests in flight at a time.

    Parameters
    ----------
    model : str
        The served model name.
    settings : GenerationSettings
        Greedy decoding is sent as ``temperature=0``; ``seed`` is sent too (servers may ignore it).
    base_url : str or sequence of str, optional
        E.g. ``http://gpu-host:8000/v1`` for vLLM, or several URLs, one per replica of the same
        model; ``None`` for the OpenAI API (or ``OPENAI_BASE_URL``). A comma inside one URL is
        refused (:func:`~analysis.llm.backends.replicas.check_base_urls`).
    api_key_env : str
        Environment variable holding the key. The key is never logged or written to a manifest.
        A local server without authentication works with the variable unset.
    concurrency : int
        Requests in flight at once, over all replicas together.
    timeout : float
        Seconds per request attempt before it is retried.
    max_retries : int
        Attempts after the first on 408/409/429/5xx, timeouts and connection failures, with
        exponential backoff; a connection failure is retried at once on another replica.
    length_param : str
        ``max_tokens`` (vLLM, most servers) or ``max_completion_tokens`` (newer OpenAI models).
    replica_cooldown : float
        Seconds a replica that could not be reached stays out before it is tried again (doubled
        on each failure in a row, at most 300 s). Only with several replicas.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        settings: GenerationSettings | None = None,
        *,
        base_url: str | Sequence[str] | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 6,
        length_param: str = "max_tokens",
        replica_cooldown: float = 30.0,
    ) -> None:
        self.model_id = model
        self.settings = settings or GenerationSettings()
        given = [base_url] if isinstance(base_url, str) else list(base_url or ())
        if not given and os.environ.get("OPENAI_BASE_URL"):
            given = [os.environ["OPENAI_BASE_URL"]]
        self.base_urls = check_base_urls(given)
        self.api_key_env = api_key_env
        self.concurrency = max(1, concurrency)
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.length_param = length_param
        self.replica_cooldown = replica_cooldown
        self._pool: ReplicaPool | None = None
        if not os.environ.get(api_key_env) and not self.base_urls:
            raise ValueError(
                f"the OpenAI API needs a key: set the environment variable {api_key_env} "
                "(or pass --base-url for a server without authentication)"
            )

    @property
    def base_url(self) -> str | None:
        """The first replica's URL (``None`` for the OpenAI API)."""
        return self.base_urls[0] if self.base_urls else None

    def _client(self, base_url: str | None) -> Any:
        from openai import AsyncOpenAI

        # A server without authentication still needs a non-empty string here. The client does
        # not retry: a retry may go to another replica (see the module docstring).
        key = os.environ.get(self.api_key_env) or "EMPTY"
        return AsyncOpenAI(api_key=key, base_url=base_url, timeout=self.timeout, max_retries=0)

    def _params(self) -> dict[str, Any]:
        s = self.settings
        params: dict[str, Any] = {self.length_param: s.max_new_tokens, "seed": s.seed}
        params["temperature"] = (
            (s.temperature if s.temperature is not None else 1.0) if s.do_sample else 0.0
        )
        if s.do_sample and s.top_p is not None:
            params["top_p"] = s.top_p
        return params

    def generate(self, requests: Iterable[Request]) -> Iterator[tuple[Request, Completion]]:
        """Yield completions in the order they finish.

        The asyncio loop runs in a worker thread and hands results over a queue, so the caller
        stays an ordinary loop that stores each result at once. A request is read from the
        input only when fewer than ``2 * concurrency`` are outstanding (in flight, or answered
        and not yet taken by the caller). Closing the iterator early stops the requests that
        have not started.
        """
        it = iter(requests)
        first = next(it, None)
        if first is None:
            return
        results: queue.Queue[Any] = queue.Queue()
        slots = _Slots(2 * self.concurrency)
        pool = ReplicaPool(self.base_urls or [OPENAI_API], self.replica_cooldown)
        self._pool = pool

        def worker() -> None:
            try:
                asyncio.run(self._run_all(itertools.chain([first], it), pool, results, slots))
            except BaseException as exc:  # re-raised in the caller's thread
                results.put(exc)
            finally:
                results.put(_DONE)

        thread = threading.Thread(target=worker, name="openai-backend", daemon=True)
        thread.start()
        try:
            while (item := results.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                slots.release()
                yield item
        finally:
            slots.stop()
            thread.join()

    async def _run_all(
        self,
        reqs: Iterator[Request],
        pool: ReplicaPool,
        results: queue.Queue[Any],
        slots: _Slots,
    ) -> None:
        for replica in pool.replicas:
            replica.client = self._client(replica.url if self.base_urls else None)
        params = self._params()
        slots.open(asyncio.get_running_loop())

        async def work() -> None:
            # One of `concurrency` workers: a request at a time, and only with a free slot.
            while await slots.acquire():
                req = next(reqs, None)
                if req is None:
                    return
                done = await self._one(req, pool, params, slots.stopped)
                if done is None:
                    return
                results.put(done)

        try:
            await asyncio.gather(*(work() for _ in range(self.concurrency)))
        finally:
            for replica in pool.replicas:
                await replica.client.close()

    async def _one(
        self, req: Request, pool: ReplicaPool, params: dict[str, Any], stop: threading.Event
    ) -> tuple[Request, Completion] | None:
        """Answer one request, retrying on this or another replica; ``None`` when stopped."""
        import openai

        # A sampled request carries its own seed (from the run seed and its key), so the
        # server can reproduce it whatever the order requests arrive in or a resume.
        seed = item_seed(self.settings.seed, req.key) if self.settings.do_sample else None
        body = {**params, "seed": seed} if seed is not None else params
        tries: list[tuple[str, str]] = []
        limit = self.max_retries + 1
        for attempt in range(limit):
            if stop.is_set():
                return None
            replica = pool.pick()
            pool.begin(replica)
            delay = 0.0
            try:
                resp = await replica.client.chat.completions.create(
                    model=self.model_id, messages=list(req.messages), **body
                )
            except openai.APIStatusError as exc:
                cause = _status_cause(exc)
                pool.failed(replica, cause, unreachable=False)
                tries.append((replica.url, cause))
                if not retryable_status(exc.status_code):
                    return req, self._failure(tries, retried=False)
                delay = retry_delay(attempt, exc.response.headers)
            except openai.APITimeoutError:
                cause = f"no answer within {self.timeout:g} s"
                pool.failed(replica, cause, unreachable=False)
                tries.append((replica.url, cause))
                delay = retry_delay(attempt)
            except openai.APIConnectionError as exc:
                cause = connection_cause(exc)
                pool.failed(replica, cause, unreachable=True)
                tries.append((replica.url, cause))
                # Another replica answers at once; a lone or last one after a backoff.
                delay = 0.0 if pool.others_up(replica) else retry_delay(attempt)
            else:
                pool.succeeded(replica)
                choice = resp.choices[0]
                usage = resp.usage
                return req, Completion(
                    choice.message.content or "",
                    usage.prompt_tokens if usage else None,
                    usage.completion_tokens if usage else None,
                    extra={"finish_reason": choice.finish_reason},
                )
            if attempt + 1 < limit and delay > 0:
                await asyncio.sleep(delay)
        return req, self._failure(tries, retried=True)

    def _failure(self, tries: list[tuple[str, str]], *, retried: bool) -> Completion:
        return Completion(
            "", error=describe_failure(tries, retried=retried, limit=self.max_retries + 1)
        )

    def info(self) -> dict[str, Any]:
        """Describe server(s) and limits for the manifest; the key only as set / not set.

        ``replicas`` counts, per base URL, the attempts, answers and failures (by cause) of the
        last :meth:`generate` and how often the replica was taken out.
        """
        import openai

        urls = list(self.base_urls) or [OPENAI_API]
        pool = self._pool
        return {
            "backend": self.name,
            "model": self.model_id,
            "base_url": urls[0] if len(urls) == 1 else None,
            "base_urls": urls,
            "api_key_env": self.api_key_env,
            "api_key_set": bool(os.environ.get(self.api_key_env)),
            "concurrency": self.concurrency,
            "timeout_s": self.timeout,
            "max_retries": self.max_retries,
            "replica_cooldown_s": self.replica_cooldown,
            "replicas": pool.describe() if pool is not None else [],
            "request_params": self._params(),
            "versions": {"openai": openai.__version__},
        }


def _status_cause(exc: Any) -> str:
    """``HTTP 404 Not Found: <the server's message>`` (the message cut to 200 characters)."""
    response = exc.response
    reason = getattr(response, "reason_phrase", "") or ""
    text = f"HTTP {exc.status_code}{' ' + reason if reason else ''}"
    message = str(getattr(exc, "message", "") or "").strip()
    return f"{text}: {message[:200]}" if message else text
