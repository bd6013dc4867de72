"""Position bias: where in the article do summary sentences come from?

Each article of N sentences is cut into K segments of near-equal sentence count
(:func:`analysis.metrics.text.segment_bounds`). Each summary sentence is mapped to its most similar
article sentence (TF-IDF cosine, or ROUGE-1 F1) and takes that sentence's segment; its position is
the segment's relative centre ``(j - 0.5) / K``. The positional distributions of the gold and each
generated summary set are compared by the Wasserstein distance (``scipy.stats``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.metrics.text import segment_of, split_sentences

__all__ = [
    "GOLD",
    "check_k",
    "map_sentences",
    "position_bias",
    "position_input_from_records",
    "positional_distribution",
    "summary_positions",
    "summary_rouge",
    "systems_long",
]

GOLD = "gold"


def systems_long(
    data: pd.DataFrame,
    *,
    id: str = "id",  # noqa: A002 - the field is called id in the input format
    article: str = "article",
    gold: str = "gold",
    summaries: str = "summaries",
) -> pd.DataFrame:
    """Reshape the position input (one row per article) to one row per (article, system).

    Parameters
    ----------
    data : pandas.DataFrame
        Columns ``id``, ``article``, ``gold`` and ``summaries`` (a mapping system -> text, or
        that mapping as a JSON string, as in a CSV cell).

    Returns
    -------
    pandas.DataFrame
        ``id``, ``article``, ``system`` (``"gold"`` for the reference) and ``summary``.
    """
    rows: list[dict[str, Any]] = []
    for rec in data.to_dict(orient="records"):
        rows.append({"id": rec[id], "article": rec[article], "system": GOLD, "summary": rec[gold]})
        generated: Any = rec.get(summaries) or {}
        if isinstance(generated, str):
            # CSV files carry the mapping as a JSON object in one cell.
            generated = json.loads(generated)
        if not isinstance(generated, Mapping):
            raise ValueError(f"article {rec[id]!r}: {summaries!r} must map system -> summary")
        for system, text in generated.items():
            if system == GOLD:
                raise ValueError(f"article {rec[id]!r}: a system may not be called {GOLD!r}")
            rows.append({"id": rec[id], "article": rec[article], "system": system, "summary": text})
    return pd.DataFrame(rows, columns=["id", "article", "system", "summary"])


def check_k(n_sentences: Mapping[Any, int], k: int) -> None:
    """Refuse a K larger than the shortest article's sentence count, naming that article."""
    if k < 1:
        raise ValueError(f"K must be at least 1, got {k}")
    if not n_sentences:
        return
    shortest = min(n_sentences, key=lambda key: n_sentences[key])
    if n_sentences[shortest] < k:
        raise ValueError(
            f"K = {k} exceeds the sentence count of article {shortest!r} "
            f"({n_sentences[shortest]} sentences); choose K <= {n_sentences[shortest]}"
        )


def map_sentences(
    article_sentences: Sequence[str],
    summary_sentences: Sequence[str],
    *,
    method: str = "tfidf",
    scorer: Any = None,
) -> list[int | None]:
    """Index of the most similar article sentence for each summary sentence.

    Parameters
    ----------
    article_sentences, summary_sentences : sequence of str
    method : {"tfidf", "rouge1"}
        ``tfidf``: cosine between TF-IDF vectors of a vectorizer fitted on this article's sentences
        (each sentence a document; scikit-learn defaults: lower-case, ``\\b\\w\\w+\\b`` tokens,
        smoothed IDF, L2 norm). ``rouge1``: ROUGE-1 F1 (``rouge-score``, stemmed).
    scorer : rouge_score.rouge_scorer.RougeScorer, optional
        Reused across calls for ``rouge1``.

    Returns
    -------
    list of int or None
        Ties go to the earliest sentence; ``None`` when no article sentence shares a term.
    """
    if not summary_sentences:
        return []
    if method == "tfidf":
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer()
        try:
            art = vectorizer.fit_transform(article_sentences)
        except ValueError:  # the article has no word of two or more characters
            return [None] * len(summary_sentences)
        sims = (vectorizer.transform(summary_sentences) @ art.T).toarray()
    elif method == "rouge1":
        if scorer is None:
            from rouge_score import rouge_scorer

            scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
        sims = np.array(
            [
                [scorer.score(a, s)["rouge1"].fmeasure for a in article_sentences]
                for s in summary_sentences
            ]
        )
    else:
        raise ValueError(f"method must be 'tfidf' or 'rouge1', got {method!r}")
    best = sims.argmax(axis=1)
    return [int(b) if sims[i, b] > 0 else None for i, b in enumerate(best)]


