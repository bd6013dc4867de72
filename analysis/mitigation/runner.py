"""Run a mitigation method over items through a generation backend and the resumable store.

Every method is a *plan*: a list of stages, each producing model calls per item from what earlier
stages produced (a draft, an analysis, chunk summaries, a re-ordered document), and a finishing
step that turns the last outputs into the result. Stages run over all items at once, so a
backend batches the calls of one stage. A method's settings (logits processors of the decoding
family, sampling for Mirostat, a token limit for a rewrite pass) are applied to the backend's
:class:`~analysis.llm.backends.base.GenerationSettings` only while its calls run.

Resuming works at two levels: finished items are skipped by the engine's resume key (``model,
task, method, template_hash, item_id, variant``) in the output file, and the intermediate
outputs of multi-pass methods are kept in ``<out>.passes.jsonl`` keyed by the rendered prompt, so
a crash between passes does not redo finished passes. Output records follow
``docs/generation.md``; ``method`` is the method's name and ``passes`` holds the intermediate
outputs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.llm.backends.base import Request
from analysis.llm.templates import PromptTemplate, get_template
from analysis.mitigation import chunking, decoding, guard, self_debias
from analysis.mitigation import prompts as P
from analysis.mitigation.registry import MethodSpec, get_method, resolve_params

log = logging.getLogger(__name__)

__all__ = ["BASELINE", "Call", "MethodRun", "method_hash", "passes_path", "plan_of", "run_method"]

BASELINE = "baseline"
_STAGE_TASK = "mitigate-pass"


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


@dataclass(frozen=True)
class Plan:
    """How a method runs: its stages, its finishing step, its templates and settings changes."""

    task: str
    stages: tuple[Stage, ...]
    finish: Finish
    templates: tuple[PromptTemplate, ...]
    settings: Callable[[Mapping[str, Any]], dict[str, Any]] = lambda params: {}


# --- finishing steps ---


def _summary_from(key: str, *, section: str | None = None) -> Finish:
    def finish(state: ItemState, params: Mapping[str, Any]) -> dict[str, Any]:
        answer = state.values[key]
        if section is None:
            return {"output": answer.strip()}
        text, found = P.extract_section(answer, section)
        return {"output": text, "raw_output": answer, "section_found": found}

    return finish


def _fact_from(key: str, *, section: str | None = None) -> Finish:
    from analysis.llm.parsing import parse_fact_check

    def finish(state: ItemState, params: Mapping[str, Any]) -> dict[str, Any]:
        answer = state.values[key]
        verdict = P.extract_section(answer, section)[0] if section else answer
        label, confidence = parse_fact_check(verdict)
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


def _baseline_summary() -> PromptTemplate:
    return get_template("summarize", "baseline")


def _followup(
    key: str, tpl: PromptTemplate, uses: Sequence[str], limit: str | None = None
) -> Stage:
    """A pass that sees the source and the outputs of earlier passes named in ``uses``."""

    def stage(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        fields = {"text": state.source, **{u: state.values[u] for u in uses}}
        max_new = int(params[limit]) if limit else None
        return [Call(key, tpl, fields, state.source, max_new)]

    return stage


def _cot() -> Plan:
    return Plan(
        "summarize",
        (_one_call(P.COT_ANALYSIS, "analysis"), _followup("final", P.COT_FINAL, ["analysis"])),
        _summary_from("final", section="FINAL_SUMMARY"),
        (P.COT_ANALYSIS, P.COT_FINAL),
    )


def _ccs() -> Plan:
    return Plan(
        "summarize",
        (_one_call(P.CCS_DRAFT, "draft"), _followup("rewrite", P.CCS_REWRITE, ["draft"])),
        _summary_from("rewrite", section="FINAL_SUMMARY"),
        (P.CCS_DRAFT, P.CCS_REWRITE),
    )


def _self_help() -> Plan:
    return Plan(
        "summarize",
        (
            _one_call(P.SELF_HELP_DRAFT, "draft"),
            _followup("critique", P.SELF_HELP_CRITIQUE, ["draft"]),
            _followup(
                "rewrite", P.SELF_HELP_REWRITE, ["draft", "critique"], "rewrite_max_new_tokens"
            ),
        ),
        _summary_from("rewrite"),
        (P.SELF_HELP_DRAFT, P.SELF_HELP_CRITIQUE, P.SELF_HELP_REWRITE),
    )


def _partial_summaries() -> Plan:
    def chunks(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        n = int(params["n_chunks"])
        parts = chunking.chunk_document(state.source, n)
        return [
            Call(f"chunk-{i}", P.CHUNK_PART, {"text": t, "part": i, "n_parts": n}, t)
            for i, t in enumerate(parts, start=1)
        ]

    def merge(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        n = int(params["n_chunks"])
        partials = "\n\n".join(
            f"Part {i}: {state.values[f'chunk-{i}'].strip()}" for i in range(1, n + 1)
        )
        return [Call("merge", P.CHUNK_MERGE, {"partials": partials}, state.source)]

    return Plan("summarize", (chunks, merge), _summary_from("merge"), (P.CHUNK_PART, P.CHUNK_MERGE))


def _weights(params: Mapping[str, Any]) -> list[float]:
    return [float(w) for w in str(params["weights"]).split(",")]


def _weighted_summaries() -> Plan:
    from analysis.metrics.text import split_parts

    def parts(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        weights = _weights(params)
        # Budgets are the model's tokens, enforced as each part's max_new_tokens; the prompt
        # states the same number.
        budgets = chunking.weighted_budgets(int(params["target_tokens"]), weights)
        texts = split_parts(state.source, len(weights), unit="tokens")
        state.values["budgets"] = budgets
        return [
            Call(
                f"part-{i}",
                P.WEIGHTED_PART,
                {"text": t, "part": i, "n_parts": len(texts), "tokens": b},
                t,
                max_new_tokens=max(1, b),
            )
            for i, (t, b) in enumerate(zip(texts, budgets, strict=True), start=1)
        ]

    def finish(state: ItemState, params: Mapping[str, Any]) -> dict[str, Any]:
        n = len(_weights(params))
        joined = " ".join(state.values[f"part-{i}"].strip() for i in range(1, n + 1))
        return {"output": joined, "budgets": state.values["budgets"]}

    return Plan("summarize", (parts,), finish, (P.WEIGHTED_PART,))


def _shuffle() -> Plan:
    tpl = _baseline_summary()

    def shuffle(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        state.values["text"] = chunking.shuffle_sentences(
            state.source, int(params["shuffle_seed"]), split=str(params["sentence_split"])
        )
        return []

    def finish(state: ItemState, params: Mapping[str, Any]) -> dict[str, Any]:
        return {"output": state.values["summary"].strip(), "shuffled_text": state.values["text"]}

    return Plan("summarize", (shuffle, _one_call(tpl)), finish, (tpl,))


def _attention_sort() -> Plan:
    from analysis.mitigation.rerank import attention_sort

    tpl = _baseline_summary()

    def reorder(state: ItemState, params: Mapping[str, Any], backend: Any) -> list[Call]:
        def render(document: str) -> str:
            return backend.format_prompt(tpl.messages(text=document))

        text, history = attention_sort(
            backend.model,
            backend.tokenizer,
            state.source,
            render,
            iterations=int(params["iterations"]),
        )
        state.values["text"] = text
        state.values["attention"] = history
        return []

    def finish(state: ItemState, params: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "output": state.values["summary"].strip(),
            "reordered_text": state.values["text"],
            "attention": state.values["attention"],
        }

    return Plan("summarize", (reorder, _one_call(tpl)), finish, (tpl,))


def _decoding(
    factory: Callable[[Mapping[str, Any]], Any],
    templates: tuple[PromptTemplate, ...] = (),
    **fixed: Any,
) -> Plan:
    """A baseline prompt decoded with a logits-processor factory (and fixed settings).

    ``templates`` are prompts the processor itself uses (they enter the method hash).
    """
    tpl = _baseline_summary()

    def settings(params: Mapping[str, Any]) -> dict[str, Any]:
        return {"logits_processors": (factory(params),), **fixed}

    return Plan(
        "summarize", (_one_call(tpl),), _summary_from("summary"), (*templates, tpl), settings
    )


def _knowledge_boundary() -> Plan:
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
                P.KNOWLEDGE_BOUNDARY,
                {"text": state.source, "cutoff": cutoff},
                state.source,
            )
        ]

    return Plan("fact-check", (stage,), _fact_from("answer"), (P.KNOWLEDGE_BOUNDARY,))


def _fact(tpl: PromptTemplate, section: str | None = None) -> Plan:
    return Plan(
        "fact-check", (_one_call(tpl, "answer"),), _fact_from("answer", section=section), (tpl,)
    )


def plan_of(name: str, task: str = "summarize") -> Plan:
    """Return the plan of a method (``baseline`` needs the ``task``).

    Parameters
    ----------
    name : str
        ``baseline`` or one of :data:`analysis.mitigation.registry.METHODS`.
    task : str
        ``summarize`` or ``fact-check``; only used for ``baseline``.
    """
    if name == BASELINE:
        if task == "fact-check":
            return _fact(get_template("fact-check", "baseline"))
        return _single("summarize", _baseline_summary(), _summary_from("summary"))
    builders: dict[str, Callable[[], Plan]] = {
        "self-awareness": lambda: _single("summarize", P.SELF_AWARENESS, _summary_from("summary")),
        "chain-of-thought": _cot,
        "cloze": lambda: _single(
            "summarize", P.CLOZE, _summary_from("summary", section="FINAL_SUMMARY")
        ),
        "cognitive-counterfactual": _ccs,
        "self-help-debias": _self_help,
        "prompt-calibration": lambda: _fact(P.PROMPT_CALIBRATION, "Answer"),
        "knowledge-boundary": _knowledge_boundary,
        "epistemic-tagging": lambda: _fact(P.EPISTEMIC_TAGGING),
        "partial-summaries": _partial_summaries,
        "weighted-summaries": _weighted_summaries,
        "attention-sort": _attention_sort,
        "position-shuffle": _shuffle,
        "balanced-coverage": lambda: _decoding(
            lambda p: decoding.BalancedCoverageFactory(p["gamma"], p["tolerance"])
        ),
        "weighted-tokens": lambda: _decoding(
            lambda p: decoding.WeightedTokenFactory(
                p["negative"], p["middle"], p["n_keywords"], p["valence_threshold"]
            )
        ),
        # Mirostat sets the sampler's temperature (or truncates): every other warper neutral.
        "mirostat": lambda: _decoding(
            lambda p: decoding.MirostatFactory(p["target"], p["eta"], p["variant"]),
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
        ),
        "rejection-sampling": lambda: _decoding(
            lambda p: decoding.RejectionSamplingFactory(p["top_k"])
        ),
        "self-debias": lambda: _decoding(
            lambda p: self_debias.SelfDebiasFactory(p["decay"], p["refresh_every"])
        ),
        "explanation-guard": lambda: _decoding(
            lambda p: guard.ExplanationGuardFactory(
                p["check_every"], p["top_k"], p["alpha"], p["min_words"], p["explain_tokens"]
            ),
            templates=(P.EXPLAIN_CHOICE,),
        ),
    }
    get_method(name)  # a clear error for unknown names
    return builders[name]()


# --- running ---


def model_name(backend: Any) -> str:
    """The model identifier a backend was created with (not the loaded model object)."""
    return str(getattr(backend, "model_id", None) or backend.model)


@contextmanager
def _settings(backend: Any, changes: Mapping[str, Any]) -> Iterator[None]:
    """Apply settings changes to the backend while the block runs."""
    if not changes:
        yield
        return
    current = getattr(backend, "settings", None)
    if current is None:
        raise ValueError(f"the {backend.name} backend has no generation settings to change")
    changes = dict(changes)
    if "logits_processors" in changes:
        changes["logits_processors"] = tuple(current.logits_processors) + tuple(
            changes["logits_processors"]
        )
    backend.settings = dataclasses.replace(current, **changes)
    try:
        yield
    finally:
        backend.settings = current


def _settings_fields(backend: Any) -> dict[str, Any]:
    from analysis.llm.tasks import settings_of

    return settings_of(backend)


def _hash(payload: Any) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def method_hash(
    name: str, plan: Plan, params: Mapping[str, Any], settings: Mapping[str, Any]
) -> str:
    """SHA-256 (first 16 hex) of a method's templates, hyperparameters and settings.

    It is the ``template_hash`` of the method's records: changing a prompt, a hyperparameter
    or a decoding setting starts new results instead of mixing them with old ones.
    """
    templates = [
        {"name": t.name, "task": t.task, "system": t.system, "user": t.user} for t in plan.templates
    ]
    return _hash(
        {"method": name, "templates": templates, "params": dict(params), "settings": dict(settings)}
    )


def passes_path(out: str | Path) -> Path:
    """Where a run keeps intermediate outputs: ``<out>.passes.jsonl`` beside ``out``."""
    out = Path(out)
    return out.with_name(out.stem + ".passes.jsonl")


@dataclass
class MethodRun:
    """Counts of one method run."""

    method: str
    n_items: int
    n_done_before: int
    n_generated: int = 0
    n_failed: int = 0
    n_calls: int = 0
    n_calls_reused: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One line for the terminal."""
        if self.n_generated == 0 and self.n_failed == 0:
            return (
                f"{self.method}: nothing to do, all {self.n_items} items are already in the output"
            )
        text = (
            f"{self.method}: {self.n_generated} of {self.n_items} items done "
            f"({self.n_done_before} were already done), {self.n_calls} model calls "
            f"({self.n_calls_reused} reused from earlier passes) in {self.seconds:.1f} s"
        )
        if self.n_failed:
            text += f"; {self.n_failed} failed (re-run to retry them)"
        return text


