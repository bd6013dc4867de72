"""Oversized and slow request bodies against a production gunicorn on PostgreSQL.

Usage::

    .venv/bin/python bench/body_flood.py                     # 50 parallel 15 MiB bodies
    .venv/bin/python bench/body_flood.py --slow 40 --nginx   # + 40 slow bodies, bare and via nginx

What one run does (everything on 127.0.0.1, everything it creates is removed at the end):

1. creates a fresh PostgreSQL database, builds it with the migrations and loads the demo
   studies (as ``bench/loadtest.py`` does), and enrols one genuine participant in it;
2. starts gunicorn with ``FRAMELAB_ENV=production`` (``gthread`` workers, the repository's
   ``gunicorn.conf.py``);
3. **quiet**: the genuine participant reloads their page for ``--seconds``; the latency of
   each request and the workers' resident memory (sampled every 50 ms) are recorded;
4. **flood**: the same, while ``--attackers`` clients each send, again and again, a 15 MiB
   ``application/x-www-form-urlencoded`` body of 1.4 million ``k=v`` fields, anonymously, in
   turn to a participant page with a made-up token, the consent form and the console login;
   then the workers' memory once the flood has stopped;
5. **slow** (``--slow N``): N connections each send a login POST's body one byte a second
   (a slowloris-style body) while the participant reloads; with ``--nginx`` and an ``nginx``
   on the PATH, the same again through nginx buffering request bodies in front of gunicorn
   (the deployment ``deploy/nginx/framelab.conf`` describes);
6. prints a summary and writes ``bench/results/body-flood-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    RESULTS,
    ROOT,
    add_pg_url,
    free_port,
    latency,
    run_header,
    stop_group,
    write_result,
)
from loadtest import Gunicorn, demo_app, demo_definition  # noqa: E402

MIB = 1024 * 1024
# The body of the outside review's attack (docs/security.md): 15 MiB of urlencoded "k=v"
# fields (1.4 million of them here).
FLOOD_BODY = b"k=v&" * (15 * MIB // 4)
SLOW_DECLARED = 100_000  # bytes a slow body announces, then sends one a second


def rss_mib(pids: list[int]) -> float:
    """Resident memory of ``pids`` together (MiB), from ``/proc``; vanished ones count 0."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


class RssSampler:
    """Samples the resident memory of the processes ``pids()`` names every 50 ms (a thread)."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids, self.peak, self._stop = pids, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pids()))
            time.sleep(0.05)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _head(host: str, port: int, path: str, length: int) -> bytes:
    """The head of an urlencoded form POST announcing ``length`` bytes of body."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def send_body(host: str, port: int, path: str, body: bytes) -> str:
    """POST ``body`` as urlencoded form over a raw socket; return the status or what went wrong.

    The server may answer and close before the body is sent (that is the point): the status
    line is read whatever the send did.
    """
    try:
        with socket.create_connection((host, port), timeout=60) as sock:
            sock.sendall(_head(host, port, path, len(body)))
            with contextlib.suppress(OSError):
                sock.sendall(body)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            line = sock.makefile("rb").readline()
    except OSError as exc:
        return type(exc).__name__
    parts = line.split()
    return parts[1].decode() if len(parts) > 1 else "no answer"


def flood(host: str, port: int, paths: list[str], attackers: int, seconds: float) -> Counter[str]:
    """``attackers`` threads each send :data:`FLOOD_BODY`, again and again for ``seconds``.

    Returns
    -------
    Counter
        The answers' status codes (or the socket error a request ended in), counted.
    """
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def attack(i: int) -> None:
        n = 0
        while n == 0 or time.monotonic() < deadline:  # each attacker sends at least one
            outcome = send_body(host, port, paths[(i + n) % len(paths)], FLOOD_BODY)
            with lock:
                outcomes[outcome] += 1
            n += 1

    threads = [threading.Thread(target=attack, args=(i,)) for i in range(attackers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


@contextlib.contextmanager
def slow_bodies(host: str, port: int, path: str, n: int) -> Iterator[None]:
    """Hold ``n`` connections that send a POST's body one byte a second while inside."""
    stop = threading.Event()
    head = _head(host, port, path, SLOW_DECLARED)

    def trickle() -> None:
        while not stop.is_set():  # a connection the server closed is opened again
            try:
                with socket.create_connection((host, port), timeout=5) as sock:
                    sock.sendall(head)
                    while not stop.wait(1.0):
                        sock.sendall(b"k")
            except OSError:
                stop.wait(0.2)

    threads = [threading.Thread(target=trickle, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    time.sleep(2.0)  # every connection open and sending before the measurement starts
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)


def reload_page(url: str, seconds: float, timeout: float = 30.0) -> dict[str, Any]:
    """The genuine participant GETs ``url`` again and again for ``seconds``."""
    import httpx

    times: list[float] = []
    statuses: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=timeout) as client:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                status = str(client.get(url).status_code)
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            times.append((time.perf_counter() - started) * 1000)
            statuses[status] += 1
    return {"requests": len(times), "statuses": dict(statuses), **latency(times)}


def enrol(app: Any) -> str:
    """Enrol one participant of the product-choice demo in-process; return their page path."""
    from urllib.parse import urlsplit

    from webapp.bots import Bot, BotBehaviour, FlaskTransport

    definition = demo_definition(app)
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="g1")
    bot.open()
    bot.step()  # consent: now on their first page
    assert bot.page is not None
    return urlsplit(bot.page.url).path


class Nginx:
    """nginx on a free loopback port, buffering request bodies in front of ``upstream``."""

    CONF = """
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
{settings}
    server {{
        listen 127.0.0.1:{port};
        location / {{ proxy_pass http://{upstream}; }}
    }}
}}
"""

    def __init__(self, upstream: str, tmp: Path) -> None:
        self.upstream, self.tmp, self.port = upstream, tmp, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Nginx:
        settings = (ROOT / "deploy" / "nginx" / "body-limits.conf").read_text()
        conf = self.tmp / "nginx.conf"
        conf.write_text(
            self.CONF.format(
                tmp=self.tmp, port=self.port, upstream=self.upstream, settings=settings
            )
        )
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen(
            [nginx, "-p", str(self.tmp), "-c", str(conf), "-g", "daemon off;"],
            start_new_session=True,
        )
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port)):
                return self
            time.sleep(0.05)
        raise RuntimeError("nginx did not start")

    def __exit__(self, *exc: object) -> None:
        stop_group(self.proc)


