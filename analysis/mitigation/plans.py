"""Mitigation methods as plans: the model calls each method makes per item, stage by stage.

A *plan* is a list of stages, each producing model calls per item from what earlier stages
produced (a draft, an analysis, chunk summaries, a re-ordered document), and a finishing step
that turns the last outputs into the result. :mod:`analysis.mitigation.runner` runs plans through
a backend and the resumable store.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.llm.templates import PromptTemplate, TemplateError, get_template, placeholders
from analysis.mitigation import chunking, decoding, guard, prompt_file, self_debias
from analysis.mitigation import prompts as P
from analysis.mitigation.registry import get_method

__all__ = ["BASELINE", "Call", "ItemState", "Plan", "plan_of"]

BASELINE = "baseline"


@dataclass(frozen=True)
class Call:
    """One model call for one item.

    Attributes
    ----------
    key : str
        Unique within the item and method (``draft``, ``chunk-2``); later stages read the
        output under this key.
    template : PromptTemplate
        The prompt.
    fields : mapping
        Values for the template's placeholders.
    text : str
        The text the call is about; decoding processors read it as the source.
    max_new_tokens : int, optional
        A token limit for this call only.
    """

    key: str
    template: PromptTemplate
    fields: Mapping[str, Any]
    text: str
    max_new_tokens: int | None = None

    def messages(self) -> tuple[dict[str, str], ...]:
        """Render the chat messages."""
        return self.template.messages(**self.fields)


@dataclass
class ItemState:
    """What the stages of one item have produced so far."""

    item: Mapping[str, Any]
    values: dict[str, Any] = field(default_factory=dict)
    n_prompt_tokens: int = 0
    n_output_tokens: int = 0
    error: str | None = None
    last_call: Call | None = None

    @property
    def source(self) -> str:
        """The item's text (the document to summarise or the statement to check)."""
        return str(self.item["text"])


# A stage sees the item's state, the method's hyperparameters and the backend, and returns the
# calls to make (it may also write non-model results, e.g. a re-ordered text, into the state).
Stage = Callable[[ItemState, Mapping[str, Any], Any], list[Call]]
Finish = Callable[[ItemState, Mapping[str, Any]], dict[str, Any]]
# A researcher's own prompts, keyed by task (the baseline prompts) or by mitigation step.
Steps = Mapping[str, PromptTemplate] | None


@dataclass(frozen=True)
class Plan:
    """How a method runs: its stages, its finishing step, its templates and settings changes."""

    task: str
    stages: tuple[Stage, ...]
    finish: Finish
    templates: tuple[PromptTemplate, ...]
    settings: Callable[[Mapping[str, Any]], dict[str, Any]] = lambda params: {}


# --- finishing steps ---


def _summary_from(
    key: str, *, section: str | None = None, keep: Mapping[str, str] | None = None
) -> Finish:
    """The summary in ``state.values[key]`` (its ``section``), plus ``keep``: record field ->
    the state value it reports."""

    def finish(state: ItemState, params: Mapping[str, Any]) -> dict[str, Any]:
        answer = state.values[key]
        if section is None:
            return {"output": answer.strip()}
        text, found = P.extract_section(answer, section)
        kept = {name: state.values[value] for name, value in (keep or {}).items()}
        return {"output": text, "raw_output": answer, "section_found": found, **kept}

    return finish


def _fact_from(key: str) -> Finish:
    from analysis.llm.parsing import parse_fact_check

    def finish(state: ItemState, params: Mapping[str, Any]) -> dict[str, Any]:
        answer = state.values[key]
        label, confidence = parse_fact_check(answer)
        return {"output": answer, "label": label, "confidence": confidence}

    return finish


# --- plans ---