def summary_positions(
    long: pd.DataFrame,
    *,
    k: int,
    method: str = "tfidf",
    progress: bool = False,
) -> pd.DataFrame:
    """Segment and relative position of every summary sentence.

    Parameters
    ----------
    long : pandas.DataFrame
        Output of :func:`systems_long` (``id``, ``article``, ``system``, ``summary``).
    k : int
        Number of segments; must not exceed the shortest article's sentence count.
    method : {"tfidf", "rouge1"}
        Sentence mapping (see :func:`map_sentences`).
    progress : bool, default False
        Show a tqdm bar over articles.

    Returns
    -------
    pandas.DataFrame
        One row per summary sentence: ``id``, ``system``, ``sentence`` (0-based index in the
        summary), ``n_article_sentences``, ``article_sentence`` (mapped index, NaN if unmapped),
        ``segment`` (1..K, NaN if unmapped) and ``position`` (``(segment - 0.5) / K``).

    Raises
    ------
    ValueError
        When ``k`` exceeds an article's sentence count (the article is named).
    """
    articles = long.drop_duplicates("id").set_index("id")["article"]
    split = {key: split_sentences(str(text)) for key, text in articles.items()}
    check_k({key: len(s) for key, s in split.items()}, k)
    scorer = None
    if method == "rouge1":
        from rouge_score import rouge_scorer

        scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)

    rows: list[tuple[Any, str, int, int, float, float, float]] = []
    grouped = long.groupby("id", sort=False)
    if progress:
        from tqdm.auto import tqdm

        grouped = tqdm(grouped, total=len(split), desc="position", unit="article")
    for key, group in grouped:
        sentences = split[key]
        n = len(sentences)
        # One mapping call per article: the vectorizer is fitted once for all its summaries.
        owners: list[tuple[str, int]] = []
        summ: list[str] = []
        for system, text in zip(group["system"], group["summary"], strict=True):
            parts = split_sentences("" if pd.isna(text) else str(text))
            owners.extend((system, i) for i in range(len(parts)))
            summ.extend(parts)
        best = map_sentences(sentences, summ, method=method, scorer=scorer)
        for (system, i), idx in zip(owners, best, strict=True):
            if idx is None:
                rows.append((key, system, i, n, np.nan, np.nan, np.nan))
            else:
                seg = segment_of(idx, n, k)
                rows.append((key, system, i, n, idx, seg, (seg - 0.5) / k))
    columns = ["id", "system", "sentence", "n_article_sentences", "article_sentence", "segment"]
    return pd.DataFrame(rows, columns=[*columns, "position"])


def positional_distribution(positions: pd.DataFrame, *, k: int) -> pd.DataFrame:
    """Share of mapped summary sentences falling in each segment, per system.

    Returns
    -------
    pandas.DataFrame
        One row per (system, segment 1..K): ``system``, ``segment``, ``position`` (segment
        centre), ``n`` (sentences) and ``share`` (``n`` over the system's mapped sentences).
    """
    mapped = positions.dropna(subset=["segment"])
    rows = []
    for system, g in mapped.groupby("system", sort=True):
        counts = np.bincount(g["segment"].astype(int), minlength=k + 1)[1:]
        for j, n in enumerate(counts, start=1):
            rows.append(
                {
                    "system": system,
                    "segment": j,
                    "position": (j - 0.5) / k,
                    "n": int(n),
                    "share": n / counts.sum(),
                }
            )
    return pd.DataFrame(rows, columns=["system", "segment", "position", "n", "share"])


