"""Preference statistics on hand-counted data; binomial p-values checked against R binom.test."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.metrics.overlap import judge_outcomes
from analysis.stats.preferences import (
    human_pair_outcomes,
    mark_reference,
    order_consistency,
    outcomes_side_by_side,
    preference_by_bin,
)


def verdict(rater, pair, first, second, chosen):
    return {
        "participant_id": rater,
        "pair_id": pair,
        "system_first": first,
        "system_second": second,
        "chosen_system": chosen,
    }


def test_mark_reference_and_errors():
    data = pd.DataFrame(
        [verdict("r1", "p1", "human", "gpt", "gpt"), verdict("r1", "p2", "mix", "human", "mix")]
    )
    marked = mark_reference(data)
    assert marked["system"].tolist() == ["gpt", "mix"]
    assert marked["reference_first"].tolist() == [1, 0]
    assert marked["chose_reference"].tolist() == [0, 0]
    assert marked["chose_first"].tolist() == [0, 1]
    with pytest.raises(ValueError, match="reference system 'human'"):
        mark_reference(pd.DataFrame([verdict("r", "p", "a", "b", "a")]))
    with pytest.raises(ValueError, match="was not one of the two shown"):
        mark_reference(pd.DataFrame([verdict("r", "p", "human", "b", "c")]))


def test_preference_by_bin_counts_and_binomial_test():
    # 10 verdicts at similarity 0.1 (7 prefer the human summary), 4 at 0.9 (1 prefers it).
    rows = [verdict(f"r{i}", "p1", "human", "gpt", "human" if i < 7 else "gpt") for i in range(10)]
    rows += [verdict(f"r{i}", "p2", "gpt", "human", "human" if i < 1 else "gpt") for i in range(4)]
    marked = mark_reference(pd.DataFrame(rows))
    marked["similarity"] = np.where(marked["pair_id"] == "p1", 0.1, 0.9)
    res = preference_by_bin(marked, bins=2).set_index("bin")
    assert list(res.index) == ["all", "[0.00, 0.50)", "[0.50, 1.00]"]
    assert (res.loc["all", "n"], res.loc["all", "n_reference"]) == (14, 8)
    low = res.loc["[0.00, 0.50)"]
    assert (low["n"], low["n_reference"], low["n_pairs"]) == (10, 7, 1)
    assert low["estimate"] == pytest.approx(0.7)
    # R> binom.test(7, 10)$p.value  -> 0.34375
    assert low["p_val"] == pytest.approx(0.34375, abs=1e-10)
    # R> prop.test(7, 10, correct = FALSE)$conf.int  (Wilson) -> 0.3967781 0.8922087
    assert low["ci_low"] == pytest.approx(0.3967781, abs=1e-6)
    assert low["ci_high"] == pytest.approx(0.8922087, abs=1e-6)
    assert res.loc["[0.50, 1.00]", "estimate"] == pytest.approx(0.25)


def test_order_consistency_per_rater():
    rows = [
        # r1 always picks the first-shown summary: a pure position preference.
        verdict("r1", "p1", "human", "gpt", "human"),
        verdict("r1", "p2", "gpt", "human", "gpt"),
        verdict("r1", "p3", "human", "gpt", "human"),
        verdict("r1", "p4", "gpt", "human", "gpt"),
        # r2 always picks the human summary, and saw p1 in both orders.
        verdict("r2", "p1", "human", "gpt", "human"),
        verdict("r2", "p1", "gpt", "human", "human"),
        verdict("r2", "p2", "gpt", "human", "human"),
    ]
    res = order_consistency(mark_reference(pd.DataFrame(rows))).set_index("participant_id")
    r1, r2 = res.loc["r1"], res.loc["r2"]
    assert r1["share_first"] == 1.0 and r1["order_consistency"] == 0.0
    assert (r1["pref_reference_first"], r1["pref_reference_second"]) == (1.0, 0.0)
    # R> binom.test(4, 4)$p.value  -> 0.125
    assert r1["p_val"] == pytest.approx(0.125)
    assert r1["n_repeated_pairs"] == 0 and np.isnan(r1["repeat_consistency"])
    assert r2["order_consistency"] == 1.0 and r2["share_first"] == pytest.approx(1 / 3)
    assert r2["n_repeated_pairs"] == 1 and r2["repeat_consistency"] == 1.0


def test_human_outcomes_use_the_judge_categories():
    rows = []
    # p1: the human summary wins in both orders -> GT.
    rows += [
        verdict("a", "p1", "human", "gpt", "human"),
        verdict("b", "p1", "gpt", "human", "human"),
    ]
    # p2: the first-shown summary wins in both orders -> tied-chose-first.
    rows += [verdict("a", "p2", "human", "gpt", "human"), verdict("b", "p2", "gpt", "human", "gpt")]
    # p3: the generated summary wins both -> Generated; p4: a 1-1 vote in one order -> other.
    rows += [verdict("a", "p3", "human", "gpt", "gpt"), verdict("b", "p3", "gpt", "human", "gpt")]
    rows += [
        verdict("a", "p4", "human", "gpt", "human"),
        verdict("b", "p4", "human", "gpt", "gpt"),
        verdict("c", "p4", "gpt", "human", "gpt"),
    ]
    out = human_pair_outcomes(mark_reference(pd.DataFrame(rows))).set_index("item_id")
    assert out["outcome"].to_dict() == {
        "p1": "GT",
        "p2": "tied-chose-first",
        "p3": "Generated",
        "p4": "other",
    }
    assert out.loc["p4", "choice_gt_first"] is None
    assert (out.loc["p4", "n_gt_first"], out.loc["p4", "n_gt_second"]) == (2, 1)
    assert set(out["judge"]) == {"humans"}


def test_outcomes_side_by_side_on_common_items():
    humans = pd.DataFrame(
        {"item_id": ["p1", "p2"], "judge": "humans", "outcome": ["GT", "Generated"]}
    )
    judge = judge_outcomes(
        pd.DataFrame(
            {
                "item_id": ["p1", "p1", "p3", "p3"],
                "model": "llm",
                "first": ["gt", "generated", "gt", "generated"],
                "second": ["generated", "gt", "generated", "gt"],
                "label": ["generated", "generated", "gt", "gt"],
            }
        ),
        gt="gt",
    )
    sims = pd.DataFrame({"item_id": ["p1", "p2", "p3"], "similarity": [0.2, 0.3, 0.8]})
    res = outcomes_side_by_side([humans, judge], sims, bins=[0, 0.5, 1])
    counted = res[res["n"] > 0].set_index(["judge", "outcome"])["n"].to_dict()
    # Only p1 is common to both sources.
    assert counted == {("humans", "GT"): 1, ("llm", "Generated"): 1}
