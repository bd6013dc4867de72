"""Several app hosts on one PostgreSQL database behind a round-robin proxy, with the load
test's bots and audit.

Usage::

    make multihost                                     # CI size: 3 servers, 40 participants
    .venv/bin/python bench/multihost.py --servers 3 --n 200 --workers 2 --threads 4

What one run does (everything on 127.0.0.1, everything it creates is removed at the end):

1. creates a fresh PostgreSQL database and loads the demo studies (as ``bench/loadtest.py``);
2. starts ``--servers`` separate gunicorn servers on it, each its own process tree with its
   own connection pools, sharing only the database and ``SECRET_KEY`` (as hosts would);
3. starts a loopback HTTP proxy that sends each request to the next server in turn, so one
   participant's consecutive pages are served by different servers (the hardest case for
   anything a server keeps in memory: CSRF cookie, page tokens, caches);
4. runs N product-choice participants as :class:`bots_async.AsyncBot` through the proxy;
5. audits the database against the bots' log (every acknowledged answer stored once with its
   value, no participant twice, balanced sequences) and checks that every server served
   requests.

Exit status 0 only when the audit passes, no request failed and every server took part.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import itertools
import secrets
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_pg_url, interrupt_on_sigterm, latency  # noqa: E402
from loadtest import Gunicorn, demo_app, demo_definition, profile_bound  # noqa: E402
from loadtest_audit import audit  # noqa: E402
from loadtest_bots import run_async_bots  # noqa: E402
from loadtest_cpu import CpuSnapshot, cpu_report  # noqa: E402

# Headers that belong to one connection, not to the request or response (RFC 9110 §7.6.1).
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)


class RoundRobinProxy:
    """A loopback HTTP/1.1 proxy sending each request to the next upstream in turn.

    ``served`` counts the requests each upstream answered; a request an upstream could not
    take (connection refused, reset) gets ``502`` and is counted under ``"failed"``.
    """

    def __init__(self, upstreams: Sequence[tuple[str, int]]) -> None:
        self.upstreams = list(upstreams)
        self.served: Counter[str] = Counter()
        self._next = itertools.cycle(range(len(self.upstreams)))
        self._lock = threading.Lock()
        self._local = threading.local()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # quiet: the bots log every request

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                status, reply_headers, data = proxy.send(self.command, self.path, headers, body)
                self.send_response_only(status)
                for k, v in reply_headers:
                    if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_HEAD = _forward  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def send(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send one request to the next upstream; return its status, headers and body."""
        with self._lock:
            index = next(self._next)
        host, port = self.upstreams[index]
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        for attempt in (1, 2):  # a kept-alive connection the server closed is opened again
            conn = conns.get(index) or http.client.HTTPConnection(host, port, timeout=120)
            conns[index] = conn
            try:
                conn.request(method, path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
            except (ConnectionError, http.client.HTTPException, OSError):
                conn.close()
                conns.pop(index, None)
                if attempt == 2:
                    with self._lock:
                        self.served["failed"] += 1
                    return 502, [("Content-Type", "text/plain")], b"upstream failed"
                continue
            with self._lock:
                self.served[f"{host}:{port}"] += 1
            return reply.status, reply.getheaders(), data
        raise AssertionError("unreachable")

    def __enter__(self) -> RoundRobinProxy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def servers(
    env: dict[str, str], n: int, workers: int, threads: int, logs: Path
) -> Iterator[list[Gunicorn]]:
    """``n`` gunicorn servers of the app, each logging to its own folder."""
    with ExitStack() as stack:
        started = []
        for i in range(n):
            folder = logs / f"server{i}"
            folder.mkdir()
            started.append(stack.enter_context(Gunicorn(env, workers, threads, folder)))
        yield started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=3, help="separate gunicorn servers")
    parser.add_argument("--n", type=int, default=40, help="product-choice participants")
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers per server")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker")
    parser.add_argument("--think-ms", type=float, default=0.0, help="mean think time")
    parser.add_argument("--ramp-s", type=float, default=5.0, help="spread arrivals over seconds")
    parser.add_argument("--seed", type=int, default=0)
    add_pg_url(parser)
    args = parser.parse_args(argv)
    interrupt_on_sigterm()
    env = {"SECRET_KEY": secrets.token_hex(32), "FRAMELAB_ENV": "development", "FLASK_DEBUG": "0"}
    with demo_app(args.pg_url, "framelab_multihost", env) as (db_url, app, _):
        definition = demo_definition(app)
        with tempfile.TemporaryDirectory() as logs:
            server_env = {**env, "DATABASE_URL": db_url}
            with servers(server_env, args.servers, args.workers, args.threads, Path(logs)) as up:
                upstreams = [("127.0.0.1", g.port) for g in up]
                pids = [pid for g in up for pid in g.pids()]
                with RoundRobinProxy(upstreams) as proxy:
                    cpu_before = CpuSnapshot.take(pids)
                    bound = profile_bound(26, args.think_ms / 1000.0, args.ramp_s, n=args.n)
                    run = asyncio.run(
                        run_async_bots(
                            proxy.url,
                            [(definition, args.n)],
                            concurrency=args.n,
                            think_ms=args.think_ms,
                            ramp_s=args.ramp_s,
                            timeout_s=bound,
                            seed=args.seed,
                        )
                    )
                    cpu_after = CpuSnapshot.take(pids)
                served = dict(proxy.served)
        result = audit(app, run)
    outcomes = Counter(r.outcome for r in run.results)
    every_server = all(served.get(f"127.0.0.1:{port}", 0) > 0 for _, port in upstreams)
    timings = [t for b in run.bots for t in b.timings]
    lat = latency(t.ms for t in timings)
    cpu = cpu_report(cpu_before, cpu_after, run.wall_s, len(timings))
    kinds = Counter(t.error or f"HTTP {t.status}" for t in timings if t.status >= 500 or t.error)
    failed_requests = sum(kinds.values())
    print(f"servers: {args.servers} x {args.workers} worker(s) x {args.threads} threads")
    print(f"participants: {args.n}; outcomes: {dict(outcomes)}")
    print(f"requests per server: {served}")
    print(f"failed requests: {failed_requests}; wall: {run.wall_s:.1f} s")
    if kinds:
        print("failed requests by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    print(
        f"latency through the proxy: p50 {lat['p50_ms']} ms, p95 {lat['p95_ms']} ms, "
        f"p99 {lat['p99_ms']} ms, max {lat['max_ms']} ms over {lat['n']} requests; "
        f"{len(timings) / run.wall_s:.0f} requests/s"
    )
    if cpu["ms_per_request"]:
        per = ", ".join(f"{k} {v} ms" for k, v in cpu["ms_per_request"].items())
        # "bots" is this process: the bots and the proxy together.
        print(f"CPU per request: {per} (bots include the proxy); busy {cpu['machine_busy']}")
    print(
        f"audit: {'ok' if result['ok'] else 'FAILED'}; lost {result['lost']}, "
        f"duplicated {result['duplicated']}"
    )
    ok = result["ok"] and not failed_requests and every_server and not run.timed_out
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
