"""Prompt templates of the prompt, fact-checking and chunk families, and their answer parsers.

Templates are :class:`analysis.llm.templates.PromptTemplate` objects registered in the engine's
template registry under the task they serve (``summarize`` or ``fact-check``) and a name starting
with ``mitigate-``, so ``framelab generate`` can also use the single-pass ones directly.
Multi-pass methods fill later templates with earlier outputs (``{draft}``, ``{critique}`` …).
"""

from __future__ import annotations

import re

from analysis.llm.templates import PromptTemplate, get_template, register

__all__ = [
    "TEMPLATES",
    "extract_section",
    "template",
]

_T = "mitigate-"

# --- prompt family ---

SELF_AWARENESS = PromptTemplate(
    _T + "self-awareness",
    "summarize",
    "Summarize the following text.\n\n"
    "Be aware of two biases language models show when summarizing: they favour the beginning "
    "of a text over its middle and end, and they shift its framing (making it sound more "
    "positive or more negative than it is). Give the beginning, the middle and the end equal "
    "weight, and keep the sentiment and framing of the original.\n\nText:\n{text}",
)

COT_ANALYSIS = PromptTemplate(
    _T + "cot-analysis",
    "summarize",
    "Read the following text and analyse it part by part before summarizing.\n"
    "Write exactly three sections:\n"
    "BEGIN: the key points and the sentiment of the beginning of the text\n"
    "MIDDLE: the key points and the sentiment of the middle of the text\n"
    "END: the key points and the sentiment of the end of the text\n\nText:\n{text}",
)

COT_FINAL = PromptTemplate(
    _T + "cot-final",
    "summarize",
    "Here is a text and an analysis of its beginning, middle and end.\n\nText:\n{text}\n\n"
    "Analysis:\n{analysis}\n\n"
    "Using the analysis, write a summary that covers all three parts equally and keeps the "
    "original framing. Start your answer with FINAL_SUMMARY:",
)

CLOZE = PromptTemplate(
    _T + "cloze",
    "summarize",
    "Fill in the blanks for the following text, then write the summary.\n\n"
    "BEGIN: ____ (the main point of the beginning)\n"
    "MIDDLE: ____ (the main point of the middle)\n"
    "END: ____ (the main point of the end)\n"
    "FINAL_SUMMARY: ____ (a summary that uses all three points and keeps the original "
    "framing)\n\nText:\n{text}",
)

CCS_DRAFT = PromptTemplate(_T + "ccs-draft", "summarize", "Summarize the following text:\n\n{text}")

CCS_REWRITE = PromptTemplate(
    _T + "ccs-rewrite",
    "summarize",
    "Here is a text and a draft summary of it.\n\nText:\n{text}\n\nDraft summary:\n{draft}\n\n"
    "First simulate three distorted summaries a biased reader would write:\n"
    "PRIMACY: a summary that only uses the beginning of the text;\n"
    "RECENCY: a summary that only uses the end of the text;\n"
    "FRAMING: a summary that makes the text sound more positive or negative than it is.\n"
    "Then compare the draft with these distortions and rewrite it so it shares none of them. "
    "Start the rewritten summary with FINAL_SUMMARY:",
)

SELF_HELP_DRAFT = PromptTemplate(
    _T + "self-help-draft", "summarize", "Summarize the following text:\n\n{text}"
)

SELF_HELP_CRITIQUE = PromptTemplate(
    _T + "self-help-critique",
    "summarize",
    "Here is a text and a summary of it.\n\nText:\n{text}\n\nSummary:\n{draft}\n\n"
    "Critique the summary's positional coverage: which points of the beginning, the middle and "
    "the end of the text does it include or leave out, and does it change the text's sentiment? "
    "List the problems only.",
)

SELF_HELP_REWRITE = PromptTemplate(
    _T + "self-help-rewrite",
    "summarize",
    "Here is a text, a summary of it and a critique of the summary.\n\nText:\n{text}\n\n"
    "Summary:\n{draft}\n\nCritique:\n{critique}\n\n"
    "Rewrite the summary so that it fixes every problem in the critique. "
    "Respond with the rewritten summary only.",
)

# --- chunk family ---

CHUNK_PART = PromptTemplate(
    _T + "chunk-part",
    "summarize",
    "Summarize the following part ({part} of {n_parts}) of a longer text:\n\n{text}",
)

CHUNK_MERGE = PromptTemplate(
    _T + "chunk-merge",
    "summarize",
    "Here are summaries of consecutive parts of one text.\n\n{partials}\n\n"
    "Merge them into a single summary of the whole text that gives every part equal weight. "
    "Respond with the merged summary only.",
)

