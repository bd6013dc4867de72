"""Append-only shards, read-time deduplication and the falsification check and sheet."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.news.falsify import (
    meaning_check,
    parse_manual,
    read_validation,
    write_validation,
)
from analysis.news.store import (
    article_id,
    near_duplicate_titles,
    normalize_url,
    read_articles,
    write_shard,
)


def _row(url: str, title: str, day: str, published: str) -> dict:
    return {
        "article_id": article_id(url),
        "collected_on": day,
        "url": url,
        "title": title,
        "published_at": published,
        "fetch_status": "ok",
        "domain": "bbc.co.uk",
    }


def test_url_identity_ignores_tracking_case_and_trailing_slash():
    a = article_id("https://www.bbc.co.uk/news/uk-politics-1?utm_source=twitter")
    assert a == article_id("http://bbc.co.uk/news/uk-politics-1/")
    assert a != article_id("https://bbc.co.uk/news/uk-politics-2")
    assert normalize_url("https://apnews.com/a?id=3&fbclid=zz#x") == "https://apnews.com/a?id=3"


def test_near_duplicate_titles():
    titles = [
        "Senate passes $1.2tn budget bill after all-night session",
        "Senate passes $1.2tn budget bill after all-night session - BBC News",  # outlet suffix
        "Senate passes budget bill after all night session",  # 7/8 words shared: 0.875
        "House rejects budget bill after all-night session",  # 4/9: a different story
        None,
        "",
    ]
    assert near_duplicate_titles(titles, 0.8) == [1, 2]
    assert near_duplicate_titles(titles, 1.0) == [1]


def test_shards_are_append_only_and_dedup_keeps_first_collected(tmp_path):
    write_shard(tmp_path, "2026-03-01", [
        _row("https://bbc.co.uk/news/1", "Budget passes", "2026-03-01", "2026-02-28T10:00:00Z"),
        _row("https://bbc.co.uk/news/2", "Strike ends", "2026-03-01", "2026-02-28T11:00:00Z"),
    ])  # fmt: skip
    write_shard(tmp_path, "2026-03-02", [
        _row("https://www.bbc.co.uk/news/1/?utm_medium=rss", "Budget passes", "2026-03-02",
             "2026-02-28T10:00:00Z"),
        _row("https://reuters.com/x", "Strike ends - Reuters", "2026-03-02",
             "2026-03-01T09:00:00Z"),
        _row("https://npr.org/y", "New minister named", "2026-03-02", "2026-03-01T12:00:00Z"),
    ])  # fmt: skip
    with pytest.raises(FileExistsError, match="append-only"):
        write_shard(tmp_path, "2026-03-01", [])
    rows, report = read_articles(tmp_path)
    assert (report.n_rows, report.n_url_duplicates, report.n_title_duplicates) == (5, 1, 1)
    assert report.n_kept == 3 == len(rows)
    assert rows["collected_on"].tolist() == ["2026-03-01", "2026-03-01", "2026-03-02"]
    raw, none = read_articles(tmp_path, dedup=False)
    assert len(raw) == 5 and none.n_url_duplicates == 0


def _unit(text: str) -> np.ndarray:
    """A deterministic bag-of-words embedding over a fixed vocabulary."""
    vocab = ["senate", "passed", "rejected", "the", "bill", "weather", "sunny", "today"]
    words = text.lower().replace(".", "").split()
    return np.array([words.count(w) for w in vocab], dtype=float)


def test_meaning_check_verdicts():
    pairs = pd.DataFrame({
        "authentic": ["The senate passed the bill."] * 4,
        "falsified": ["The senate rejected the bill.", "The senate passed the bill.",
                      "Sunny weather today.", ""],
    })  # fmt: skip
    out = meaning_check(pairs, embedder=lambda texts: np.stack([_unit(t) for t in texts]))
    assert out["auto_check"].tolist() == ["differs", "unchanged", "off_topic", "empty"]
    # 4 of 5 words kept in order: 1 - 2*4/10 = 0.2 changed
    assert out["word_change"].iloc[0] == pytest.approx(0.2)
    # counts (senate, passed|rejected, the x2, bill): dot 1 + 4 + 1 = 6, norms sqrt(7) each
    assert out["embed_cosine"].iloc[0] == pytest.approx(6 / 7)
    assert np.isnan(out["embed_cosine"].iloc[3])


def test_validation_sheet_keeps_manual_values(tmp_path):
    (tmp_path / "falsified").mkdir()
    base = pd.DataFrame({
        "article_id": ["a", "b"], "model": "m", "template_hash": "h",
        "authentic": ["x", "y"], "falsified": ["not x", "not y"],
        "embed_cosine": [0.9, 0.8], "word_change": [0.3, 0.3], "auto_check": "differs",
    })  # fmt: skip
    path = write_validation(tmp_path, base)
    sheet = pd.read_csv(path, dtype=str, keep_default_na=False)
    sheet.loc[sheet["article_id"] == "a", ["manual_valid", "manual_note"]] = ["no", "kept claim"]
    sheet.to_csv(path, index=False)
    # a later run: b's record was removed by hand, c is new
    later = pd.concat([base.iloc[[0]], base.iloc[[1]].assign(article_id="c")])
    write_validation(tmp_path, later)
    again = read_validation(tmp_path).set_index("article_id")
    assert again.loc["a", "manual_valid"] is False and again.loc["a", "manual_note"] == "kept claim"
    assert again.loc["c", "manual_valid"] is None
    assert "b" in again.index  # never lost
    sheet = pd.read_csv(path, dtype=str, keep_default_na=False)
    sheet.loc[0, "manual_valid"] = "maybe"
    sheet.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"validation.csv:2: manual_valid must be yes/no"):
        read_validation(tmp_path)
    assert parse_manual("Yes") is True and parse_manual(" ") is None


def _all_pairs(titles, threshold):
    """The quadratic reference: compare each title with every earlier kept one."""
    from analysis.news.store import title_tokens

    kept, dropped = [], []
    for i, title in enumerate(titles):
        tokens = title_tokens(title)
        if tokens and any(len(tokens & o) / len(tokens | o) >= threshold for o in kept):
            dropped.append(i)
        elif tokens:
            kept.append(tokens)
    return dropped


@pytest.mark.parametrize("threshold", [0.5, 0.8, 1.0])
def test_prefix_filter_drops_exactly_what_all_pairs_drops(threshold):
    rng = np.random.default_rng(7)
    vocab = [
        "the",
        "to",
        "of",
        "in",
        "budget",
        "senate",
        "vote",
        "strike",
        "rail",
        "minister",
        "court",
        "ruling",
        "tax",
        "plan",
        "talks",
        "ends",
        "after",
        "new",
        "law",
        "bill",
    ]
    titles = []
    for _ in range(400):
        n = int(rng.integers(2, 8))
        words = rng.choice(vocab, size=n, replace=True)
        titles.append(" ".join(words))
    assert near_duplicate_titles(titles, threshold) == _all_pairs(titles, threshold)
