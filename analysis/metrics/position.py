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
    "cap_sentences",
    "check_k",
    "map_sentences",
    "map_sentences_top_k",
    "position_rouge_correlation",
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


def _similarities(
    article_sentences: Sequence[str],
    summary_sentences: Sequence[str],
    *,
    method: str,
    scorer: Any,
) -> np.ndarray | None:
    """Summary x article similarity matrix; None when the article has no usable term."""
    if method == "tfidf":
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer()
        try:
            art = vectorizer.fit_transform(article_sentences)
        except ValueError:  # the article has no word of two or more characters
            return None
        return (vectorizer.transform(summary_sentences) @ art.T).toarray()
    if method == "rouge1":
        if scorer is None:
            from rouge_score import rouge_scorer

            scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
        return np.array(
            [
                [scorer.score(a, s)["rouge1"].fmeasure for a in article_sentences]
                for s in summary_sentences
            ]
        )
    raise ValueError(f"method must be 'tfidf' or 'rouge1', got {method!r}")


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
    return [
        ranked[0] if ranked else None
        for ranked in map_sentences_top_k(
            article_sentences, summary_sentences, method=method, scorer=scorer
        )
    ]


def map_sentences_top_k(
    article_sentences: Sequence[str],
    summary_sentences: Sequence[str],
    *,
    top_k: int = 1,
    tolerance: float = 0.1,
    method: str = "tfidf",
    scorer: Any = None,
) -> list[list[int]]:
    """The article sentences each summary sentence is mapped to: its best, or its top k.

    Position bias (Chhabra, Askari & Mohapatra, NAACL 2024) maps each summary sentence to its
    most similar article sentence, and reports top-2 and top-3 mappings as well: an abstractive
    sentence often fuses several article sentences. As in the authors' released code
    (``get_summary_indices_modified``), a sentence whose best similarity is at least
    ``1 - tolerance`` is a near-copy and keeps its single best match; any other sentence is
    mapped to its ``top_k`` most similar article sentences (those with a positive similarity).

    Parameters
    ----------
    article_sentences, summary_sentences : sequence of str
    top_k : int, default 1
        Article sentences per (non-copied) summary sentence.
    tolerance : float, default 0.1
        Near-copy margin: a best similarity >= ``1 - tolerance`` keeps one match.
    method, scorer
        As for :func:`map_sentences`.

    Returns
    -------
    list of list of int
        Per summary sentence, article sentence indices from most to least similar (ties: the
        earlier sentence first); empty when no article sentence shares a term.

    Examples
    --------
    >>> article = ["the cat sat", "a dog ran far", "the dog sat"]
    >>> map_sentences_top_k(article, ["the dog sat"], top_k=2)
    [[2]]
    >>> map_sentences_top_k(article, ["dog sat"], top_k=2)
    [[2, 1]]
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if not summary_sentences:
        return []
    sims = _similarities(article_sentences, summary_sentences, method=method, scorer=scorer)
    if sims is None:
        return [[] for _ in summary_sentences]
    out: list[list[int]] = []
    for row in sims:
        # A stable sort on the negated scores keeps the earliest of tied sentences first.
        order = [int(j) for j in np.argsort(-row, kind="stable") if row[j] > 0]
        keep = 1 if order and row[order[0]] >= 1 - tolerance else top_k
        out.append(order[:keep])
    return out


def summary_positions(
    long: pd.DataFrame,
    *,
    k: int,
    method: str = "tfidf",
    top_k: int = 1,
    tolerance: float = 0.1,
    unique: bool = False,
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
    top_k, tolerance : int, float
        Top-k mapping (:func:`map_sentences_top_k`): each summary sentence that is not a
        near-copy contributes up to ``top_k`` positions; 1 is the paper's headline mapping.
    unique : bool, default False
        Count each article sentence once per summary, however many summary sentences map to
        it (the authors' released code does; the paper's text maps sentence by sentence).
    progress : bool, default False
        Show a tqdm bar over articles.

    Returns
    -------
    pandas.DataFrame
        One row per mapping of a summary sentence: ``id``, ``system``, ``sentence`` (0-based
        index in the summary), ``rank`` (1 for the best match, 2, … for top-k matches),
        ``n_article_sentences``, ``article_sentence`` (mapped index, NaN if unmapped),
        ``segment`` (1..K, NaN if unmapped) and ``position`` (``(segment - 0.5) / K``). An
        unmapped sentence has one row with ``rank`` 1 and NaN position.

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

    rows: list[tuple[Any, str, int, int, int, float, float, float]] = []
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
        ranked = map_sentences_top_k(
            sentences, summ, top_k=top_k, tolerance=tolerance, method=method, scorer=scorer
        )
        seen: set[tuple[str, int]] = set()
        for (system, i), matches in zip(owners, ranked, strict=True):
            if not matches:
                rows.append((key, system, i, 1, n, np.nan, np.nan, np.nan))
            for rank, idx in enumerate(matches, start=1):
                if unique and (system, idx) in seen:
                    continue
                seen.add((system, idx))
                seg = segment_of(idx, n, k)
                rows.append((key, system, i, rank, n, idx, seg, (seg - 0.5) / k))
    columns = ["id", "system", "sentence", "rank", "n_article_sentences", "article_sentence"]
    return pd.DataFrame(rows, columns=[*columns, "segment", "position"])


def cap_sentences(
    long: pd.DataFrame,
    *,
    n: int | None = None,
    reference: str = GOLD,
    seed: int = 0,
) -> pd.DataFrame:
    """Randomly sample each generated summary down to the required sentence count.

    LLM summaries are often longer than the gold ones, and every extra sentence adds positions
    to the system's distribution. The position-bias authors therefore compared summaries of the
    required length, sampling sentences at random from longer ones (their ``*_capped_random``
    runs). The required count is ``n``, or, when ``n`` is None, the gold summary's sentence count
    for the same article. Summaries at or under the count are unchanged; the sampled sentences
    keep their order and are joined by line breaks, which always end a sentence in
    :func:`analysis.metrics.text.split_sentences`, so they are re-split exactly.

    Parameters
    ----------
    long : pandas.DataFrame
        Output of :func:`systems_long`.
    n : int, optional
        A fixed sentence count; default the gold summary's.
    reference : str, default "gold"
        The reference system (never sampled).
    seed : int, default 0
        The draw for each (article, system) is seeded by ``(seed, id, system)``, so it does
        not depend on which other systems or articles are in the file.

    Returns
    -------
    pandas.DataFrame
        ``long`` with ``summary`` sampled, plus ``n_sentences_before`` and ``n_sentences``.
    """
    import random

    if n is not None and n < 1:
        raise ValueError(f"the sentence count must be at least 1, got {n}")
    out = long.copy()
    text = out["summary"].map(lambda t: "" if pd.isna(t) else str(t))
    parts = text.map(split_sentences)
    gold_counts = {
        key: len(p)
        for key, p, sys_ in zip(out["id"], parts, out["system"], strict=True)
        if sys_ == reference
    }
    summaries, before, after = [], [], []
    for key, system, sents, original in zip(
        out["id"], out["system"], parts, out["summary"], strict=True
    ):
        want = n if n is not None else gold_counts.get(key)
        before.append(len(sents))
        if system == reference or want is None or len(sents) <= want:
            summaries.append(original)
            after.append(len(sents))
            continue
        # A str seed is hashed with SHA-512 by random.seed: stable across runs and platforms.
        picked = sorted(random.Random(f"{seed}:{key}:{system}").sample(range(len(sents)), want))
        summaries.append("\n".join(sents[i] for i in picked))
        after.append(want)
    out["summary"] = summaries
    out["n_sentences_before"] = before
    out["n_sentences"] = after
    return out


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


def position_rouge_correlation(
    table: pd.DataFrame,
    *,
    bias: str = "wasserstein",
    metrics: Sequence[str] = ("rouge1", "rouge2", "rougeL"),
    by: Sequence[str] = (),
) -> pd.DataFrame:
    """Spearman correlation between position bias W and ROUGE across systems.

    The position-bias paper asks whether a model's position bias tracks its summary quality, and
    reports the rank correlation of W with ROUGE over the models (and datasets) it compares;
    ``scipy.stats.spearmanr`` computes it here.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per system (and dataset): a ``bias`` column and the ``metrics`` columns, e.g.
        :func:`position_bias` merged with :func:`summary_rouge` on ``system``.
    bias : str, default "wasserstein"
    metrics : sequence of str
        The ROUGE columns to correlate with ``bias``.
    by : sequence of str
        Correlate within each group of these columns (e.g. per dataset); default all rows.

    Returns
    -------
    pandas.DataFrame
        One row per (group, metric): the ``by`` columns, ``metric``, ``n`` (systems with both
        values), ``rho`` (Spearman's ρ) and ``p_val`` (two-sided); NaN with fewer than three
        systems or a constant column.

    Examples
    --------
    >>> t = pd.DataFrame({"wasserstein": [0.1, 0.2, 0.3, 0.4], "rouge1": [0.4, 0.3, 0.1, 0.2]})
    >>> round(position_rouge_correlation(t, metrics=["rouge1"])["rho"].iloc[0], 6)
    -0.8
    """
    import warnings

    from scipy.stats import spearmanr

    from analysis.metrics.records import each_group

    keys = list(by)
    rows = []
    for key_vals, g in each_group(table, keys):
        for metric in metrics:
            pair = g[[bias, metric]].astype(float).dropna()
            rho = p_val = np.nan
            constant = pair[bias].nunique() < 2 or pair[metric].nunique() < 2
            if len(pair) >= 3 and not constant:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # n = 3 draws a small-sample warning
                    res = spearmanr(pair[bias], pair[metric])
                rho, p_val = float(res.statistic), float(res.pvalue)
            rows.append({**key_vals, "metric": metric, "n": len(pair), "rho": rho, "p_val": p_val})
    return pd.DataFrame(rows, columns=[*keys, "metric", "n", "rho", "p_val"])