def _run_calls(
    backend: Any,
    calls: Sequence[tuple[ItemState, Call]],
    *,
    method: str,
    method_settings: Mapping[str, Any],
    cache: dict[tuple[str, ...], dict[str, Any]],
    passes: Any,
    run: MethodRun,
) -> None:
    """Run one stage's calls (reusing cached passes) and store their outputs in the states."""
    from analysis.llm.store import utc_now

    model = model_name(backend)
    groups: dict[int | None, list[tuple[ItemState, Call]]] = {}
    for state, call in calls:
        groups.setdefault(call.max_new_tokens, []).append((state, call))
    for limit, group in groups.items():
        changes = dict(method_settings)
        if limit is not None:
            changes["max_new_tokens"] = limit
        with _settings(backend, changes):
            settings = _settings_fields(backend)
            todo: dict[str, tuple[ItemState, Call, tuple[str, ...]]] = {}
            for state, call in group:
                messages = call.messages()
                key = (
                    model,
                    _STAGE_TASK,
                    method,
                    _hash([messages, settings]),
                    str(state.item["item_id"]),
                    call.key,
                )
                state.last_call = call
                if key in cache:
                    _store_output(state, call, cache[key])
                    run.n_calls_reused += 1
                else:
                    todo[f"{state.item['item_id']}\x1f{call.key}"] = (state, call, key)
            requests = [Request(k, call.messages(), call.text) for k, (_, call, _) in todo.items()]
            for request, completion in backend.generate(requests):
                state, call, key = todo[request.key]
                run.n_calls += 1
                if completion.error is not None:
                    state.error = f"{call.key}: {completion.error}"
                    continue
                record = {
                    "model": key[0],
                    "task": key[1],
                    "method": key[2],
                    "template_hash": key[3],
                    "item_id": key[4],
                    "variant": key[5],
                    "template": call.template.name,
                    "output": completion.text,
                    "n_prompt_tokens": completion.n_prompt_tokens,
                    "n_output_tokens": completion.n_output_tokens,
                    "created_at": utc_now(),
                }
                passes.append(record)
                cache[key] = record
                _store_output(state, call, record)