def position_bias(positions: pd.DataFrame, *, reference: str = GOLD) -> pd.DataFrame:
    """Wasserstein distance between each system's positions and the reference's.

    Returns
    -------
    pandas.DataFrame
        One row per non-reference system: ``system``, ``wasserstein``
        (``scipy.stats.wasserstein_distance`` of the two position samples), ``mean_position``,
        ``reference_mean_position``, ``n_sentences`` (mapped), ``n_unmapped``.
    """
    from scipy.stats import wasserstein_distance

    ref = positions.loc[positions["system"] == reference, "position"].dropna().to_numpy()
    if ref.size == 0:
        raise ValueError(f"no mapped {reference!r} summary sentences to compare against")
    rows = []
    for system, g in positions.groupby("system", sort=True):
        if system == reference:
            continue
        pos = g["position"].dropna().to_numpy()
        rows.append(
            {
                "system": system,
                "wasserstein": wasserstein_distance(ref, pos) if pos.size else np.nan,
                "mean_position": pos.mean() if pos.size else np.nan,
                "reference_mean_position": ref.mean(),
                "n_sentences": int(pos.size),
                "n_unmapped": int(g["position"].isna().sum()),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "system",
            "wasserstein",
            "mean_position",
            "reference_mean_position",
            "n_sentences",
            "n_unmapped",
        ],
    )


def summary_rouge(
    long: pd.DataFrame, *, reference: str = GOLD, stemmer: bool = True
) -> pd.DataFrame:
    """ROUGE-1/2/L F1 of each system's summaries against the reference (``rouge-score``).

    Returns
    -------
    pandas.DataFrame
        One row per non-reference system: ``system``, ``n``, ``rouge1``, ``rouge2``, ``rougeL``
        (mean F1 over articles that have both summaries).
    """
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=stemmer)
    ref = long.loc[long["system"] == reference].set_index("id")["summary"]
    rows = []
    for system, g in long.loc[long["system"] != reference].groupby("system", sort=True):
        scores = [
            scorer.score(str(ref[key]), "" if pd.isna(text) else str(text))
            for key, text in zip(g["id"], g["summary"], strict=True)
            if key in ref.index
        ]
        rows.append(
            {
                "system": system,
                "n": len(scores),
                **{
                    m: float(np.mean([s[m].fmeasure for s in scores])) if scores else np.nan
                    for m in ("rouge1", "rouge2", "rougeL")
                },
            }
        )
    return pd.DataFrame(rows, columns=["system", "n", "rouge1", "rouge2", "rougeL"])


def position_input_from_records(
    records: pd.DataFrame,
    *,
    gold: str = "gold",
    source: str = "text",
    summary: str = "output",
) -> pd.DataFrame:
    """The position-bias input (one row per article) from ``summarize`` records.

    Each summarize record contributes its model's summary (system name ``model``, or
    ``model/method`` for a mitigation method); the article is the source text and the gold summary
    the input's ``gold`` field.

    Returns
    -------
    pandas.DataFrame
        ``id``, ``article``, ``gold``, ``summaries`` (mapping system -> summary).
    """
    from analysis.metrics.records import column, select_task

    rows = select_task(records, "summarize")
    gold_col, source_col, summary_col = (column(rows, f) for f in (gold, source, summary))
    articles: dict[str, dict[str, Any]] = {}
    for rec in rows.to_dict(orient="records"):
        dataset = rec.get("dataset")
        # Missing values arrive as None or NaN, depending on the other files read alongside.
        key = f"{dataset}/{rec['item_id']}" if isinstance(dataset, str) else str(rec["item_id"])
        entry = articles.setdefault(
            key, {"id": key, "article": rec[source_col], "gold": rec[gold_col], "summaries": {}}
        )
        method = rec.get("method")
        system = str(rec.get("model"))
        if isinstance(method, str) and method != "baseline":
            system = f"{system}/{method}"
        entry["summaries"][system] = rec[summary_col]
    return pd.DataFrame(list(articles.values()), columns=["id", "article", "gold", "summaries"])
