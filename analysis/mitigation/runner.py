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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.llm.backends.base import Request
from analysis.llm.store import (
    ResultStore,
    input_hash,
    read_records,
    result_key,
    utc_now,
    write_manifest,
)
from analysis.llm.tasks import Prompt, build_record, framelab_version, settings_of
from analysis.llm.templates import PromptTemplate
from analysis.mitigation.plans import BASELINE, Call, ItemState, Plan, Stage, plan_of
from analysis.mitigation.registry import MethodSpec, get_method, resolve_params

log = logging.getLogger(__name__)

__all__ = ["BASELINE", "Call", "MethodRun", "method_hash", "passes_path", "plan_of", "run_method"]

_STAGE_TASK = "mitigate-pass"


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
    manifest: Path | None = None
    n_changed: int = 0  # stored items whose input changed: run again

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
        if self.n_changed:
            text += (
                f"; {self.n_changed} run again because their input changed "
                "(old records in the .stale.jsonl beside the output)"
            )
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
    model = model_name(backend)
    groups: dict[int | None, list[tuple[ItemState, Call]]] = {}
    for state, call in calls:
        groups.setdefault(call.max_new_tokens, []).append((state, call))
    for limit, group in groups.items():
        changes = dict(method_settings)
        if limit is not None:
            changes["max_new_tokens"] = limit
        with _settings(backend, changes):
            settings = settings_of(backend)
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
    argv: Sequence[str] | None = None,
    templates: Mapping[str, PromptTemplate] | None = None,
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
    argv : sequence of str, optional
        The command line, recorded in the manifest.
    templates : mapping, optional
        ``{task: PromptTemplate}`` replacing the baseline prompts (see
        :func:`analysis.mitigation.plans.plan_of`); their text enters ``template_hash``.

    Returns
    -------
    MethodRun
        Counts of items and model calls, and the manifest path.

    Notes
    -----
    Like ``framelab generate``, every run appends an entry to ``<out>.manifest.json``
    (:func:`analysis.llm.store.write_manifest`): status, times, method, hyperparameters,
    ``template_hash``, the templates with their hashes, the output-changing settings (decoding
    and backend loading choices, as hashed), the backend description, counts, first errors and
    the command line — also when the run is interrupted.
    """
    spec: MethodSpec | None = None if name == BASELINE else get_method(name)
    if spec is not None and backend.name not in spec.backends:
        raise ValueError(
            f"{name} needs the {' or '.join(spec.backends)} backend, not {backend.name}"
        )
    values = resolve_params(spec, params) if spec is not None else {}
    plan = plan_of(name, spec.task if spec is not None else task, templates)
    with _settings(backend, plan.settings(values)):
        hashed_settings = settings_of(backend)
        thash = method_hash(name, plan, values, hashed_settings)
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
    keys = [result_key({**base, "item_id": str(i["item_id"]), "variant": ""}) for i in item_list]
    # An item whose content changed since its record was written is not done: its old record
    # moves to <out>.stale.jsonl and it runs again (docs/generation.md, "Resuming").
    changed = store.retire_changed({k: input_hash(i) for k, i in zip(keys, item_list, strict=True)})
    states = [ItemState(i) for i, k in zip(item_list, keys, strict=True) if k not in store]
    run = MethodRun(name, len(item_list), len(item_list) - len(states), n_changed=len(changed))
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
    started, status = utc_now(), "completed"
    try:
        _run_stages(
            name, plan, values, backend, states, stages, store, cache, out, run, dataset, model,
            thash,
        )  # fmt: skip
    except BaseException as exc:
        # Ctrl-C, OOM, a dead server: what was stored stays, and the manifest says how far.
        status = f"interrupted: {type(exc).__name__}"
        raise
    finally:
        run.seconds = time.perf_counter() - t0
        run.manifest = _write_method_manifest(
            out, run, plan, values, thash, hashed_settings, backend, started, status, argv
        )
    return run


def _write_method_manifest(
    out: str | Path,
    run: MethodRun,
    plan: Plan,
    values: Mapping[str, Any],
    thash: str,
    settings: Mapping[str, Any],
    backend: Any,
    started: str,
    status: str,
    argv: Sequence[str] | None,
) -> Path:
    """Append this run to ``<out>.manifest.json``, in the layout ``framelab generate`` writes."""
    import platform
    import sys

    return write_manifest(
        out,
        {
            "status": status,
            "started_at": started,
            "finished_at": utc_now(),
            "seconds": round(run.seconds, 3),
            "task": plan.task,
            "method": run.method,
            "hyperparameters": dict(values),
            "template_hash": thash,
            "templates": {t.name: t.hash() for t in plan.templates},
            "template_files": {t.name: t.source for t in plan.templates if t.source},
            "settings": dict(settings),
            "seed": settings.get("seed"),
            "backend": backend.info() if hasattr(backend, "info") else {"backend": backend.name},
            "counts": {
                "items": run.n_items,
                "already_done": run.n_done_before,
                "input_changed": run.n_changed,
                "generated": run.n_generated,
                "failed": run.n_failed,
                "model_calls": run.n_calls,
                "model_calls_reused": run.n_calls_reused,
            },
            "errors": run.errors[:20],
            "passes_file": passes_path(out).name,
            "python": platform.python_version(),
            "framelab": framelab_version(),
            "argv": list(argv) if argv is not None else list(sys.argv),
        },
    )


def _run_stages(
    name: str,
    plan: Plan,
    values: Mapping[str, Any],
    backend: Any,
    states: list[ItemState],
    stages: Sequence[Stage],
    store: Any,
    cache: dict[tuple[str, ...], dict[str, Any]],
    out: str | Path,
    run: MethodRun,
    dataset: str | None,
    model: str,
    thash: str,
) -> None:
    """Run the stages over the items still to do and append each finished record."""
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
