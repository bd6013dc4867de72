"""How long to wait before another attempt at a request that failed: one policy for every
client of the research package (the OpenAI-compatible backend and the NewsAPI collector).

The server's ``Retry-After`` (or ``retry-after-ms``) is honoured when it is usable; otherwise
the wait doubles with each retry up to a cap, less up to ``jitter`` of itself at random, so
that clients failing together do not all come back together.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["Backoff", "retry_after_s"]


def retry_after_s(headers: Mapping[str, str] | None, limit_s: float) -> float | None:
    """The server's ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), if it is a
    wait from 0 to ``limit_s`` seconds.

    Examples
    --------
    >>> retry_after_s({"retry-after-ms": "250"}, 60), retry_after_s({"retry-after": "2"}, 60)
    (0.25, 2.0)
    >>> retry_after_s({"retry-after": "3600"}, 60) is None
    True
    """
    if not headers:
        return None
    value: float | None = None
    try:
        if "retry-after-ms" in headers:
            value = float(headers["retry-after-ms"]) / 1000.0
        elif "retry-after" in headers:
            raw = headers["retry-after"]
            try:
                value = float(raw)
            except ValueError:
                when = email.utils.parsedate_to_datetime(raw)
                value = when.timestamp() - time.time()
    except (TypeError, ValueError):
        return None
    if value is None or not 0 <= value <= limit_s:
        return None
    return value


@dataclass(frozen=True)
class Backoff:
    """Waits before retries: ``first_s`` doubling up to ``max_s``, or the server's Retry-After
    up to ``max_retry_after_s``.

    Examples
    --------
    >>> openai = Backoff(first_s=0.5, max_s=8.0, max_retry_after_s=60.0, jitter=0.25)
    >>> [openai.delay(r, rng=lambda: 0.0) for r in (0, 3, 9)]
    [0.5, 4.0, 8.0]
    >>> Backoff(first_s=2.0, max_s=60.0, max_retry_after_s=300.0).delay(0, {"Retry-After": "0"})
    0.0
    """

    first_s: float
    max_s: float
    max_retry_after_s: float
    jitter: float = 0.0

    def delay(
        self,
        retry: int,
        headers: Mapping[str, str] | None = None,
        rng: Callable[[], float] = random.random,
    ) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        after = retry_after_s(_lower(headers), self.max_retry_after_s)
        if after is not None:
            return after
        return min(self.first_s * 2.0**retry, self.max_s) * (1.0 - self.jitter * rng())


def _lower(headers: Mapping[str, str] | None) -> Mapping[str, str] | None:
    # httpx's headers are case-insensitive already; a plain dict is not.
    return None if headers is None else {k.lower(): v for k, v in headers.items()}