def _one_call(tpl: PromptTemplate, key: str = "summary", **extra: Any) -> Stage:
    def stage(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        text = state.values.get("text", state.source)
        return [Call(key, tpl, {"text": text, **extra}, text)]

    return stage


def _single(task: str, tpl: PromptTemplate, finish: Finish, **kw: Any) -> Plan:
    return Plan(task, (_one_call(tpl),), finish, (tpl,), **kw)


def _baseline_summary(templates: Steps = None) -> PromptTemplate:
    """The summarisation prompt methods build on: the baseline, or a researcher's own file."""
    return (templates or {}).get("summarize") or get_template("summarize", "baseline")


def _followup(
    key: str, tpl: PromptTemplate, uses: Sequence[str], limit: str | None = None
) -> Stage:
    """A pass that sees the source and the outputs of earlier passes named in ``uses``."""

    def stage(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        fields = {"text": state.source, **{u: state.values[u] for u in uses}}
        max_new = int(params[limit]) if limit else None
        return [Call(key, tpl, fields, state.source, max_new)]

    return stage


def _cot(over: Steps) -> Plan:
    # One prompt: the analysis sections and the final summary come out of the same answer.
    tpl = P.step_template("cot", over)
    return Plan(
        "summarize",
        (_one_call(tpl, "answer"),),
        _summary_from("answer", section="FINAL_SUMMARY"),
        (tpl,),
    )


def _ccs(over: Steps) -> Plan:
    # Two passes (000 A.6): the draft comes with the simulated deviations in one answer; the
    # final revision (A.8) sees the text, the draft and the deviations.
    first, final = P.step_template("ccs-draft", over), P.step_template("ccs-rewrite", over)

    def revise(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        draft, deviations, found = P.draft_and_deviations(state.values["first"])
        state.values.update(draft=draft, counterfactuals=deviations)
        state.values["deviations_found"] = found
        fields = {"text": state.source, "draft": draft, "counterfactuals": deviations}
        return [Call("rewrite", final, fields, state.source)]

    finish = _summary_from(
        "rewrite", section="FINAL_SUMMARY", keep={"deviations_found": "deviations_found"}
    )
    return Plan("summarize", (_one_call(first, "first"), revise), finish, (first, final))


def _self_help(over: Steps) -> Plan:
    # 000 A.8's rewrite sees the draft only; the self-critique of A.6 runs when the rewrite
    # prompt asks for it ({critique}), since otherwise its answer would reach nothing.
    draft, rewrite = (
        P.step_template("self-help-draft", over),
        P.step_template("self-help-rewrite", over),
    )
    critiqued = "critique" in placeholders(rewrite.user) | placeholders(rewrite.system or "")
    if not critiqued and "self-help-critique" in (over or {}):
        raise TemplateError(
            "self-help-critique was given but the self-help-rewrite prompt does not use "
            "{critique}, so the critique would reach nothing; add {critique} to the rewrite or "
            "drop the critique prompt"
        )
    stages = [_one_call(draft, "draft")]
    used = [draft]
    if critiqued:
        critique = P.step_template("self-help-critique", over)
        stages.append(_followup("critique", critique, ["draft"]))
        used.append(critique)
    uses = ["draft", "critique"] if critiqued else ["draft"]
    stages.append(_followup("rewrite", rewrite, uses, "rewrite_max_new_tokens"))
    return Plan(
        "summarize",
        tuple(stages),
        _summary_from("rewrite", section="FINAL_SUMMARY"),
        (*used, rewrite),
    )


def _partial_summaries(over: Steps) -> Plan:
    part_tpl, merge_tpl = P.step_template("chunk-part", over), P.step_template("chunk-merge", over)

    def chunks(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        n = int(params["n_chunks"])
        parts = chunking.chunk_document(state.source, n)
        return [
            Call(f"chunk-{i}", part_tpl, {"text": t, "part": i, "n_parts": n}, t)
            for i, t in enumerate(parts, start=1)
        ]

    def merge(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        n = int(params["n_chunks"])
        # 000 A.8 lists the partial summaries one after another, unlabelled.
        partials = "\n\n".join(state.values[f"chunk-{i}"].strip() for i in range(1, n + 1))
        return [Call("merge", merge_tpl, {"partials": partials}, state.source)]

    finish = _summary_from("merge", section="FINAL_SUMMARY")
    return Plan("summarize", (chunks, merge), finish, (part_tpl, merge_tpl))


def _weights(params: Mapping[str, Any]) -> list[float]:
    return [float(w) for w in str(params["weights"]).split(",")]


def _weighted_summaries(over: Steps) -> Plan:
    from analysis.metrics.text import split_parts

    tpl = P.step_template("weighted-part", over)

    def parts(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        weights = _weights(params)
        # The prompt asks for about the budget and not more (000 A.6, A.8); the hard limit is
        # only a safety cap above it, so a part summary ends where the model ends it rather
        # than being cut mid-sentence.
        budgets = chunking.weighted_budgets(int(params["target_tokens"]), weights)
        cap = float(params["cap_factor"])
        texts = split_parts(state.source, len(weights), unit="tokens")
        state.values["budgets"] = budgets
        return [
            Call(
                f"part-{i}",
                tpl,
                {"text": t, "part": i, "n_parts": len(texts), "tokens": b},
                t,
                max_new_tokens=max(1, math.ceil(cap * b)),
            )
            for i, (t, b) in enumerate(zip(texts, budgets, strict=True), start=1)
        ]

    def finish(state: ItemState, params: Mapping[str, Any]) -> dict[str, Any]:
        n = len(_weights(params))
        parts = [P.extract_section(state.values[f"part-{i}"]) for i in range(1, n + 1)]
        return {
            "output": " ".join(text for text, _ in parts),
            "budgets": state.values["budgets"],
            "section_found": all(found for _, found in parts),
        }

    return Plan("summarize", (parts,), finish, (tpl,))


def _shuffle(templates: Mapping[str, PromptTemplate] | None) -> Plan:
    tpl = P.step_template("position-shuffle", templates)

    def shuffle(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        seed = chunking.text_seed(
            int(params["shuffle_seed"]), str(state.item["item_id"]), str(params["seed_scope"])
        )
        state.values["shuffle_seed_used"] = seed
        state.values["text"] = chunking.shuffle_sentences(
            state.source, seed, split=str(params["sentence_split"])
        )
        return []

    keep = {"shuffled_text": "text", "shuffle_seed_used": "shuffle_seed_used"}
    finish = _summary_from("summary", section="FINAL_SUMMARY", keep=keep)
    return Plan("summarize", (shuffle, _one_call(tpl)), finish, (tpl,))


def _attention_sort(templates: Mapping[str, PromptTemplate] | None) -> Plan:
    from analysis.mitigation.rerank import attention_sort

    tpl = P.step_template("attention-sort", templates)

    def fields(units: Sequence[str], joiner: str) -> dict[str, str]:
        return {"text": joiner.join(units), "segments": P.labelled_segments(list(units))}

    def reorder(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        def render(units: Sequence[str], joiner: str) -> str:
            return backend.format_prompt(tpl.messages(**fields(units, joiner)))

        units, joiner, history = attention_sort(
            backend.model,
            backend.tokenizer,
            state.source,
            render,
            iterations=int(params["iterations"]),
        )
        state.values.update(fields(units, joiner))
        state.values["attention"] = history
        return [Call("summary", tpl, fields(units, joiner), state.values["text"])]

    keep = {"reordered_text": "text", "attention": "attention"}
    finish = _summary_from("summary", section="FINAL_SUMMARY", keep=keep)
    return Plan("summarize", (reorder,), finish, (tpl,))


def _decoding(
    factory: Callable[[Mapping[str, Any]], Any],
    templates: tuple[PromptTemplate, ...] = (),
    *,
    overrides: Mapping[str, PromptTemplate] | None = None,
    **fixed: Any,
) -> Plan:
    """A baseline prompt decoded with a logits-processor factory (and fixed settings).

    ``templates`` are prompts the processor itself uses (they enter the method hash).
    """
    tpl = _baseline_summary(overrides)

    def settings(params: Mapping[str, Any]) -> dict[str, Any]:
        return {"logits_processors": (factory(params),), **fixed}

    return Plan(
        "summarize", (_one_call(tpl),), _summary_from("summary"), (*templates, tpl), settings
    )


def _knowledge_boundary(over: Steps) -> Plan:
    tpl = P.step_template("knowledge-boundary", over)

    def stage(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        cutoff = params.get("cutoff") or state.item.get("cutoff")
        if not cutoff:
            raise ValueError(
                "knowledge-boundary needs the model's cutoff date: pass cutoff (--cutoff) or "
                f"give item {state.item['item_id']!r} a 'cutoff' field"
            )
        return [
            Call(
                "answer",
                tpl,
                {"text": state.source, "cutoff": cutoff},
                state.source,
            )
        ]

    return Plan("fact-check", (stage,), _fact_from("answer"), (tpl,))


def _fact(tpl: PromptTemplate) -> Plan:
    return Plan("fact-check", (_one_call(tpl, "answer"),), _fact_from("answer"), (tpl,))


def plan_of(name: str, task: str = "summarize", templates: Steps = None) -> Plan:
    """Return the plan of a method (``baseline`` needs the ``task``).

    Parameters
    ----------
    name : str
        ``baseline`` or one of :data:`analysis.mitigation.registry.METHODS`.
    task : str
        ``summarize`` or ``fact-check``; only used for ``baseline``.
    templates : mapping, optional
        A researcher's own prompts (``--template KEY=PATH``), keyed by task or by step:
        ``summarize`` replaces the baseline summarisation prompt (the baseline and the
        decoding family, which decodes it),
        ``fact-check`` the fact-check baseline, and a step of
        :data:`analysis.mitigation.prompts.STEPS` (``ccs-rewrite``, ``debias-prefix``,
        ``explain-choice`` …) that method's own prompt. Every template a plan uses is in
        ``Plan.templates``, so its text enters the method hash (the resume key).
    """
    # A prompts file may give one method its own copy of a shared prompt (summarize@METHOD).
    over = prompt_file.scoped(name, templates)
    if name == BASELINE:
        if task == "fact-check":
            fact = (over or {}).get("fact-check") or get_template("fact-check", "baseline")
            return _fact(fact)
        return _single("summarize", _baseline_summary(over), _summary_from("summary"))

    def decode(factory: Callable[[Mapping[str, Any]], Any], *args: Any, **kw: Any) -> Plan:
        return _decoding(factory, *args, overrides=over, **kw)

    def step(name: str) -> PromptTemplate:
        return P.step_template(name, over)

    def self_debias_plan() -> Plan:
        prefix = step("debias-prefix")
        return decode(
            lambda p: self_debias.SelfDebiasFactory(
                p["decay"], p["refresh_every"], prefix=prefix.user
            ),
            templates=(prefix,),
        )

    def guard_plan() -> Plan:
        explain = step("explain-choice")
        return decode(
            lambda p: guard.ExplanationGuardFactory(
                p["check_every"],
                p["top_k"],
                p["alpha"],
                p["min_words"],
                p["explain_tokens"],
                explain_template=explain,
            ),
            templates=(explain,),
        )

    builders: dict[str, Callable[[], Plan]] = {
        "self-awareness": lambda: _single(
            "summarize", step("self-awareness"), _summary_from("summary", section="FINAL_SUMMARY")
        ),
        "chain-of-thought": lambda: _cot(over),
        "cloze": lambda: _single(
            "summarize", step("cloze"), _summary_from("summary", section="FINAL_SUMMARY")
        ),
        "cognitive-counterfactual": lambda: _ccs(over),
        "self-help-debias": lambda: _self_help(over),
        "prompt-calibration": lambda: _fact(step("prompt-calibration")),
        "knowledge-boundary": lambda: _knowledge_boundary(over),
        "epistemic-tagging": lambda: _fact(step("epistemic-tagging")),
        "partial-summaries": lambda: _partial_summaries(over),
        "weighted-summaries": lambda: _weighted_summaries(over),
        "attention-sort": lambda: _attention_sort(over),
        "position-shuffle": lambda: _shuffle(over),
        "balanced-coverage": lambda: decode(
            lambda p: decoding.BalancedCoverageFactory(p["gamma"], p["tolerance"])
        ),
        "weighted-tokens": lambda: decode(
            lambda p: decoding.WeightedTokenFactory(
                p["negative"], p["middle"], p["n_keywords"], p["valence_threshold"]
            )
        ),
        # Mirostat sets the sampler's temperature (or truncates): every other warper neutral.
        "mirostat": lambda: decode(
            lambda p: decoding.MirostatFactory(p["target"], p["eta"], p["variant"]),
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
        ),
        "rejection-sampling": lambda: decode(
            lambda p: decoding.RejectionSamplingFactory(p["top_k"])
        ),
        "self-debias": self_debias_plan,
        "explanation-guard": guard_plan,
    }
    get_method(name)  # a clear error for unknown names
    return builders[name]()
