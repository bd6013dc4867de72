"""The load test's bots: the profile-following bound and N async bots over HTTP.

Split from ``bench/loadtest.py`` (which re-exports these names, as the fault tests and the peer
benchmark use them as ``loadtest.run_async_bots`` and so on).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


def pages_per_participant(definition: Any) -> int:
    """Submissions one participant makes in a study: each block's pages, from its task type."""
    from webapp.tasks import get_task_type

    total = 0
    for block in definition.tasks:  # a webapp.definition.StudyDefinition
        task = get_task_type(block.type)
        total += task.n_steps(block) if task is not None else 1
    return total


def profile_bound(
    pages: int,
    think_s: float,
    ramp_s: float,
    n: int = 1,
    per_request_s: float = 2.0,
    service_s: float = 0.05,
) -> float:
    """How long a run of this profile may take before the bound cuts it (seconds).

    The last arrival starts at ``ramp_s``; its think times are ``pages`` exponential draws of
    mean ``think_s``, so their sum is Gamma(pages, think_s): mean ``pages·think_s``, standard
    deviation ``sqrt(pages)·think_s``. Eight standard deviations above the mean leaves well
    under one bot in a million cut by chance (a fixed 900 s bound cut the slowest 23 readers
    of a ramped N = 1,000 run). Each page adds a GET and a POST at ``per_request_s``; and when
    everyone arrives at once the server works through all ``n × 2 × pages`` requests in turn,
    at no less than 1 / ``service_s`` requests per second (20/s: half of what one loaded core
    of this VM served). 60 s covers start-up.

    Examples
    --------
    >>> round(profile_bound(26, 0.0, 0.0))
    167
    >>> profile_bound(26, 5.0, 60.0) > 60 + 26 * 5.0
    True
    >>> profile_bound(26, 0.0, 0.0, n=1000) > 1000 * 2 * 26 / 20
    True
    """
    think = pages * think_s + 8.0 * pages**0.5 * think_s
    queue = n * 2 * pages * service_s
    return 60.0 + ramp_s + think + 2 * pages * per_request_s + queue


@dataclass
class BotRun:
    """What the bots did: their results, acknowledged submissions and request timings."""

    bots: list[Any] = field(default_factory=list)  # AsyncBot
    results: list[Any] = field(default_factory=list)  # BotResult
    wall_s: float = 0.0
    timed_out: bool = False


async def run_async_bots(
    base_url: str,
    groups: list[tuple[Mapping[str, Any], int]],
    *,
    concurrency: int,
    think_ms: float = 0.0,
    ramp_s: float = 0.0,
    timeout_s: float = 900.0,
    seed: int = 0,
    prefix: str = "LOAD",
    run: BotRun | None = None,
    on_ack: Callable[[Any], Awaitable[None]] | None = None,
) -> BotRun:
    """Run bots on several studies at once over HTTP.

    Parameters
    ----------
    base_url : str
        The server (``http://127.0.0.1:PORT``).
    groups : list of (definition, n)
        Study definitions and how many bots each gets.
    concurrency : int
        Bots in a session at the same time.
    think_ms : float
        Mean think time before each submission (0: none).
    ramp_s : float
        Arrivals spread evenly over this many seconds.
    timeout_s : float
        The whole run is cancelled after this long; ``run.timed_out`` then says the bound was
        reached (reported apart from the integrity audit). :func:`profile_bound` gives one
        that follows the profile.
    seed : int
        Seeds each bot's own choices.
    prefix : str
        Start of the bots' platform IDs.
    run : BotRun, optional
        Filled while the bots run (fault tests watch it to strike mid-run).
    on_ack : callable, optional
        Awaited by a bot with each submission the server acknowledged (an ``Ack``), before
        that bot goes on; the other bots run meanwhile.

    Returns
    -------
    BotRun
    """
    from bots_async import AsyncBot, AsyncHttpTransport

    from webapp.bots import BotBehaviour, BotResult

    master = random.Random(seed)
    plan = [(d, i) for d, n in groups for i in range(n)]
    master.shuffle(plan)  # interleave studies
    run = run if run is not None else BotRun()
    gate = asyncio.Semaphore(concurrency)

    async def one(k: int, definition: Any) -> BotResult:
        if ramp_s > 0:
            await asyncio.sleep(ramp_s * k / max(1, len(plan)))
        transport = AsyncHttpTransport(base_url, timeout=120.0)
        bot = AsyncBot(
            transport,
            definition,
            BotBehaviour(platform="prolific"),
            rng=random.Random(master.getrandbits(32) ^ k),
            external_id=f"{prefix}{seed:04d}x{k:05d}",
            think_s=think_ms / 1000.0,
            on_ack=on_ack,
        )
        run.bots.append(bot)
        try:
            async with gate:
                return await bot.arun()
        except Exception as exc:  # report it; the other bots go on
            return BotResult(bot.external_id, "error", "", bot.submitted, error=repr(exc))
        finally:
            await transport.aclose()

    coros = [one(k, d) for k, (d, _) in enumerate(plan)]
    run.results, run.wall_s, cut = await run_within(coros, timeout_s)
    run.timed_out = cut > 0
    return run


async def run_within(coros: Sequence[Awaitable[T]], timeout_s: float) -> tuple[list[T], float, int]:
    """Run ``coros`` at once for at most ``timeout_s`` seconds.

    Returns
    -------
    tuple
        The results of those that finished (in their order), the wall seconds until the last
        finished or the bound cut the rest, and how many the bound cut (cancelled).
    """
    t0 = time.perf_counter()
    tasks = [asyncio.ensure_future(c) for c in coros]
    done, pending = await asyncio.wait(tasks, timeout=timeout_s)
    wall_s = time.perf_counter() - t0
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return [t.result() for t in tasks if t in done and not t.cancelled()], wall_s, len(pending)