def _store_output(state: ItemState, call: Call, record: Mapping[str, Any]) -> None:
    state.values[call.key] = record["output"]
    state.n_prompt_tokens += int(record.get("n_prompt_tokens") or 0)
    state.n_output_tokens += int(record.get("n_output_tokens") or 0)


def run_method(
    name: str,
    items: Iterable[Mapping[str, Any]],
    backend: Any,
    out: str | Path,
    *,
    params: Mapping[str, Any] | None = None,
    task: str = "summarize",
    dataset: str | None = None,
    progress: bool = True,
) -> MethodRun:
    """Run a mitigation method (or ``baseline``) over items, appending records to ``out``.

    Parameters
    ----------
    name : str
        ``baseline`` or a method of :data:`analysis.mitigation.registry.METHODS`.
    items : iterable of mapping
        Input items with ``item_id`` and ``text`` (the source document, or the statement for
        fact checks) and any other fields (kept under ``input`` in the records).
    backend : Backend
        A backend of :func:`analysis.llm.backends.make_backend`; decoding and attention methods
        need ``transformers``.
    out : str or Path
        Output JSONL (records of ``docs/generation.md``); intermediate passes go to
        :func:`passes_path`.
    params : mapping, optional
        Hyperparameters; missing ones take the seed defaults.
    task : str
        For ``baseline`` only: ``summarize`` or ``fact-check``.
    dataset : str, optional
        Dataset name for items without one.
    progress : bool
        Show a tqdm bar over stages.

    Returns
    -------
    MethodRun
        Counts of items and model calls.
    """
    from analysis.llm.store import ResultStore, read_records, result_key
    from analysis.llm.tasks import Prompt, build_record

    spec: MethodSpec | None = None if name == BASELINE else get_method(name)
    if spec is not None and backend.name not in spec.backends:
        raise ValueError(
            f"{name} needs the {' or '.join(spec.backends)} backend, not {backend.name}"
        )
    values = resolve_params(spec, params) if spec is not None else {}
    plan = plan_of(name, spec.task if spec is not None else task)
    with _settings(backend, plan.settings(values)):
        thash = method_hash(name, plan, values, _settings_fields(backend))
    t0 = time.perf_counter()

    item_list = [dict(i) for i in items]
    ids = [str(item.get("item_id")) for item in item_list]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise ValueError(f"duplicate item IDs {dup}: every item needs its own item_id")
    # Methods that split the source into thirds or chunks need at least three words of it.
    needs_parts = spec is not None and spec.family in {"chunk", "decoding"}
    for item in item_list:
        if "text" not in item or item["text"] in (None, ""):
            raise ValueError(f"item {item.get('item_id')!r} has no 'text'")
        if needs_parts and len(str(item["text"]).split()) < 3:
            raise ValueError(
                f"{name} splits the source into parts: item {item.get('item_id')!r} has fewer "
                "than 3 words"
            )
    model = model_name(backend)
    base = {"model": model, "task": plan.task, "method": name, "template_hash": thash}
    store = ResultStore(out)
    states = [
        ItemState(item)
        for item in item_list
        if result_key({**base, "item_id": str(item["item_id"]), "variant": ""}) not in store
    ]
    run = MethodRun(name, len(item_list), len(item_list) - len(states))
    cache = {
        tuple(
            str(r.get(k) or "")
            for k in ("model", "task", "method", "template_hash", "item_id", "variant")
        ): r
        for r in read_records(passes_path(out))
    }
    stages: Sequence[Stage] = plan.stages
    if progress and states:
        from tqdm.auto import tqdm

        stages = tqdm(plan.stages, desc=name, unit="stage")
    with ResultStore(passes_path(out)) as passes, store:
        for stage in stages:
            calls = [
                (state, call)
                for state in states
                if state.error is None
                for call in stage(state, values, backend)
            ]
            _run_calls(
                backend,
                calls,
                method=name,
                method_settings=plan.settings(values),
                cache=cache,
                passes=passes,
                run=run,
            )
        for state in states:
            if state.error is not None:
                run.n_failed += 1
                run.errors.append(f"{state.item['item_id']}: {state.error}")
                continue
            parsed = plan.finish(state, values)
            call = state.last_call
            prompt = Prompt(state.item, {}, call.messages() if call else (), state.source)
            template = call.template if call else plan.templates[-1]
            record = build_record(
                prompt,
                parsed,
                backend=backend,
                task=plan.task,
                method=name,
                template=template,
                template_hash=thash,
                dataset=dataset,
                n_prompt_tokens=state.n_prompt_tokens,
                n_output_tokens=state.n_output_tokens,
                extra={
                    "hyperparameters": values,
                    "passes": {
                        k: v for k, v in state.values.items() if isinstance(v, str) and k != "text"
                    },
                },
            )
            record["model"] = model  # the identifier, whatever the backend's attribute holds
            store.append(record)
            run.n_generated += 1
    run.seconds = time.perf_counter() - t0
    return run
