"""Position bias as Chhabra, Askari & Mohapatra (NAACL 2024) report it.

Top-2/top-3 sentence mapping, summaries sampled to the required sentence count, and the Spearman
correlation of the position bias W with ROUGE. The paper's equation numbers could not be checked
against its PDF on this offline machine; each test quotes the definition it checks.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy.stats import wasserstein_distance

from analysis.cli.metrics import metrics
from analysis.metrics.position import (
    cap_sentences,
    map_sentences,
    map_sentences_top_k,
    position_bias,
    position_rouge_correlation,
    summary_positions,
    systems_long,
)
from analysis.metrics.text import split_sentences

_NATO = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"
WORDS = _NATO.split()
# Ten sentences with distinct vocabularies: "Alpha alphas alphaed here." …
ARTICLE_10 = " ".join(f"{w.capitalize()} {w}s {w}ed here." for w in WORDS)


def _long(gold: str, systems: dict[str, str]) -> pd.DataFrame:
    row = {"id": "a1", "article": ARTICLE_10, "gold": gold, "summaries": systems}
    return systems_long(pd.DataFrame([row]))


def test_top_k_mapping_known_values():
    """Each summary sentence maps to its k most similar article sentences, unless it copies one.

    "Alphas juliets." shares one term with sentence 1 and one with sentence 10 (TF-IDF cosine
    1/√3 · 1/√2 ≈ 0.41 with each, tied): top-1 takes the earlier, top-2 both. "Echo echoes echoed
    here." copies sentence 5 (cosine 1 ≥ 1 − tolerance) and keeps one match at any k.
    """
    article = split_sentences(ARTICLE_10)
    summary = ["Alphas juliets.", "Echo echos echoed here."]
    assert map_sentences(article, summary) == [0, 4]
    assert map_sentences_top_k(article, summary, top_k=1) == [[0], [4]]
    assert map_sentences_top_k(article, summary, top_k=2) == [[0, 9], [4]]
    # A third match needs a positive similarity: only two sentences share a term.
    assert map_sentences_top_k(article, summary, top_k=3) == [[0, 9], [4]]
    # A sentence sharing no term is unmapped at any k.
    assert map_sentences_top_k(article, ["Nothing shared."], top_k=2) == [[]]
    with pytest.raises(ValueError, match="top_k must be at least 1"):
        map_sentences_top_k(article, summary, top_k=0)


def test_top_2_positions_and_wasserstein():
    """W = Wasserstein-1 distance of the gold and generated position samples, with top-2 maps.

    Gold "Alphas juliets." → top-2 sentences 1 and 10 (K = 2: segments 1 and 2, positions
    0.25 and 0.75); the system copies sentence 5 → position 0.25 once. W = 0.25.
    """
    long = _long("Alphas juliets.", {"sys": "Echo echos echoed here."})
    pos = summary_positions(long, k=2, top_k=2)
    gold = pos.loc[pos["system"] == "gold"]
    assert gold["rank"].tolist() == [1, 2]
    assert gold["article_sentence"].tolist() == [0, 9]
    assert gold["position"].tolist() == [0.25, 0.75]
    w = position_bias(pos)["wasserstein"].iloc[0]
    assert w == pytest.approx(0.25)
    assert w == pytest.approx(wasserstein_distance([0.25, 0.75], [0.25]))
    # Top-1 (the paper's headline) maps the gold sentence once: W = 0.
    assert position_bias(summary_positions(long, k=2))["wasserstein"].iloc[0] == 0


def test_unique_per_summary_counts_each_article_sentence_once():
    # Two summary sentences both copy sentence 3: by sentence they count twice, unique once.
    long = _long("Charlie charlies. Charlie charlied.", {"sys": "Alpha alphas."})
    by_sentence = summary_positions(long, k=2)
    unique = summary_positions(long, k=2, unique=True)
    assert (by_sentence["system"] == "gold").sum() == 2
    assert (unique["system"] == "gold").sum() == 1


def test_cap_sentences_samples_longer_summaries_to_the_gold_count():
    """The required sentence count: a 5-sentence summary against a 2-sentence gold summary."""
    long_sys = " ".join(f"{w.capitalize()} {w}s." for w in WORDS[:5])
    long = _long("Alpha alphas. Juliet juliets.", {"long": long_sys, "short": "Echo echos."})
    capped = cap_sentences(long, seed=3)
    row = capped.set_index("system").loc["long"]
    assert (row["n_sentences_before"], row["n_sentences"]) == (5, 2)
    kept = split_sentences(row["summary"])
    assert len(kept) == 2
    # The kept sentences are a subset of the original, in their original order.
    original = split_sentences(long_sys)
    assert [original.index(s) for s in kept] == sorted(original.index(s) for s in kept)
    # The same seed draws the same sentences whatever else is in the file.
    alone = cap_sentences(long.loc[long["system"] != "short"], seed=3)
    assert alone.set_index("system").loc["long", "summary"] == row["summary"]
    # Shorter summaries and the gold summary are left as they are.
    assert capped.set_index("system").loc["short", "summary"] == "Echo echos."
    assert capped.set_index("system").loc["gold", "n_sentences"] == 2
    # A fixed count, and its check.
    assert cap_sentences(long, n=1).set_index("system").loc["long", "n_sentences"] == 1
    with pytest.raises(ValueError, match="at least 1"):
        cap_sentences(long, n=0)
    # Capping changes the positions that enter W: 5 positions before, 2 after.
    before = summary_positions(long, k=2)
    after = summary_positions(capped, k=2)
    assert (before["system"] == "long").sum() == 5
    assert (after["system"] == "long").sum() == 2


def test_spearman_of_w_against_rouge_known_value():
    """ρ = 1 − 6 Σ d² / (n (n² − 1)) on ranks, W against each ROUGE across systems.

    W = 0.1, 0.2, 0.3, 0.4 (ranks 1–4); ROUGE-1 = 0.4, 0.3, 0.1, 0.2 (ranks 4, 3, 1, 2):
    d = −3, −1, 2, 2, Σ d² = 18, ρ = 1 − 108/60 = −0.8. ROUGE-2 in W's order: ρ = 1.
    """
    table = pd.DataFrame(
        {
            "system": list("abcd"),
            "wasserstein": [0.1, 0.2, 0.3, 0.4],
            "rouge1": [0.4, 0.3, 0.1, 0.2],
            "rouge2": [0.01, 0.02, 0.03, 0.04],
            "rougeL": [0.3, 0.3, 0.3, 0.3],
        }
    )
    out = position_rouge_correlation(table).set_index("metric")
    assert out.loc["rouge1", "rho"] == pytest.approx(1 - 6 * 18 / (4 * 15))
    assert out.loc["rouge2", "rho"] == pytest.approx(1.0)
    assert out.loc["rouge1", "n"] == 4
    # A constant column has no rank correlation, and says so with NaN rather than a warning.
    assert np.isnan(out.loc["rougeL", "rho"])
    # Per dataset, and fewer than three systems give NaN.
    two = table.assign(dataset=["x", "x", "y", "y"])
    per = position_rouge_correlation(two, by=["dataset"], metrics=["rouge1"])
    assert per["n"].tolist() == [2, 2] and per["rho"].isna().all()


def test_position_command_top_k_cap_and_correlation(examples, tmp_path):
    result = CliRunner().invoke(
        metrics,
        ["position", "--input", str(examples / "position.jsonl"), "--k", "3", "--out",
         str(tmp_path), "--top-k", "2", "--cap-sentences", "gold", "--seed", "1"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    corr = pd.read_csv(tmp_path / "position_rouge_correlation.csv")
    assert corr["metric"].tolist() == ["rouge1", "rouge2", "rougeL"]
    sentences = pd.read_csv(tmp_path / "position_sentences.csv")
    assert set(sentences["rank"]) <= {1, 2}
    # Every gold summary of the example has one sentence, so each system keeps one per article.
    assert sentences.groupby(["id", "system"])["sentence"].nunique().max() == 1
    assert json.loads((tmp_path / "results.json").read_text())["k"] == 3
    bad = CliRunner().invoke(
        metrics,
        ["position", "--input", str(examples / "position.jsonl"), "--k", "3", "--out",
         str(tmp_path), "--cap-sentences", "some"],
    )  # fmt: skip
    assert bad.exit_code == 2 and "use 'gold' or a positive number" in bad.output
