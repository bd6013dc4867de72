"""The fetcher against hostile answers: internal addresses (directly and at any redirect hop),
untrusted hosts, a server that drips bytes, an endless body; and the store never holding the
text of an internal page."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.news.fetch import FetchOptions, PoliteFetcher
from analysis.news.outbound import OutboundPolicy

from .conftest import API_KEY, api_article, article_html, paragraphs_for

SECRET = "INTERNAL-ONLY-7f3c: the admin console of the collecting machine"


@pytest.fixture
def internal() -> Iterator[dict]:
    """A second loopback server standing for an internal service: it answers everything with
    a long page holding ``SECRET`` and records every request it sees."""
    state: dict[str, Any] = {"hits": []}
    page = article_html("Admin", [SECRET, *paragraphs_for("the admin console")]).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            state["hits"].append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                     daemon=True).start()  # fmt: skip
    state["port"] = server.server_address[1]
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def _fetcher(policy: OutboundPolicy, **options: Any) -> PoliteFetcher:
    return PoliteFetcher(FetchOptions(**{"delay": 0.0, "timeout": 120.0, **options}), policy=policy)


# Every spelling of "this machine" a URL can carry, each trusted as an outlet so that it is the
# address check, not the domain list, that refuses it.
def _internal_urls(port: int) -> list[str]:
    return [
        f"http://127.0.0.1:{port}/admin",
        f"http://localhost:{port}/admin",
        f"http://[::ffff:127.0.0.1]:{port}/admin",
        f"http://[::1]:{port}/admin",
        f"http://2130706433:{port}/admin",  # 127.0.0.1 as one decimal number
        f"http://[2002:7f00:1::]:{port}/admin",  # 6to4 of 127.0.0.1
        f"http://[64:ff9b::7f00:1]:{port}/admin",  # NAT64 of 127.0.0.1
        "http://169.254.169.254/latest/meta-data/",
        "http://10.20.30.40/",
        "http://[fd00::1]/",
    ]


def _trusting_all(port: int, *allowed_ports: int) -> OutboundPolicy:
    hosts = [httpx.URL(u).host for u in _internal_urls(port)]
    return OutboundPolicy(tuple({*hosts, "127.0.0.1", "localhost"}), frozenset(allowed_ports))


def test_an_internal_server_is_refused_by_default_and_never_asked(internal):
    port = internal["port"]
    with _fetcher(_trusting_all(port)) as fetcher:
        for url in _internal_urls(port):
            page = fetcher.fetch(url)
            assert page.fetch_status == "refused_address", (url, page.fetch_reason)
            assert page.article_text is None and page.http_status is None
    assert internal["hits"] == []


def test_the_tests_only_setting_lets_one_loopback_port_through_and_no_mapped_form(internal):
    port = internal["port"]
    with _fetcher(_trusting_all(port, port)) as fetcher:
        assert fetcher.fetch(f"http://127.0.0.1:{port}/admin").fetch_status == "ok"
        mapped = fetcher.fetch(f"http://[::ffff:127.0.0.1]:{port}/admin")
        assert mapped.fetch_status == "refused_address"
        assert "IPv4-mapped" in mapped.fetch_reason
    assert internal["hits"] == ["/robots.txt", "/admin"]


def test_a_redirect_to_an_internal_address_is_refused_at_every_hop(fake_site, internal):
    port = internal["port"]
    targets = _internal_urls(port)
    for i, target in enumerate(targets):
        fake_site.raw(f"/news/{i}", 302, {"Location": target})
    # two hops on the outlet first, then the internal one
    fake_site.raw("/news/chain-a", 301, {"Location": "/news/chain-b"})
    fake_site.raw("/news/chain-b", 302, {"Location": targets[0]})
    with _fetcher(_trusting_all(port, fake_site.port)) as fetcher:
        for i, target in enumerate(targets):
            page = fetcher.fetch(f"http://127.0.0.1:{fake_site.port}/news/{i}")
            assert page.fetch_status == "refused_address", (target, page.fetch_reason)
            assert page.http_status == 302 and page.article_text is None
        chain = fetcher.fetch(f"http://127.0.0.1:{fake_site.port}/news/chain-a")
    assert chain.fetch_status == "refused_address" and chain.article_text is None
    assert internal["hits"] == []


def test_untrusted_hosts_are_refused_directly_and_after_a_redirect(fake_site):
    fake_site.html("/news/a", article_html("A", paragraphs_for("the farm bill")))
    fake_site.raw("/news/away", 302, {"Location": f"http://localhost:{fake_site.port}/news/a"})
    policy = OutboundPolicy(("127.0.0.1",), frozenset({fake_site.port}))
    with _fetcher(policy) as fetcher:
        direct = fetcher.fetch(f"http://localhost:{fake_site.port}/news/a")
        away = fetcher.fetch(f"http://127.0.0.1:{fake_site.port}/news/away")
        ok = fetcher.fetch(f"http://127.0.0.1:{fake_site.port}/news/a")
    assert direct.fetch_status == away.fetch_status == "untrusted_domain"
    assert "localhost is not one of the trusted outlets" in away.fetch_reason
    assert ok.fetch_status == "ok"
    assert all(host == f"127.0.0.1:{fake_site.port}" for host, _ in fake_site.hits)
    assert [p for _, p in fake_site.hits] == ["/robots.txt", "/news/away", "/news/a"]


# --- deadline and size ---


class SlowSite:
    """The port of the dripping server and, per path asked, how its answer ended."""

    def __init__(self) -> None:
        self.port = 0
        self.ends: dict[str, str] = {}
        self.done: dict[str, threading.Event] = {}

    def end(self, path: str) -> str | None:
        """How the answer to ``path`` ended ("cut" by the client or "ran out"), once it has;
        None if nobody asked for ``path``."""
        if path not in self.done:
            return None
        self.done[path].wait()
        return self.ends[path]


@pytest.fixture
def slow_site() -> Iterator[SlowSite]:
    """A server whose answers drip: ``/drip-body`` sends its headers, then one body byte every
    0.25 s; ``/drip-head`` sends the status line and a header that never ends, a byte every
    0.25 s; ``/endless`` an unbounded body without Content-Length. Asked as ``localhost``, its
    robots.txt drips too (as ``127.0.0.1`` there is none). No answer ends by itself, so it is
    "cut" by the client (the work a deadline or a size bound saves) however slow the machine;
    a client that never cuts hangs the test until the suite's timeout fails it."""
    site = SlowSite()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            site.done[self.path] = done = threading.Event()
            site.ends[self.path] = "ran out"
            try:
                host = self.headers.get("Host", "")
                if self.path == "/robots.txt" and host.startswith("localhost"):
                    self._drip_body()
                elif self.path == "/robots.txt":
                    self.send_error(404)
                elif self.path == "/drip-body":
                    self._drip_body()
                elif self.path == "/drip-head":
                    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Pad: "
                    for byte in itertools.chain(head, itertools.repeat(ord("a"))):
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.25)
                elif self.path == "/endless":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    chunk = b"<p>" + b"x" * 65_533
                    while True:
                        self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                site.ends[self.path] = "cut"  # the client gave up, as it should
            finally:
                done.set()

        def _drip_body(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            while True:
                self.wfile.write(b"a")
                self.wfile.flush()
                time.sleep(0.25)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                     daemon=True).start()  # fmt: skip
    site.port = server.server_address[1]
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("path", ["/drip-body", "/drip-head"])
def test_a_dripping_server_is_cut_at_the_overall_deadline(slow_site, path):
    policy = OutboundPolicy(("127.0.0.1",), frozenset({slow_site.port}))
    with _fetcher(policy, timeout=1.5) as fetcher:
        page = fetcher.fetch(f"http://127.0.0.1:{slow_site.port}{path}")
    # Each read comes within 0.25 s, so only a deadline on the whole fetch ends it (before
    # the overall deadline existed, the fetch went on for as long as the server dripped).
    assert page.fetch_status == "timeout", page.fetch_reason
    assert slow_site.end(path) == "cut"


