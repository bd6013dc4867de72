"""Fixtures for the metrics tests: a deterministic bag-of-words embedder and example files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).parent / "examples"


class BagOfWords:
    """Count vectors over a fixed vocabulary: cosines are hand-computable."""

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self.index = {w: i for i, w in enumerate(vocabulary)}
        self.calls: list[int] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), len(self.index)))
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, self.index[word.strip(".,")]] += 1
        return out


@pytest.fixture()
def bow() -> type[BagOfWords]:
    return BagOfWords


@pytest.fixture()
def examples() -> Path:
    return EXAMPLES


# Words of the BERTScore tests: every one is a whole-word entry of the tiny vocabulary.
TINY_BERT_WORDS = [
    "the",
    "council",
    "raised",
    "school",
    "spending",
    "by",
    "ten",
    "percent",
    "in",
    "new",
    "budget",
    "its",
    "schools",
    "get",
    "more",
    "money",
    "raising",
    "minimum",
    "wage",
    "lifts",
    "families",
    "out",
    "of",
    "poverty",
    "workers",
    "deserve",
    "pay",
    "higher",
    "floors",
    "force",
    "small",
    "businesses",
    "to",
    "cut",
    "jobs",
    "markets",
    "not",
    "mandates",
    "should",
    "set",
    "say",
]


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer BERT with random weights and a word-level vocabulary, saved like a checkpoint.

    No weights can be downloaded here, so the real ``from_pretrained`` path of ``bert-score`` is
    exercised on a model built and saved by the test session.
    """
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("tiny-bert")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = specials + sorted(set(TINY_BERT_WORDS)) + list("abcdefghijklmnopqrstuvwxyz.,'")
    # Saved without model_max_length, as many hand-made checkpoints are.
    tokenizer = BertTokenizerFast(vocab={token: i for i, token in enumerate(vocab)})
    assert tokenizer.unk_token_id not in tokenizer("council budget")["input_ids"]
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
