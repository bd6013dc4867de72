"""The mitigation methods' own prompts (template files) and their answer parsers.

Every prompt a method writes itself is a file under ``analysis/llm/prompts/mitigate/STEP.txt``
(or ``.json``), loaded here with the placeholders its step fills in (:data:`STEPS`) and
registered in the engine's template registry under the task it serves (``summarize`` or
``fact-check``) as ``mitigate-STEP``; its text enters the method's ``template_hash`` (the resume
key) and the manifest like every task's template. A researcher replaces one with their own file
without code changes: ``framelab mitigate METHOD --template STEP=PATH`` (``framelab mitigate
templates`` lists the steps), or ``templates={"STEP": load_step_file(PATH, "STEP")}`` in Python.
Multi-pass methods fill later templates with earlier outputs (``{draft}``, ``{critique}`` …);
Attention-Sort's final prompt gets the re-ordered passages as numbered ``Segment N:`` lines
(``{segments}``) or as plain text (``{text}``). The parsers read the markers the defaults ask
for, as 000 A.8 prints them (``FINAL_SUMMARY:``; ``DRAFT_SUMMARY:`` and ``DEVIATIONS:`` in the
counterfactual's first pass; ``PART: …; SENTIMENT: …`` in the Guard's explanation): an own
file should keep them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from analysis.llm.templates import (
    PROMPT_DIR,
    PromptTemplate,
    TemplateError,
    get_template,
    load_template_file,
    placeholders,
    register,
)

__all__ = [
    "STEPS",
    "STEP_DIR",
    "Step",
    "draft_and_deviations",
    "extract_section",
    "labelled_segments",
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
        What the default carries: the printed prompt (000 A.8) or description (A.6) it follows.
    any_of : tuple of str
        Placeholders of which a replacement must use at least one (Attention-Sort's final
        prompt takes the labelled ``{segments}`` or the plain re-ordered ``{text}``).
    """

    name: str
    task: str
    fields: tuple[str, ...]
    required: tuple[str, ...]
    methods: tuple[str, ...]
    paper: str
    any_of: tuple[str, ...] = ()

    def check(self, template: PromptTemplate, where: str) -> PromptTemplate:
        """Refuse a template that uses none of :attr:`any_of`; return it otherwise."""
        used = placeholders(template.user) | placeholders(template.system or "")
        if self.any_of and not used & set(self.any_of):
            raise TemplateError(
                f"{where}: a mitigate-{self.name} template must contain one of "
                f"{', '.join('{' + f + '}' for f in self.any_of)}"
            )
        return template


_A8 = "our wording of the prompt 000 A.8 (Table A7) prints for"