def test_robots_txt_counts_against_the_same_deadline(slow_site):
    policy = OutboundPolicy(("localhost",), frozenset({slow_site.port}))
    with _fetcher(policy, timeout=1.5) as fetcher:
        page = fetcher.fetch(f"http://localhost:{slow_site.port}/drip-body")
    # robots.txt used the whole budget: unreachable, so disallowed (RFC 9309), and no page
    # asked for (a deadline per request would have given the page a budget of its own)
    assert page.fetch_status == "robots_disallowed"
    assert slow_site.end("/robots.txt") == "cut"
    assert slow_site.end("/drip-body") is None


def test_an_endless_body_is_cut_at_the_size_bound(slow_site):
    # (the size bound held before; this guards it under the new transport)
    policy = OutboundPolicy(("127.0.0.1",), frozenset({slow_site.port}))
    with _fetcher(policy, timeout=120.0, max_bytes=300_000) as fetcher:
        page = fetcher.fetch(f"http://127.0.0.1:{slow_site.port}/endless")
    assert page.fetch_status == "too_large" and "more than 300000 bytes" in page.fetch_reason
    assert slow_site.end("/endless") == "cut"


# --- the dataset ---


def test_sync_stores_no_text_of_an_internal_page(fake_newsapi, fake_site, tmp_path):
    """`framelab news sync` with its defaults: NewsAPI names pages on this machine; none is
    fetched, the rows keep the API's description and say why."""
    from framelab.cli import main

    fake_site.html("/news/admin", article_html("Admin", [SECRET, *paragraphs_for("admin")]))
    fake_site.raw("/news/moved", 302, {"Location": f"http://localhost:{fake_site.port}/news/admin"})
    s = f"http://127.0.0.1:{fake_site.port}"
    fake_newsapi.articles = [
        api_article(f"{s}/news/admin", "Politics of the admin console", "2026-03-01T08:00:00Z"),
        api_article(f"{s}/news/moved", "Politics moved elsewhere", "2026-03-01T09:00:00Z"),
        api_article("http://[::ffff:127.0.0.1]:1/x", "Politics, mapped", "2026-03-01T10:00:00Z"),
        api_article("https://www.evil-bbc.co.uk/x", "Politics lookalike", "2026-03-01T11:00:00Z"),
    ]
    domains = tmp_path / "domains.txt"
    domains.write_text("127.0.0.1\nlocalhost\nbbc.co.uk\n", encoding="utf-8")
    dataset = tmp_path / "newslens"
    env = {"NEWSAPI_KEY": API_KEY, "NEWSAPI_URL": fake_newsapi.url}
    result = CliRunner().invoke(
        main, ["news", "sync", "--out", str(dataset), "--date", "2026-03-01", "--domains",
               str(domains), "--delay", "0", "--timeout", "120"], env=env, catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert fake_site.hits == []  # not even robots.txt
    rows = pd.read_parquet(next(dataset.glob("shards/day=*/articles.parquet")))
    status = dict(zip(rows["title"], rows["fetch_status"], strict=True))
    assert status == {
        "Politics of the admin console": "refused_address",
        "Politics moved elsewhere": "refused_address",
        "Politics, mapped": "untrusted_domain",  # the literal is not a listed outlet
        "Politics lookalike": "untrusted_domain",
    }
    assert rows["article_text"].isna().all() and set(rows["description_source"]) == {"api"}
    for path in dataset.rglob("*"):
        if path.is_file():
            assert "INTERNAL-ONLY" not in path.read_bytes().decode("utf-8", "replace"), path
    log = [json.loads(line) for line in next(dataset.glob("logs/*.jsonl")).read_text().splitlines()]
    reasons = [e["reason"] for e in log if e.get("event") == "page"]
    assert any("127.0.0.1 is a loopback address" in r for r in reasons)
