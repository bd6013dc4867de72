"""The ``openai`` backend: the OpenAI API or any OpenAI-compatible server (e.g. vLLM).

Scale-out beyond one GPU is a vLLM server (tensor parallel, or replicas behind one URL) driven by
this backend with bounded concurrency. Retries with exponential backoff on 429, 5xx, connection
errors and timeouts are the ``openai`` client's own (``max_retries``; it honours ``Retry-After``),
so none is written here.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from analysis.llm.backends.base import Completion, GenerationSettings, Request, item_seed

_DONE = object()


class OpenAIBackend:
    """Chat completions over HTTP, ``concurrency`` requests in flight at a time.

    Parameters
    ----------
    model : str
        The served model name.
    settings : GenerationSettings
        Greedy decoding is sent as ``temperature=0``; ``seed`` is sent too (servers may ignore it).
    base_url : str, optional
        E.g. ``http://gpu-host:8000/v1`` for vLLM; ``None`` for the OpenAI API
        (or ``OPENAI_BASE_URL``).
    api_key_env : str
        Environment variable holding the key. The key is never logged or written to a manifest.
        A local server without authentication works with the variable unset.
    concurrency : int
        Requests in flight at once.
    timeout : float
        Seconds per request attempt before it is retried.
    max_retries : int
        Attempts after the first on 429/5xx/timeouts, with exponential backoff.
    length_param : str
        ``max_tokens`` (vLLM, most servers) or ``max_completion_tokens`` (newer OpenAI models).
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        settings: GenerationSettings | None = None,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 6,
        length_param: str = "max_tokens",
    ) -> None:
        self.model_id = model
        self.settings = settings or GenerationSettings()
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.api_key_env = api_key_env
        self.concurrency = max(1, concurrency)
        self.timeout = timeout
        self.max_retries = max_retries
        self.length_param = length_param
        if not os.environ.get(api_key_env) and self.base_url is None:
            raise ValueError(
                f"the OpenAI API needs a key: set the environment variable {api_key_env} "
                "(or pass --base-url for a server without authentication)"
            )

    def _client(self) -> Any:
        from openai import AsyncOpenAI

        # A server without authentication still needs a non-empty string here.
        key = os.environ.get(self.api_key_env) or "EMPTY"
        return AsyncOpenAI(
            api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=self.max_retries
        )

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
        stays an ordinary loop that stores each result at once. Closing the iterator early stops
        the requests that have not started.
        """
        reqs = list(requests)
        if not reqs:
            return
        results: queue.Queue[Any] = queue.Queue()
        stop = threading.Event()

        def worker() -> None:
            try:
                asyncio.run(self._run_all(reqs, results, stop))
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
                yield item
        finally:
            stop.set()
            thread.join()

    async def _run_all(
        self, reqs: list[Request], results: queue.Queue[Any], stop: threading.Event
    ) -> None:
        import openai

        client = self._client()
        gate = asyncio.Semaphore(self.concurrency)
        params = self._params()

        async def one(req: Request) -> None:
            async with gate:
                if stop.is_set():
                    return
                # A sampled request carries its own seed (from the run seed and its key), so the
                # server can reproduce it whatever the order requests arrive in or a resume.
                seed = item_seed(self.settings.seed, req.key) if self.settings.do_sample else None
                try:
                    resp = await client.chat.completions.create(
                        model=self.model_id,
                        messages=list(req.messages),
                        **({**params, "seed": seed} if seed is not None else params),
                    )
                except openai.APIStatusError as exc:
                    results.put(
                        (req, Completion("", error=f"HTTP {exc.status_code} after retries"))
                    )
                    return
                except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                    results.put((req, Completion("", error=f"{type(exc).__name__} after retries")))
                    return
                choice = resp.choices[0]
                usage = resp.usage
                results.put(
                    (
                        req,
                        Completion(
                            choice.message.content or "",
                            usage.prompt_tokens if usage else None,
                            usage.completion_tokens if usage else None,
                            extra={"finish_reason": choice.finish_reason},
                        ),
                    )
                )

        try:
            await asyncio.gather(*(one(r) for r in reqs))
        finally:
            await client.close()

    def info(self) -> dict[str, Any]:
        """Describe server and limits for the manifest; the key only as set / not set."""
        import openai

        return {
            "backend": self.name,
            "model": self.model_id,
            "base_url": self.base_url or "https://api.openai.com/v1",
            "api_key_env": self.api_key_env,
            "api_key_set": bool(os.environ.get(self.api_key_env)),
            "concurrency": self.concurrency,
            "timeout_s": self.timeout,
            "max_retries": self.max_retries,
            "request_params": self._params(),
            "versions": {"openai": openai.__version__},
        }
