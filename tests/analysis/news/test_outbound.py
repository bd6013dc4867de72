"""The outbound policy on its own: which addresses are public, which hosts are trusted, which
URLs are refused, and that a name is resolved once per connection and TLS still names the host."""

from __future__ import annotations

import http.server
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from analysis.news.fetch import FetchOptions, PoliteFetcher
from analysis.news.outbound import (
    STATUS_BAD_URL,
    STATUS_REFUSED,
    STATUS_UNTRUSTED,
    DestinationRefused,
    OutboundPolicy,
    address_refusal,
    guarded_client,
    host_trusted,
    loopback_ports_from_text,
)

from .conftest import article_html, paragraphs_for

FAST = FetchOptions(delay=0.0, timeout=120.0, max_bytes=200_000)

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"),  # cloud metadata
    ("100.64.0.1", "shared (carrier-grade NAT)"),
    ("0.0.0.0", "'this network'"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("192.0.2.7", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("::ffff:127.0.0.1", "IPv4-mapped address (of 127.0.0.1)"),
    ("::ffff:8.8.8.8", "IPv4-mapped address (of 8.8.8.8)"),  # mapped forms: never, whatever
    ("::127.0.0.1", "IPv4-compatible address (of 127.0.0.1)"),
    ("2002:7f00:1::", "6to4 address embedding 127.0.0.1, a loopback address"),
    ("2002:a9fe:a9fe::1", "6to4 address embedding 169.254.169.254, a link-local address"),
    ("64:ff9b::a00:1", "NAT64 address embedding 10.0.0.1, a private address"),
    ("64:ff9b:1::1", "local-use NAT64"),
    ("2001::1", "Teredo"),
    ("fd12:3456::1", "unique local"),
    ("fec0::1", "site-local"),
    ("fe80::1", "link-local"),
    ("fe80::1%2", "scoped"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("100::1", "discard-only"),
    ("4000::1", "not a global unicast address"),
]
PUBLIC = ["8.8.8.8", "151.101.0.81", "2606:4700::1111", "2a00:1450:4009::200e",
          "2002:808:808::", "64:ff9b::808:808"]  # fmt: skip


@pytest.mark.parametrize(("address", "why"), REFUSED)
def test_internal_addresses_are_refused_with_their_kind(address, why):
    reason = address_refusal(address)
    assert reason is not None and why in reason


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address):
    assert address_refusal(address) is None


def test_trusted_outlets_are_the_domain_and_its_subdomains_never_a_lookalike():
    domains = ("bbc.co.uk", "apnews.com")
    for host in ("bbc.co.uk", "www.bbc.co.uk", "news.BBC.co.uk", "bbc.co.uk.", "apnews.com"):
        assert host_trusted(host, domains), host
    for host in ("evil-bbc.co.uk", "xbbc.co.uk", "bbc.co.uk.evil.com", "co.uk", "apnews.co",
                 "bbc.co.ukk", ""):  # fmt: skip
        assert not host_trusted(host, domains), host
    # an address names itself only: no "subdomains" of an IP literal
    assert host_trusted("127.0.0.1", ["127.0.0.1"])
    assert not host_trusted("x.127.0.0.1", ["127.0.0.1"])
    assert not host_trusted("anything.org", [])  # nothing listed: nothing trusted


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("ftp://bbc.co.uk/x", STATUS_BAD_URL),
        ("file:///etc/passwd", STATUS_BAD_URL),
        ("javascript:alert(1)", STATUS_BAD_URL),
        ("http:///news", STATUS_BAD_URL),
        ("http://user:pw@www.bbc.co.uk/x", STATUS_BAD_URL),
        ("http://evil.com\\@www.bbc.co.uk/x", STATUS_BAD_URL),  # parsers disagree: refused
        ("https://evil-bbc.co.uk/news", STATUS_UNTRUSTED),
        ("https://bbc.co.uk.evil.com/news", STATUS_UNTRUSTED),
        ("http://169.254.169.254/latest/meta-data/", STATUS_UNTRUSTED),
    ],
)
def test_urls_of_the_wrong_form_or_host_are_refused_before_any_connection(url, status):
    policy = OutboundPolicy(("bbc.co.uk",))
    with pytest.raises(DestinationRefused) as caught:
        policy.check_url(url)
    assert caught.value.status == status
    assert policy.check_url("https://www.bbc.co.uk/news/x").host == "www.bbc.co.uk"


