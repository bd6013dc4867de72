"""Judge overlap bias: BLEU/ROUGE similarity, two-order outcomes, bins and length filter."""

from __future__ import annotations

import pandas as pd
import pytest
import sacrebleu
from rouge_score import rouge_scorer

from analysis.metrics.overlap import (
    judge_outcomes,
    length_filter,
    outcome_shares,
    overlap_similarity,
)

GEN = "The committee approved the new budget on Tuesday after a long debate."
REF = "After a long debate, the committee approved the budget on Tuesday."


def test_similarity_matches_sacrebleu_and_rouge_score():
    row = overlap_similarity(pd.DataFrame({"generated": [GEN], "reference": [REF]})).iloc[0]
    # sacrebleu.sentence_bleu is BLEU-4 with effective order and exp smoothing.
    bleu4 = sacrebleu.sentence_bleu(GEN, [REF]).score / 100
    bleu1 = (
        sacrebleu.metrics.BLEU(max_ngram_order=1, effective_order=True)
        .sentence_score(GEN, [REF])
        .score
        / 100
    )
    rouge = rouge_scorer.RougeScorer(["rouge1", "rouge2"], use_stemmer=True).score(REF, GEN)
    assert row["bleu4"] == pytest.approx(bleu4)
    assert row["bleu1"] == pytest.approx(bleu1)
    assert row["rouge1"] == pytest.approx(rouge["rouge1"].fmeasure)
    assert row["rouge2"] == pytest.approx(rouge["rouge2"].fmeasure)
    assert row["similarity"] == pytest.approx((bleu1 + bleu4 + row["rouge1"] + row["rouge2"]) / 4)


def test_bleu1_hand_computed():
    # Candidate "the cat sat on the mat" vs "the cat is on the mat": 5 of 6 unigrams match
    # (clipped), equal lengths so no brevity penalty: BLEU-1 = 5/6.
    row = overlap_similarity(
        pd.DataFrame(
            {"generated": ["the cat sat on the mat"], "reference": ["the cat is on the mat"]}
        )
    ).iloc[0]
    assert row["bleu1"] == pytest.approx(5 / 6)
    assert row["rouge1"] == pytest.approx(5 / 6)
    assert row["rouge2"] == pytest.approx(3 / 5)  # the-cat, on-the, the-mat of 5 bigrams


def _verdicts(rows):
    return pd.DataFrame(rows, columns=["item_id", "model", "first", "second", "label"])


def test_two_order_outcomes():
    judgments = _verdicts(
        [
            ("1", "j", "human", "gpt", "human"),  # human first, chose human
            ("1", "j", "gpt", "human", "human"),  # human second, chose human -> GT
            ("2", "j", "human", "gpt", "gpt"),
            ("2", "j", "gpt", "human", "gpt"),  # -> Generated
            ("3", "j", "human", "gpt", "human"),
            ("3", "j", "gpt", "human", "gpt"),  # chose the first both times
            ("4", "j", "human", "gpt", "gpt"),
            ("4", "j", "gpt", "human", "human"),  # chose the last both times
            ("5", "j", "human", "gpt", "other"),
            ("5", "j", "gpt", "human", "gpt"),  # invalid verdict
            ("6", "j", "human", "gpt", "human"),  # one order missing
        ]
    )
    out = judge_outcomes(judgments).set_index("item_id")["outcome"].to_dict()
    assert out == {
        "1": "GT",
        "2": "Generated",
        "3": "tied-chose-first",
        "4": "tied-chose-last",
        "5": "other",
        "6": "other",
    }


def test_pair_without_the_human_system_is_refused():
    with pytest.raises(ValueError, match="exactly one of first/second"):
        judge_outcomes(_verdicts([("1", "j", "a", "b", "a")]), gt="human")


