"""The mitigation methods' own prompts (template files) and their answer parsers.

Every prompt a method writes itself is a file under ``analysis/llm/prompts/mitigate/STEP.txt``
(or ``.json``), loaded here with the placeholders its step fills in (:data:`STEPS`) and
registered in the engine's template registry under the task it serves (``summarize`` or
``fact-check``) as ``mitigate-STEP``; its text enters the method's ``template_hash`` (the resume
key) and the manifest like every task's template. A researcher replaces one with their own file
without code changes: ``framelab mitigate METHOD --template STEP=PATH`` (``framelab mitigate
templates`` lists the steps), or ``templates={"STEP": load_step_file(PATH, "STEP")}`` in Python.
Multi-pass methods fill later templates with earlier outputs (``{draft}``, ``{critique}`` …).
The parsers read markers the default wording asks for (``FINAL_SUMMARY:``, ``Answer:``,
``PART: …; SENTIMENT: …``): an own file should keep them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from analysis.llm.templates import (
    PROMPT_DIR,
    PromptTemplate,
    get_template,
    load_template_file,
    register,
)

__all__ = [
    "STEPS",
    "STEP_DIR",
    "TEMPLATES",
    "Step",
    "extract_section",
    "load_step_file",
    "step_template",
    "template",
]

_T = "mitigate-"
STEP_DIR = PROMPT_DIR / "mitigate"


@dataclass(frozen=True)
class Step:
    """One prompt a mitigation method writes itself.

    Attributes
    ----------
    name : str
        The file's stem and the ``--template`` key (``ccs-rewrite``); registered as
        ``mitigate-NAME``.
    task : str
        The task it serves (``summarize`` or ``fact-check``).
    fields : tuple of str
        The placeholders the step fills in.
    required : tuple of str
        Those a replacement file must use (what the step is about: the draft it rewrites …).
    methods : tuple of str
        The methods that use it.
    paper : str
        What the default is: the seed paper's description it paraphrases.
    """

    name: str
    task: str
    fields: tuple[str, ...]
    required: tuple[str, ...]
    methods: tuple[str, ...]
    paper: str


_PAPER = "our wording of the seed paper's description of"

STEPS: dict[str, Step] = {
    s.name: s
    for s in (
        Step("self-awareness", "summarize", ("text",), ("text",), ("self-awareness",),
             f"{_PAPER} Self-Awareness Prompting (name both biases, weigh all parts)"),
        Step("cot", "summarize", ("text",), ("text",), ("chain-of-thought",),
             f"{_PAPER} Chain-of-Thought: one prompt with beginning, middle and end analysis "
             "sections, then FINAL_SUMMARY"),
        Step("cloze", "summarize", ("text",), ("text",), ("cloze",),
             f"{_PAPER} Cloze Prompting (BEGIN / MIDDLE / END / FINAL_SUMMARY blanks)"),
        Step("ccs-draft", "summarize", ("text",), ("text",), ("cognitive-counterfactual",),
             "a plain summarisation request (the draft pass)"),
        Step("ccs-simulate", "summarize", ("text", "draft"), ("draft",),
             ("cognitive-counterfactual",),
             f"{_PAPER} Cognitive Counterfactual Simulation, simulation pass (the primacy, "
             "recency and framing summaries a biased reader would write)"),
        Step("ccs-rewrite", "summarize", ("text", "draft", "counterfactuals"),
             ("draft", "counterfactuals"), ("cognitive-counterfactual",),
             f"{_PAPER} Cognitive Counterfactual Simulation, comparison pass (correct the "
             "draft where it leans like a simulated distortion; FINAL_SUMMARY)"),
        Step("self-help-draft", "summarize", ("text",), ("text",), ("self-help-debias",),
             "a plain summarisation request (the draft pass)"),
        Step("self-help-critique", "summarize", ("text", "draft"), ("draft",),
             ("self-help-debias",),
             f"{_PAPER} Self-Help Debias, critique pass (positional coverage, sentiment)"),
        Step("self-help-rewrite", "summarize", ("text", "draft", "critique"), ("critique",),
             ("self-help-debias",), f"{_PAPER} Self-Help Debias, rewrite pass"),
        Step("chunk-part", "summarize", ("text", "part", "n_parts"), ("text",),
             ("partial-summaries",),
             f"{_PAPER} Partial Summaries Ensemble (summarise each chunk)"),
        Step("chunk-merge", "summarize", ("partials",), ("partials",), ("partial-summaries",),
             f"{_PAPER} Partial Summaries Ensemble (merge the partial summaries)"),
        Step("weighted-part", "summarize", ("text", "part", "n_parts", "tokens"), ("text",),
             ("weighted-summaries",),
             f"{_PAPER} Weighted Summaries (each part in about its share of the tokens)"),
        Step("position-shuffle", "summarize", ("text",), ("text",), ("position-shuffle",),
             "a plain summarisation request over the shuffled text (the baseline's wording)"),
        Step("attention-sort", "summarize", ("text",), ("text",), ("attention-sort",),
             "a plain summarisation request over the re-ordered text (the baseline's wording)"),
        Step("explain-choice", "summarize", ("text", "summary", "token"), ("token",),
             ("explanation-guard",),
             f"{_PAPER} the Local-Explanation Guard's explanation step (the model explains "
             "the token it is about to choose)"),
        Step("debias-prefix", "summarize", (), (), ("self-debias",),
             f"{_PAPER} Self-Debias Decoding's bias-naming prefix (< 30 tokens)"),
        Step("prompt-calibration", "fact-check", ("text",), ("text",), ("prompt-calibration",),
             f"{_PAPER} Prompt Calibration (chain-of-thought criteria for True/False; False "
             "when in any doubt)"),
        Step("knowledge-boundary", "fact-check", ("text", "cutoff"), ("text", "cutoff"),
             ("knowledge-boundary",),
             f"{_PAPER} Knowledge Boundary Awareness (the cutoff date in the prompt; a best "
             "prediction for events after it)"),
        Step("epistemic-tagging", "fact-check", ("text",), ("text",), ("epistemic-tagging",),
             f"{_PAPER} Epistemic Tagging ([High Confidence] / [Low Confidence])"),
    )
}  # fmt: skip


def load_step_file(path: str | Path, step: str) -> PromptTemplate:
    """Read a template file for a mitigation step, checking its placeholders against the step.

    The template is named ``mitigate-STEP`` whatever the file is called, so manifests list a
    replaced step under the same name (and ``template_files`` gives the file).

    Raises
    ------
    KeyError
        An unknown step (the message lists the steps).
    analysis.llm.templates.TemplateError
        The file cannot serve the step (as :func:`~analysis.llm.templates.load_template_file`).
    """
    if step.startswith(_T):
        step = step[len(_T) :]
    try:
        spec = STEPS[step]
    except KeyError:
        raise KeyError(f"no mitigation prompt {step!r}; the steps are {sorted(STEPS)}") from None
    return load_template_file(
        path, spec.task, _T + spec.name, fields=spec.fields, required=spec.required
    )


def _default_file(step: str) -> Path:
    for suffix in (".txt", ".json"):
        path = STEP_DIR / f"{step}{suffix}"
        if path.exists():
            return path
    raise FileNotFoundError(f"the default prompt of mitigation step {step!r} is missing")


# A re-import (e.g. importlib.reload in a notebook) registers the same templates again.
TEMPLATES: tuple[PromptTemplate, ...] = tuple(
    register(load_step_file(_default_file(name), name), replace=True) for name in STEPS
)


def step_template(
    step: str, overrides: Mapping[str, PromptTemplate] | None = None
) -> PromptTemplate:
    """The prompt of a step: a researcher's replacement from ``overrides``, else the default.

    ``overrides`` is keyed by step name (``ccs-rewrite``) as ``--template STEP=PATH`` gives it.
    """
    chosen = (overrides or {}).get(step)
    if chosen is not None:
        return chosen
    spec = STEPS[step]
    return get_template(spec.task, _T + spec.name)


def template(task: str, name: str) -> PromptTemplate:
    """Return one of the mitigation templates by its short name (without ``mitigate-``)."""
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
