"""Simulated time for bots and tests: the app's ``CLOCK`` and the bots' think time in one object.

With the system clock a bot's duration is however long the machine took to serve its pages
(tenths of a second, longer under load), so a rule on durations (the too-fast exclusion) would
depend on machine load. A :class:`SimulatedClock` given to the app (``create_app({"CLOCK":
clock})``) and to the bots moves only when a bot spends its scripted think time, so every
timestamp the server records is exact and repeatable.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class SimulatedClock:
    """Time that passes only when someone sleeps on it.

    Calling the clock returns the current simulated time (UTC, timezone-aware);
    :meth:`sleep` moves it on instead of waiting. One clock serves every thread: with bots
    running concurrently each one's duration includes the others' think time, as on a real
    clock; with one bot at a time it is exactly its own.

    Examples
    --------
    >>> clock = SimulatedClock(datetime(2025, 1, 1, tzinfo=UTC))
    >>> clock.sleep(90)
    >>> clock().isoformat()
    '2025-01-01T00:01:30+00:00'
    """

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime.now(UTC)
        if start.tzinfo is None:
            raise ValueError("the clock's start must be timezone-aware (UTC)")
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` (at least 0) without waiting."""
        if seconds < 0:
            raise ValueError(f"cannot sleep a negative time ({seconds} s)")
        with self._lock:
            self._now += timedelta(seconds=seconds)
