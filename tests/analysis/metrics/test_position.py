"""Position bias: segments, sentence mapping, distributions, Wasserstein and ROUGE."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from rouge_score import rouge_scorer
from scipy.stats import wasserstein_distance

from analysis.metrics.position import (
    check_k,
    map_sentences,
    position_bias,
    positional_distribution,
    summary_positions,
    summary_rouge,
    systems_long,
)

_NATO = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"
WORDS = _NATO.split()
# Ten sentences with distinct vocabularies, so each summary sentence maps unambiguously.
ARTICLE_10 = " ".join(f"{w.capitalize()} {w}s {w}ed here." for w in WORDS)


def _frame(gold: str, systems: dict[str, str], article: str = ARTICLE_10) -> pd.DataFrame:
    return systems_long(
        pd.DataFrame([{"id": "a1", "article": article, "gold": gold, "summaries": systems}])
    )


def test_map_sentences_tfidf_picks_the_matching_sentence():
    article = ["The cat sat on the mat.", "Dogs bark loudly at night.", "Birds sing."]
    summary = ["Loud dogs bark.", "A cat on a mat.", "Nothing shared here."]
    assert map_sentences(article, summary) == [1, 0, None]
    assert map_sentences(article, summary, method="rouge1") == [1, 0, None]


def test_positions_on_n10_k3():
    # Gold copies sentences 1 and 10 (segments 1 and 3); the system copies sentence 5 (segment 2).
    long = _frame(gold="Alpha alphas. Juliet juliets.", systems={"sys": "Echo echoed."})
    pos = summary_positions(long, k=3)
    gold = pos.loc[pos["system"] == "gold"]
    assert gold["article_sentence"].tolist() == [0, 9]
    assert gold["segment"].tolist() == [1, 3]
    assert gold["position"].tolist() == pytest.approx([0.5 / 3, 2.5 / 3])
    sys_row = pos.loc[pos["system"] == "sys"].iloc[0]
    assert (sys_row["article_sentence"], sys_row["segment"]) == (4, 2)  # 0..3 | 4..6 | 7..9

    dist = positional_distribution(pos, k=3)
    gold_dist = dist.loc[dist["system"] == "gold"]
    assert gold_dist["n"].tolist() == [1, 0, 1]
    assert gold_dist["share"].tolist() == [0.5, 0.0, 0.5]

    bias = position_bias(pos).iloc[0]
    # Two point masses at 1/6 and 5/6 against one at 1/2: every unit of mass moves 1/3.
    assert bias["wasserstein"] == pytest.approx(1 / 3)
    assert bias["wasserstein"] == pytest.approx(wasserstein_distance([1 / 6, 5 / 6], [0.5]))


def test_wasserstein_matches_scipy_on_many_articles():
    rng = np.random.default_rng(7)
    words = WORDS
    rows = []
    for i in range(20):
        pick_gold = rng.choice(10, size=2, replace=False)
        pick_sys = rng.choice(10, size=3, replace=False)
        rows.append(
            {
                "id": f"a{i}",
                "article": ARTICLE_10,
                "gold": " ".join(f"{words[j].capitalize()} {words[j]}s." for j in pick_gold),
                "summaries": {"s": " ".join(f"{words[j].capitalize()}." for j in pick_sys)},
            }
        )
    pos = summary_positions(systems_long(pd.DataFrame(rows)), k=4)
    expected = wasserstein_distance(
        pos.loc[pos["system"] == "gold", "position"], pos.loc[pos["system"] == "s", "position"]
    )
    assert position_bias(pos).iloc[0]["wasserstein"] == pytest.approx(expected)
    assert pos["segment"].notna().all()


def test_k_larger_than_shortest_article_is_refused_by_name():
    long = systems_long(
        pd.DataFrame(
            [
                {"id": "long", "article": ARTICLE_10, "gold": "Alpha.", "summaries": {}},
                {"id": "short-one", "article": "One. Two.", "gold": "One.", "summaries": {}},
            ]
        )
    )
    with pytest.raises(ValueError, match=r"article 'short-one' \(2 sentences\)"):
        summary_positions(long, k=3)
    check_k({"x": 7}, 7)  # K equal to N is allowed: one sentence per segment


def test_n7_k7_each_sentence_its_own_segment():
    article = " ".join(
        f"{w.capitalize()} x{w}." for w in ["one", "two", "three", "four", "five", "six", "seven"]
    )
    long = _frame(gold="Seven xseven.", systems={"s": "Four xfour."}, article=article)
    pos = summary_positions(long, k=7)
    assert pos.set_index("system")["segment"].to_dict() == {"gold": 7, "s": 4}
    assert position_bias(pos).iloc[0]["wasserstein"] == pytest.approx(3 / 7)


def test_unmapped_sentences_are_counted_not_placed():
    long = _frame(gold="Alpha.", systems={"s": "Alpha. Zulu zulus."})
    bias = position_bias(summary_positions(long, k=2)).iloc[0]
    assert (bias["n_sentences"], bias["n_unmapped"]) == (1, 1)


def test_summary_rouge_matches_rouge_score():
    long = _frame(
        gold="The cat sat on the mat.",
        systems={"s": "The cat was sitting on a mat.", "t": "Dogs bark."},
    )
    table = summary_rouge(long).set_index("system")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    ref = scorer.score("The cat sat on the mat.", "The cat was sitting on a mat.")
    for metric in ("rouge1", "rouge2", "rougeL"):
        assert table.loc["s", metric] == pytest.approx(ref[metric].fmeasure)
    assert table.loc["t", "rouge1"] == 0.0


def test_system_named_gold_is_refused():
    with pytest.raises(ValueError, match="may not be called"):
        _frame(gold="x", systems={"gold": "y"})
