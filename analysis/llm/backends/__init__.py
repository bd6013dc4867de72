"""Backends behind one interface (:class:`~analysis.llm.backends.base.Backend`).

``transformers`` (a local checkpoint, batched on one GPU or the CPU), ``openai`` (the OpenAI API
or any OpenAI-compatible server such as vLLM) and ``vader`` (a lexicon baseline for framing).
"""

from __future__ import annotations

from typing import Any

from analysis.llm.backends.base import (
    Backend,
    BatchContext,
    Completion,
    GenerationSettings,
    Request,
)

BACKENDS = ("transformers", "openai", "vader")

__all__ = [
    "BACKENDS",
    "Backend",
    "BatchContext",
    "Completion",
    "GenerationSettings",
    "Request",
    "make_backend",
]


def make_backend(
    name: str, model: str | None, settings: GenerationSettings | None = None, **options: Any
) -> Backend:
    """Construct a backend by name; ``options`` go to its constructor.

    Parameters
    ----------
    name : str
        ``transformers``, ``openai`` or ``vader``.
    model : str, optional
        Checkpoint path or served model name (ignored by ``vader``).
    settings : GenerationSettings, optional
        Decoding settings.
    **options
        Backend-specific keyword arguments (``device``, ``dtype``, ``base_url``, ``concurrency`` …).

    Returns
    -------
    Backend
    """
    if name == "transformers":
        from analysis.llm.backends.hf import TransformersBackend

        if not model:
            raise ValueError("the transformers backend needs --model (a checkpoint directory)")
        return TransformersBackend(model, settings, **options)
    if name == "openai":
        from analysis.llm.backends.openai_compat import OpenAIBackend

        if not model:
            raise ValueError("the openai backend needs --model (the served model name)")
        return OpenAIBackend(model, settings, **options)
    if name == "vader":
        from analysis.llm.backends.vader import VaderBackend

        return VaderBackend(model or "vaderSentiment")
    raise ValueError(f"unknown backend {name!r}; choose one of {BACKENDS}")
