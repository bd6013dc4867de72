"""End to end: three simulated days of `framelab news sync`, falsify with the tiny model, export
after a cutoff, fact-check with the tiny model and `framelab metrics hallucination` on it."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.news.store import read_articles, shard_path

from .conftest import API_KEY, api_article, article_html, paragraphs_for

DAYS = ("2026-03-01", "2026-03-02", "2026-03-03")


def _framelab(*args: str, env: dict | None = None, ok: bool = True):
    from framelab.cli import main

    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def world(fake_newsapi, fake_site, tmp_path):
    """Articles appearing over three days on two hosts of the loopback site."""
    s, loc = f"http://127.0.0.1:{fake_site.port}", f"http://localhost:{fake_site.port}"
    topics = [("a1", "the farm budget"), ("a2", "the ethics law"), ("a3", "the rail strike"),
              ("a4", "the new minister"), ("a5", "the school funding plan")]  # fmt: skip
    for slug, topic in topics:
        fake_site.html(f"/news/{slug}", article_html(topic.title(), paragraphs_for(topic)))
    fake_site.html("/news/a3-syndicated", article_html("Rail", paragraphs_for("the rail strike")))
    stub = ["Ministers met.", "Subscribe to continue reading."]
    fake_site.html("/news/locked", article_html("Locked", stub))
    cafe = paragraphs_for("the café owners’ rent bill")
    fake_site.html("/news/cafe", article_html("Café", cafe, charset="windows-1252"), charset=None)
    fake_site.raw("/news/old", 301, {"Location": "/news/a4"})
    fake_site.html("/private/memo", article_html("Memo", paragraphs_for("the memo")))
    fake_newsapi.articles = [
        api_article(f"{s}/news/a1", "Senate passes farm budget", "2026-02-28T10:00:00Z"),
        api_article(f"{loc}/news/a2", "Governor signs ethics law", "2026-02-28T12:00:00Z"),
        api_article(f"{s}/news/locked", "Cabinet meets behind closed doors",
                    "2026-03-01T08:00:00Z"),
        api_article(f"{loc}/news/cafe", "Café owners win rent relief", "2026-03-01T09:00:00Z"),
        api_article(f"{s}/news/a3", "Rail strike ends after talks", "2026-03-02T07:00:00Z"),
        api_article(f"{loc}/news/a3-syndicated", "Rail strike ends after talks - Reuters",
                    "2026-03-02T07:30:00Z"),
        api_article(f"{s}/news/old", "New transport minister named", "2026-03-02T08:00:00Z"),
        api_article(f"{s}/private/memo", "Leaked memo on party funding", "2026-03-02T09:00:00Z"),
        {"source": {"id": None, "name": "[Removed]"}, "author": None, "title": "[Removed]",
         "description": "[Removed]", "url": "https://removed.com", "urlToImage": None,
         "publishedAt": "2026-03-02T10:00:00Z", "content": "[Removed]"},
        api_article(f"{s}/news/a3?utm_source=rss", "Rail strike ends after talks",
                    "2026-03-03T01:00:00Z"),
        api_article(f"{loc}/news/a5", "School funding plan unveiled", "2026-03-03T06:00:00Z"),
    ]  # fmt: skip
    domains = tmp_path / "domains.txt"
    domains.write_text("# loopback outlets\n127.0.0.1\nlocalhost\n", encoding="utf-8")
    # The loopback site's port is let through by the tests-only setting; the default refuses it.
    env = {"NEWSAPI_KEY": API_KEY, "NEWSAPI_URL": fake_newsapi.url,
           "FRAMELAB_TEST_LOOPBACK_PORTS": str(fake_site.port)}  # fmt: skip
    return fake_newsapi, fake_site, domains, env


def _sync(dataset: Path, day: str, domains: Path, env: dict, ok: bool = True):
    return _framelab("news", "sync", "--out", str(dataset), "--date", day, "--domains",
                     str(domains), "--delay", "0", "--timeout", "120", env=env, ok=ok)  # fmt: skip


@pytest.mark.slow
def test_three_days_to_hallucination_metrics(world, tmp_path):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    api, site, domains, env = world
    dataset = tmp_path / "newslens"

    # day 1, twice: the second run adds nothing and asks NewsAPI nothing
    api.today = DAYS[0]
    first = _sync(dataset, DAYS[0], domains, env)
    assert "4 articles" in first.output
    shard = shard_path(dataset, DAYS[0]).read_bytes()
    assert "4 collected rows: 0 duplicate URLs" in first.output
    n_requests = len(api.requests)
    again = _sync(dataset, DAYS[0], domains, env)
    assert "already collected" in again.output and "nothing added" in again.output
    assert shard_path(dataset, DAYS[0]).read_bytes() == shard and len(api.requests) == n_requests

    # day 2 opens with a 429 (retried after Retry-After: 0); day 3 is "the next day" again
    api.today = DAYS[1]
    api.fail_next = [(429, "rateLimited")]
    _sync(dataset, DAYS[1], domains, env)
    api.today = DAYS[2]
    _sync(dataset, DAYS[2], domains, env)
    assert [r["query"]["from"] for r in api.requests] == ["2026-02-28", "2026-03-01", "2026-03-01",
                                                          "2026-03-02"]  # fmt: skip
    assert all(r["query"]["domains"] == "127.0.0.1,localhost" for r in api.requests)

    raw, _ = read_articles(dataset, dedup=False)
    assert raw.groupby("collected_on").size().tolist() == [4, 6, 6]  # the placeholder skipped
    rows, report = read_articles(dataset)
    # day 2 repeats 2 URLs, day 3 repeats 4 and one with a tracking parameter; 1 syndicated title
    assert (report.n_rows, report.n_url_duplicates, report.n_title_duplicates) == (16, 7, 1)
    assert report.n_kept == 8
    status = dict(zip(rows["title"], rows["fetch_status"], strict=True))
    assert status["Cabinet meets behind closed doors"] == "paywalled"
    assert status["Leaked memo on party funding"] == "robots_disallowed"
    assert status["Café owners win rent relief"] == "ok"
    by_title = rows.set_index("title")
    assert "café owners’ rent bill" in by_title.loc["Café owners win rent relief", "description"]
    assert by_title.loc["New transport minister named", "final_url"].endswith("/news/a4")
    locked = by_title.loc["Cabinet meets behind closed doors"]
    assert locked["description_source"] == "api" and locked["description"].startswith("Cabinet")
    # pages scraped once: later days reuse them
    assert sum(path == "/news/a3" for _, path in site.hits) == 1
    assert not any(path.startswith("/private/") for _, path in site.hits)

    manifest = json.loads((dataset / "manifest.json").read_text())
    assert [s["n_rows"] for s in manifest["shards"]] == [4, 6, 6]
    assert manifest["counts"] == {"n_rows": 16, "n_url_duplicates": 7, "n_title_duplicates": 1,
                                  "n_kept": 8}  # fmt: skip
    assert manifest["runs"][DAYS[2]]["removed"] == 1
    sheet = (dataset / "DATASHEET.md").read_text()
    assert "7 duplicate URLs, 1 near-duplicate titles" in sheet and "| localhost |" in sheet
    day1_log = (dataset / "logs" / f"{DAYS[0]}.jsonl").read_text().splitlines()
    assert [json.loads(line)["event"] for line in day1_log][-1] == "skipped"
    day2_log = (dataset / "logs" / f"{DAYS[1]}.jsonl").read_text()
    assert '"retry_in_s": 0.0' in day2_log and API_KEY not in day2_log

    # falsify with the tiny model; a second run generates nothing and keeps the manual column
    model = tmp_path / "tiny"
    _framelab("dev", "tiny-model", "--out", str(model))
    gen = ["--model", str(model), "--max-new-tokens", "12", "--device", "cpu", "--no-progress"]
    out = _framelab("news", "falsify", "--dataset", str(dataset), *gen).output
    assert "generated 8 of 8" in out and "meaning check:" in out
    validation = dataset / "falsified" / "validation.csv"
    sheet = pd.read_csv(validation, dtype=str, keep_default_na=False)
    assert len(sheet) == 8 and (sheet["model"] == str(model)).all()
    assert set(sheet["auto_check"]) <= {"differs", "unchanged", "off_topic", "empty"}
    titles = rows.set_index("article_id")["title"]
    rejected = titles[titles == "School funding plan unveiled"].index[0]
    sheet["manual_valid"] = ["no" if a == rejected else "yes" for a in sheet["article_id"]]
    sheet.to_csv(validation, index=False)
    out = _framelab("news", "falsify", "--dataset", str(dataset), *gen).output
    assert "nothing to generate" in out
    kept = pd.read_csv(validation, dtype=str, keep_default_na=False)
    assert kept.set_index("article_id").loc[rejected, "manual_valid"] == "no"

    # export after the cutoff: the two articles of 28 February go, the rejected pair goes
    items_path = tmp_path / "pairs.jsonl"
    out = _framelab("news", "export", "--dataset", str(dataset), "--after-cutoff", "2026-03-01",
                    "--require", "manual", "--out", str(items_path)).output  # fmt: skip
    items = [json.loads(line) for line in items_path.read_text().splitlines()]
    nonempty = (sheet["falsified"].str.strip() != "") & (sheet["article_id"] != rejected)
    post = sheet["published_at"] > "2026-03-01"
    expected = int((nonempty & post).sum())
    assert expected >= 3 and len(items) == 2 * expected
    assert all(item["date"] > "2026-03-01" for item in items)
    assert sorted({i["truth"] for i in items}) == [False, True]
    assert f"{expected} pairs exported of 8" in out and "2 published on or before" in out
    assert rejected not in {i["pair_id"] for i in items}

    # fact-check with the tiny model, then the hallucination metrics with that cutoff
    answers = tmp_path / "answers.jsonl"
    _framelab("generate", "fact-check", "--input", str(items_path), "--out", str(answers), *gen)
    metrics = tmp_path / "metrics"
    _framelab("metrics", "hallucination", "--input", str(answers), "--cutoff",
              f"{model}=2026-03-01", "--out", str(metrics))  # fmt: skip
    scores = pd.read_csv(metrics / "hallucination_scores.csv")
    assert set(scores["period"]) == {"post", "all"}  # every exported item is after the cutoff
    post_row = scores.loc[scores["period"] == "post"].iloc[0]
    assert post_row["n_pairs"] == expected
    assert post_row["n_true"] == post_row["n_false"] == expected


def test_sync_errors_are_clear_and_save_nothing(world, tmp_path):
    api, _, domains, env = world
    dataset = tmp_path / "newslens"
    no_key = _sync(dataset, DAYS[0], domains, {**env, "NEWSAPI_KEY": ""}, ok=False)
    assert no_key.exit_code != 0 and "set NEWSAPI_KEY" in no_key.output
    bad = _sync(dataset, DAYS[0], domains, {**env, "NEWSAPI_KEY": "wrong"}, ok=False)
    assert bad.exit_code != 0 and "apiKeyInvalid" in bad.output
    assert "Traceback" not in bad.output
    assert not shard_path(dataset, DAYS[0]).exists()
    log = (dataset / "logs" / f"{DAYS[0]}.jsonl").read_text()
    assert '"code": "apiKeyInvalid"' in log and "wrong" not in log.replace("Wrong", "")
    bad_domains = tmp_path / "bad.txt"
    bad_domains.write_text("BBC News\n", encoding="utf-8")
    out = _sync(dataset, DAYS[0], bad_domains, env, ok=False).output
    assert "not a domain" in out
    # the retry budget runs out: a clear message, and a later run the same day still works
    api.fail_next = [(503, "unexpectedError")] * 10
    out = _framelab("news", "sync", "--out", str(dataset), "--date", DAYS[0], "--domains",
                    str(domains), "--retries", "1", env=env, ok=False).output  # fmt: skip
    assert "503 unexpectedError" in out
    api.fail_next = []
    assert "4 articles" in _sync(dataset, DAYS[0], domains, env).output


class FakeClock:
    """The collection day, moved on by hand."""

    def __init__(self, day: date) -> None:
        self.day = day

    def __call__(self) -> date:
        return self.day

    def next_day(self) -> None:
        self.day += timedelta(days=1)


def test_library_sync_with_a_fake_clock(world, tmp_path):
    from analysis.news.sync import sync

    api, site, _, _ = world
    clock = FakeClock(date(2026, 3, 1))
    kw = {"api_key": API_KEY, "api_url": api.url, "domains": ("127.0.0.1", "localhost"),
          "clock": clock, "fetch_pages": False, "sleep": lambda s: None}  # fmt: skip
    api.today = clock().isoformat()
    first = sync(tmp_path / "d", **kw)
    assert (first.day, first.n_rows, first.skipped) == ("2026-03-01", 4, False)
    assert sync(tmp_path / "d", **kw).skipped
    clock.next_day()
    api.today = clock().isoformat()
    second = sync(tmp_path / "d", **kw)
    assert (second.day, second.n_rows, second.n_removed) == ("2026-03-02", 6, 1)
    assert api.requests[-1]["query"]["from"] == "2026-03-01"  # the day before, by the clock
    rows, report = read_articles(tmp_path / "d")
    assert set(rows["fetch_status"]) == {"not_fetched"} and set(rows["description_source"]) == {
        "api"
    }
    assert report.n_url_duplicates == 2 and site.hits == []
