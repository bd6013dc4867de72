"""Memory of the ``openai`` backend over many requests: bounded workers vs one task per request.

A loopback stub of an OpenAI-compatible server (a separate process, so the client's figures are
its own) answers every chat completion at once with a fixed reply and counts the requests it
holds at the same time. The client reads N requests from a generator and stores nothing, so
what grows with N is the backend's own bookkeeping:

- ``bounded`` (the backend): ``--concurrency`` workers take requests one at a time;
- ``all-at-once`` (what the backend did before): a coroutine per request gathered up front,
  a semaphore letting ``--concurrency`` of them send, the ``openai`` client's own retries.

It prints and writes (``--out``) the process's peak resident memory (``VmHWM``, or a larger
resident size sampled) above what it had before the run, the resident memory sampled along the
way, the wall time and the most requests the stub saw in flight.

    python bench/openai_inflight.py --n 200000 --concurrency 64 --mode bounded
    python bench/openai_inflight.py --n 200000 --concurrency 64 --mode all-at-once
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit_json  # noqa: E402

REPLY = json.dumps(
    {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Positive"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
    }
).encode()


def _stub(port_out: Any, stats: Any) -> None:
    """Serve chat completions on loopback (keep-alive HTTP/1.1) until terminated."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                with stats.get_lock():
                    stats[0] += 1  # in flight now
                    stats[1] = max(stats[1], stats[0])
                    stats[2] += 1  # answered
                await asyncio.sleep(0)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(REPLY)}\r\n\r\n".encode()
                    + REPLY
                )
                await writer.drain()
                with stats.get_lock():
                    stats[0] -= 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        port_out.value = server.sockets[0].getsockname()[1]
        parent = os.getppid()
        async with server:
            while os.getppid() == parent:  # the bench was killed: do not outlive it
                await asyncio.sleep(1.0)

    asyncio.run(main())


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _requests(n: int) -> Any:
    from analysis.llm.backends.base import Request

    for i in range(n):
        text = f"Statement number {i}: the battery lasts and the screen is clear."
        yield Request(f"item-{i}", ({"role": "user", "content": text},), text)


def run_bounded(url: str, n: int, concurrency: int) -> int:
    """The backend as it is: workers pull requests; results are consumed and dropped."""
    from analysis.llm.backends.base import GenerationSettings
    from analysis.llm.backends.openai_compat import OpenAIBackend

    backend = OpenAIBackend(
        "stub", GenerationSettings(max_new_tokens=4), base_url=url, concurrency=concurrency
    )
    done = 0
    t0 = time.perf_counter()
    for _, completion in backend.generate(_requests(n)):
        if completion.error is not None:
            raise RuntimeError(completion.error)
        done += 1
        if done % 10_000 == 0:
            _progress(done, t0)
    return done


def _progress(done: int, t0: float) -> None:
    rss = _status_kb("VmRSS") / 1024
    print(f"{done} answered, {time.perf_counter() - t0:.0f} s, RSS {rss:.1f} MiB", flush=True)


def run_all_at_once(url: str, n: int, concurrency: int) -> int:
    """One coroutine per request, gathered up front (the former backend's pattern)."""
    from openai import AsyncOpenAI

    async def main() -> int:
        client = AsyncOpenAI(api_key="EMPTY", base_url=url, max_retries=6)
        gate = asyncio.Semaphore(concurrency)
        reqs = list(_requests(n))
        done = 0
        t0 = time.perf_counter()

        async def one(req: Any) -> None:
            nonlocal done
            async with gate:
                await client.chat.completions.create(
                    model="stub", messages=list(req.messages), max_tokens=4, temperature=0.0
                )
                done += 1
                if done % 10_000 == 0:
                    _progress(done, t0)

        try:
            await asyncio.gather(*(one(r) for r in reqs))
        finally:
            await client.close()
        return done

    return asyncio.run(main())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--mode", choices=["bounded", "all-at-once"], default="bounded")
    parser.add_argument("--out", type=Path, help="Write the figures as JSON here.")
    args = parser.parse_args(argv)

    ctx = mp.get_context("spawn")
    port = ctx.Value("i", 0)
    stats = ctx.Array("q", 3)
    stub = ctx.Process(target=_stub, args=(port, stats), daemon=True)
    stub.start()
    while port.value == 0:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port.value}/v1"

    # Import what the run needs first, so the baseline holds the libraries and not the run.
    import openai  # noqa: F401

    import analysis.llm.backends.openai_compat  # noqa: F401

    base_kb = _status_kb("VmRSS")
    samples: list[tuple[float, int]] = []
    finished = threading.Event()
    t0 = time.perf_counter()

    def sample() -> None:
        while not finished.wait(1.0):
            samples.append((round(time.perf_counter() - t0, 1), _status_kb("VmRSS")))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    run = run_bounded if args.mode == "bounded" else run_all_at_once
    done = run(url, args.n, args.concurrency)
    wall = time.perf_counter() - t0
    finished.set()
    sampler.join()
    # The kernel updates VmHWM lazily: it can trail a resident size sampled a moment before.
    peak_kb = max([_status_kb("VmHWM"), _status_kb("VmRSS"), *(kb for _, kb in samples)])
    stub.terminate()
    stub.join()
    result = {
        "mode": args.mode,
        "n": args.n,
        "concurrency": args.concurrency,
        "answered": done,
        "stub_answered": int(stats[2]),
        "stub_max_in_flight": int(stats[1]),
        "wall_s": round(wall, 1),
        "requests_per_s": round(done / wall, 1),
        "rss_before_mib": round(base_kb / 1024, 1),
        "peak_rss_mib": round(peak_kb / 1024, 1),
        "peak_above_before_mib": round((peak_kb - base_kb) / 1024, 1),
        "rss_samples_mib": [
            (t, round(kb / 1024, 1)) for t, kb in samples[:: max(1, len(samples) // 20)]
        ],
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {platform.node()}",
    }
    emit_json(result, args.out)
    return 0 if done == args.n else 1


if __name__ == "__main__":
    sys.exit(main())