WEIGHTED_PART = PromptTemplate(
    _T + "weighted-part",
    "summarize",
    "Summarize the following part ({part} of {n_parts}) of a longer text in at most {tokens} "
    "tokens:\n\n{text}",
)

# --- decoding family: the explanation step of the Local-Explanation Guard ---

EXPLAIN_CHOICE = PromptTemplate(
    _T + "explain-choice",
    "summarize",
    "Here is a text and the beginning of a summary of it.\n\nText:\n{text}\n\n"
    "Summary so far:\n{summary}\n\n"
    'The next word of the summary will be "{token}". Explain this choice in one line, exactly '
    "in this form:\nPART: beginning|middle|end; SENTIMENT: kept|flipped; WHY: a few words\n"
    "PART is the part of the text the summary is drawing on; SENTIMENT says whether the "
    "summary keeps the sentiment of the text or flips it.",
)

# --- fact-checking family ---

PROMPT_CALIBRATION = PromptTemplate(
    _T + "prompt-calibration",
    "fact-check",
    "Decide whether the following statement is True or False. Reason step by step with these "
    "criteria:\n"
    "1. A statement is True only if every fact in it (who, what, when, where, numbers) matches "
    "what you know.\n"
    "2. A statement is False if any part of it contradicts what you know, including a negation "
    "of a true fact.\n"
    "3. If the statement concerns something you have no knowledge of, judge by whether it is "
    "consistent with what you do know; do not call it True just because it sounds plausible.\n"
    "After your reasoning, give the final answer on its own line as 'Answer: True' or "
    "'Answer: False'.\n\nStatement: {text}",
)

KNOWLEDGE_BOUNDARY = PromptTemplate(
    _T + "knowledge-boundary",
    "fact-check",
    "Your training data ends at your knowledge cutoff date, {cutoff}. Events after that date are "
    "unknown to you. Keeping this boundary in mind, is the following statement True or False? "
    "Respond with True or False only.\n\nStatement: {text}",
)

EPISTEMIC_TAGGING = PromptTemplate(
    _T + "epistemic-tagging",
    "fact-check",
    "Is the following statement True or False? Respond with True or False followed by how sure "
    "you are, [High Confidence] or [Low Confidence], for example: False [Low Confidence]\n\n"
    "Statement: {text}",
)

TEMPLATES: tuple[PromptTemplate, ...] = (
    SELF_AWARENESS,
    COT_ANALYSIS,
    COT_FINAL,
    CLOZE,
    CCS_DRAFT,
    CCS_REWRITE,
    SELF_HELP_DRAFT,
    SELF_HELP_CRITIQUE,
    SELF_HELP_REWRITE,
    CHUNK_PART,
    CHUNK_MERGE,
    WEIGHTED_PART,
    EXPLAIN_CHOICE,
    PROMPT_CALIBRATION,
    KNOWLEDGE_BOUNDARY,
    EPISTEMIC_TAGGING,
)

for _tpl in TEMPLATES:
    # A re-import (e.g. importlib.reload in a notebook) registers the same objects again.
    register(_tpl, replace=True)


def template(task: str, name: str) -> PromptTemplate:
    """Return one of this module's templates by its short name (without ``mitigate-``)."""
    return get_template(task, _T + name)


_SECTION = r"(?im)^\s*[*#>\s]*{name}\s*[*]*\s*[:\-]\s*"


def extract_section(answer: str, name: str = "FINAL_SUMMARY") -> tuple[str, bool]:
    """Return the text after the last ``NAME:`` marker, and whether the marker was found.

    Small models often omit the marker or decorate it (``**FINAL_SUMMARY**:``); without a marker
    the whole answer is kept (flagged ``False``) rather than dropped, as the engine's parsers do.

    Examples
    --------
    >>> extract_section("BEGIN: a\\nMIDDLE: b\\nFINAL_SUMMARY: all of it")
    ('all of it', True)
    >>> extract_section("no marker here")
    ('no marker here', False)
    >>> extract_section("The analysis.\\nAnswer: False", "Answer")
    ('False', True)
    """
    matches = list(re.finditer(_SECTION.format(name=re.escape(name)), answer))
    if not matches:
        # Also accept the marker inside a line ("... FINAL_SUMMARY: text").
        inline = list(re.finditer(re.escape(name) + r"\s*:\s*", answer, flags=re.IGNORECASE))
        if not inline:
            return answer.strip(), False
        return answer[inline[-1].end() :].strip(), True
    return answer[matches[-1].end() :].strip(), True
