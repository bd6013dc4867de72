"""Self-Debias Decoding as a ``transformers`` logits processor.

A second forward pass conditions the model on a short bias-naming prefix; tokens that the biased
pass favours more than the main pass (Δ = p_main − p_bias < 0) are scaled by e^{λΔ}. It lives apart
from :mod:`analysis.mitigation.decoding` because it is the only method that runs the model itself;
its factory follows the same protocol (see that module's docstring).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["SelfDebiasDecoding", "SelfDebiasFactory", "default_prefix"]


def default_prefix() -> str:
    """The bias-naming prefix of Self-Debias Decoding: the ``debias-prefix`` step's file.

    It describes the biases the method removes (positional neglect of the middle, sentiment
    flips) so that the biased pass makes them likely; ``--template debias-prefix=PATH``
    replaces it.
    """
    from analysis.mitigation.prompts import step_template

    return step_template("debias-prefix").user


class SelfDebiasDecoding:
    """Self-debiasing (Schick et al., 2021) against a bias-naming prefix.

    A second pass runs the same model on ``prefix + prompt + output so far``, where the prefix
    names the biases to avoid; ``Δ = p_main - p_bias`` per token, and tokens the biased pass
    prefers (``Δ < 0``) are scaled by ``exp(λΔ)``. The processor returns
    ``log p_main + λ min(Δ, 0)``: the log of the scaled, not yet renormalised, probabilities.

    The biased pass is recomputed every ``refresh_every`` steps and its distribution reused in
    between (``refresh_every=1`` is exact self-debiasing at twice the decoding cost).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model generating (its weights serve the biased pass).
    tokenizer : transformers tokenizer
        Tokenizes the prefix.
    input_ids, attention_mask : torch.Tensor
        The left-padded prompt batch.
    prefix : str, optional
        The bias-naming prefix (default :func:`default_prefix`); longer than
        ``max_prefix_tokens`` tokens it is cut (and logged).
    decay : float, default 10.0
        λ.
    refresh_every : int, default 4
        Steps between biased passes.
    max_prefix_tokens : int, default 29
        The prefix stays under 30 tokens so it does not dominate short prompts.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        input_ids: Any,
        attention_mask: Any,
        *,
        prefix: str | None = None,
        decay: float = 10.0,
        refresh_every: int = 4,
        max_prefix_tokens: int = 29,
    ) -> None:
        self.model = model
        self.decay = decay
        self.refresh_every = max(1, refresh_every)
        if prefix is None:
            prefix = default_prefix()
        prefix_ids = tokenizer.encode(prefix, add_special_tokens=False)
        if len(prefix_ids) > max_prefix_tokens:
            log.warning(
                "self-debias prefix has %d tokens; keeping the first %d",
                len(prefix_ids),
                max_prefix_tokens,
            )
            prefix_ids = prefix_ids[:max_prefix_tokens]
        self.prefix_ids = prefix_ids
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.prompts = [
            row[mask.bool()].tolist() for row, mask in zip(input_ids, attention_mask, strict=True)
        ]
        self.prompt_length = int(input_ids.shape[1])
        self.step = 0
        self._p_bias: Any = None
        self.n_biased_passes = 0

    def biased_probs(self, input_ids: Any) -> Any:
        """Run the biased pass: next-token probabilities given ``prefix + prompt + output``."""
        import torch

        outputs = input_ids[:, self.prompt_length :].tolist()
        seqs = [self.prefix_ids + p + o for p, o in zip(self.prompts, outputs, strict=True)]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):  # left padding, like the main pass
            ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s) :] = 1
        device = input_ids.device
        ids, mask = ids.to(device), mask.to(device)
        # Positions count real tokens only, as generate() does for left-padded rows.
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        self.n_biased_passes += 1
        return torch.softmax(logits[:, -1, :].float(), dim=-1)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self._p_bias is None or self.step % self.refresh_every == 0:
            self._p_bias = self.biased_probs(input_ids)
        self.step += 1
        log_main = torch.log_softmax(scores.float(), dim=-1)
        p_bias = self._p_bias[:, : scores.shape[-1]].to(scores.device)
        delta = log_main.exp() - p_bias
        return (log_main + self.decay * delta.clamp(max=0.0)).to(scores.dtype)


@dataclass(frozen=True)
class SelfDebiasFactory:
    """Build :class:`SelfDebiasDecoding` for one batch."""

    decay: float = 10.0
    refresh_every: int = 4
    prefix: str | None = None  # None: the debias-prefix step's file

    def __call__(self, ctx: Any) -> SelfDebiasDecoding:
        return SelfDebiasDecoding(
            ctx.model,
            ctx.tokenizer,
            ctx.input_ids,
            ctx.attention_mask,
            prefix=self.prefix,
            decay=self.decay,
            refresh_every=self.refresh_every,
        )
