"""One daily NewsLens run: query NewsAPI, fetch the pages, write the day's shard, log it all."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from analysis.llm.store import utc_now
from analysis.news import DEFAULT_DOMAINS
from analysis.news.fetch import FetchOptions, Page, PoliteFetcher
from analysis.news.newsapi import (
    DEFAULT_API_URL,
    DEVELOPER_MAX_RESULTS,
    NewsAPIClient,
    NewsAPIError,
    Query,
    article_fields,
)
from analysis.news.outbound import OutboundPolicy
from analysis.news.store import (
    append_log,
    article_id,
    domain_of,
    read_shards,
    shard_path,
    write_datasheet,
    write_manifest,
    write_shard,
)

# NewsAPI keeps articles taken down by their publisher as placeholders with this title.
REMOVED_TITLE = "[Removed]"


@dataclass
class SyncResult:
    """What one run did."""

    day: str
    skipped: bool = False
    n_api_articles: int = 0
    n_removed: int = 0
    n_rows: int = 0
    n_fetched: int = 0
    n_reused: int = 0
    fetch_statuses: dict[str, int] = field(default_factory=dict)
    stopped: str = ""
    shard: Path | None = None
    log: Path | None = None

    def describe(self) -> str:
        """One line for the terminal."""
        if self.skipped:
            return f"{self.day}: already collected ({self.shard}); nothing added"
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(self.fetch_statuses.items()))
        return (
            f"{self.day}: {self.n_rows} articles from NewsAPI ({self.n_removed} removed "
            f"placeholders skipped; paging ended: {self.stopped}); pages fetched "
            f"{self.n_fetched}, reused {self.n_reused}; {statuses or 'no pages'} -> {self.shard}"
        )


def today_utc() -> date:
    """Today's date in UTC (the collection day of a run)."""
    return datetime.now(UTC).date()


def _reusable_pages(root: Path) -> dict[str, dict[str, Any]]:
    """Page fields of articles scraped successfully on an earlier day, by article ID."""
    rows = read_shards(root)
    if rows.empty:
        return {}
    ok = rows.loc[rows["fetch_status"] == "ok"].drop_duplicates("article_id")
    keep = list(Page("").fields())
    return {r["article_id"]: {k: r[k] for k in keep} for r in ok.to_dict("records")}


