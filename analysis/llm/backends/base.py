"""The backend interface: prompts in, completions out, in whatever order they finish."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, str]


@dataclass(frozen=True, eq=False)  # identity hash: usable as a dict key despite its messages
class Request:
    """One prompt to complete.

    Attributes
    ----------
    key : str
        Unique within a run; completions are matched back to requests by it.
    messages : list of dict
        Chat messages (``role``, ``content``) built from a prompt template.
    text : str
        The raw text being judged, for backends that read text rather than prompts (``vader``).
    """

    key: str
    messages: tuple[Message, ...]
    text: str = ""


@dataclass
class Completion:
    """What a backend returns for one request. ``error`` is set (and ``text`` empty) on failure."""

    text: str
    n_prompt_tokens: int | None = None
    n_output_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class BatchContext:
    """What a logits-processor factory sees for one batch of the ``transformers`` backend.

    Mitigation methods that steer decoding by the source (e.g. boosting source tokens, contrastive
    decoding against a context-free prompt) need the batch's prompts; a factory receives this and
    returns a ``transformers.LogitsProcessor`` for that batch only.
    """

    requests: Sequence[Request]
    input_ids: Any  # torch.LongTensor, left-padded
    attention_mask: Any
    tokenizer: Any
    model: Any


LogitsProcessorFactory = Callable[[BatchContext], Any]


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding settings shared by all backends.

    The defaults follow the seed experiments: greedy decoding (``do_sample=False``; an OpenAI
    server gets ``temperature=0``), at most 500 new tokens, seed 0. Everything here except
    ``batch_size`` and ``logits_processors`` (whose names count instead) enters the template hash,
    so changing a setting starts a new set of results instead of mixing them.
    """

    max_new_tokens: int = 500
    do_sample: bool = False
    temperature: float | None = None
    top_p: float | None = None
    seed: int = 0
    batch_size: int = 16
    min_new_tokens: int | None = None
    logits_processors: tuple[LogitsProcessorFactory, ...] = ()

    def hash_fields(self) -> dict[str, Any]:
        """Return the settings that change outputs, for the template hash and the manifest."""
        return {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": self.do_sample,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "min_new_tokens": self.min_new_tokens,
            "logits_processors": [_qualname(f) for f in self.logits_processors],
        }


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


class Backend(Protocol):
    """Anything that turns requests into completions.

    ``generate`` yields ``(request, completion)`` pairs as they finish (batch by batch, or in
    completion order for a server), so the caller can store each one at once and a crash loses
    at most the work in flight.
    """

    name: str
    model_id: str  # recorded as ``model`` in every result

    def generate(self, requests: Iterable[Request]) -> Iterator[tuple[Request, Completion]]: ...

    def info(self) -> dict[str, Any]:
        """Describe the backend for the run manifest (never secrets)."""
        ...


def item_seed(run_seed: int, key: str) -> int:
    """The seed of one item's sampling generator, from the run seed and the request key.

    A request's key is its item ID and variant, so the same item draws the same tokens whatever
    batch it lands in, whatever was generated before it, and across a resume.

    Examples
    --------
    >>> item_seed(0, "a") == item_seed(0, "a") != item_seed(1, "a")
    True
    """
    digest = hashlib.sha256(f"{int(run_seed)}\x1f{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # torch seeds are below 2**63
