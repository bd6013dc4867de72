"""The seed datasets' draws: MediaSum's seeded random sample and the All the News loader.

The All the News files under ``data/`` are hand-made rows in the two published layouts (Kaggle
v1 ``articles1.csv``: an unnamed index column, then ``id,title,publication,author,date,year,
month,url,content``; v2.0 ``all-the-news-2-1.csv``: an unnamed index column, then ``date,year,
month,day,author,title,article,url,section,publication``), with the quirks of the real files:
years and months as floats, quoted multi-line bodies with doubled quotes, empty fields.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from analysis.llm.loaders import LoaderError, load, load_all_the_news, load_mediasum

DATA = Path(__file__).parent / "data"


def _mediasum(tmp_path: Path, n: int = 12) -> Path:
    records = []
    for i in range(n):
        # Every third transcript is longer than the 40-token budget used below.
        words = 60 if i % 3 == 2 else 5
        records.append(
            {
                "id": f"CNN-{i}",
                "program": "P",
                "date": "2015-01-01",
                "summary": f"Summary {i}.",
                "utt": [" ".join(["word"] * words)],
                "speaker": ["HOST"],
            }
        )
    path = tmp_path / "news_dialogue.json"
    path.write_text(json.dumps(records))
    return path


def test_mediasum_draws_a_seeded_random_sample_within_the_token_budget(tmp_path: Path) -> None:
    """The primacy study: a seeded random 1,000 of the transcripts of at most 4,000 tokens.

    Before, ``load_mediasum(path, n=…)`` returned the first n records of the file, long or not.
    """
    path = _mediasum(tmp_path)
    eligible = [f"CNN-{i}" for i in range(12) if i % 3 != 2]  # 8 transcripts of 7 tokens
    drawn = load_mediasum(path, n=4, max_tokens=40, seed=7)
    ids = [it["item_id"] for it in drawn]
    # The same draw as random.Random(7).sample over the eligible transcripts, in file order.
    expected = [eligible[i] for i in sorted(random.Random(7).sample(range(len(eligible)), 4))]
    assert ids == expected
    assert ids != eligible[:4]  # not the first n
    assert all(it["n_tokens"] <= 40 for it in drawn)
    assert load_mediasum(path, n=4, max_tokens=40, seed=7) == drawn  # reproducible
    assert [it["item_id"] for it in load_mediasum(path, n=4, max_tokens=40, seed=8)] != ids
    # Without n every eligible transcript comes back; max_tokens=None keeps the long ones too.
    assert [it["item_id"] for it in load_mediasum(path, max_tokens=40)] == eligible
    assert len(load_mediasum(path, max_tokens=None)) == 12
    # The default budget is the paper's 4,000 tokens.
    assert len(load_mediasum(path)) == 12
    # Through the dispatcher the CLI uses: --limit draws, --seed seeds.
    via_cli = load("mediasum", path, limit=4, max_tokens=40, seed=7)
    assert [it["item_id"] for it in via_cli] == expected
    with pytest.raises(LoaderError, match="must not be negative"):
        load_mediasum(path, n=-1)


def test_all_the_news_v1_layout() -> None:
    items = load_all_the_news(DATA / "all_the_news_v1.csv")
    # The empty article is skipped; the rest keep file order and the file's own ids.
    assert [it["item_id"] for it in items] == ["17283", "17284", "17285", "17287"]
    first = items[0]
    assert first["version"] == "v1"
    assert first["publication"] == "New York Times"
    assert first["date"] == "2016-12-31"
    assert first["url"] is None and first["section"] is None
    # A quoted, multi-line body with doubled quotes arrives whole.
    assert "\nThe neighborhood" in items[1]["text"]
    assert items[1]["text"].endswith('"you\'re a name on a list."')
    assert items[1]["author"] == "Ann Writer and Bo Reporter"
    # An empty date with only year and month: the day is not guessed.
    assert items[2]["date"] is None
    assert items[2]["title"] == 'Tyrone Tells All, in "Five Quotes"'


def test_all_the_news_v2_layout_and_pre_cutoff_set() -> None:
    path = DATA / "all_the_news_v2.csv"
    items = load_all_the_news(path)
    assert [it["date"] for it in items] == ["2016-12-09", "2016-10-07", "2019-04-02", None]
    assert items[2]["section"] == "Politics" and items[2]["publication"] == "Reuters"
    assert all(it["version"] == "v2" for it in items)
    # v2.0 has no id column: a stable content hash instead, the same on every read.
    assert [it["item_id"] for it in load_all_the_news(path)] == [it["item_id"] for it in items]
    assert len({it["item_id"] for it in items}) == 4
    # The pre-cutoff set: dated on or before the cutoff; the undated row is never pre-cutoff.
    pre = load_all_the_news(path, cutoff="2016-12-09")
    assert [it["date"] for it in pre] == ["2016-12-09", "2016-10-07"]
    assert [it["title"] for it in load_all_the_news(path, publications=["reuters"])] == [
        "The president asks Congress to act on the border"
    ]
    drawn = load("allnews", path, limit=2, seed=1, cutoff="2020-01-01")
    assert len(drawn) == 2 and all(it["date"] <= "2020-01-01" for it in drawn)
    with pytest.raises(LoaderError, match="not a date"):
        load_all_the_news(path, cutoff="June 2016")


def test_all_the_news_refuses_other_layouts(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text("id,headline,body\n1,A,B\n")
    with pytest.raises(LoaderError, match="not an All the News file.*v2.0 columns"):
        load_all_the_news(other)
    no_id = tmp_path / "no_id.csv"
    header = "id,title,publication,author,date,year,month,url,content"
    no_id.write_text(f"{header}\n,T,P,A,2016-01-01,2016.0,1.0,,Body text.\n")
    with pytest.raises(LoaderError, match=r"no_id.csv:2: a v1 row needs its id"):
        load_all_the_news(no_id)
