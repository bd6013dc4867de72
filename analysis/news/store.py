"""The append-only NewsLens dataset: one Parquet shard per collection day, a manifest, a datasheet.

Layout of ``DATASET_DIR``::

    shards/day=YYYY-MM-DD/articles.parquet   one shard per day, written once, never rewritten
    manifest.json                            shards with row counts and SHA-256, totals
    DATASHEET.md                             sources, licence notes, fields, counts
    logs/YYYY-MM-DD.jsonl                    the run log of each day (every run appends)
    falsified/                               negate records, checks, the validation sheet

A shard is written to a temporary name and renamed, so a crash never leaves half a shard, and
an existing shard is never replaced: a second run of a day adds nothing. Overlaps between days
(the same story collected twice) are kept, as in the seed, and removed when the dataset is read
(:func:`read_articles`), with the counts reported.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pandas as pd

from analysis.llm.store import utc_now

SCHEMA_VERSION = 1
DATASET_NAME = "NewsLens"

# Column -> (Arrow type, description); the datasheet's field table is generated from this.
FIELDS: dict[str, tuple[str, str]] = {
    "article_id": ("string", "SHA-256 (16 hex) of the normalised URL; pair ID of the export"),
    "collected_on": ("string", "the collection day (UTC, YYYY-MM-DD): the shard's day"),
    "collected_at": ("string", "when the run fetched it (ISO 8601 UTC)"),
    "query": ("string", "the NewsAPI q parameter"),
    "domain": ("string", "the outlet's registered domain from the URL (www. removed)"),
    "source_id": ("string", "NewsAPI source.id"),
    "source_name": ("string", "NewsAPI source.name"),
    "author": ("string", "NewsAPI author"),
    "title": ("string", "NewsAPI title"),
    "api_description": ("string", "NewsAPI description (often truncated)"),
    "api_content": ("string", "NewsAPI content (truncated to 200 characters on free plans)"),
    "url": ("string", "the article's URL as NewsAPI gave it"),
    "url_to_image": ("string", "NewsAPI urlToImage"),
    "published_at": ("string", "NewsAPI publishedAt (ISO 8601 UTC): the cutoff filter's date"),
    "final_url": ("string", "the URL after redirects"),
    "http_status": ("int64", "HTTP status of the article page"),
    "fetch_status": ("string", "ok, or why the page gave no description (docs/newslens.md)"),
    "fetch_reason": ("string", "the detail behind a fetch_status other than ok"),
    "encoding": ("string", "the charset the page was decoded with"),
    "article_text": ("string", "main text extracted by trafilatura (not for redistribution)"),
    "webscraped_description": ("string", "the article's opening paragraphs (about 80 words)"),
    "page_description": ("string", "the page's own meta description"),
    "n_words": ("int64", "words of the extracted main text"),
    "description": ("string", "webscraped_description when fetched, else api_description"),
    "description_source": ("string", "webscraped or api"),
}


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64()}
    return pa.schema([(name, types[kind]) for name, (kind, _) in FIELDS.items()])


# --- identity ---

_TRACKING = re.compile(r"^(utm_|fbclid$|gclid$|ocid$|cmpid$|at_medium$|at_campaign$)")


def normalize_url(url: str) -> str:
    """Normalise a URL for identity: lower-case host without ``www.``, no tracking parameters,
    no fragment, no trailing slash, ``http`` treated as ``https``.

    Examples
    --------
    >>> normalize_url("http://WWW.bbc.co.uk/news/a/?utm_source=x&id=2#top")
    'https://bbc.co.uk/news/a?id=2'
    """
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower().removeprefix("www.")
    if parts.port and parts.port not in (80, 443):
        host = f"{host}:{parts.port}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if not _TRACKING.match(k)])
    path = parts.path.rstrip("/") or ""
    return urlunsplit(("https", host, path, query, ""))


def article_id(url: str) -> str:
    """Stable ID of an article: 16 hex digits of SHA-256 over its normalised URL."""
    return hashlib.sha256(normalize_url(url).encode()).hexdigest()[:16]


def domain_of(url: str) -> str:
    """The URL's host without ``www.`` (``https://www.bbc.co.uk/x`` → ``bbc.co.uk``)."""
    return (urlsplit(url).hostname or "").lower().removeprefix("www.")


_PUNCT = str.maketrans(string.punctuation + "‘’“”–—", " " * (len(string.punctuation) + 6))
_OUTLET_SUFFIX = re.compile(r"\s+[-|–—]\s+[^-|–—]{2,40}$")


def title_tokens(title: str | None) -> frozenset[str]:
    """Lower-cased word set of a title without an outlet suffix (`` - BBC News``).

    Examples
    --------
    >>> sorted(title_tokens("Senate passes the budget - BBC News"))
    ['budget', 'passes', 'senate', 'the']
    """
    if not title:
        return frozenset()
    text = _OUTLET_SUFFIX.sub("", title.strip())
    return frozenset(text.lower().translate(_PUNCT).split())


# --- writing ---


