"""The mitigation-effect benchmark's statistics on inputs small enough to check by hand."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "mitigation_effect.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_mitigation_effect", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_repetition_is_the_share_of_repeated_trigrams(bench):
    # trigrams: (a b c) (b c a) (c a b) (a b c): one of four repeats an earlier one
    assert bench.repetition("A b c a b c") == pytest.approx(0.25)
    assert bench.repetition("durability, durability, durability, durability") == pytest.approx(0.5)
    assert bench.repetition("too short") == 0.0


def test_faithfulness_counts_summary_content_words_found_in_the_source(bench):
    source = "The pump leaked water under the tray."
    assert bench.faithfulness("The pump leaked.", source) == 1.0
    # content words: pump, exploded, loudly -> one of three in the source
    assert bench.faithfulness("The pump exploded loudly", source) == pytest.approx(1 / 3)
    assert math.isnan(bench.faithfulness("the and of", source))


def test_part_coverage_is_the_share_of_a_parts_content_words_used(bench):
    part = "Battery life is excellent"  # battery, life, excellent
    assert bench.part_coverage("The battery is excellent.", part) == pytest.approx(2 / 3)
    assert math.isnan(bench.part_coverage("anything", "it is"))


def test_paired_bootstrap_mean_and_interval(bench):
    treated, baseline = [1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 2.0, 3.0]
    res = bench.paired_bootstrap(treated, baseline, n_boot=500)
    # Every difference is 1: the mean and both ends of the interval are exactly 1.
    assert (res["diff"], res["ci_low"], res["ci_high"]) == (1.0, 1.0, 1.0)
    assert res["n"] == 4 and res["mean_baseline"] == 1.5 and res["mean_method"] == 2.5


def test_paired_bootstrap_interval_matches_a_direct_resampling(bench):
    rng = np.random.default_rng(1)
    a, b = rng.normal(1, 1, 40), rng.normal(0, 1, 40)
    res = bench.paired_bootstrap(a, b, n_boot=4000, seed=7)
    d = a - b
    draws = np.random.default_rng(7).integers(0, 40, size=(4000, 40))
    low, high = np.percentile(d[draws].mean(axis=1), [2.5, 97.5])
    assert res["ci_low"] == pytest.approx(low) and res["ci_high"] == pytest.approx(high)
    assert res["ci_low"] < res["diff"] < res["ci_high"]


def test_paired_bootstrap_drops_pairs_with_a_missing_side(bench):
    res = bench.paired_bootstrap([1.0, float("nan"), 3.0], [0.0, 5.0, float("nan")])
    assert res["n"] == 1 and res["diff"] == 1.0


def test_intervention_log_counts_changed_distributions_and_tokens(bench):
    import torch

    class Ctx:
        requests = [type("R", (), {"key": "t1\x1fsummary"})()]

    def boost_second(input_ids, scores):
        scores[:, 1] += 10.0  # in place, as processors may do
        return scores

    logged = bench.Logged(lambda ctx: boost_second)
    proc = logged(Ctx())
    scores = torch.tensor([[2.0, 0.0, -1.0]])
    proc(None, scores)
    proc(None, torch.tensor([[0.0, 1.0, -1.0]]))  # argmax already the boosted token
    rec = logged.log["t1"].as_dict()
    assert rec["steps"] == 2 and rec["changed_argmax"] == 1 and rec["changed_distribution"] == 2
    assert 0 < rec["mean_tv"] <= rec["max_tv"] <= 1


def test_sources_reach_the_papers_lengths_from_the_repositorys_texts(bench):
    """000 Table A3: reviews 2,180 and news 1,166 tokens on average; each source is the
    repository's own paragraphs, a different selection and order per text."""
    count = lambda text: len(text.split())  # noqa: E731  (a stand-in tokenizer: words)
    items = bench.paper_length_sources(count, 4, targets={"review": 600, "news": 400})
    assert [i["kind"] for i in items] == ["review", "news", "review", "news"]
    assert len({i["item_id"] for i in items}) == 4
    pool = {r["kind"]: [] for r in bench.read_jsonl(bench.TEXTS)}
    for r in bench.read_jsonl(bench.TEXTS):
        pool[r["kind"]].append(" ".join(r["parts"]))
    pool["review"] += [r["text"] for r in bench.read_jsonl(bench.REVIEWS)]
    for item in items:
        target = 600 if item["kind"] == "review" else 400
        paragraphs = item["text"].split("\n\n")
        assert set(paragraphs) <= set(pool[item["kind"]]) and len(set(paragraphs)) > 2
        # Filled up to the target: the next paragraph would not have fitted.
        assert target - max(map(count, pool[item["kind"]])) < item["n_tokens"] <= target
        assert " ".join(item["parts"]) == " ".join(item["text"].split())
    assert items[0]["text"].split("\n\n")[0] != items[2]["text"].split("\n\n")[0]
    again = bench.paper_length_sources(count, 4, targets={"review": 600, "news": 400})
    assert again == items  # seeded


def test_a_prompts_file_row_is_compared_with_the_baseline_and_with_its_default(bench):
    assert bench.comparisons(["baseline", "cloze", "cloze+a8"]) == [
        ("cloze", "baseline"), ("cloze+a8", "baseline"), ("cloze+a8", "cloze")
    ]  # fmt: skip


def test_instruction_words_count_what_the_summary_takes_from_the_prompt(bench):
    source = "The pump leaked water under the tray."
    said = "Be an unbiased summarizer and keep the sentiment."
    assert bench.instruction_words("The pump leaked water.", source, said) == 0.0
    # content words: unbiased, summary, pump -> "unbiased" comes from the instructions only
    assert bench.instruction_words("Unbiased summary: pump", source, said) == pytest.approx(1 / 3)
