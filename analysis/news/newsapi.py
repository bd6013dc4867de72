"""A client for NewsAPI's ``/v2/everything`` endpoint: documented parameters, paging, retries.

Parameters as NewsAPI documents them (https://newsapi.org/docs/endpoints/everything): ``q``,
``domains`` (comma-separated), ``language``, ``from``/``to`` (ISO 8601), ``sortBy``
(``relevancy``, ``popularity``, ``publishedAt``), ``pageSize`` (at most 100) and ``page``; the
key travels in the ``X-Api-Key`` header, never in the URL (so it never reaches a log). A
response is ``{"status": "ok", "totalResults": N, "articles": [...]}`` or ``{"status":
"error", "code": ..., "message": ...}`` (https://newsapi.org/docs/errors). Developer accounts
see at most 100 results per query; asking for more answers HTTP 426 ``maximumResultsReached``,
which ends paging without failing the run.

429 and 5xx answers are retried with exponential backoff (``Retry-After`` honoured); any other
error stops with a :class:`NewsAPIError` carrying NewsAPI's code and message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from analysis.retry import Backoff

DEFAULT_API_URL = "https://newsapi.org"
EVERYTHING_PATH = "/v2/everything"
MAX_PAGE_SIZE = 100
# Developer (free) accounts: 100 results per query, 100 requests a day.
DEVELOPER_MAX_RESULTS = 100
SORT_BY = ("relevancy", "popularity", "publishedAt")
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class NewsAPIError(RuntimeError):
    """NewsAPI refused a request: ``code`` and ``message`` are NewsAPI's own."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"NewsAPI error {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Query:
    """One ``everything`` query.

    Attributes
    ----------
    q : str
        Keywords (NewsAPI allows at most 500 characters).
    domains : tuple of str
        Outlets to restrict the search to.
    from_date, to_date : str, optional
        ISO dates or datetimes bounding ``publishedAt``.
    language : str
        Two-letter ISO 639-1 code.
    sort_by : str
        ``publishedAt`` (newest first), ``relevancy`` or ``popularity``.
    page_size : int
        Results per page, 1 to 100.
    """

    q: str = "politics"
    domains: tuple[str, ...] = ()
    from_date: str | None = None
    to_date: str | None = None
    language: str = "en"
    sort_by: str = "publishedAt"
    page_size: int = MAX_PAGE_SIZE

    def __post_init__(self) -> None:
        if not self.q.strip():
            raise ValueError("the query (--query) must not be empty")
        if len(self.q) > 500:
            raise ValueError(f"NewsAPI allows queries of at most 500 characters, not {len(self.q)}")
        if self.sort_by not in SORT_BY:
            raise ValueError(f"sortBy must be one of {SORT_BY}, not {self.sort_by!r}")
        if not 1 <= self.page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"pageSize must be 1 to {MAX_PAGE_SIZE}, not {self.page_size}")

    def params(self, page: int) -> dict[str, str]:
        """The query string of one page (the key goes in a header, not here)."""
        params = {
            "q": self.q,
            "language": self.language,
            "sortBy": self.sort_by,
            "pageSize": str(self.page_size),
            "page": str(page),
        }
        if self.domains:
            params["domains"] = ",".join(self.domains)
        if self.from_date:
            params["from"] = self.from_date
        if self.to_date:
            params["to"] = self.to_date
        return params


@dataclass
class SearchResult:
    """Everything one paged search returned.

    Attributes
    ----------
    articles : list of dict
        NewsAPI article objects in the order received.
    total_results : int
        ``totalResults`` of the first page.
    pages : int
        Pages fetched.
    requests : int
        HTTP requests made, retries included.
    stopped : str
        Why paging ended: ``complete``, ``max_results``, ``max_pages``, ``empty_page`` or
        ``maximumResultsReached``.
    events : list of dict
        One entry per request (page, HTTP status, retry wait) for the run log.
    """

    articles: list[dict[str, Any]] = field(default_factory=list)
    total_results: int = 0
    pages: int = 0
    requests: int = 0
    stopped: str = "complete"
    events: list[dict[str, Any]] = field(default_factory=list)


