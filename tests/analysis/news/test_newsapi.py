"""The NewsAPI client against the loopback fake: documented parameters, paging, errors, retries."""

from __future__ import annotations

import pytest

from analysis.news.newsapi import NewsAPIClient, NewsAPIError, Query, domains_from_lines

from .conftest import API_KEY, api_article


def _articles(n: int) -> list[dict]:
    return [
        api_article(
            f"https://bbc.co.uk/news/{i}", f"Politics story {i}", f"2026-03-01T{i:02d}:00:00Z"
        )
        for i in range(n)
    ]


def test_documented_parameters_and_key_in_header(fake_newsapi):
    fake_newsapi.articles = _articles(3)
    with NewsAPIClient(API_KEY, base_url=fake_newsapi.url, sleep=lambda s: None) as client:
        result = client.search(Query(q="politics", domains=("bbc.co.uk", "npr.org"),
                                     from_date="2026-02-28"))  # fmt: skip
    sent = fake_newsapi.requests[0]
    assert sent["path"] == "/v2/everything"
    assert sent["query"] == {
        "q": "politics", "language": "en", "sortBy": "publishedAt", "pageSize": "100",
        "page": "1", "domains": "bbc.co.uk,npr.org", "from": "2026-02-28",
    }  # fmt: skip
    assert sent["headers"]["x-api-key"] == API_KEY
    assert API_KEY not in str(sent["query"])  # never in the URL (it would reach logs)
    assert result.total_results == 3 and len(result.articles) == 3
    assert result.stopped == "complete" and result.requests == 1
    # sortBy=publishedAt: newest first
    assert [a["title"] for a in result.articles] == ["Politics story 2", "Politics story 1",
                                                     "Politics story 0"]  # fmt: skip


def test_pages_until_complete_and_stops_at_plan_ceiling(fake_newsapi):
    fake_newsapi.articles = _articles(7)
    with NewsAPIClient(API_KEY, base_url=fake_newsapi.url, sleep=lambda s: None) as client:
        full = client.search(Query(page_size=3), max_results=1000, max_pages=10)
        assert [r["query"]["page"] for r in fake_newsapi.requests] == ["1", "2", "3"]
        assert len(full.articles) == 7 and full.pages == 3 and full.stopped == "complete"

        fake_newsapi.max_results = 4  # a developer plan's ceiling, smaller for the test
        capped = client.search(Query(page_size=3), max_results=1000, max_pages=10)
        # page 2 asks for results 3..6 > 4: NewsAPI answers 426 maximumResultsReached
        assert len(capped.articles) == 3 and capped.stopped == "maximumResultsReached"

        budget = client.search(Query(page_size=2), max_results=1000, max_pages=1)
        assert len(budget.articles) == 2 and budget.stopped == "max_pages"


def test_429_and_5xx_are_retried_with_backoff(fake_newsapi):
    fake_newsapi.articles = _articles(1)
    fake_newsapi.fail_next = [(429, "rateLimited"), (503, "unexpectedError")]
    waits: list[float] = []
    with NewsAPIClient(API_KEY, base_url=fake_newsapi.url, sleep=waits.append,
                       backoff=1.5) as client:  # fmt: skip
        result = client.search(Query())
    assert len(result.articles) == 1
    # 429 carries Retry-After: 0 (honoured); the 503 waits backoff * 2**1
    assert waits == [0.0, 3.0]
    assert [e.get("http_status") for e in result.events] == [429, 503, 200]


def test_retries_give_up_with_newsapi_code(fake_newsapi):
    fake_newsapi.fail_next = [(429, "rateLimited")] * 3
    client = NewsAPIClient(API_KEY, base_url=fake_newsapi.url, sleep=lambda s: None, max_retries=2)
    with client, pytest.raises(NewsAPIError) as info:
        client.search(Query())
    assert info.value.status == 429 and info.value.code == "rateLimited"


@pytest.mark.parametrize(
    ("key", "query", "code"),
    [
        ("wrong", Query(), "apiKeyInvalid"),
        (API_KEY, None, "parametersMissing"),
    ],
)
def test_errors_carry_code_and_message(fake_newsapi, key, query, code):
    with NewsAPIClient(key, base_url=fake_newsapi.url, sleep=lambda s: None) as client:
        if query is None:  # the API's own check, bypassing ours
            events: list = []
            bad = Query()
            object.__setattr__(bad, "q", "")
            with pytest.raises(NewsAPIError) as info:
                client.get_page(bad, 1, events)
        else:
            with pytest.raises(NewsAPIError) as info:
                client.search(query)
    assert info.value.code == code and "scripted" not in info.value.message


def test_bad_queries_are_refused_before_any_request():
    with pytest.raises(ValueError, match="500 characters"):
        Query(q="x" * 501)
    with pytest.raises(ValueError, match="pageSize"):
        Query(page_size=101)
    with pytest.raises(ValueError, match="sortBy"):
        Query(sort_by="newest")
    with pytest.raises(ValueError, match="NEWSAPI_KEY"):
        NewsAPIClient("")


def test_domain_file_lines():
    assert domains_from_lines(["bbc.co.uk  # BBC", "", "https://www.reuters.com/world"]) == (
        "bbc.co.uk",
        "reuters.com",
    )
    with pytest.raises(ValueError, match="not a domain"):
        domains_from_lines(["BBC News"])


def test_answers_that_are_not_newsapi_json_are_named():
    import httpx

    answers = iter([
        httpx.Response(502, text="<html>Bad gateway</html>"),  # a proxy's page, retried
        httpx.Response(200, text="<html>captive portal</html>"),
        httpx.Response(200, json={"status": "ok", "totalResults": 1}),
    ])  # fmt: skip
    transport = httpx.MockTransport(lambda request: next(answers))
    client = NewsAPIClient(API_KEY, sleep=lambda s: None, transport=transport)
    with client:
        with pytest.raises(NewsAPIError, match="notJson.*captive portal"):
            client.search(Query())
        with pytest.raises(NewsAPIError, match="badShape"):
            client.search(Query())
