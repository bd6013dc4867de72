"""Where the article fetcher may connect: public addresses of the trusted outlets only.

Article URLs come from outside: NewsAPI's answers name them and the pages' redirects move them.
Left unchecked, such a URL makes the collecting machine fetch its own services
(``http://127.0.0.1:8080/``, ``http://169.254.169.254/`` cloud metadata, a database on the LAN)
and store what they answer in the dataset. So every request of the fetcher passes two checks:

1. **The URL** (:meth:`OutboundPolicy.check_url`, at every redirect hop, robots.txt included):
   ``http``/``https`` only, no credentials in it, and its host one of the trusted outlets or a
   subdomain of one (``news.bbc.co.uk`` for ``bbc.co.uk``; never ``evil-bbc.co.uk``).
2. **The addresses** (:meth:`OutboundPolicy.vet`, when the connection is opened): the name is
   resolved once, *every* address it resolves to must be public (:func:`address_refusal`), and
   the connection is made to the checked address itself. TLS still names the host (SNI and
   certificate check use the URL's host) and so does the ``Host`` header, because the URL is
   never rewritten: :class:`GuardedTransport` gives httpcore a network backend that resolves,
   checks and connects, so nothing resolves the name a second time between the check and the
   connection (DNS rebinding).

The transport also enforces a **deadline** per request: every connect, TLS handshake, read and
write gets at most the time left, so a server that drips one byte at a time cannot hold a fetch
past its ``--timeout`` (per-read timeouts alone never fire on such a server).

The NewsAPI base URL and LLM server URLs are not checked here: the user chooses them (a vLLM
server on localhost is legitimate). Only URLs that arrive as data are.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

# fetch_status values of refused URLs (docs/newslens.md lists them).
STATUS_BAD_URL = "bad_url"
STATUS_UNTRUSTED = "untrusted_domain"
STATUS_REFUSED = "refused_address"

# The request extension that carries a request's deadline (time.monotonic() seconds).
DEADLINE = "framelab_deadline"

# Environment setting of `framelab news sync` that lets loopback ports through, for tests only.
TEST_LOOPBACK_ENV = "FRAMELAB_TEST_LOOPBACK_PORTS"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class DestinationRefused(Exception):
    """A URL or address the policy refuses; ``status`` is the page's ``fetch_status``."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _nets(pairs: Sequence[tuple[str, str]]) -> tuple[tuple[Any, str], ...]:
    return tuple((ipaddress.ip_network(net), why) for net, why in pairs)


