"""Decoding-family mitigations as ``transformers`` logits processors.

Each method is a ``LogitsProcessor`` (``__call__(input_ids, scores) -> scores``) plus a small frozen
dataclass *factory* that the generation engine calls once per batch with a
:class:`analysis.llm.backends.base.BatchContext` (see ``docs/generation.md``). The factory's
``repr`` names the method and its hyperparameters, so the engine's template hash (which records
the factories) changes when a hyperparameter changes and results are never mixed.

None of these methods exists in ``transformers`` (only generic warpers do), so they are written
here; TF-IDF comes from scikit-learn and sentiment valences from VADER.

All processors read the source document of each row (the text being summarised) through
:func:`source_text` and the output generated so far as ``input_ids[:, prompt_length:]``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

log = logging.getLogger(__name__)

__all__ = [
    "BalancedCoverageFactory",
    "CandidateFilter",
    "ForcedBalancedCoverage",
    "MIROSTAT_VARIANTS",
    "Mirostat",
    "MirostatFactory",
    "PartCoverage",
    "RejectionSampling",
    "RejectionSamplingFactory",
    "WeightedTokenDecoding",
    "WeightedTokenFactory",
    "decode_rows",
    "middle_keywords",
    "negative_words",
    "single_token_ids",
    "source_text",
]


def source_text(request: Any) -> str:
    """Return the source document of a request: its ``text``, else its last user message.

    The mitigation runner puts the source into ``Request.text``; a request built by other code
    still works when the source is the content of its last user message.
    """
    text = getattr(request, "text", "") or ""
    if text:
        return text
    for message in reversed(getattr(request, "messages", ()) or ()):
        if message.get("role") == "user":
            return message.get("content", "")
    return ""


def decode_rows(tokenizer: Any, input_ids: Any, prompt_length: int) -> list[str]:
    """Decode the tokens generated so far in each row (special tokens dropped)."""
    rows = input_ids[:, prompt_length:].tolist()
    return [tokenizer.decode(row, skip_special_tokens=True) for row in rows]


class PartCoverage:
    """TF-IDF cosine similarity of a text to the beginning, middle and end third of a source.

    The thirds are cut by whitespace tokens exactly as the primacy metric cuts them
    (:func:`analysis.metrics.text.split_parts`), so "covered" here means what ψpri measures,
    with TF-IDF (cheap enough to recompute at every decoding step) instead of embeddings.

    Parameters
    ----------
    source : str
        The source document (at least three whitespace tokens).
    """

    def __init__(self, source: str) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        from analysis.metrics.text import split_parts

        self.parts = split_parts(source, 3, unit="tokens")
        self.vectorizer = TfidfVectorizer().fit(self.parts)
        self._parts = self.vectorizer.transform(self.parts)  # rows are L2-normalised

    def __call__(self, text: str) -> np.ndarray:
        """Return ``[s_b, s_m, s_e]`` for ``text`` (zeros for text with no known term)."""
        vec = self.vectorizer.transform([text])
        return np.asarray((self._parts @ vec.T).toarray()).ravel()

    def terms(self, part: int) -> set[str]:
        """Return the vocabulary terms that occur in one part (0 = beginning, 2 = end)."""
        analyzer = self.vectorizer.build_analyzer()
        return set(analyzer(self.parts[part]))


def single_token_ids(tokenizer: Any, words: Sequence[str]) -> list[int]:
    """Token IDs of the words that are a single token, with or without a leading space.

    Only whole-word tokens are steered: scaling the first piece of a multi-piece word would also
    scale every other word that starts with that piece.
    """
    ids: set[int] = set()
    for word in words:
        for variant in (word, " " + word, word.capitalize(), " " + word.capitalize()):
            pieces = tokenizer.encode(variant, add_special_tokens=False)
            if len(pieces) == 1:
                ids.add(int(pieces[0]))
    return sorted(ids)


def _part_token_ids(tokenizer: Any, text: str) -> set[int]:
    return set(tokenizer.encode(text, add_special_tokens=False))


@dataclass(frozen=True)
class _SourceFactory:
    """A factory of a processor built from the batch's sources, tokenizer and prompt length.

    Subclasses name the processor class and declare its hyperparameters as fields; every field
    is passed on as a keyword argument.
    """

    processor: ClassVar[type]

    def __call__(self, ctx: Any) -> Any:
        return self.processor(
            [source_text(r) for r in ctx.requests],
            ctx.tokenizer,
            int(ctx.input_ids.shape[1]),
            **dataclasses.asdict(self),
        )


# --- Forced Balanced Coverage


class ForcedBalancedCoverage:
    """Boost tokens of under-covered source thirds until beginning and end are balanced.

    At every step the output so far is compared with the three thirds of its source
    (:class:`PartCoverage`). While ``|s_b - s_e| > tolerance``, every third whose similarity is
    below the best one by more than ``tolerance`` is under-covered, and ``log(gamma)`` is added to
    the logits of the tokens that occur in an under-covered third but in no covered third
    (multiplying their probability by ``gamma`` before renormalisation).

    Parameters
    ----------
    sources : sequence of str
        One source document per batch row.
    tokenizer : transformers tokenizer
        Decodes the output so far and tokenizes the thirds.
    prompt_length : int
        Length of the (left-padded) prompt; later positions are the output.
    gamma : float, default 1.5
        Probability multiplier of under-covered tokens.
    tolerance : float, default 0.05
        Balance reached when ``|s_b - s_e| <= tolerance``.
    """

    def __init__(
        self,
        sources: Sequence[str],
        tokenizer: Any,
        prompt_length: int,
        *,
        gamma: float = 1.5,
        tolerance: float = 0.05,
    ) -> None:
        if gamma <= 0:
            raise ValueError(f"gamma must be positive, got {gamma}")
        self.tokenizer = tokenizer
        self.prompt_length = prompt_length
        self.log_gamma = math.log(gamma)
        self.tolerance = tolerance
        self.coverage = [PartCoverage(s) for s in sources]
        self.part_ids = [
            [_part_token_ids(tokenizer, p) for p in cov.parts] for cov in self.coverage
        ]
        self.boosted_parts: list[list[int]] = []  # per step, for diagnostics and tests

    def under_covered(self, sims: np.ndarray) -> list[int]:
        """Return the thirds to boost for similarities ``[s_b, s_m, s_e]`` (empty when balanced)."""
        if abs(sims[0] - sims[2]) <= self.tolerance:
            return []
        best = float(np.max(sims))
        return [j for j in range(3) if sims[j] < best - self.tolerance]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        texts = decode_rows(self.tokenizer, input_ids, self.prompt_length)
        scores = scores.clone()
        step: list[int] = []
        for row, text in enumerate(texts):
            parts = self.under_covered(self.coverage[row](text))
            step.extend(parts)
            if not parts:
                continue
            covered = set().union(*(self.part_ids[row][j] for j in range(3) if j not in parts))
            boost = set().union(*(self.part_ids[row][j] for j in parts)) - covered
            idx = torch.tensor(sorted(i for i in boost if i < scores.shape[-1]), dtype=torch.long)
            scores[row, idx] += self.log_gamma
        self.boosted_parts.append(step)
        return scores


@dataclass(frozen=True)
class BalancedCoverageFactory(_SourceFactory):
    """Build :class:`ForcedBalancedCoverage` for one batch of the engine."""

    processor = ForcedBalancedCoverage
    gamma: float = 1.5
    tolerance: float = 0.05


# --- Weighted Token Decoding


def negative_words(threshold: float = -1.0) -> list[str]:
    """Alphabetic words of the VADER lexicon with a mean valence at or below ``threshold``.

    VADER valences run from -4 (most negative) to +4; -1.0 keeps clearly negative words
    (``bad`` -2.5, ``dirty`` -1.9) and leaves mild ones (``ordinary`` -0.6) alone.
    """
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    lexicon = SentimentIntensityAnalyzer().lexicon
    return sorted(w for w, v in lexicon.items() if w.isalpha() and v <= threshold)


# Letters only (two or more): numbers and punctuation are never "keywords".
_WORD_PATTERN = r"(?u)\b[^\W\d_]{2,}\b"


def middle_keywords(source: str, k: int = 10) -> list[str]:
    """The ``k`` content words with the highest TF-IDF weight in the middle third of ``source``.

    Content words: scikit-learn's English stop-word list (``ENGLISH_STOP_WORDS``, 318 function
    words) is removed, and so are tokens with digits. TF-IDF is computed within the document:
    the three thirds (cut like the primacy metric's) are the documents of the IDF, so words that
    also fill the beginning and end rank low. Ties are broken alphabetically so the list is
    deterministic.

    Examples
    --------
    >>> middle_keywords("the cat sat on the mat and the dog ran to the park where the "
    ...                 "birds sang in the trees", 3)
    ['dog', 'park', 'ran']
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    from analysis.metrics.text import split_parts

    parts = split_parts(source, 3, unit="tokens")
    vectorizer = TfidfVectorizer(stop_words="english", token_pattern=_WORD_PATTERN)
    try:
        matrix = vectorizer.fit_transform(parts)
    except ValueError:  # nothing but stop words and numbers
        return []
    weights = matrix[1].toarray().ravel()
    vocab = vectorizer.get_feature_names_out()
    order = sorted(range(len(vocab)), key=lambda i: (-weights[i], vocab[i]))
    return [str(vocab[i]) for i in order[:k] if weights[i] > 0]


@functools.lru_cache(maxsize=8)
def _negative_ids(tokenizer: Any, threshold: float) -> tuple[int, ...]:
    # Tokenizing the ~3,000 VADER words takes a fraction of a second; once per tokenizer will do.
    return tuple(single_token_ids(tokenizer, negative_words(threshold)))


class WeightedTokenDecoding:
    """Multiply the probability of listed tokens by fixed factors.

    Adds ``log(factor)`` to each listed token's logit, so after renormalisation the ratio of its
    probability to any unlisted token's is multiplied by exactly ``factor``.

    Parameters
    ----------
    weights : sequence of dict
        One ``{token_id: factor}`` mapping per batch row.
    """

    def __init__(self, weights: Sequence[dict[int, float]]) -> None:
        self.weights = list(weights)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        scores = scores.clone()
        for row, mapping in enumerate(self.weights):
            if not mapping:
                continue
            ids = torch.tensor(list(mapping), dtype=torch.long)
            logs = torch.tensor([math.log(f) for f in mapping.values()], dtype=scores.dtype)
            scores[row, ids] += logs.to(scores.device)
        return scores


@dataclass(frozen=True)
class WeightedTokenFactory:
    """Build :class:`WeightedTokenDecoding`: negative words × ``negative``, middle keywords ×
    ``middle``."""

    negative: float = 0.3
    middle: float = 2.0
    n_keywords: int = 10
    valence_threshold: float = -1.0

    def weights(self, tokenizer: Any, source: str, negative_ids: Sequence[int]) -> dict[int, float]:
        """Return ``{token_id: factor}`` for one source (a middle keyword wins over negativity)."""
        mapping = dict.fromkeys(negative_ids, self.negative)
        keywords = middle_keywords(source, self.n_keywords)
        for tid in single_token_ids(tokenizer, keywords):
            mapping[tid] = self.middle
        return mapping

    def __call__(self, ctx: Any) -> WeightedTokenDecoding:
        negative_ids = _negative_ids(ctx.tokenizer, self.valence_threshold)
        return WeightedTokenDecoding(
            [self.weights(ctx.tokenizer, source_text(r), negative_ids) for r in ctx.requests]
        )


# --- Mirostat


MIROSTAT_VARIANTS = ("temperature", "v2")


class Mirostat:
    """Mirostat: feedback on the observed surprise, by temperature (default) or truncation (v2).

    ``variant="temperature"`` is the seed paper's formula: step ``t`` samples from
    ``softmax(logits / T_t)`` with ``T_t = exp(mu_t)``; the token drawn has the observed surprise
    ``s_t = -log p_t`` under the *model's* distribution (temperature 1, i.e. the surprise the
    model assigns to the text), and ``mu_{t+1} = mu_t - eta (s_t - target)``. ``mu`` starts at 0
    (``T = 1``, the model's own distribution): text more surprising than the target cools the
    sampler, duller text heats it. ``mu`` is kept within ``[-20, 20]`` so a target the model
    cannot reach leaves a finite temperature.

    ``variant="v2"`` is Mirostat v2 truncation (Basu et al., 2021): tokens whose surprise exceeds
    ``mu_t`` are removed (the most likely token always stays) and the rest renormalised; the
    observed surprise is measured under that truncated distribution; ``mu`` starts at
    ``2 * target``.

    Either way the processor must be the last change to the distribution before sampling: use
    it with ``do_sample=True`` and neutral warpers (``temperature=1.0``, ``top_k=0``,
    ``top_p=1.0``). It reads the token drawn at step ``t`` from ``input_ids`` at step ``t + 1``.
    Surprise is in nats.

    Parameters
    ----------
    batch_size : int
        Rows in the batch.
    target : float, default 2.0
        Target surprise ``mu*`` (nats).
    eta : float, default 0.1
        Learning rate of the feedback.
    variant : {"temperature", "v2"}
        Temperature feedback ``T = exp(mu)`` (the paper's) or v2 truncation.
    """

    def __init__(
        self,
        batch_size: int,
        *,
        target: float = 2.0,
        eta: float = 0.1,
        variant: str = "temperature",
    ) -> None:
        if variant not in MIROSTAT_VARIANTS:
            raise ValueError(
                f"Mirostat variant must be one of {MIROSTAT_VARIANTS}, not {variant!r}"
            )
        self.target = target
        self.eta = eta
        self.variant = variant
        self.mu = np.full(batch_size, 0.0 if variant == "temperature" else 2.0 * target)
        self._previous: Any = None  # log-probabilities the last token's surprise is read from
        self.observed: list[np.ndarray] = []  # observed surprise per step, per row
        self.temperatures: list[np.ndarray] = []  # T_t per step, per row (temperature variant)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self._previous is not None:
            chosen = input_ids[:, -1].to(self._previous.device)
            surprise = -self._previous.gather(1, chosen[:, None]).squeeze(1).double().cpu()
            surprise = surprise.numpy()
            self.observed.append(surprise)
            # A finished row is fed padding, which may have been cut (infinite surprise): its
            # mu is frozen rather than driven to -inf.
            live = np.isfinite(surprise)
            self.mu[live] = self.mu[live] - self.eta * (surprise[live] - self.target)
            if self.variant == "temperature":
                np.clip(self.mu, -20.0, 20.0, out=self.mu)
        logp = torch.log_softmax(scores.float(), dim=-1)
        mu = torch.tensor(self.mu, dtype=logp.dtype, device=logp.device)[:, None]
        if self.variant == "temperature":
            self.temperatures.append(np.exp(self.mu))
            self._previous = logp
            # log p / T is logits / T up to a per-row constant, which softmax ignores.
            return (logp / torch.exp(mu)).to(scores.dtype)
        keep = -logp <= mu
        keep[torch.arange(len(keep), device=keep.device), logp.argmax(dim=-1)] = True
        truncated = logp.masked_fill(~keep, -math.inf)
        self._previous = torch.log_softmax(truncated, dim=-1)
        return self._previous.to(scores.dtype)


@dataclass(frozen=True)
class MirostatFactory:
    """Build :class:`Mirostat` for one batch."""

    target: float = 2.0
    eta: float = 0.1
    variant: str = "temperature"

    def __post_init__(self) -> None:
        if self.variant not in MIROSTAT_VARIANTS:
            raise ValueError(
                f"Mirostat variant must be one of {MIROSTAT_VARIANTS}, not {self.variant!r}"
            )

    def __call__(self, ctx: Any) -> Mirostat:
        return Mirostat(
            int(ctx.input_ids.shape[0]), target=self.target, eta=self.eta, variant=self.variant
        )


# --- candidate filters


class CandidateFilter:
    """Shared mechanics of methods that veto top-k candidates by a text-level criterion."""

    def __init__(self, tokenizer: Any, prompt_length: int, top_k: int) -> None:
        self.tokenizer = tokenizer
        self.prompt_length = prompt_length
        self.top_k = top_k
        self.rejected: list[tuple[int, int, int]] = []  # (step, row, token) for diagnostics
        self.step = 0

    def _with(self, input_ids: Any, row: int, token: int) -> str:
        ids = input_ids[row, self.prompt_length :].tolist() + [int(token)]
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def _restrict(self, scores: Any, row: int, keep: Sequence[int]) -> None:
        """Leave only ``keep`` possible in ``row`` (the sampler then resamples among them)."""
        import torch

        mask = torch.ones(scores.shape[-1], dtype=torch.bool, device=scores.device)
        mask[torch.tensor(list(keep), dtype=torch.long, device=scores.device)] = False
        scores[row, mask] = -math.inf


class RejectionSampling(CandidateFilter):
    """Drop the top token when it would increase chunk imbalance; resample within the top-k.

    Imbalance is the spread ``max(s) - min(s)`` of the output's TF-IDF similarities to the three
    thirds of its source (:class:`PartCoverage`). When appending the most likely token would
    raise it, that token is removed and the next token comes from the other ``top_k - 1``
    candidates (greedy decoding takes the second best; sampling draws among them).

    Parameters
    ----------
    sources : sequence of str
        One source per row.
    tokenizer, prompt_length
        As in :class:`ForcedBalancedCoverage`.
    top_k : int, default 5
        Candidates considered.
    """

    def __init__(
        self, sources: Sequence[str], tokenizer: Any, prompt_length: int, *, top_k: int = 5
    ) -> None:
        super().__init__(tokenizer, prompt_length, top_k)
        self.coverage = [PartCoverage(s) for s in sources]

    def imbalance(self, row: int, text: str) -> float:
        """Return ``max(s) - min(s)`` of ``text`` against the thirds of row ``row``'s source."""
        sims = self.coverage[row](text)
        return float(sims.max() - sims.min())

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        scores = scores.clone()
        top = scores.topk(min(self.top_k, scores.shape[-1]), dim=-1).indices.tolist()
        texts = decode_rows(self.tokenizer, input_ids, self.prompt_length)
        for row, candidates in enumerate(top):
            now = self.imbalance(row, texts[row])
            after = self.imbalance(row, self._with(input_ids, row, candidates[0]))
            if after > now + 1e-12 and len(candidates) > 1:
                self.rejected.append((self.step, row, candidates[0]))
                self._restrict(scores, row, candidates[1:])
        self.step += 1
        return scores


@dataclass(frozen=True)
class RejectionSamplingFactory(_SourceFactory):
    """Build :class:`RejectionSampling` for one batch."""

    processor = RejectionSampling
    top_k: int = 5