def sync(
    out: str | Path,
    *,
    api_key: str,
    api_url: str = DEFAULT_API_URL,
    query: str = "politics",
    domains: Sequence[str] = DEFAULT_DOMAINS,
    since: date | None = None,
    clock: Callable[[], date] = today_utc,
    max_results: int = DEVELOPER_MAX_RESULTS,
    max_pages: int = 1,
    fetch_options: FetchOptions | None = None,
    api_transport: httpx.BaseTransport | None = None,
    allow_loopback_ports: Collection[int] = (),
    sleep: Callable[[float], None] = time.sleep,
    fetch_pages: bool = True,
    retries: int = 4,
) -> SyncResult:
    """Collect one day of news into ``out`` (idempotent: a collected day is never redone).

    Parameters
    ----------
    out : str or Path
        The dataset directory (created if missing).
    api_key, api_url : str
        NewsAPI key and base URL.
    query : str
        NewsAPI ``q``.
    domains : sequence of str
        Outlets (``domains``): the query's ``domains`` and the only hosts (with their
        subdomains) whose pages are fetched.
    since : date, optional
        Oldest ``publishedAt`` asked for; default the day before the collection day (the free
        plan delays articles by a day and keeps a month).
    clock : callable
        Returns the collection day (tests pass a fake one for "the next day").
    max_results, max_pages : int
        The plan's result ceiling and this run's request budget (free plan: one call a day).
    fetch_options : FetchOptions, optional
        Politeness and extraction limits.
    api_transport : httpx.BaseTransport, optional
        For tests of the API client (the base URL is the user's choice; pages are never
        fetched through a swapped transport).
    allow_loopback_ports : collection of int
        **Tests only**: pages on loopback addresses at these ports are fetched
        (:class:`~analysis.news.outbound.OutboundPolicy`); empty, every internal address is
        refused.
    sleep : callable
        How retries and politeness delays wait.
    fetch_pages : bool
        Scrape article pages (``False`` keeps API descriptions only).
    retries : int
        Retries of an API request after a 429 or 5xx.

    Returns
    -------
    SyncResult
    """
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    day = clock().isoformat()
    result = SyncResult(day)
    existing = shard_path(root, day)
    if existing.exists():
        result.skipped, result.shard = True, existing
        result.log = append_log(root, day, {"event": "skipped", "reason": "day already collected"})
        write_manifest(root)
        write_datasheet(root, domains=domains, query=query)
        return result

    from_date = (since or (clock() - timedelta(days=1))).isoformat()
    q = Query(q=query, domains=tuple(domains), from_date=from_date)
    started = utc_now()
    append_log(root, day, {"event": "start", "query": q.params(1) | {"page": None}})
    try:
        with NewsAPIClient(
            api_key, base_url=api_url, transport=api_transport, sleep=sleep, max_retries=retries
        ) as client:
            found = client.search(q, max_results=max_results, max_pages=max_pages)
    except NewsAPIError as exc:
        append_log(root, day, {"event": "failed", "status": exc.status, "code": exc.code,
                               "message": exc.message})  # fmt: skip
        raise
    for event in found.events:
        append_log(root, day, {"event": "api_request", **event})
    result.n_api_articles, result.stopped = len(found.articles), found.stopped

    records = []
    for article in found.articles:
        fields = article_fields(article)
        if fields["title"] == REMOVED_TITLE or not fields["url"]:
            result.n_removed += 1
            continue
        records.append(fields)

    reusable = _reusable_pages(root)
    pages: dict[str, dict[str, Any]] = {}
    todo = []
    for rec in records:
        aid = article_id(rec["url"])
        if aid in reusable:
            pages[rec["url"]] = reusable[aid]
            result.n_reused += 1
        elif fetch_pages:
            todo.append(rec["url"])
    if todo:
        policy = OutboundPolicy(tuple(domains), frozenset(allow_loopback_ports))
        with PoliteFetcher(fetch_options, policy=policy, sleep=sleep) as fetcher:
            fetched = fetcher.fetch_many(todo)
        for url, page in fetched.items():
            pages[url] = page.fields()
            append_log(root, day, {"event": "page", "url": url, "status": page.fetch_status,
                                   "reason": page.fetch_reason})  # fmt: skip
        result.n_fetched = len(fetched)

    collected_at = utc_now()
    rows = []
    for rec in records:
        page = pages.get(rec["url"]) or Page(rec["url"]).fields()
        scraped = page.get("fetch_status") == "ok" and page.get("webscraped_description")
        row = {
            "article_id": article_id(rec["url"]),
            "collected_on": day,
            "collected_at": collected_at,
            "query": query,
            "domain": domain_of(rec["url"]),
            **rec,
            **page,
            "description": page["webscraped_description"] if scraped else rec["api_description"],
            "description_source": "webscraped" if scraped else "api",
        }
        status = row["fetch_status"]
        result.fetch_statuses[status] = result.fetch_statuses.get(status, 0) + 1
        rows.append(row)
    result.n_rows = len(rows)
    result.shard = write_shard(root, day, rows)
    write_manifest(
        root,
        runs={
            day: {
                "started_at": started,
                "finished_at": utc_now(),
                "query": q.params(1) | {"page": None},
                "api_url": api_url,
                "total_results": found.total_results,
                "pages": found.pages,
                "requests": found.requests,
                "stopped": found.stopped,
                "removed": result.n_removed,
                "fetch_statuses": result.fetch_statuses,
            }
        },
    )
    write_datasheet(root, domains=domains, query=query)
    result.log = append_log(root, day, {"event": "done", "rows": result.n_rows,
                                        "fetch_statuses": result.fetch_statuses})  # fmt: skip
    return result
