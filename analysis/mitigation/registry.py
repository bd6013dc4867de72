"""The 18 mitigation methods: family, target bias, definition, hyperparameters and backends.

This table is the single description of each method; ``framelab mitigate list`` prints it, the
CLI builds one option per hyperparameter from it, and :mod:`analysis.mitigation.runner` checks
parameters and backends against it. Defaults are the seed study's values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BOTH",
    "FAMILIES",
    "METHODS",
    "TRANSFORMERS_ONLY",
    "MethodSpec",
    "Param",
    "get_method",
    "method_table",
    "resolve_params",
]

BOTH = ("transformers", "openai")
TRANSFORMERS_ONLY = ("transformers",)
FAMILIES = ("prompt", "fact-checking", "chunk", "re-rank", "decoding")


@dataclass(frozen=True)
class Param:
    """One hyperparameter: its name (a CLI option ``--name``), seed default and meaning."""

    name: str
    default: Any
    help: str

    @property
    def type(self) -> type:
        """The Python type of the default (``str`` when the default is ``None``)."""
        return type(self.default) if self.default is not None else str


@dataclass(frozen=True)
class MethodSpec:
    """A mitigation method as the seed study defines it.

    Attributes
    ----------
    name : str
        The ``method`` value written into every result record.
    family : str
        One of :data:`FAMILIES`.
    task : str
        ``summarize`` or ``fact-check``.
    target_bias : str
        The bias the method is meant to reduce.
    definition : str
        One-paragraph definition.
    params : tuple of Param
        Hyperparameters with the seed values as defaults.
    backends : tuple of str
        Backends that can run it.
    passes : int
        Model calls per item (excluding forward passes for measurement).
    """

    name: str
    family: str
    task: str
    target_bias: str
    definition: str
    params: tuple[Param, ...] = ()
    backends: tuple[str, ...] = BOTH
    passes: int = 1

    def defaults(self) -> dict[str, Any]:
        """Return ``{name: seed default}`` of the hyperparameters."""
        return {p.name: p.default for p in self.params}


_FRAMING_PRIMACY = "framing change and primacy"

METHODS: dict[str, MethodSpec] = {
    m.name: m
    for m in (
        # --- prompt family ---
        MethodSpec(
            "self-awareness",
            "prompt",
            "summarize",
            _FRAMING_PRIMACY,
            "The summarisation prompt gives the model an unbiased-summarizer role and asks it to "
            "add no framing bias, not to omit the middle and to keep the sentiment; the text "
            "after FINAL_SUMMARY: is the summary.",
        ),
        MethodSpec(
            "chain-of-thought",
            "prompt",
            "summarize",
            _FRAMING_PRIMACY,
            "One prompt: the model first describes the beginning, middle and end of the text "
            "in analysis sections, then writes a concise FINAL_SUMMARY.",
        ),
        MethodSpec(
            "cloze",
            "prompt",
            "summarize",
            _FRAMING_PRIMACY,
            "One prompt with BEGIN / MIDDLE / END blanks to fill, then FINAL_SUMMARY; the text "
            "after FINAL_SUMMARY is the summary.",
        ),
        MethodSpec(
            "cognitive-counterfactual",
            "prompt",
            "summarize",
            _FRAMING_PRIMACY,
            "Cognitive Counterfactual Simulation in two passes (000 A.6): pass 1 drafts a "
            "summary and lists how a primacy-, recency- and framing-biased summary would "
            "deviate from it; pass 2 writes a final summary that avoids those deviations "
            "(FINAL_SUMMARY).",
            passes=2,
        ),
        MethodSpec(
            "self-help-debias",
            "prompt",
            "summarize",
            _FRAMING_PRIMACY,
            "Self-Help Debias: a draft, then a rewrite of the draft alone (no bias, the "
            "original sentiment, equal coverage of beginning, middle and end; FINAL_SUMMARY) "
            "limited to rewrite_max_new_tokens tokens. A self-critique pass runs between them "
            "when the rewrite prompt uses {critique} (3 passes).",
            params=(
                Param("rewrite_max_new_tokens", 300, "token limit of the rewrite pass (000 A.6)"),
            ),
            passes=2,
        ),
        # --- fact-checking family ---
        MethodSpec(
            "prompt-calibration",
            "fact-checking",
            "fact-check",
            "hallucination",
            "Criteria for calling a statement True (certain it happened or follows directly "
            "from a known event, clear knowledge, specific details) or False (any doubt, "
            "misleading content, no reliable information); exactly one word, no explanation.",
        ),
        MethodSpec(
            "knowledge-boundary",
            "fact-checking",
            "fact-check",
            "hallucination",
            "Knowledge Boundary Awareness: the model's knowledge cutoff date is stated in the "
            "prompt, and the model is asked for its best prediction when a statement concerns "
            "events after it; exactly one word.",
            params=(
                Param(
                    "cutoff",
                    None,
                    "the model's knowledge cutoff (ISO date); required, or an item's 'cutoff'",
                ),
            ),
        ),
        MethodSpec(
            "epistemic-tagging",
            "fact-checking",
            "fact-check",
            "hallucination",
            "One of four answers, True or False followed by [High Confidence] or [Low "
            "Confidence], with the [Certain] / [Uncertain] / [Reasoning] / [Conclusion] tags "
            "as a guide to the reasoning.",
        ),
        # --- chunk family ---
        MethodSpec(
            "partial-summaries",
            "chunk",
            "summarize",
            "primacy",
            "Partial Summaries Ensemble: the document is cut into n_chunks chunks of "
            "floor(|D|/n_chunks) tokens, each summarised on its own, and the partial summaries "
            "merged into one coherent summary (FINAL_SUMMARY).",
            params=(Param("n_chunks", 3, "number of chunks"),),
            passes=4,
        ),
        MethodSpec(
            "weighted-summaries",
            "chunk",
            "summarize",
            "primacy",
            "Weighted Summaries: beginning, middle and end are summarised separately, each "
            "prompt asking for about 33%, 34% and 33% of target_tokens and not more, and the "
            "three summaries joined. A part's hard token limit is only a safety cap (cap_factor "
            "times its budget).",
            params=(
                Param("target_tokens", 100, "desired summary length in model tokens"),
                Param("weights", "0.33,0.34,0.33", "budget shares of beginning, middle, end"),
                Param(
                    "cap_factor",
                    3.0,
                    "safety cap of a part's length, as a multiple of its budget (FrameLab's "
                    "choice; the paper states only the budget)",
                ),
            ),
            passes=3,
        ),
        # --- re-rank family ---
        MethodSpec(
            "attention-sort",
            "re-rank",
            "summarize",
            "primacy",
            "Attention-Sort Re-ordering: a forward pass measures the attention each paragraph "
            "receives; paragraphs are reordered from lowest to highest attention, repeated "
            "iterations times, and the method's own prompt gives them as numbered segments "
            "before the task.",
            params=(Param("iterations", 2, "measure-and-reorder rounds"),),
            backends=TRANSFORMERS_ONLY,
        ),
        MethodSpec(
            "position-shuffle",
            "re-rank",
            "summarize",
            "primacy",
            "Position-Invariant Shuffle: sentences are shuffled with a seed, then the method's "
            "own prompt tells the model the text is out of order and asks for a summary of all "
            "of it.",
            params=(
                Param("shuffle_seed", 42, "seed of random.Random that shuffles the sentences"),
                Param(
                    "seed_scope",
                    "text",
                    "'text' (the seed combined with the item id: a permutation per text) or "
                    "'fixed' (the seed alone: one permutation per sentence count)",
                ),
                Param(
                    "sentence_split",
                    "sentences",
                    "'sentences' (the shared library splitter) or 'periods' (cut at every "
                    "period, the seed description taken literally)",
                ),
            ),
        ),
        # --- decoding family ---
        MethodSpec(
            "balanced-coverage",
            "decoding",
            "summarize",
            "primacy",
            "Forced Balanced Coverage: TF-IDF coverage of the source thirds by the output so far; "
            "log(gamma) is added to tokens of under-covered thirds until |s_b - s_e| <= tolerance. "
            "Which thirds count as under-covered (below the best by more than the tolerance) is "
            "FrameLab's choice: the paper does not define it.",
            params=(
                Param("gamma", 1.5, "probability multiplier of under-covered tokens"),
                Param("tolerance", 0.05, "balance threshold on |s_b - s_e|"),
            ),
            backends=TRANSFORMERS_ONLY,
        ),
        MethodSpec(
            "weighted-tokens",
            "decoding",
            "summarize",
            _FRAMING_PRIMACY,
            "Weighted Token Decoding: probabilities of negative-sentiment tokens (VADER valence "
            "<= valence_threshold) are multiplied by `negative`, those of the middle third's "
            "top TF-IDF keywords by `middle`.",
            params=(
                Param("negative", 0.3, "factor on negative-sentiment tokens"),
                Param("middle", 2.0, "factor on middle keywords"),
                Param("n_keywords", 10, "middle keywords (top TF-IDF terms of the middle third)"),
                Param(
                    "valence_threshold", -1.0, "VADER valence at or below which a word is negative"
                ),
            ),
            backends=TRANSFORMERS_ONLY,
        ),
        MethodSpec(
            "mirostat",
            "decoding",
            "summarize",
            "primacy",
            "Mirostat: sampling temperature T = exp(mu); after each sampled token "
            "mu <- mu - eta (s_t - target) with s_t = -ln p_t its surprise under the model "
            "(mu starts at 0). variant=v2 truncates tokens with surprise above mu instead. "
            "Sampling with neutral warpers (temperature 1, top_k 0, top_p 1).",
            params=(
                Param("target", 2.0, "target surprise mu* (nats)"),
                Param("eta", 0.1, "learning rate"),
                Param(
                    "variant",
                    "temperature",
                    "'temperature' (T = exp(mu), the paper's formula) or 'v2' (truncation)",
                ),
            ),
            backends=TRANSFORMERS_ONLY,
        ),
        MethodSpec(
            "rejection-sampling",
            "decoding",
            "summarize",
            "primacy",
            "If the top token would increase the imbalance (max - min TF-IDF coverage of the "
            "thirds), it is dropped and the token is resampled within the top-k.",
            params=(Param("top_k", 5, "candidates considered"),),
            backends=TRANSFORMERS_ONLY,
        ),
        MethodSpec(
            "self-debias",
            "decoding",
            "summarize",
            _FRAMING_PRIMACY,
            "Self-Debias Decoding: a second pass with a bias-naming prefix (< 30 tokens) gives "
            "p_bias; tokens with delta = p_main - p_bias < 0 are scaled by exp(decay * delta); the "
            "biased pass is refreshed every refresh_every steps (4 in 000 A.6).",
            params=(
                Param("decay", 10.0, "lambda"),
                Param("refresh_every", 4, "steps between biased passes (000 A.6)"),
            ),
            backends=TRANSFORMERS_ONLY,
        ),
        MethodSpec(
            "explanation-guard",
            "decoding",
            "summarize",
            _FRAMING_PRIMACY,
            "Local-Explanation Guard: every check_every steps the model explains the token it "
            "is about to choose (which part of the text it draws on; whether the sentiment is "
            "kept), then rule-based checks (TF-IDF coverage, VADER) run; a violation the "
            "explanation admits or the checks find makes candidates that deepen it rejected "
            "and the token resampled within the top-k. A check every check_every = 5 steps is "
            "000 A.6's; the min_words and alpha rules of the detector are FrameLab's choice: "
            "the paper names a rule-based detector without its rules.",
            params=(
                Param("check_every", 5, "steps between checks (000 A.6)"),
                Param("top_k", 5, "candidates considered at a check"),
                Param("alpha", 0.05, "margin of the ignoring-middle rule"),
                Param("min_words", 10, "output words before the middle rule applies"),
                Param("explain_tokens", 24, "token limit of one explanation (0: checks only)"),
            ),
            backends=TRANSFORMERS_ONLY,
        ),
    )
}


def get_method(name: str) -> MethodSpec:
    """Return a method by name, listing the known ones if it is unknown."""
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(
            f"unknown mitigation method {name!r}; choose one of {sorted(METHODS)}"
        ) from None


def resolve_params(spec: MethodSpec, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Merge given hyperparameters over the defaults, converting to the defaults' types.

    Unknown names are an error naming the method's parameters.
    """
    params = spec.defaults()
    known = {p.name: p for p in spec.params}
    for name, value in (given or {}).items():
        if name not in known:
            raise ValueError(
                f"{spec.name} has no hyperparameter {name!r}; it has {sorted(known) or 'none'}"
            )
        params[name] = known[name].type(value) if value is not None else None
    return params


def method_table(names: list[str] | None = None) -> pd.DataFrame:
    """The methods as a table.

    Returns
    -------
    pandas.DataFrame
        One row per method: ``method``, ``family``, ``task``, ``target_bias``,
        ``hyperparameters`` (``name=default`` joined by ``, ``), ``backends``, ``passes``,
        ``definition``.
    """
    import pandas as pd

    rows = []
    for name in names or list(METHODS):
        m = get_method(name)
        rows.append(
            {
                "method": m.name,
                "family": m.family,
                "task": m.task,
                "target_bias": m.target_bias,
                "hyperparameters": ", ".join(f"{p.name}={p.default}" for p in m.params),
                "backends": ", ".join(m.backends),
                "passes": m.passes,
                "definition": m.definition,
            }
        )
    return pd.DataFrame(rows)