def shard_path(root: str | Path, day: str) -> Path:
    """Where the shard of ``day`` lives."""
    return Path(root) / "shards" / f"day={day}" / "articles.parquet"


def write_shard(root: str | Path, day: str, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write the shard of ``day`` once (atomically); refuse to overwrite an existing one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = shard_path(root, day)
    if path.exists():
        raise FileExistsError(f"{path} exists: the dataset is append-only")
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {name: [_cell(row.get(name), kind) for row in rows]
               for name, (kind, _) in FIELDS.items()}  # fmt: skip
    table = pa.table(columns, schema=_arrow_schema())
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


def _cell(value: Any, kind: str) -> Any:
    """A value ready for its Arrow column (pandas hands NaN for missing and numpy scalars)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    if kind == "int64":
        return int(value)
    return str(value)


def shard_days(root: str | Path) -> list[str]:
    """The days that have a shard, sorted."""
    base = Path(root) / "shards"
    if not base.is_dir():
        return []
    return sorted(p.parent.name.removeprefix("day=") for p in base.glob("day=*/articles.parquet"))


def append_log(root: str | Path, day: str, event: Mapping[str, Any]) -> Path:
    """Append one event to the day's run log (JSON lines, timestamped)."""
    path = Path(root) / "logs" / f"{day}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"at": utc_now(), **event}, ensure_ascii=False, default=str) + "\n")
    return path


# --- reading and deduplication ---


@dataclass
class DedupReport:
    """How many rows reading kept and why the others were dropped."""

    n_rows: int = 0
    n_url_duplicates: int = 0
    n_title_duplicates: int = 0
    n_kept: int = 0

    def describe(self) -> str:
        """One line for the terminal."""
        return (
            f"{self.n_rows} collected rows: {self.n_url_duplicates} duplicate URLs and "
            f"{self.n_title_duplicates} near-duplicate titles removed, {self.n_kept} articles"
        )


def read_shards(root: str | Path) -> pd.DataFrame:
    """Every collected row of every shard, in collection order (no deduplication)."""
    frames = [pd.read_parquet(shard_path(root, day)) for day in shard_days(root)]
    if not frames:
        return pd.DataFrame(columns=list(FIELDS))
    return pd.concat(frames, ignore_index=True)


def near_duplicate_titles(titles: Sequence[str | None], threshold: float = 0.8) -> list[int]:
    """Indices of titles whose word set has Jaccard similarity ≥ ``threshold`` with an earlier
    kept title (a dropped title is no reference for later ones).

    Written here because the need is one exact set-similarity self-join over short word sets.
    Comparing every pair would be quadratic (common words such as "the" link almost every
    title), so candidates come from prefix filtering (the AllPairs principle, Bayardo et al.,
    WWW 2007): with each set's words ordered rarest first, two sets with Jaccard ≥ t share a
    word among the first ``|x| - ceil(t·|x|) + 1`` of each. Exact: the same titles are dropped
    as by the all-pairs comparison (checked in the tests); timings in docs/benchmarks.md.

    Examples
    --------
    >>> near_duplicate_titles(["Rail strike ends", "Rail strike ends - Reuters", "Budget passes"])
    [1]
    """
    import math

    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], not {threshold}")
    sets = [title_tokens(t) for t in titles]
    frequency: dict[str, int] = {}
    for tokens in sets:
        for word in tokens:
            frequency[word] = frequency.get(word, 0) + 1
    index: dict[str, list[int]] = {}
    dropped: list[int] = []
    for i, tokens in enumerate(sets):
        if not tokens:
            continue
        ordered = sorted(tokens, key=lambda w: (frequency[w], w))
        prefix = ordered[: len(ordered) - math.ceil(threshold * len(ordered) - 1e-9) + 1]
        seen: set[int] = set()
        duplicate = False
        for word in prefix:
            for j in index.get(word, ()):
                if j in seen:
                    continue
                seen.add(j)
                other = sets[j]
                if len(tokens & other) >= threshold * len(tokens | other) - 1e-9:
                    duplicate = True
                    break
            if duplicate:
                break
        if duplicate:
            dropped.append(i)
            continue
        for word in prefix:
            index.setdefault(word, []).append(i)
    return dropped


def read_articles(
    root: str | Path, *, dedup: bool = True, title_threshold: float = 0.8
) -> tuple[pd.DataFrame, DedupReport]:
    """Read the dataset, keeping the first collected copy of each article.

    Parameters
    ----------
    root : str or Path
        The dataset directory.
    dedup : bool
        Remove rows whose normalised URL, or whose title (word-set Jaccard ≥ ``title_threshold``
        with an earlier kept title), was seen before.
    title_threshold : float
        Near-duplicate title threshold; 1.0 means equal word sets only.

    Returns
    -------
    (pandas.DataFrame, DedupReport)
        The rows (columns of :data:`FIELDS`) and the counts.
    """
    rows = read_shards(root)
    report = DedupReport(n_rows=len(rows))
    if dedup and len(rows):
        rows = rows.sort_values(["collected_on", "published_at"], kind="stable")
        url_dup = rows["article_id"].duplicated(keep="first")
        report.n_url_duplicates = int(url_dup.sum())
        rows = rows.loc[~url_dup].reset_index(drop=True)
        drop = near_duplicate_titles(rows["title"].tolist(), title_threshold)
        report.n_title_duplicates = len(drop)
        rows = rows.drop(index=drop).reset_index(drop=True)
    report.n_kept = len(rows)
    return rows, report