# IANA's special-purpose registries (RFC 6890 and successors): nothing here is a news site.
_V4_REFUSED = _nets(
    [
        ("0.0.0.0/8", "a 'this network' address"),
        ("10.0.0.0/8", "a private address"),
        ("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address"),
        ("172.16.0.0/12", "a private address"),
        ("192.0.0.0/24", "an IETF protocol assignment"),
        ("192.0.2.0/24", "a documentation address"),
        ("192.88.99.0/24", "a 6to4 relay anycast address"),
        ("192.168.0.0/16", "a private address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),  # 255.255.255.255 (broadcast) included
    ]
)
_V6_REFUSED = _nets(
    [
        ("::/128", "the unspecified address"),
        ("::1/128", "the loopback address"),
        # These reach IPv4 hosts through an IPv6 socket: refused whatever they embed, because
        # a public server is never announced that way and the IPv4 rules must not be sidestepped.
        ("::ffff:0:0/96", "an IPv4-mapped address"),
        ("::/96", "an IPv4-compatible address"),
        ("::ffff:0:0:0/96", "an IPv4-translated address"),
        ("64:ff9b:1::/48", "a local-use NAT64 address"),
        ("100::/64", "a discard-only address"),
        ("2001::/23", "an IETF protocol assignment (Teredo, benchmarking, ORCHID)"),
        ("2001:db8::/32", "a documentation address"),
        ("3fff::/20", "a documentation address"),
        ("5f00::/16", "a segment routing (SRv6) address"),
        ("fc00::/7", "a unique local address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a site-local address"),
        ("ff00::/8", "a multicast address"),
    ]
)
# Prefixes that carry an IPv4 address: allowed only when the embedded address is public.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.ip_address("::1")


def _why_not_public(ip: IPAddress) -> str | None:
    if isinstance(ip, ipaddress.IPv4Address):
        for net, why in _V4_REFUSED:
            if ip in net:
                return why
        return None if ip.is_global else "not a public address"
    if ip.scope_id:
        return "a scoped (interface-bound) address"
    for net, why in _V6_REFUSED:
        if ip in net:
            if net.prefixlen == 96:  # the IPv4 forms: name the IPv4 host they reach
                return f"{why} (of {ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)})"
            return why
    if ip in _NAT64 or ip in _SIX_TO_FOUR:
        embedded = ip.sixtofour or ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        inner = _why_not_public(embedded)
        kind = "a 6to4" if ip in _SIX_TO_FOUR else "a NAT64"
        return f"{kind} address embedding {embedded}, {inner}" if inner else None
    return None if ip in _GLOBAL_UNICAST else "not a global unicast address"


def address_refusal(address: str | IPAddress) -> str | None:
    """Why an address is not a public one, or ``None`` when it is.

    Refused: loopback, private, link-local, multicast, unspecified, reserved, documentation and
    benchmarking ranges, shared (CGNAT) 100.64/10, IPv4-mapped, -compatible and -translated
    IPv6, 6to4 and NAT64 addresses embedding one of those, Teredo, IPv6 unique local and
    site-local addresses, anything outside IPv6 global unicast. The table is written out rather
    than left to :attr:`ipaddress.IPv4Address.is_global`, whose answers for IPv6 embeddings
    change between Python versions.

    Examples
    --------
    >>> address_refusal("93.184.215.14") is None
    True
    >>> address_refusal("::ffff:127.0.0.1").endswith("is an IPv4-mapped address (of 127.0.0.1)")
    True
    >>> address_refusal("2002:a00:1::")
    '2002:a00:1:: is a 6to4 address embedding 10.0.0.1, a private address'
    """
    ip = address if not isinstance(address, str) else ipaddress.ip_address(address)
    why = _why_not_public(ip)
    return f"{ip} is {why}" if why else None


def host_trusted(host: str, domains: Iterable[str]) -> bool:
    """Whether ``host`` is one of ``domains`` or a subdomain of one (a lookalike is not).

    Examples
    --------
    >>> [host_trusted(h, ["bbc.co.uk"]) for h in ("www.bbc.co.uk", "BBC.co.uk.", "evil-bbc.co.uk")]
    [True, True, False]
    """
    host = host.lower().rstrip(".")
    for domain in domains:
        domain = domain.lower().rstrip(".")
        if host == domain:
            return True
        # An address has no subdomains: x.127.0.0.1 is a name, not part of 127.0.0.1.
        literal = _ip_or_none(host) is not None or _ip_or_none(domain) is not None
        if domain and not literal and host.endswith("." + domain):
            return True
    return False


def _ip_or_none(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def loopback_ports_from_text(text: str) -> frozenset[int]:
    """Parse the test setting: comma-separated TCP ports (``"8080,8081"``); blank means none.

    Examples
    --------
    >>> sorted(loopback_ports_from_text(" 8080, 8081 "))
    [8080, 8081]
    """
    ports = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or not 0 < int(part) < 65536:
            raise ValueError(f"{TEST_LOOPBACK_ENV}: {part!r} is not a TCP port (1-65535)")
        ports.add(int(part))
    return frozenset(ports)


def _resolve(host: str, port: int, timeout: float) -> list[IPAddress]:
    """The addresses of ``host`` by the system resolver, waiting at most ``timeout`` seconds."""
    answer: dict[str, Any] = {}

    def lookup() -> None:
        try:
            answer["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            answer["error"] = exc

    # getaddrinfo takes no timeout: a daemon thread keeps a slow resolver inside the deadline.
    worker = threading.Thread(target=lookup, name=f"resolve {host}", daemon=True)
    worker.start()
    worker.join(max(timeout, 0.0))
    if worker.is_alive():
        raise httpcore.ConnectTimeout(f"resolving {host} took longer than {timeout:.1f} s")
    if "error" in answer:
        raise httpcore.ConnectError(f"cannot resolve {host}: {answer['error']}")
    out: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in answer["infos"]:
        ip = ipaddress.ip_address(sockaddr[0])
        if ip not in out:
            out.append(ip)
    if not out:
        raise httpcore.ConnectError(f"{host} resolves to no address")
    return out


@dataclass(frozen=True)
class OutboundPolicy:
    """Which URLs and addresses the article fetcher may reach.

    Attributes
    ----------
    trusted_domains : tuple of str
        The outlets (``--domains``); their subdomains are trusted too. Empty trusts nothing.
    loopback_ports : frozenset of int
        **Tests only**: loopback addresses (``127.0.0.0/8``, ``::1``; never their IPv4-mapped
        forms) on these ports are let through, so the fetcher can be tested against a local
        server. Empty by default: every non-public address is refused. ``framelab news sync``
        reads it from ``FRAMELAB_TEST_LOOPBACK_PORTS``.
    """

    trusted_domains: tuple[str, ...]
    loopback_ports: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        ports = frozenset(int(p) for p in self.loopback_ports)
        bad = sorted(p for p in ports if not 0 < p < 65536)
        if bad:
            raise ValueError(f"not TCP ports: {bad}")
        object.__setattr__(self, "trusted_domains", tuple(self.trusted_domains))
        object.__setattr__(self, "loopback_ports", ports)

    def check_url(self, url: str | httpx.URL) -> httpx.URL:
        """The parsed URL if its form and host are allowed; :class:`DestinationRefused` if not."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            reason = f"not a URL: {str(url)[:200]!r} ({exc})"
            raise DestinationRefused(STATUS_BAD_URL, reason) from None
        if parsed.scheme not in ("http", "https") or not parsed.raw_host:
            raise DestinationRefused(STATUS_BAD_URL, f"not an http(s) URL: {str(url)[:200]!r}")
        if parsed.userinfo:
            raise DestinationRefused(STATUS_BAD_URL, "a URL with credentials in it is not fetched")
        host = parsed.raw_host.decode("ascii")
        if not host_trusted(host, self.trusted_domains):
            raise DestinationRefused(
                STATUS_UNTRUSTED, f"{host} is not one of the trusted outlets or their subdomains"
            )
        return parsed

    def _loopback_allowed(self, ip: IPAddress, port: int) -> bool:
        if port not in self.loopback_ports:
            return False
        if isinstance(ip, ipaddress.IPv4Address):
            return ip in _LOOPBACK_V4
        return ip == _LOOPBACK_V6

    def vet(self, host: str, port: int, *, timeout: float) -> list[IPAddress]:
        """Resolve ``host`` once and return its addresses if every one of them may be reached.

        Raises
        ------
        DestinationRefused
            An address is not public (one bad answer refuses the name: a resolver that mixes
            public and internal answers is not to be trusted with the choice).
        httpcore.ConnectError, httpcore.ConnectTimeout
            The name does not resolve, or not within ``timeout`` seconds.
        """
        literal = _ip_or_none(host)
        addresses = [literal] if literal is not None else _resolve(host, port, timeout)
        for ip in addresses:
            why = address_refusal(ip)
            if why and not self._loopback_allowed(ip, port):
                said = why if literal is not None else f"{host} resolves to {why}"
                raise DestinationRefused(STATUS_REFUSED, said)
        return addresses


def _time_left(deadline: float, timeout: float | None, error: type[Exception]) -> float:
    """Seconds an operation may take: its own timeout, cut to what is left before the deadline."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the fetch's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every operation ends by the request's deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def _left(self, timeout: float | None, error: type[Exception]) -> float:
        return _time_left(self._deadline, timeout, error)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        left = self._left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(
            self._inner.start_tls(ssl_context, server_hostname, left), self._deadline
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _GuardedBackend(httpcore.NetworkBackend):
    """Resolve, check every address, connect to a checked one: one request's connections."""

    def __init__(self, policy: OutboundPolicy, deadline: float) -> None:
        self._policy = policy
        self._deadline = deadline
        self._inner = httpcore.SyncBackend()

    def _left(self, timeout: float | None) -> float:
        return _time_left(self._deadline, timeout, httpcore.ConnectTimeout)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = self._policy.vet(host, port, timeout=self._left(timeout))
        failure: Exception | None = None
        for ip in addresses:  # the checked addresses, in the resolver's order
            try:
                stream = self._inner.connect_tcp(
                    str(ip), port, self._left(timeout), local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                failure = exc
                continue
            return _DeadlineStream(stream, self._deadline)
        raise failure or httpcore.ConnectError(f"no address of {host} answered")

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        raise DestinationRefused(STATUS_REFUSED, "Unix sockets are never fetched")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


# httpcore's errors as httpx's, most specific first (httpx maps them the same way).
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = tuple(
    (getattr(httpcore, name), getattr(httpx, name))
    for name in ("ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout",
                 "TimeoutException", "ConnectError", "ReadError", "WriteError", "NetworkError",
                 "RemoteProtocolError", "LocalProtocolError", "ProtocolError",
                 "UnsupportedProtocol")
)  # fmt: skip


@contextmanager
def _as_httpx_errors(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for source, target in _ERRORS:
            if isinstance(exc, source):
                raise target(str(exc) or type(exc).__name__, request=request) from exc
        raise


class _Body(httpx.SyncByteStream):
    """A response body that closes its one-request pool with it."""

    def __init__(
        self, response: httpcore.Response, pool: httpcore.ConnectionPool, request: httpx.Request
    ) -> None:
        self._response = response
        self._pool = pool
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors(self._request):
            yield from self._response.iter_stream()

    def close(self) -> None:
        try:
            self._response.close()
        finally:
            self._pool.close()


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport that fetches only what an :class:`OutboundPolicy` allows.

    Each request gets a connection of its own (no keep-alive across requests), opened by a
    backend that resolves the host once, checks every address and connects to a checked one;
    every socket operation ends by the request's deadline (``extensions={DEADLINE: t}``, a
    :func:`time.monotonic` time; default ``budget`` seconds from the request's start). Env
    proxies are never used: a proxy would resolve the name itself.

    Parameters
    ----------
    policy : OutboundPolicy
        What may be reached.
    budget : float
        Seconds a request may take in all when it carries no deadline.
    ssl_context : ssl.SSLContext, optional
        Certificate checks (default: httpx's, with certifi's roots).
    """

    def __init__(
        self, policy: OutboundPolicy, *, budget: float, ssl_context: Any | None = None
    ) -> None:
        self.policy = policy
        self.budget = budget
        self._ssl_context = ssl_context or httpx.create_ssl_context(trust_env=False)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send one request after checking its URL; the address is checked at connect time."""
        self.policy.check_url(request.url)
        deadline = request.extensions.get(DEADLINE) or time.monotonic() + self.budget
        pool = httpcore.ConnectionPool(
            ssl_context=self._ssl_context,
            max_connections=1,
            http1=True,
            http2=False,
            network_backend=_GuardedBackend(self.policy, deadline),
        )
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,  # type: ignore[arg-type]
            extensions=request.extensions,
        )
        try:
            with _as_httpx_errors(request):
                response = pool.handle_request(core_request)
        except BaseException:
            pool.close()
            raise
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response, pool, request),
            extensions=response.extensions,
        )


def guarded_client(
    policy: OutboundPolicy,
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
    ssl_context: Any | None = None,
) -> httpx.Client:
    """An httpx client over :class:`GuardedTransport` that follows no redirect by itself.

    Redirects are the caller's to follow, so each hop's URL passes :meth:`OutboundPolicy.
    check_url` (the transport checks it again, and the addresses, before connecting).
    """
    return httpx.Client(
        headers=headers,
        timeout=timeout,
        transport=GuardedTransport(policy, budget=timeout, ssl_context=ssl_context),
        follow_redirects=False,
        trust_env=False,
    )
