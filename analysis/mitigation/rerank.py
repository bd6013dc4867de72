"""Attention-Sort Re-ordering: move the paragraphs the model attends to least to the front.

Following Attention Sorting (Peysakhovich & Lerer, 2023): one forward pass over the full prompt
measures how much attention each paragraph of the document receives from the position where the
answer starts (the last prompt token), averaged over layers, heads and the paragraph's tokens;
paragraphs are then ordered from lowest to highest attention, so the best-attended one sits next
to the answer, and the pass is repeated on the new order (2 iterations by default) before the
model is prompted with the final order. It needs attention weights, so only the ``transformers``
backend can run it; the model is switched to eager attention for the measuring pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from analysis.mitigation.chunking import paragraphs

__all__ = ["attention_sort", "paragraph_attention"]


@contextmanager
def _eager_attention(model: Any):
    """Temporarily use eager attention, the only implementation that returns weights."""
    previous = getattr(model.config, "_attn_implementation", None)
    switch = previous not in (None, "eager") and hasattr(model, "set_attn_implementation")
    if switch:
        model.set_attn_implementation("eager")
    try:
        yield model
    finally:
        if switch:
            model.set_attn_implementation(previous)


def paragraph_attention(
    model: Any, tokenizer: Any, prompt: str, units: Sequence[str]
) -> np.ndarray:
    """Mean attention each unit of ``prompt`` receives from the prompt's last token.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal language model.
    tokenizer : transformers fast tokenizer
        Must return offset mappings.
    prompt : str
        The full prompt, containing every unit verbatim in order.
    units : sequence of str
        The paragraphs (or sentences) whose attention is measured.

    Returns
    -------
    numpy.ndarray
        One value per unit: attention from the last position, averaged over layers and heads,
        then over the unit's tokens (0 for a unit with no token of its own).
    """
    import torch

    spans, start = [], 0
    for unit in units:
        begin = prompt.index(unit, start)
        spans.append((begin, begin + len(unit)))
        start = begin + len(unit)
    enc = tokenizer(
        prompt, return_tensors="pt", add_special_tokens=False, return_offsets_mapping=True
    )
    offsets = enc.pop("offset_mapping")[0].tolist()
    enc = enc.to(model.device)
    rows: list[Any] = []

    def keep_last_row(module: Any, args: Any, output: Any) -> None:
        # Eager attention returns (output, weights); only the last query row is kept, so memory
        # stays at one layer's weights instead of all layers' (tens of GB for a long prompt).
        weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if weights is not None and getattr(weights, "dim", lambda: 0)() == 4:
            rows.append(weights[0, :, -1, :].float().mean(dim=0).cpu())

    modules = [m for name, m in model.named_modules() if name.endswith("self_attn")]
    handles = [m.register_forward_hook(keep_last_row) for m in modules]
    # The base model skips the LM head: its logits over the whole prompt are not needed.
    body = getattr(model, "base_model", model)
    try:
        with _eager_attention(model), torch.inference_mode():
            body(**enc)
    finally:
        for handle in handles:
            handle.remove()
    if not rows:
        raise ValueError(
            f"{type(model).__name__} exposes no attention weights through its self_attn modules"
        )
    # Attention from the last query position to every key, averaged over layers and heads.
    received = torch.stack(rows).mean(dim=0).numpy()
    scores = np.zeros(len(units))
    for j, (a, b) in enumerate(spans):
        tokens = [i for i, (s, e) in enumerate(offsets) if s < b and e > a]
        scores[j] = received[tokens].mean() if tokens else 0.0
    return scores


def attention_sort(
    model: Any,
    tokenizer: Any,
    text: str,
    render: Callable[[Sequence[str], str], str],
    *,
    iterations: int = 2,
) -> tuple[list[str], str, list[list[float]]]:
    """Reorder the paragraphs of ``text`` from least to most attended, ``iterations`` times.

    Parameters
    ----------
    model, tokenizer
        The ``transformers`` model and its fast tokenizer.
    text : str
        The document.
    render : callable
        ``(units, joiner) -> full prompt string``: the chat-formatted summarisation prompt over
        the units in their current order (as labelled segments or joined by ``joiner``); every
        unit must occur in it verbatim.
    iterations : int, default 2
        Measure-and-sort rounds.

    Returns
    -------
    units : list of str
        The units in the final order.
    joiner : str
        What joins them back into a document (a blank line between paragraphs, a space between
        sentences).
    history : list of list of float
        The attention scores measured in each round, in the order of that round.
    """
    units = paragraphs(text)
    joiner = "\n\n" if len(units) > 1 and "\n\n" in text else " "
    history: list[list[float]] = []
    for _ in range(iterations):
        scores = paragraph_attention(model, tokenizer, render(units, joiner), units)
        history.append([float(s) for s in scores])
        # A stable sort keeps the original order among equally attended units.
        order = sorted(range(len(units)), key=lambda i: scores[i])
        units = [units[i] for i in order]
    return units, joiner, history