def _flood_phase(
    host: str,
    port: int,
    page_url: str,
    targets: list[str],
    args: argparse.Namespace,
    pids: Callable[[], list[int]],
) -> dict[str, Any]:
    """The participant reloads their page while the attackers flood ``host:port``."""
    outcomes: Counter[str] = Counter()
    with RssSampler(pids) as rss:
        attack = threading.Thread(
            target=lambda: outcomes.update(flood(host, port, targets, args.attackers, args.seconds))
        )
        attack.start()
        during = reload_page(page_url, args.seconds)
        attack.join()
    time.sleep(2.0)
    return during | {
        "peak_rss_mib": rss.peak,
        "rss_after_mib": rss_mib(pids()),
        "attack_requests": dict(outcomes),
        "targets": ["participant page, made-up token", "consent", "console login"],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the measurements; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attackers", type=int, default=50, help="parallel oversized bodies")
    parser.add_argument("--seconds", type=float, default=20.0, help="each phase's length")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker")
    parser.add_argument("--slow", type=int, default=0, help="slow-body connections (0: skip)")
    parser.add_argument("--nginx", action="store_true", help="measure slow bodies via nginx too")
    add_pg_url(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    env = {"SECRET_KEY": secrets.token_hex(32), "FRAMELAB_ENV": "production"}
    report: dict[str, Any] = {
        **run_header(argv),
        "config": vars(args) | {"out": str(args.out), "worker_class": "gthread"},
    }
    with (
        demo_app(args.pg_url, "framelab_flood", {**env, "FRAMELAB_ENV": "development"}) as (
            db_url,
            app,
            _,
        ),
        tempfile.TemporaryDirectory() as tmp,
    ):
        page = enrol(app)
        slug = page.split("/")[2]
        made_up = f"/s/{slug}/p/{secrets.token_urlsafe(24)}"
        targets = [made_up, f"/s/{slug}/start", "/researcher/login"]
        server_env = {**env, "DATABASE_URL": db_url}
        with Gunicorn(server_env, args.workers, args.threads, Path(tmp)) as g:
            host, port = "127.0.0.1", g.port

            def pids() -> list[int]:
                return g.worker_pids()

            report["rss_start_mib"] = rss_mib(pids())
            with RssSampler(pids) as quiet_rss:
                quiet = reload_page(g.url + page, args.seconds)
            report["quiet"] = quiet | {"peak_rss_mib": quiet_rss.peak}
            report["flood"] = _flood_phase(host, port, g.url + page, targets, args, pids)
            if args.slow:
                with slow_bodies(host, port, "/researcher/login", args.slow):
                    report["slow_bare"] = reload_page(g.url + page, args.seconds, timeout=60)
            if args.nginx and (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
                with Nginx(f"{host}:{port}", Path(tmp)) as proxy:
                    via = f"http://{host}:{proxy.port}"
                    report["nginx_quiet"] = reload_page(via + page, args.seconds)
                    report["nginx_flood"] = _flood_phase(
                        host, proxy.port, via + page, targets, args, pids
                    )
                    if args.slow:
                        with slow_bodies(host, proxy.port, "/researcher/login", args.slow):
                            report["nginx_slow"] = reload_page(via + page, args.seconds, 60)
            report["errors_in_log"] = g.error_log().count("Traceback")
    _print(report, write_result(report, args.out, "body-flood"))
    return 0


def _print(r: dict[str, Any], out: Path) -> None:
    print(f"workers at start: {r['rss_start_mib']} MiB resident")
    for phase in ("quiet", "flood", "slow_bare", "nginx_quiet", "nginx_flood", "nginx_slow"):
        if phase not in r:
            continue
        p = r[phase]
        rss = f", peak RSS {p['peak_rss_mib']} MiB" if "peak_rss_mib" in p else ""
        print(
            f"{phase:<17} participant page: {p['requests']} requests, p50 {p['p50_ms']} ms, "
            f"p99 {p['p99_ms']} ms, max {p['max_ms']} ms, {p['statuses']}{rss}"
        )
    for phase in ("flood", "nginx_flood"):
        if phase in r:
            f = r[phase]
            print(f"after {phase}: {f['rss_after_mib']} MiB; answers: {f['attack_requests']}")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
