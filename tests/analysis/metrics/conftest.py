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
