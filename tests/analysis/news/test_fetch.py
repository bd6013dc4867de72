"""The polite fetcher against the loopback site: extraction, stubs, charsets, redirects, robots."""

from __future__ import annotations

import pytest

from analysis.news.fetch import FetchOptions, PoliteFetcher, decode_html, lead_paragraphs
from analysis.news.outbound import OutboundPolicy

from .conftest import article_html, paragraphs_for

FAST = FetchOptions(delay=0.0, timeout=120.0, max_bytes=200_000, workers=4)


def loopback_policy(*ports: int) -> OutboundPolicy:
    """The loopback site as a trusted outlet, its port let through (the tests-only setting)."""
    return OutboundPolicy(("127.0.0.1", "localhost"), frozenset(ports))


@pytest.fixture
def fetcher(fake_site):
    # port 9 (discard): nothing listens there, for the unreachable robots.txt case
    with PoliteFetcher(FAST, policy=loopback_policy(fake_site.port, 9)) as f:
        yield f


def _url(site, path: str, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{site.port}{path}"


def test_main_text_without_boilerplate(fake_site, fetcher):
    fake_site.html(
        "/news/budget", article_html("Senate passes budget", paragraphs_for("the budget"))
    )
    page = fetcher.fetch(_url(fake_site, "/news/budget"))
    assert page.fetch_status == "ok", page.fetch_reason
    assert "Lawmakers voted on Tuesday on the budget" in page.article_text
    assert "critics warned" in page.article_text
    for boilerplate in ("All rights reserved", "Most read", "Sign in", "Another story"):
        assert boilerplate not in page.article_text
    assert page.webscraped_description.startswith("Lawmakers voted on Tuesday on the budget")
    assert page.page_description.startswith("Lawmakers voted")
    assert page.encoding == "utf-8" and page.http_status == 200
    assert page.n_words >= 60


def test_paywall_stub_and_short_page_keep_reasons(fake_site, fetcher):
    fake_site.html(
        "/news/locked",
        article_html("Locked story", ["Lawmakers voted on the bill.",
                                      "Subscribe to continue reading this article."]),
    )  # fmt: skip
    fake_site.html("/news/brief", article_html("Brief", ["Lawmakers voted.", "More soon."]))
    locked = fetcher.fetch(_url(fake_site, "/news/locked"))
    brief = fetcher.fetch(_url(fake_site, "/news/brief"))
    assert locked.fetch_status == "paywalled" and "paywall" in locked.fetch_reason
    assert brief.fetch_status == "too_short"
    assert locked.webscraped_description is None and brief.webscraped_description is None


def test_windows_1252_page_without_charset_header(fake_site, fetcher):
    paragraphs = paragraphs_for("the café owners’ “fair rent” bill")
    fake_site.html(
        "/news/cafe",
        article_html("Café bill", paragraphs, charset="windows-1252"),
        charset=None,  # no charset in Content-Type: only <meta charset> says it
    )
    page = fetcher.fetch(_url(fake_site, "/news/cafe"))
    assert page.fetch_status == "ok", page.fetch_reason
    assert "café owners’ “fair rent” bill" in page.article_text
    assert page.encoding == "detected"
    # Declared charset wins when it is given
    latin_html = article_html("Zoë", paragraphs_for("Zoë's law"), charset="iso-8859-1")
    fake_site.html("/news/latin", latin_html, charset="iso-8859-1")
    latin = fetcher.fetch(_url(fake_site, "/news/latin"))
    assert "Zoë's law" in latin.article_text and latin.encoding == "iso-8859-1"


def test_redirects_are_followed_and_checked_against_robots(fake_site, fetcher):
    fake_site.html("/news/new-home", article_html("Moved", paragraphs_for("the moved bill")))
    fake_site.raw("/news/old-home", 301, {"Location": "/news/new-home"})
    fake_site.raw("/news/sneaky", 302, {"Location": "/private/secret"})
    fake_site.raw("/loop/a", 302, {"Location": "/loop/b"})
    fake_site.raw("/loop/b", 302, {"Location": "/loop/a"})
    moved = fetcher.fetch(_url(fake_site, "/news/old-home"))
    assert moved.fetch_status == "ok"
    assert moved.final_url == _url(fake_site, "/news/new-home")
    sneaky = fetcher.fetch(_url(fake_site, "/news/sneaky"))
    assert sneaky.fetch_status == "robots_disallowed"
    loop = fetcher.fetch(_url(fake_site, "/loop/a"))
    assert loop.fetch_status == "too_many_redirects"
    assert (f"127.0.0.1:{fake_site.port}", "/private/secret") not in fake_site.hits


def test_robots_disallow_means_no_request(fake_site, fetcher):
    fake_site.html("/private/memo", article_html("Memo", paragraphs_for("the memo")))
    page = fetcher.fetch(_url(fake_site, "/private/memo"))
    assert page.fetch_status == "robots_disallowed"
    assert [path for _, path in fake_site.hits] == ["/robots.txt"]


def test_unreachable_robots_disallows_and_missing_robots_allows(fake_site, fetcher):
    fake_site.html("/news/x", article_html("X", paragraphs_for("x")))
    fake_site.raw("/robots.txt", 503, {"Content-Type": "text/plain"}, b"down")
    assert fetcher.fetch(_url(fake_site, "/news/x")).fetch_status == "robots_disallowed"
    fake_site.raw("/robots.txt", 404, {"Content-Type": "text/plain"}, b"none")
    assert fetcher.fetch(_url(fake_site, "/news/x", "localhost")).fetch_status == "ok"


def test_caps_and_content_types(fake_site, fetcher):
    fake_site.raw("/big", 200, {"Content-Type": "text/html"}, b"<p>" + b"a " * 150_000)
    fake_site.raw("/doc.pdf", 200, {"Content-Type": "application/pdf"}, b"%PDF-1.4")
    fake_site.raw("/gone", 410, {"Content-Type": "text/html"}, b"gone")
    assert fetcher.fetch(_url(fake_site, "/big")).fetch_status == "too_large"
    assert fetcher.fetch(_url(fake_site, "/doc.pdf")).fetch_status == "not_html"
    gone = fetcher.fetch(_url(fake_site, "/gone"))
    assert gone.fetch_status == "http_error" and gone.http_status == 410
    assert fetcher.fetch("ftp://example.org/x").fetch_status == "bad_url"
    dead = fetcher.fetch("http://127.0.0.1:9/news")  # discard port: nothing listens
    assert dead.fetch_status == "robots_disallowed"  # robots.txt unreachable: RFC 9309


def test_one_request_per_host_at_a_time_hosts_in_parallel(fake_site):
    urls = []
    for i in range(4):
        fake_site.html(f"/news/{i}", article_html(f"Story {i}", paragraphs_for(f"bill {i}")))
        urls += [_url(fake_site, f"/news/{i}"), _url(fake_site, f"/news/{i}", "localhost")]
    with PoliteFetcher(FAST, policy=loopback_policy(fake_site.port)) as fetcher:
        pages = fetcher.fetch_many(urls)
    assert len(pages) == 8 and {p.fetch_status for p in pages.values()} == {"ok"}
    assert max(fake_site.max_in_flight.values()) == 1
    hosts = {host for host, _ in fake_site.hits}
    assert hosts == {f"127.0.0.1:{fake_site.port}", f"localhost:{fake_site.port}"}
    # robots.txt read once per host
    assert sum(path == "/robots.txt" for _, path in fake_site.hits) == 2


def test_politeness_delay_spaces_requests_to_one_host(fake_site):
    fake_site.html("/news/a", article_html("A", paragraphs_for("a")))
    fake_site.html("/news/b", article_html("B", paragraphs_for("b")))
    now = [100.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    opts = FetchOptions(delay=2.5, timeout=120.0)
    policy = loopback_policy(fake_site.port)
    with PoliteFetcher(opts, policy=policy, clock=lambda: now[0], sleep=sleep) as fetcher:
        fetcher.fetch(_url(fake_site, "/news/a"))
        fetcher.fetch(_url(fake_site, "/news/b"))
    # robots.txt, then page a, then page b: each waits the full delay on the frozen clock
    assert waits == [2.5, 2.5]


def test_decode_and_lead_helpers():
    assert decode_html("é".encode("cp1252"), "bogus-charset")[1] == "detected"
    assert decode_html("é".encode(), "utf-8") == ("é", "utf-8")
    assert lead_paragraphs("", 10) == ""