def test_the_tests_only_loopback_setting_names_ports_and_nothing_else():
    assert loopback_ports_from_text("") == frozenset()
    assert loopback_ports_from_text("8080, 9090") == {8080, 9090}
    for bad in ("80a", "0", "70000", "-1"):
        with pytest.raises(ValueError, match="not a TCP port"):
            loopback_ports_from_text(bad)
    policy = OutboundPolicy(("localhost",), frozenset({8080}))
    assert policy.vet("127.0.0.1", 8080, timeout=1) and policy.vet("::1", 8080, timeout=1)
    for host, port in (("127.0.0.1", 8081), ("::ffff:127.0.0.1", 8080), ("10.0.0.1", 8080)):
        with pytest.raises(DestinationRefused):
            policy.vet(host, port, timeout=1)


# --- resolution: once per connection, to the checked address; TLS names the host ---


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Names of a test zone resolved by a fake system resolver; every lookup is recorded."""
    zone: dict[str, list[str]] = {}
    calls: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        calls.append(name)
        if name in zone:
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                     (a, port)) for a in zone[name]]  # fmt: skip
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return {"zone": zone, "calls": calls}


def test_a_name_is_resolved_once_per_connection_and_connected_by_its_checked_address(
    fake_site, fake_dns
):
    fake_site.html("/news/a", article_html("A", paragraphs_for("the farm bill")))
    fake_dns["zone"]["news.test"] = ["127.0.0.1"]
    policy = OutboundPolicy(("news.test",), frozenset({fake_site.port}))
    with PoliteFetcher(FAST, policy=policy) as fetcher:
        page = fetcher.fetch(f"http://news.test:{fake_site.port}/news/a")
    assert page.fetch_status == "ok", page.fetch_reason
    # robots.txt and the page: two connections, each resolved the name once; every other
    # lookup was of the checked address itself, so nothing could answer differently in between
    assert fake_site.hits == [(f"news.test:{fake_site.port}", "/robots.txt"),
                              (f"news.test:{fake_site.port}", "/news/a")]  # fmt: skip
    calls = fake_dns["calls"]
    assert calls.count("news.test") == 2
    assert set(calls) - {"news.test"} <= {"127.0.0.1"}


def test_one_internal_answer_refuses_the_name(fake_site, fake_dns):
    fake_site.html("/news/a", article_html("A", paragraphs_for("the farm bill")))
    fake_dns["zone"]["mixed.test"] = ["127.0.0.1", "10.0.0.5"]
    policy = OutboundPolicy(("mixed.test",), frozenset({fake_site.port}))
    with PoliteFetcher(FAST, policy=policy) as fetcher:
        page = fetcher.fetch(f"http://mixed.test:{fake_site.port}/news/a")
    assert page.fetch_status == STATUS_REFUSED
    assert "mixed.test resolves to 10.0.0.5 is a private address" in page.fetch_reason
    assert fake_site.hits == []


@pytest.fixture
def tls_site(tmp_path: Path) -> Iterator[dict]:
    """An HTTPS server on loopback with a certificate for news.test only; records SNI."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    try:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out", str(cert),
             "-days", "2", "-subj", "/CN=news.test", "-addext", "subjectAltName=DNS:news.test"],
            check=True, capture_output=True,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"openssl cannot make a test certificate: {exc}")
    seen: dict = {"sni": [], "hosts": []}
    body = article_html("Secure", paragraphs_for("the secure bill")).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            seen["hosts"].append(self.headers.get("Host"))
            status = 404 if self.path == "/robots.txt" else 200
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: seen["sni"].append(name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.daemon = True
    thread.start()
    client = ssl.create_default_context(cafile=str(cert))
    try:
        yield {"port": server.server_address[1], "seen": seen, "client_context": client}
    finally:
        server.shutdown()
        server.server_close()


def test_tls_names_the_host_while_connecting_to_the_checked_address(tls_site, fake_dns):
    port = tls_site["port"]
    fake_dns["zone"]["news.test"] = ["127.0.0.1"]
    fake_dns["zone"]["other.test"] = ["127.0.0.1"]
    policy = OutboundPolicy(("news.test", "other.test"), frozenset({port}))
    with PoliteFetcher(FAST, policy=policy, ssl_context=tls_site["client_context"]) as fetcher:
        page = fetcher.fetch(f"https://news.test:{port}/news/a")
        assert page.fetch_status == "ok", page.fetch_reason
        assert set(tls_site["seen"]["sni"]) == {"news.test"}
        assert set(tls_site["seen"]["hosts"]) == {f"news.test:{port}"}
    # the certificate is checked against the URL's host, not against the address connected to
    context = tls_site["client_context"]
    with (
        guarded_client(policy, timeout=120.0, ssl_context=context) as client,
        pytest.raises(httpx.ConnectError, match="(?i)certificate|hostname"),
    ):
        client.get(f"https://other.test:{port}/news/a")
    assert f"other.test:{port}" not in tls_site["seen"]["hosts"]
