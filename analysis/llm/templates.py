"""Named prompt templates, one registry for every task.

A template is data: a name, the task it serves, an optional system message and a user message
with ``{placeholders}``. Its hash (text plus the generation settings) is part of every result's
resume key, so editing a prompt can never mix old and new answers in one file. Mitigation methods
that change the prompt register their own templates with :func:`register`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PromptTemplate:
    """A named prompt.

    Attributes
    ----------
    name : str
        Unique within its task (``baseline``, ``words-100``, ``wildframe``, …).
    task : str
        The task it serves.
    user : str
        The user message; ``{field}`` placeholders are filled by the task.
    system : str, optional
        A system message, if any.
    shots : dict
        Named one-shot examples the task picks from (``reframe`` picks by sentiment and position).
    """

    name: str
    task: str
    user: str
    system: str | None = None
    shots: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def messages(self, **fields: Any) -> tuple[dict[str, str], ...]:
        """Render the chat messages with ``fields`` filled in."""
        msgs = []
        if self.system:
            msgs.append({"role": "system", "content": self.system.format(**fields)})
        msgs.append({"role": "user", "content": self.user.format(**fields)})
        return tuple(msgs)

    def hash(self, settings: Mapping[str, Any] | None = None) -> str:
        """Return the first 16 hex digits of SHA-256 over the template text and the settings."""
        payload = {
            "task": self.task,
            "system": self.system,
            "user": self.user,
            "shots": {k: dict(v) for k, v in sorted(self.shots.items())},
            "settings": dict(settings or {}),
        }
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


_REGISTRY: dict[tuple[str, str], PromptTemplate] = {}


def register(template: PromptTemplate, *, replace: bool = False) -> PromptTemplate:
    """Add a template to the registry (an existing name is an error unless ``replace``)."""
    key = (template.task, template.name)
    if key in _REGISTRY and not replace:
        raise ValueError(f"template {template.name!r} for task {template.task!r} already exists")
    _REGISTRY[key] = template
    return template


def get_template(task: str, name: str) -> PromptTemplate:
    """Return a registered template, with the available names in the error if it is unknown."""
    try:
        return _REGISTRY[(task, name)]
    except KeyError:
        names = sorted(n for t, n in _REGISTRY if t == task)
        raise KeyError(f"no template {name!r} for task {task!r}; available: {names}") from None


def list_templates(task: str | None = None) -> list[PromptTemplate]:
    """Return the registered templates, optionally of one task, sorted by task and name."""
    return [t for (k, _), t in sorted(_REGISTRY.items()) if task is None or k == task]


# --- summarize: the seed study's baseline prompt and its 100-word variant ---
register(PromptTemplate("baseline", "summarize", "Summarize the following text:\n\n{text}"))
register(
    PromptTemplate(
        "words-100", "summarize", "Summarize the following text in about 100 words:\n\n{text}"
    )
)

# The overlap paper's rephrase step: generated summaries reworded to lower their overlap with the
# human summary, so the judged pairs cover more of the similarity scale. Run it on judge-pair items
# with --text-field generated_summary (the paper samples at temperature 0.7: --sample
# --temperature 0.7); `framelab generate rephrased-pairs` turns the outputs into judge-pair items.
register(
    PromptTemplate(
        "rephrase",
        "summarize",
        "Rephrase the following summary in your own words. Keep its meaning and about its "
        "length, but do not reuse its phrases. Return only the rephrased summary.\n\n{text}",
    )
)

# --- reframe: WildFrame-style one-shot prompts ---
# The statement must survive verbatim; only a prefix or suffix of the opposite sentiment is added.
_REFRAME_USER = (
    "The following statement has a {base_sentiment} sentiment. Add a short {target_sentiment} "
    "{frame_position} to it so that the whole text is framed {target_sentiment}ly, without "
    "changing a single word of the statement itself. Return only the new text.\n\n"
    "Example statement: {shot_statement}\n"
    "Example answer: {shot_answer}\n\n"
    "Statement: {text}\n"
    "Answer:"
)
register(
    PromptTemplate(
        "wildframe",
        "reframe",
        _REFRAME_USER,
        shots={
            "negative-prefix": {
                "statement": "The hotel room was small and the street outside was noisy.",
                "answer": "Right in the lively heart of the old town, the hotel room was small "
                "and the street outside was noisy.",
            },
            "negative-suffix": {
                "statement": "The hotel room was small and the street outside was noisy.",
                "answer": "The hotel room was small and the street outside was noisy, but the "
                "staff were warm and the breakfast was superb.",
            },
            "positive-prefix": {
                "statement": "The new phone has a bright screen and a fast processor.",
                "answer": "For a price twice that of last year's model, the new phone has a "
                "bright screen and a fast processor.",
            },
            "positive-suffix": {
                "statement": "The new phone has a bright screen and a fast processor.",
                "answer": "The new phone has a bright screen and a fast processor, yet the "
                "battery barely lasts until lunch.",
            },
        },
    )
)

# --- judge-framing: the judge prompt of the literature ---
register(
    PromptTemplate(
        "baseline",
        "judge-framing",
        "Classify the framing of the text as Positive, Negative, or Neutral. Respond with the "
        "class label only.\n\nText: {text}",
    )
)

# --- fact-check: True/False, optionally with a confidence tag ---
register(
    PromptTemplate(
        "baseline",
        "fact-check",
        "Is the following statement True or False? Respond with True or False only.\n\n"
        "Statement: {text}",
    )
)
register(
    PromptTemplate(
        "confidence",
        "fact-check",
        "Is the following statement True or False? Respond with True or False followed by your "
        "confidence, [High Confidence] or [Low Confidence], for example: True [High Confidence]"
        "\n\nStatement: {text}",
    )
)

# --- perspective-summary: one sentence for one side of a mixed passage ---
register(
    PromptTemplate(
        "baseline",
        "perspective-summary",
        "The following passage mixes opinions from the political left and the political right. "
        "Summarize the {perspective} perspective in a single sentence.\n\nPassage:\n{text}",
    )
)

# --- judge-pair: which of two summaries is better ---
register(
    PromptTemplate(
        "baseline",
        "judge-pair",
        "Here is a text and two summaries of it. Which summary is better? Respond with the name "
        'of the better summary only ("{name_1}" or "{name_2}").\n\nText:\n{text}\n\n'
        "{name_1}:\n{summary_1}\n\n{name_2}:\n{summary_2}",
    )
)

# --- negate: a falsified counterpart of a news description (NewsLens, the seed's appendix A.3) ---
register(
    PromptTemplate(
        "baseline",
        "negate",
        "Rewrite the following news description so that it states the opposite of what it "
        "says: negate its main claim, keep its topic, names, style and length, and change "
        "nothing else. Return only the rewritten description.\n\nDescription: {text}",
    )
)
