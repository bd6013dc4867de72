"""Local-Explanation Guard: the model explains its choice, then checks veto biased tokens.

Every ``check_every`` decoding steps the guard asks the model to explain the token it is about to
choose (the explanation step of the seed paper): which part of the source the summary is drawing
on, and whether it keeps the source's sentiment (the template file ``prompts/mitigate/
explain-choice.txt``, step ``explain-choice``, replaceable with ``--template explain-choice=PATH``;
generated greedily, at most ``explain_tokens`` tokens). The checks then run: a violation is what
the explanation admits (``PART: beginning|end`` → the middle is being ignored; ``SENTIMENT:
flipped``) or what the rule-based detector finds in the output so far (TF-IDF coverage of the
thirds; VADER compounds of source and output). On a violation, top-k candidates that would make a
violated score worse are rejected and the token is resampled among the others.

Neither the explanation step nor the checks exist in a library; they are written here on top of
scikit-learn (TF-IDF), VADER and ``transformers.generate``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.mitigation.decoding import CandidateFilter, PartCoverage, decode_rows, source_text

__all__ = ["ExplanationGuardFactory", "LocalExplanationGuard", "parse_explanation"]

_PART = re.compile(r"PART\W*(beginning|start|middle|end)", re.IGNORECASE)
_SENTIMENT = re.compile(r"SENTIMENT\W*(kept|keeps|same|flipped|flips|opposite)", re.IGNORECASE)


def parse_explanation(text: str) -> dict[str, str | None]:
    """Read ``PART`` and ``SENTIMENT`` from an explanation (``None`` where it names neither).

    Examples
    --------
    >>> parse_explanation("PART: End; SENTIMENT: flipped; WHY: the ending is upbeat")
    {'part': 'end', 'sentiment': 'flipped'}
    >>> parse_explanation("It summarises the text.")
    {'part': None, 'sentiment': None}
    """
    part = _PART.search(text)
    sentiment = _SENTIMENT.search(text)
    p = part.group(1).lower() if part else None
    s = sentiment.group(1).lower() if sentiment else None
    return {
        "part": "beginning" if p == "start" else p,
        "sentiment": None
        if s is None
        else ("flipped" if s in {"flipped", "flips", "opposite"} else "kept"),
    }


def _vader_compound(text: str, analyzer: Any) -> float:
    return float(analyzer.polarity_scores(text)["compound"])


def _round_neutral(compound: float) -> float:
    """Map VADER compounds inside the neutral band ``(-0.05, 0.05)`` to 0."""
    return 0.0 if abs(compound) < 0.05 else compound


class LocalExplanationGuard(CandidateFilter):
    """Every ``check_every`` steps, explain the choice, then veto candidates that deepen a bias.

    At a check step, for each row:

    1. **Explanation** (when a ``model`` is given): the model is prompted with the source, the
       summary so far and the token it is about to choose (the top candidate) and explains the
       choice as ``PART: …; SENTIMENT: …; WHY: …`` (greedy, at most ``explain_tokens`` tokens).
       The explanation *admits* ``ignoring_middle`` when it names the beginning or the end (once
       the output has ``min_words`` words) and ``flipping_sentiment`` when it says flipped.
    2. **Checks**: the rule-based detector (:meth:`detect`) finds *ignoring middle* (at least
       ``min_words`` words and ``s_m + alpha < max(s_b, s_e)``, TF-IDF similarities to the source
       thirds) and *flipping sentiment* (VADER compounds of source and output of opposite signs,
       both at least 0.05 in magnitude).

    The violations are the union of both. Each top-k candidate is scored by the violation it
    leaves (middle gap ``max(s_b, s_e) - s_m``; sentiment ``-sign(source) * compound(output)``);
    candidates that make a violated score worse are rejected and the next token is resampled from
    the rest (if all would be rejected, the least bad one is kept). Generation cannot take back
    emitted tokens, so "reject" acts on the token being chosen. Explanations are kept in
    :attr:`explanations`.

    Parameters
    ----------
    sources : sequence of str
        One source per row.
    tokenizer, prompt_length
        As in :class:`analysis.mitigation.decoding.ForcedBalancedCoverage`.
    model : transformers model, optional
        Writes the explanations; without it only the rule-based checks run.
    check_every : int, default 5
        Steps between checks.
    top_k : int, default 5
        Candidates considered at a check.
    alpha : float, default 0.05
        Margin of the ignoring-middle rule.
    min_words : int, default 10
        Output length below which ignoring the middle is not judged.
    explain_tokens : int, default 24
        Token limit of one explanation.
    explain_template : PromptTemplate, optional
        The explanation prompt (fields ``text``, ``summary``, ``token``); default the
        ``explain-choice`` step's file.
    """

    def __init__(
        self,
        sources: Sequence[str],
        tokenizer: Any,
        prompt_length: int,
        *,
        model: Any = None,
        check_every: int = 5,
        top_k: int = 5,
        alpha: float = 0.05,
        min_words: int = 10,
        explain_tokens: int = 24,
        explain_template: Any = None,
    ) -> None:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

        super().__init__(tokenizer, prompt_length, top_k)
        self.sources = list(sources)
        self.model = model
        self.check_every = check_every
        self.alpha = alpha
        self.min_words = min_words
        self.explain_tokens = explain_tokens
        if explain_template is None:
            from analysis.mitigation.prompts import step_template

            explain_template = step_template("explain-choice")
        self.explain_template = explain_template
        self.coverage = [PartCoverage(s) for s in sources]
        self.analyzer = SentimentIntensityAnalyzer()
        self.source_sign = [int(np.sign(_round_neutral(self._compound(s)))) for s in sources]
        self.flags: list[tuple[int, int, str]] = []  # (step, row, violation)
        self.explanations: list[dict[str, Any]] = []  # step, row, token, text, part, sentiment

    def _compound(self, text: str) -> float:
        return _vader_compound(text, self.analyzer)

    def explain(self, row: int, output: str, token: int) -> str:
        """Ask the model to explain choosing ``token`` after ``output`` (greedy, short)."""
        import torch
        from transformers import GenerationConfig

        from analysis.llm.backends.hf import format_messages

        tok = self.tokenizer
        messages = self.explain_template.messages(
            text=self.sources[row], summary=output, token=tok.decode([int(token)]).strip()
        )
        enc = tok(format_messages(tok, messages), return_tensors="pt", add_special_tokens=False)
        enc = enc.to(self.model.device)
        config = GenerationConfig(
            max_new_tokens=self.explain_tokens,
            do_sample=False,
            eos_token_id=self.model.generation_config.eos_token_id or tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        with torch.inference_mode():
            out = self.model.generate(**enc, generation_config=config)
        return tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True).strip()

    def admitted(self, explanation: str, output: str) -> set[str]:
        """The violations an explanation admits."""
        parsed = parse_explanation(explanation)
        found = set()
        if parsed["part"] in {"beginning", "end"} and len(output.split()) >= self.min_words:
            found.add("ignoring_middle")
        if parsed["sentiment"] == "flipped":
            found.add("flipping_sentiment")
        return found

    def detect(self, row: int, text: str) -> dict[str, float]:
        """Return the rule-based violations of ``text`` with their scores (empty when fine)."""
        found: dict[str, float] = {}
        if len(text.split()) >= self.min_words:
            s_b, s_m, s_e = self.coverage[row](text)
            if s_m + self.alpha < max(s_b, s_e):
                found["ignoring_middle"] = float(max(s_b, s_e) - s_m)
        sign = self.source_sign[row]
        compound = _round_neutral(self._compound(text))
        if sign and compound and np.sign(compound) != sign:
            found["flipping_sentiment"] = float(-sign * compound)
        return found

    def _badness(self, row: int, text: str, kinds: Sequence[str]) -> tuple[float, ...]:
        out = []
        for kind in kinds:
            if kind == "ignoring_middle":
                s_b, s_m, s_e = self.coverage[row](text)
                out.append(float(max(s_b, s_e) - s_m))
            else:
                out.append(float(-self.source_sign[row] * self._compound(text)))
        return tuple(out)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        step, self.step = self.step, self.step + 1
        if step == 0 or step % self.check_every:
            return scores
        scores = scores.clone()
        top = scores.topk(min(self.top_k, scores.shape[-1]), dim=-1).indices.tolist()
        texts = decode_rows(self.tokenizer, input_ids, self.prompt_length)
        for row, candidates in enumerate(top):
            kinds_found = set(self.detect(row, texts[row]))
            if self.model is not None:
                explanation = self.explain(row, texts[row], candidates[0])
                admitted = self.admitted(explanation, texts[row])
                self.explanations.append(
                    {
                        "step": step,
                        "row": row,
                        "token": candidates[0],
                        "text": explanation,
                        **parse_explanation(explanation),
                        "admitted": sorted(admitted),
                    }
                )
                kinds_found |= admitted
            if not kinds_found:
                continue
            kinds = sorted(kinds_found)
            self.flags.extend((step, row, k) for k in kinds)
            now = self._badness(row, texts[row], kinds)
            bad = {c: self._badness(row, self._with(input_ids, row, c), kinds) for c in candidates}
            keep = [
                c
                for c in candidates
                if all(b <= n + 1e-12 for b, n in zip(bad[c], now, strict=True))
            ]
            if not keep:
                keep = [min(candidates, key=lambda c: sum(bad[c]))]
            self.rejected.extend((step, row, c) for c in candidates if c not in keep)
            self._restrict(scores, row, keep)
        return scores


@dataclass(frozen=True)
class ExplanationGuardFactory:
    """Build :class:`LocalExplanationGuard` for one batch (the batch's model explains)."""

    check_every: int = 5
    top_k: int = 5
    alpha: float = 0.05
    min_words: int = 10
    explain_tokens: int = 24
    # The explanation prompt (None: the explain-choice step's file). Out of the repr, which enters
    # the settings hash: the method hash has its text, and its file path must not count.
    explain_template: Any = field(default=None, repr=False)

    def __call__(self, ctx: Any) -> LocalExplanationGuard:
        return LocalExplanationGuard(
            [source_text(r) for r in ctx.requests],
            ctx.tokenizer,
            int(ctx.input_ids.shape[1]),
            model=ctx.model if self.explain_tokens > 0 else None,
            check_every=self.check_every,
            top_k=self.top_k,
            alpha=self.alpha,
            min_words=self.min_words,
            explain_tokens=self.explain_tokens,
            explain_template=self.explain_template,
        )