def test_outcome_shares_per_bin():
    outcomes = pd.DataFrame(
        {
            "judge": "j",
            "outcome": ["GT", "GT", "Generated", "tied-chose-first", "other"],
            "similarity": [0.05, 0.45, 0.49, 0.5, 1.0],
        }
    )
    shares = outcome_shares(outcomes, bins=[0, 0.25, 0.5, 0.75, 1.0])
    assert len(shares) == 4 * 5
    pivot = shares.pivot_table(index="bin_low", columns="outcome", values="n", aggfunc="sum")
    assert pivot.loc[0.0, "GT"] == 1
    assert pivot.loc[0.25, "GT"] == 1 and pivot.loc[0.25, "Generated"] == 1
    assert pivot.loc[0.5, "tied-chose-first"] == 1  # 0.5 falls in [0.5, 0.75)
    assert pivot.loc[0.75, "other"] == 1  # the top edge belongs to the last bin
    bin2 = shares.loc[shares["bin_low"] == 0.25].set_index("outcome")["share"]
    assert bin2["GT"] == 0.5 and bin2["Generated"] == 0.5 and bin2["other"] == 0.0
    assert shares.loc[shares["bin_low"] == 0.0, "share"].sum() == pytest.approx(1.0)


def test_empty_bin_share_is_nan():
    outcomes = pd.DataFrame({"judge": "j", "outcome": ["GT"], "similarity": [0.1]})
    shares = outcome_shares(outcomes, bins=2)
    assert shares.loc[shares["bin_low"] == 0.5, "share"].isna().all()


def test_length_filter_is_on_the_human_reference():
    # The overlap paper keeps items whose *human reference* has 95-105 words. The case to guard:
    # ten references of exactly 100 words; filtering the generated summaries kept 1 of 10.
    generated = [" ".join(["w"] * n) for n in (20, 50, 80, 94, 100, 106, 120, 150, 200, 300)]
    data = pd.DataFrame({"generated": generated, "reference": [" ".join(["w"] * 100)] * 10})
    assert len(length_filter(data)) == 10
    bounds = pd.DataFrame(
        {
            "reference": [" ".join(["w"] * n) for n in (94, 95, 100, 105, 106)],
            "generated": [" ".join(["w"] * n) for n in (100, 100, 3, 100, 100)],
        }
    )
    kept = length_filter(bounds)["reference"].str.split().str.len().tolist()
    assert kept == [95, 100, 105]  # inclusive bounds
    both = length_filter(bounds, columns=("generated", "reference"))
    assert both["reference"].str.split().str.len().tolist() == [95, 105]


def test_two_judges_and_reruns_make_no_phantom_items():
    judgments = _verdicts(
        [
            ("1", "j1", "human", "gpt", "gpt"),
            ("1", "j1", "human", "gpt", "human"),  # a rerun of the same order wins
            ("1", "j1", "gpt", "human", "human"),
            ("2", "j2", "human", "gpt", "gpt"),
            ("2", "j2", "gpt", "human", "gpt"),
        ]
    )
    out = judge_outcomes(judgments)
    assert out[["item_id", "judge", "outcome"]].values.tolist() == [
        ["1", "j1", "GT"],
        ["2", "j2", "Generated"],
    ]


def test_missing_similarity_is_not_binned():
    outcomes = pd.DataFrame({"judge": "j", "outcome": ["GT", "GT"], "similarity": [0.2, None]})
    assert outcome_shares(outcomes, bins=2)["n"].sum() == 1


def test_outcome_plot_draws_shares_of_each_bin():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from analysis.plots.metrics import plot_judge_outcomes

    outcomes = pd.DataFrame(
        {
            "judge": "j",
            "similarity": [0.05, 0.05, 0.05, 0.05, 0.95],
            "outcome": ["GT", "GT", "GT", "Generated", "tied-chose-first"],
        }
    )
    fig, ax = plt.subplots()
    try:
        plot_judge_outcomes(outcome_shares(outcomes, bins=2), ax)
        tops: dict[float, float] = {}
        for bar in ax.patches:
            x = round(bar.get_x(), 6)
            tops[x] = max(tops.get(x, 0.0), bar.get_y() + bar.get_height())
        assert tops == pytest.approx({0.0: 1.0, 0.5: 1.0})  # each bin stacks to 1, not to n
        assert ax.get_ylabel() == "share of items in the bin"
    finally:
        plt.close(fig)
