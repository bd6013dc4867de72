"""The ``vader`` lexicon baseline for ``judge-framing`` (offline, no model).

VADER (Hutto & Gilbert, 2014) scores sentiment from a word list; it is a reference point for
the LLM judges, not a judge of framing itself. Labels follow the VADER authors' thresholds on the
compound score: >= 0.05 positive, <= -0.05 negative, otherwise neutral.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from analysis.llm.backends.base import Completion, Request

POSITIVE_AT = 0.05
NEGATIVE_AT = -0.05


def vader_label(compound: float) -> str:
    """Map a VADER compound score to ``positive``/``negative``/``neutral``.

    Examples
    --------
    >>> vader_label(0.05), vader_label(-0.3), vader_label(0.0)
    ('positive', 'negative', 'neutral')
    """
    if compound >= POSITIVE_AT:
        return "positive"
    if compound <= NEGATIVE_AT:
        return "negative"
    return "neutral"


class VaderBackend:
    """Answer framing prompts with the VADER label of the request's raw text."""

    name = "vader"
    settings = None

    def __init__(self, model: str = "vaderSentiment") -> None:
        self.model_id = model
        self._analyzer: Any = None

    def generate(self, requests: Iterable[Request]) -> Iterator[tuple[Request, Completion]]:
        """Yield ``Positive``/``Negative``/``Neutral`` with the compound score in ``extra``."""
        if self._analyzer is None:
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

            self._analyzer = SentimentIntensityAnalyzer()
        for req in requests:
            compound = self._analyzer.polarity_scores(req.text)["compound"]
            label = vader_label(compound)
            yield req, Completion(label.capitalize(), extra={"vader_compound": compound})

    def info(self) -> dict[str, Any]:
        """Describe the lexicon baseline for the manifest."""
        from importlib.metadata import version

        return {
            "backend": self.name,
            "model": self.model_id,
            "thresholds": {"positive": POSITIVE_AT, "negative": NEGATIVE_AT},
            "versions": {"vaderSentiment": version("vaderSentiment")},
        }