STEPS: dict[str, Step] = {
    s.name: s
    for s in (
        Step("self-awareness", "summarize", ("text",), ("text",), ("self-awareness",),
             f"{_A8} Self-Awareness Prompting: unbiased-summarizer persona, no framing bias, "
             "do not omit the middle, keep the sentiment; ends with FINAL_SUMMARY:"),
        Step("cot", "summarize", ("text",), ("text",), ("chain-of-thought",),
             f"{_A8} Chain-of-Thought: describe beginning, middle and end in detail under "
             "BEGIN_ANALYSIS / MIDDLE_ANALYSIS / END_ANALYSIS, then a concise FINAL_SUMMARY; "
             "the text last"),
        Step("cloze", "summarize", ("text",), ("text",), ("cloze",),
             f"{_A8} Cloze-Style Prompt: BEGIN / MIDDLE / END blanks, the text, then "
             "FINAL_SUMMARY:"),
        Step("ccs-draft", "summarize", ("text",), ("text",), ("cognitive-counterfactual",),
             "the first of the two passes of 000 A.6 (A.8 prints only the final revision): a "
             "draft after DRAFT_SUMMARY: and the simulated primacy, recency and framing "
             "deviations after DEVIATIONS:, in one answer"),
        Step("ccs-rewrite", "summarize", ("text", "draft", "counterfactuals"),
             ("draft", "counterfactuals"), ("cognitive-counterfactual",),
             f"{_A8} Cognitive Counterfactual Simulation (Final Revision): the text, the draft "
             "and the list of simulated deviations; a final summary avoiding them; "
             "FINAL_SUMMARY:"),
        Step("self-help-draft", "summarize", ("text",), ("text",), ("self-help-debias",),
             "a plain summarisation request (the draft pass; A.8 prints none)"),
        Step("self-help-critique", "summarize", ("text", "draft"), ("draft",),
             ("self-help-debias",),
             "000 A.6's self-critique of positional coverage; runs only when the rewrite "
             "prompt uses {critique} (A.8's rewrite sees the draft only)"),
        Step("self-help-rewrite", "summarize", ("text", "draft", "critique"), ("draft",),
             ("self-help-debias",),
             f"{_A8} Self-Help Debias (Rewrite Stage): the draft only; remove bias, keep the "
             "sentiment, equal coverage of beginning, middle and end; FINAL_SUMMARY:"),
        Step("chunk-part", "summarize", ("text", "part", "n_parts"), ("text",),
             ("partial-summaries",),
             "a plain summarisation request per chunk (000 A.6: each chunk summarised "
             "independently; A.8 prints none)"),
        Step("chunk-merge", "summarize", ("partials",), ("partials",), ("partial-summaries",),
             f"{_A8} Partial Summaries Ensemble (Merge Prompt): combine the partial summaries "
             "into one coherent summary; FINAL_SUMMARY:"),
        Step("weighted-part", "summarize", ("text", "part", "n_parts", "tokens"),
             ("text", "tokens"), ("weighted-summaries",),
             f"{_A8} Weighted Summaries (Chunk Prompt): the portion in about its token budget "
             "(A.6: not to exceed it); FINAL_SUMMARY:"),
        Step("position-shuffle", "summarize", ("text",), ("text",), ("position-shuffle",),
             f"{_A8} Position-Invariant Shuffle: the text is out of order, summarise all of "
             "it; FINAL_SUMMARY:"),
        Step("attention-sort", "summarize", ("text", "segments"), (), ("attention-sort",),
             f"{_A8} Attention-Sort Re-ordering (Final Prompt): CONTEXT with numbered segment "
             "labels first, then the task; FINAL_SUMMARY:",
             any_of=("segments", "text")),
        Step("explain-choice", "summarize", ("text", "summary", "token"), ("token",),
             ("explanation-guard",),
             "our wording of 000 A.6's Local-Explanation Guard step (the model explains the "
             "token it is about to choose; A.8 prints none)"),
        Step("debias-prefix", "summarize", (), (), ("self-debias",),
             "our wording of 000 A.6's Self-Debias bias-naming prefix (< 30 tokens; A.8 "
             "prints none)"),
        Step("prompt-calibration", "fact-check", ("text",), ("text",), ("prompt-calibration",),
             f"{_A8} Prompt Calibration (CoT): fact-checker persona, the True-only-if and "
             "False-if criteria (any doubt, misleading content, no reliable information), "
             "A.6's direct-consequence rule, exactly one word and no explanation"),
        Step("knowledge-boundary", "fact-check", ("text", "cutoff"), ("text", "cutoff"),
             ("knowledge-boundary",),
             f"{_A8} Knowledge Boundary Awareness: persona with knowledge up to the cutoff, "
             "a prediction for events after it, exactly one word"),
        Step("epistemic-tagging", "fact-check", ("text",), ("text",), ("epistemic-tagging",),
             f"{_A8} Epistemic Tagging: the four 'True/False [High/Low Confidence]' answers, "
             "the [Certain] [Uncertain] [Reasoning] [Conclusion] guide, nothing else"),
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
    return spec.check(
        load_template_file(
            path, spec.task, _T + spec.name, fields=spec.fields, required=spec.required
        ),
        str(path),
    )


def _default_file(step: str) -> Path:
    for suffix in (".txt", ".json"):
        path = STEP_DIR / f"{step}{suffix}"
        if path.exists():
            return path
    raise FileNotFoundError(f"the default prompt of mitigation step {step!r} is missing")


# A re-import (e.g. importlib.reload in a notebook) registers the same templates again.
for _step in STEPS:
    register(load_step_file(_default_file(_step), _step), replace=True)


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


def draft_and_deviations(answer: str) -> tuple[str, str, bool]:
    """Split the counterfactual's first answer into its draft and its simulated deviations.

    The draft is what stands between ``DRAFT_SUMMARY:`` (or the start) and ``DEVIATIONS:``; the
    deviations follow that marker. Without ``DEVIATIONS:`` the whole answer is the draft and the
    deviations are empty (flagged ``False``), so the revision pass still runs.

    Examples
    --------
    >>> draft_and_deviations("DRAFT_SUMMARY: Fine pump.\\nDEVIATIONS:\\n- only the start")
    ('Fine pump.', '- only the start', True)
    >>> draft_and_deviations("Fine pump.")
    ('Fine pump.', '', False)
    """
    deviations, found = extract_section(answer, "DEVIATIONS")
    head = answer
    if found:
        marks = list(re.finditer(_SECTION.format(name="DEVIATIONS"), answer))
        cut = marks[-1].start() if marks else answer.upper().rindex("DEVIATIONS")
        head = answer[:cut]
    draft = extract_section(head, "DRAFT_SUMMARY")[0]
    return draft, (deviations if found else ""), found


def labelled_segments(units: list[str] | tuple[str, ...]) -> str:
    """Passages as numbered ``Segment N: …`` lines, the layout of Attention-Sort's prompt.

    >>> print(labelled_segments(["First.", "Second."]))
    Segment 1: First.
    Segment 2: Second.
    """
    return "\n".join(f"Segment {i}: {unit}" for i, unit in enumerate(units, start=1))
