"""Replicas of one OpenAI-compatible server: spreading requests, taking a failing one out.

The ``openai`` backend sends each request to the replica with the fewest requests in flight
(:meth:`ReplicaPool.pick`). A replica that cannot be reached (connection refused, reset, or
closed mid-answer) is taken out for a cooldown, doubled on each failure in a row up to
:data:`MAX_COOLDOWN_S`; the first request after the cooldown tries it again, and an answer puts
it back. While every replica is out, requests go to the one whose cooldown ends first, so a
single server is retried as before. Every attempt and its outcome is counted per replica for
the run manifest (:meth:`ReplicaPool.describe`).

Also here: which failures are retried (:func:`retryable_status`), how long to wait before the
next attempt (:func:`retry_delay`), and what a failure was in words (:func:`describe_failure`).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from analysis.retry import Backoff

# The openai client's own backoff: 0.5 s doubling up to 8 s, minus up to a quarter of jitter;
# a Retry-After beyond 60 s is not waited for (the client's limit too): backoff instead.
BACKOFF = Backoff(first_s=0.5, max_s=8.0, max_retry_after_s=60.0, jitter=0.25)
MAX_COOLDOWN_S = 300.0
# 408 request timeout, 409 lock conflict, 429 rate limit: worth another try, as 5xx are.
RETRY_STATUS = frozenset({408, 409, 429})
OPENAI_API = "https://api.openai.com/v1"


def check_base_urls(urls: Sequence[str]) -> tuple[str, ...]:
    """Validate replica URLs: one http(s) URL per value, none twice.

    A comma is refused rather than split: ``--base-url a,b`` used to become one URL that
    answered 404, and a comma can be part of a real URL's path or query.

    Examples
    --------
    >>> check_base_urls(["http://a:8000/v1", "http://b:8000/v1/"])
    ('http://a:8000/v1', 'http://b:8000/v1')
    >>> check_base_urls(["http://a:8000/v1,http://b:8000/v1"])
    Traceback (most recent call last):
    ...
    ValueError: --base-url takes one URL per option, got 'http://a:8000/v1,http://b:8000/v1': \
