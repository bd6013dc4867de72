"""The seed study's headline hallucination figure, recomputed from its own Table 4.

000's abstract: the models hallucinate "on 60.33 % of post-knowledge-cutoff questions". Table 4's
baseline rows give actual-news, falsified-news and strict accuracy before and after each model's
cutoff (Table A2). Answers reproducing those rows exactly (100 pairs per model and period) go
through the project's fact-check table (:func:`analysis.mitigation.compare.fact_check_table`)
and the mean over models (:func:`analysis.metrics.hallucination.hallucination_mean_of_means`):
the headline is 1 − actual-news accuracy after the cutoff (60.33 %), not 1 − s_TH (85.33 %).
"""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.metrics.hallucination import hallucination_mean_of_means
from analysis.mitigation.compare import fact_check_table

# 000 Table 4, rows "Baseline": (actual %, falsified %, strict %) pre- and post-cutoff; cutoffs
# from Table A2.
TABLE_4 = {
    "Llama-3-8B-Instruct": ("2023-03-31", (74, 46, 26), (75, 42, 21)),
    "Llama-3.2-3B-Instruct": ("2024-10-31", (48, 58, 19), (35, 72, 15)),
    "Phi-3-mini-4k-Instruct": ("2023-10-31", (14, 97, 12), (9, 98, 8)),
}


def _answers(model: str, period: str, date: str, actual: int, falsified: int, strict: int):
    """100 (true, negated) pairs whose answers give exactly these percentages.

    ``strict`` pairs have both answers right, the rest of the right true answers and of the
    right negated answers fall on different pairs (so no further pair is strictly right).
    """
    assert actual + falsified - strict <= 100
    rows = []
    for n in range(100):
        true_ok = n < actual
        false_ok = n < strict or actual <= n < actual + falsified - strict
        pair = f"{model}-{period}-{n}"
        for truth, ok in ((True, true_ok), (False, false_ok)):
            rows.append({
                "task": "fact-check", "method": "baseline", "model": model,
                "item_id": f"{pair}-{truth}", "pair_id": pair, "truth": truth, "date": date,
                "label": ("true" if truth else "false") if ok else ("false" if truth else "true"),
            })  # fmt: skip
    return rows


def test_the_abstracts_60_33_percent_comes_from_table_4():
    tables = []
    for model, (cutoff, pre, post) in TABLE_4.items():
        day = pd.Timestamp(cutoff)
        records = pd.DataFrame(
            _answers(model, "pre", str((day - pd.Timedelta(days=30)).date()), *pre)
            + _answers(model, "post", str((day + pd.Timedelta(days=30)).date()), *post)
        )
        table = fact_check_table(records, cutoff=cutoff)
        # Each model's rows are Table 4's.
        for period, row in (("pre", pre), ("post", post)):
            got = table.set_index("period").loc[period]
            assert [round(100 * got[c]) for c in ("actual_acc", "falsified_acc", "strict_acc")] \
                == list(row)  # fmt: skip
        tables.append(table)
    means = hallucination_mean_of_means(pd.concat(tables)).set_index("period")
    post = means.loc["post"]
    assert post["n_means"] == 3
    assert 100 * post["actual_news_error_rate"] == pytest.approx(60.33, abs=0.005)
    # 1 − s_TH is another quantity: 85.33 %, under its own name.
    assert 100 * post["strict_error_rate"] == pytest.approx(85.33, abs=0.005)
    # δH from Table 4: 5, 4 and 4 points (§7.3's text gives Llama-3.2 13 % and δH 6 where
    # Table 4 prints 15 %; the table is what is typed in here).
    assert 100 * post["delta_h"] == pytest.approx((5 + 4 + 4) / 3)