# --- manifest and datasheet ---


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(root: str | Path, runs: Mapping[str, Any] | None = None) -> Path:
    """Regenerate ``manifest.json`` from the shards (runs' settings are kept from the old one)."""
    root = Path(root)
    path = root / "manifest.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    run_info = dict(old.get("runs", {}))
    run_info.update(runs or {})
    shards = []
    for day in shard_days(root):
        shard = shard_path(root, day)
        n = len(pd.read_parquet(shard, columns=["article_id"]))
        shards.append(
            {
                "day": day,
                "path": shard.relative_to(root).as_posix(),
                "n_rows": n,
                "sha256": _sha256(shard),
                **({"run": run_info[day]} if day in run_info else {}),
            }
        )
    _, report = read_articles(root)
    manifest = {
        "name": DATASET_NAME,
        "schema_version": SCHEMA_VERSION,
        "updated_at": utc_now(),
        "fields": {name: kind for name, (kind, _) in FIELDS.items()},
        "shards": shards,
        "counts": asdict(report),
        "runs": run_info,
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def _table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(none yet)\n"
    cols = list(frame.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(map(str, row)) + " |")
    return "\n".join(lines) + "\n"


def write_datasheet(root: str | Path, *, domains: Sequence[str], query: str) -> Path:
    """Regenerate ``DATASHEET.md``: sources, licence notes, fields, counts per day and domain."""
    root = Path(root)
    raw = read_shards(root)
    kept, report = read_articles(root)
    per_day = (
        raw.groupby("collected_on").agg(collected=("article_id", "size")).reset_index()
        if len(raw)
        else pd.DataFrame()
    )
    if len(kept):
        per_day = per_day.merge(
            kept.groupby("collected_on").agg(kept=("article_id", "size")).reset_index(),
            how="left",
        ).fillna({"kept": 0})
        per_day["kept"] = per_day["kept"].astype(int)
    per_domain = (
        kept.groupby("domain")
        .agg(articles=("article_id", "size"), scraped=("fetch_status", lambda s: (s == "ok").sum()))
        .reset_index()
        if len(kept)
        else pd.DataFrame()
    )
    statuses = (
        raw["fetch_status"].value_counts().rename_axis("fetch_status").reset_index(name="rows")
        if len(raw)
        else pd.DataFrame()
    )
    field_rows = pd.DataFrame(
        [{"field": k, "type": t, "meaning": d} for k, (t, d) in FIELDS.items()]
    )
    dates = raw["published_at"].dropna() if len(raw) else pd.Series(dtype=str)
    days = shard_days(root)
    span = f"{days[0]} to {days[-1]}" if days else "none yet"
    text = f"""# {DATASET_NAME} datasheet

Regenerated by `framelab news sync` on {utc_now()}; do not edit by hand.

## Motivation and composition
English news matching `q={query}` from a fixed list of trusted outlets, pulled once a day
from NewsAPI's `everything` endpoint, each article's description scraped from its own page
(the API truncates), so that language models can be fact-checked on news published after
their knowledge cutoff. Records are timestamped (`published_at`) for that filter.

- Outlets: {", ".join(domains)}
- Collection days: {len(days)} ({span})
- Published between: {dates.min() if len(dates) else "-"} and {dates.max() if len(dates) else "-"}
- Rows collected: {report.n_rows}; after deduplication at read time: {report.n_kept}
  ({report.n_url_duplicates} duplicate URLs, {report.n_title_duplicates} near-duplicate titles)

## Collection process
One `everything` query per day (`language=en`, `sortBy=publishedAt`, `pageSize=100`), article
pages fetched politely (robots.txt honoured, one request per host at a time, identified user
agent, size and time caps, trusted outlets on public addresses only), main text extracted
with trafilatura. Pages that cannot be used keep the API's description
(`description_source = api`) and say why in `fetch_status`.

## Licence notes
Titles, descriptions and article texts remain the copyright of their publishers. NewsAPI's
terms govern the API fields. Share the dataset's URLs, dates and the generated falsified
descriptions freely; share `article_text`, scraped descriptions and API text only as the
publishers' terms and your jurisdiction's research exceptions allow. FrameLab's code is MIT.

## Counts per collection day
{_table(per_day)}
## Counts per domain (after deduplication)
{_table(per_domain)}
## Fetch outcomes (all collected rows)
{_table(statuses)}
## Fields
{_table(field_rows)}"""
    path = root / "DATASHEET.md"
    path.write_text(text, encoding="utf-8")
    return path