class NewsAPIClient:
    """A NewsAPI client over ``httpx``.

    Parameters
    ----------
    api_key : str
        The key (``NEWSAPI_KEY``).
    base_url : str
        NewsAPI's own, a mirror, or a test fake.
    timeout : float
        Seconds per request.
    max_retries : int
        Retries of one request after a 429 or 5xx.
    backoff : float
        First wait in seconds; doubles with each retry up to 60 s (:class:`analysis.retry.Backoff`;
        a ``Retry-After`` of up to 300 s is waited instead).
    sleep : callable
        How to wait (tests pass one that does not).
    transport : httpx.BaseTransport, optional
        For tests; the network otherwise.
    """

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = DEFAULT_API_URL,
        timeout: float = 30.0,
        max_retries: int = 4,
        backoff: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        user_agent: str = "FrameLab-NewsLens",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not api_key:
            raise ValueError("no NewsAPI key: set NEWSAPI_KEY (https://newsapi.org/register)")
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff = Backoff(first_s=backoff, max_s=60.0, max_retry_after_s=300.0)
        self.sleep = sleep
        self._client = httpx.Client(
            headers={"X-Api-Key": api_key, "User-Agent": user_agent},
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> NewsAPIClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_page(self, query: Query, page: int, events: list[dict[str, Any]]) -> dict[str, Any]:
        """Fetch one page, retrying 429/5xx and network errors; raise :class:`NewsAPIError`."""
        url = self.base_url + EVERYTHING_PATH
        for attempt in range(self.max_retries + 1):
            response: httpx.Response | None = None
            try:
                response = self._client.get(url, params=query.params(page))
            except httpx.TransportError as exc:
                event = {"page": page, "error": type(exc).__name__}
                if attempt == self.max_retries:
                    events.append(event)
                    raise NewsAPIError(0, "network", f"{url}: {exc}") from exc
            else:
                event = {"page": page, "http_status": response.status_code}
                if response.status_code not in RETRY_STATUSES:
                    events.append(event)
                    return self._body(response)
                if attempt == self.max_retries:
                    events.append(event)
                    return self._body(response)  # raises with NewsAPI's code
            wait = self.backoff.delay(attempt, response.headers if response is not None else None)
            events.append({**event, "retry_in_s": wait})
            self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _body(response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, Mapping):
            raise NewsAPIError(
                response.status_code, "notJson", f"the API answered {response.text[:200]!r}"
            )
        if response.status_code != 200 or body.get("status") != "ok":
            raise NewsAPIError(
                response.status_code,
                str(body.get("code", "unknown")),
                str(body.get("message", "no message")),
            )
        if not isinstance(body.get("articles"), list):
            raise NewsAPIError(response.status_code, "badShape", "the answer has no articles list")
        return dict(body)

    def search(
        self, query: Query, *, max_results: int = DEVELOPER_MAX_RESULTS, max_pages: int = 5
    ) -> SearchResult:
        """Page through one query until all results, ``max_results`` or ``max_pages`` are in.

        Parameters
        ----------
        query : Query
            What to search.
        max_results : int
            The account's result limit (100 on the free plan; paid plans allow more).
        max_pages : int
            Requests budget for this run (free plan: 100 a day in all).

        Returns
        -------
        SearchResult
        """
        result = SearchResult()
        page = 1
        while True:
            try:
                body = self.get_page(query, page, result.events)
            except NewsAPIError as exc:
                if exc.code == "maximumResultsReached" and page > 1:
                    result.stopped = exc.code  # the plan's ceiling: keep what came in
                    break
                raise
            finally:
                result.requests = len(result.events)
            articles = body["articles"]
            if page == 1:
                result.total_results = int(body.get("totalResults") or 0)
            result.pages = page
            result.articles.extend(a for a in articles if isinstance(a, Mapping))
            if not articles:
                result.stopped = "empty_page"
                break
            if len(result.articles) >= result.total_results:
                result.stopped = "complete"
                break
            if page * query.page_size >= max_results:
                result.stopped = "max_results"
                break
            if page >= max_pages:
                result.stopped = "max_pages"
                break
            page += 1
        return result


def article_fields(article: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten one NewsAPI article object into the dataset's API columns.

    Examples
    --------
    >>> row = article_fields({"source": {"id": "bbc-news", "name": "BBC News"}, "title": "T",
    ...                       "url": "https://www.bbc.co.uk/news/x"})
    >>> row["source_name"], row["api_description"]
    ('BBC News', None)
    """
    source = article.get("source") if isinstance(article.get("source"), Mapping) else {}

    def text(key: str) -> str | None:
        value = article.get(key)
        return str(value) if value not in (None, "") else None

    return {
        "source_id": str(source.get("id")) if source.get("id") else None,
        "source_name": str(source.get("name")) if source.get("name") else None,
        "author": text("author"),
        "title": text("title"),
        "api_description": text("description"),
        "api_content": text("content"),
        "url": text("url"),
        "url_to_image": text("urlToImage"),
        "published_at": text("publishedAt"),
    }


def domains_from_lines(lines: Iterable[str]) -> tuple[str, ...]:
    """Read a domain list: one per line, ``#`` comments and blank lines ignored, de-duplicated.

    Examples
    --------
    >>> domains_from_lines(["# outlets", "bbc.co.uk", " https://www.NPR.org/ ", "bbc.co.uk"])
    ('bbc.co.uk', 'npr.org')
    """
    out: list[str] = []
    for raw in lines:
        line = raw.split("#", 1)[0].strip().lower()
        if not line:
            continue
        line = line.removeprefix("https://").removeprefix("http://").split("/", 1)[0]
        line = line.removeprefix("www.")
        if ("." not in line and line != "localhost") or " " in line:
            raise ValueError(f"not a domain: {raw.strip()!r}")
        if line not in out:
            out.append(line)
    return tuple(out)
