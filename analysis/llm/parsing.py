"""Turn free-form model answers into labels without ever dropping an answer.

Models answer ``Positive``, ``positive.``, ``**Neutral**``, ``{"label": "Negative"}``,
``The framing is positive.`` or ``True [High Confidence]``. Each parser returns a label from a
closed set or ``"other"``; the caller keeps the raw answer beside it, so an unparsable answer is
visible in the output instead of vanishing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

OTHER = "other"
FRAMING_LABELS = ("positive", "negative", "neutral")
TRUTH_LABELS = ("true", "false")

_JSON_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)
_JSON_KEYS = ("label", "framing", "class", "answer", "sentiment", "verdict", "prediction")
_CONFIDENCE = re.compile(r"\b(high|low)\b[\s-]*(?:confidence)?|confidence\W*(high|low)\b", re.I)


def _json_value(answer: str) -> str | None:
    """Return the label-like value of the first JSON object in the answer, if any."""
    for match in _JSON_OBJECT.finditer(answer):
        try:
            obj = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        lowered = {str(k).lower(): v for k, v in obj.items()}
        for key in _JSON_KEYS:
            if isinstance(lowered.get(key), str | bool):
                return str(lowered[key])
        strings = [v for v in obj.values() if isinstance(v, str)]
        if len(strings) == 1:
            return strings[0]
    return None


def match_label(answer: str, labels: Iterable[str]) -> str:
    """Pick one label from a closed set by whole-word matching, or ``"other"``.

    Rules, in order: a JSON object's label field wins; an answer whose first word is a label is
    that label; otherwise exactly one distinct label must occur anywhere. Two different labels
    (``"not negative but positive"``) or none are ``"other"``: guessing would bias the metrics.

    Parameters
    ----------
    answer : str
        The raw model output.
    labels : iterable of str
        Lower-case labels.

    Returns
    -------
    str
        One of ``labels`` or ``"other"``.

    Examples
    --------
    >>> match_label("**Positive**", ["positive", "negative", "neutral"])
    'positive'
    >>> match_label("Not negative, rather positive", ["positive", "negative"])
    'other'
    """
    labels = [lab.lower() for lab in labels]
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, labels)) + r")\b", re.I)
    from_json = _json_value(answer)
    if from_json is not None:
        found = pattern.findall(from_json)
        if len({f.lower() for f in found}) == 1:
            return found[0].lower()
    words = re.findall(r"[A-Za-z]+", answer)
    if words and words[0].lower() in labels:
        return words[0].lower()
    found = {f.lower() for f in pattern.findall(answer)}
    return found.pop() if len(found) == 1 else OTHER


def parse_framing(answer: str) -> str:
    """Return ``positive``, ``negative``, ``neutral`` or ``other`` for a framing judgment."""
    return match_label(answer, FRAMING_LABELS)


def parse_fact_check(answer: str) -> tuple[str, str | None]:
    """Return ``(true|false|other, high|low|None)`` for a fact-check answer.

    Examples
    --------
    >>> parse_fact_check("True [High Confidence]")
    ('true', 'high')
    >>> parse_fact_check("false")
    ('false', None)
    """
    label = match_label(answer, TRUTH_LABELS)
    conf = _CONFIDENCE.search(answer)
    confidence = (conf.group(1) or conf.group(2)).lower() if conf else None
    return label, confidence


def parse_choice(answer: str, names: Mapping[str, str]) -> str:
    """Recover which named option a judge chose by string matching.

    Parameters
    ----------
    answer : str
        The raw judge output.
    names : mapping
        Presented name (as in the prompt, e.g. ``"Summary A"``) -> value to return (e.g. ``"gt"``).

    Returns
    -------
    str
        The value of the chosen name, or ``"other"`` when none or both are named (a judge that
        names both without an order is not counted as a choice).

    Examples
    --------
    >>> parse_choice("Summary B is better.", {"Summary A": "gt", "Summary B": "generated"})
    'generated'
    >>> parse_choice("B", {"Summary A": "gt", "Summary B": "generated"})
    'generated'
    >>> parse_choice("summary_2", {"summary_1": "gt", "summary_2": "generated"})
    'generated'
    """
    text = answer.strip()
    positions = {}
    for name, value in names.items():
        hit = re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", text, re.I)
        if hit:
            positions[value] = hit.start()
    if len(positions) == 1:
        return next(iter(positions))
    if len(positions) > 1:
        # "Summary A is better than Summary B": the answer leads with its choice.
        first = min(positions.values())
        return next(v for v, p in positions.items() if p == first) if first == 0 else OTHER
    # A bare distinguishing token ("A", "B.") when every presented name shares a prefix.
    bare = re.sub(r"[^\w]", "", text).lower()
    tails = {re.split(r"[\s_]+", name)[-1].lower(): value for name, value in names.items()}
    return tails.get(bare, OTHER) if len(tails) == len(names) else OTHER


def clean_reframing(answer: str) -> str:
    """Strip an echoed ``Answer:`` prefix and wrapping quotes from a reframing."""
    text = answer.strip()
    text = re.sub(r"^(answer|reframed|new text)\s*:\s*", "", text, flags=re.I)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


_LEADING_LABEL = re.compile(
    r"^\s*\**\s*(?:negated|negation|falsified|answer|rewritten|output)"
    r"(?:\s+(?:description|text|version))?\s*\**\s*:\s*\**\s*",
    re.I,
)


def clean_negation(answer: str) -> str:
    """A negated description without a leading label, wrapping quotes or trailing chatter.

    Keeps the first non-empty paragraph: the negate prompt asks for the rewritten text only,
    and models that add an explanation add it after a blank line.

    Examples
    --------
    >>> clean_negation('Negated: "The Senate rejected the bill."\\n\\nI changed passed.')
    'The Senate rejected the bill.'
    """
    text = _LEADING_LABEL.sub("", answer.strip())
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    text = paragraphs[0] if paragraphs else ""
    text = _LEADING_LABEL.sub("", text)
    if len(text) >= 2 and text[0] in "\"'“" and text[-1] in "\"'”":
        text = text[1:-1].strip()
    return text