for several replicas repeat it (--base-url http://a:8000/v1 --base-url http://b:8000/v1)
    """
    seen: list[str] = []
    for raw in urls:
        url = raw.strip().rstrip("/")
        if "," in url:
            raise ValueError(
                f"--base-url takes one URL per option, got {raw!r}: for several replicas repeat "
                "it (--base-url http://a:8000/v1 --base-url http://b:8000/v1)"
            )
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--base-url {raw!r} is not an http(s) URL like http://host:8000/v1")
        if url in seen:
            raise ValueError(f"--base-url {url} is given twice")
        seen.append(url)
    return tuple(seen)


def retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another attempt (408, 409, 429 and 5xx)."""
    return status in RETRY_STATUS or status >= 500


def retry_delay(retry: int, headers: Mapping[str, str] | None = None) -> float:
    """Seconds before retry number ``retry``: the server's Retry-After, else the backoff of the
    openai client (:data:`BACKOFF`)."""
    return BACKOFF.delay(retry, headers)


def connection_cause(exc: BaseException) -> str:
    """Say why a connection failed, from the innermost error with an errno or a message.

    ``openai.APIConnectionError`` says only "Connection error."; the cause chain below it
    holds e.g. ``ConnectionRefusedError(111, ...)``, which reads as "connection refused".
    """
    best = ""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        errno = getattr(current, "errno", None)
        if isinstance(current, OSError) and isinstance(errno, int):
            return os.strerror(errno).lower()
        text = str(current).strip()
        if text and text != "Connection error.":
            best = f"{type(current).__name__}: {text}"
        current = current.__cause__ or current.__context__
    return best or type(exc).__name__


@dataclass
class Replica:
    """One server: its URL, client, requests in flight, cooldown and counts."""

    url: str
    client: Any = None
    in_flight: int = 0
    out_until: float = 0.0  # monotonic time before which it is taken out
    failures_in_row: int = 0
    attempts: int = 0
    succeeded: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    taken_out: int = 0
    last_error: str | None = None

    def describe(self) -> dict[str, Any]:
        """Counts for the manifest."""
        return {
            "url": self.url,
            "attempts": self.attempts,
            "succeeded": self.succeeded,
            "failed": sum(self.failures.values()),
            "failures": dict(self.failures),
            "taken_out": self.taken_out,
            "last_error": self.last_error,
        }


class ReplicaPool:
    """Replicas of one server and which of them are taken out for now.

    Parameters
    ----------
    urls : sequence of str
        Base URLs, one per replica.
    cooldown_s : float
        How long a replica that could not be reached stays out before it is tried again
        (doubled on each failure in a row, at most :data:`MAX_COOLDOWN_S`).
    clock : callable
        Monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        urls: Sequence[str],
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not urls:
            raise ValueError("a replica pool needs at least one URL")
        self.replicas = [Replica(url) for url in urls]
        self.cooldown_s = cooldown_s
        self.clock = clock
        self._turn = 0

    def __len__(self) -> int:
        return len(self.replicas)

    def up(self) -> list[Replica]:
        """Replicas not taken out now."""
        now = self.clock()
        return [r for r in self.replicas if r.out_until <= now]

    def pick(self) -> Replica:
        """The replica for the next attempt: fewest in flight among those up, in turn on ties.

        When every replica is out, the one that comes back first (a single server is thus
        always retried).
        """
        candidates = self.up()
        if not candidates:
            return min(self.replicas, key=lambda r: r.out_until)
        self._turn += 1
        n = len(self.replicas)
        order = {id(r): (i - self._turn) % n for i, r in enumerate(self.replicas)}
        return min(candidates, key=lambda r: (r.in_flight, order[id(r)]))

    def others_up(self, replica: Replica) -> bool:
        """Whether a replica other than ``replica`` is up."""
        return any(r is not replica for r in self.up())

    def begin(self, replica: Replica) -> None:
        """Count an attempt sent to ``replica``."""
        replica.in_flight += 1
        replica.attempts += 1

    def succeeded(self, replica: Replica) -> None:
        """An answer came: the replica is in again."""
        replica.in_flight -= 1
        replica.succeeded += 1
        replica.failures_in_row = 0
        replica.out_until = 0.0

    def failed(self, replica: Replica, cause: str, *, unreachable: bool) -> None:
        """Count a failed attempt; take the replica out when it could not be reached.

        Only with another replica to go to: a lone server is retried with backoff instead. A
        replica tried again after its cooldown that fails again stays out twice as long.
        """
        replica.in_flight -= 1
        replica.failures[cause] += 1
        replica.last_error = cause
        now = self.clock()
        if not unreachable or len(self.replicas) == 1 or replica.out_until > now:
            # Already out: the requests it had in flight fail with it, one cooldown for all.
            return
        replica.failures_in_row += 1
        replica.taken_out += 1
        cooldown = min(self.cooldown_s * 2.0 ** (replica.failures_in_row - 1), MAX_COOLDOWN_S)
        replica.out_until = now + cooldown

    def describe(self) -> list[dict[str, Any]]:
        """Per replica: attempts, answers, failures by cause, times taken out, last error."""
        return [r.describe() for r in self.replicas]


def describe_failure(attempts: Sequence[tuple[str, str]], *, retried: bool, limit: int) -> str:
    """One line saying what failed where: the last cause and URL, and every attempt.

    Examples
    --------
    >>> describe_failure([("http://a/v1", "HTTP 404 Not Found")], retried=False, limit=7)
    'HTTP 404 Not Found from http://a/v1 (not retried)'
    >>> describe_failure(
    ...     [("http://a/v1", "connection refused"), ("http://b/v1", "HTTP 503")] * 2,
    ...     retried=True,
    ...     limit=4,
    ... )
    'HTTP 503 from http://b/v1 after 4 of 4 attempts (2 x connection refused at http://a/v1; \
2 x HTTP 503 at http://b/v1)'
    """
    url, cause = attempts[-1]

    def each(tries: Sequence[tuple[str, str]]) -> str:
        return "; ".join(f"{n} x {c} at {u}" for (u, c), n in Counter(tries).items())

    if not retried:
        earlier = f"; before it {each(attempts[:-1])}" if len(attempts) > 1 else ""
        return f"{cause} from {url} (not retried{earlier})"
    return f"{cause} from {url} after {len(attempts)} of {limit} attempts ({each(attempts)})"
