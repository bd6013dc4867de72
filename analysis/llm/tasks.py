"""Tasks: how an input item becomes prompts, and how an answer becomes a result record.

Each task is a :class:`Task` in :data:`TASKS`. Some tasks present one item several times (a
reframing as prefix and as suffix, a pair of summaries in both orders); each presentation is a
*variant* with its own flat fields (``frame_position``, ``order``, ``perspective``) and its own
resume key. :func:`run_task` ties a task to a backend and a result store.
"""

from __future__ import annotations

import dataclasses
import platform
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.llm import parsing
from analysis.llm.backends.base import Backend, Request
from analysis.llm.store import ResultStore, input_hash, result_key, utc_now, write_manifest
from analysis.llm.templates import PromptTemplate, resolve_template


class TaskInputError(ValueError):
    """An input item lacks what the task needs; the message names the item and the field."""


@dataclass(frozen=True)
class TaskOptions:
    """Per-run choices of how items are presented.

    Attributes
    ----------
    text_field : str
        Field holding the text (dotted paths reach into nested records: ``input.text``).
    dataset : str, optional
        Dataset name for records whose input has no ``dataset`` field.
    positions : tuple of str
        ``reframe``: where the opposite-sentiment frame goes (``prefix``, ``suffix``).
    perspectives : tuple of str
        ``perspective-summary``: whose view to summarize (``left``, ``right``).
    left_field, right_field : str
        ``perspective-summary``: fields holding the left and right passages.
    human_field, generated_field : str
        ``judge-pair``: fields holding the human (ground-truth) and generated summaries.
    pair_names : tuple of str
        ``judge-pair``: names under which the first and second summary are shown.
    passage_seed : int
        ``perspective-summary``: run seed of the shuffle of each side's passages before they
        alternate (PoliSum shuffles passages that share a perspective); each item's own seed,
        derived from it and the item ID, is recorded in its records as ``passage_seed``.
    """

    text_field: str = "text"
    dataset: str | None = None
    positions: tuple[str, ...] = ("prefix", "suffix")
    perspectives: tuple[str, ...] = ("left", "right")
    left_field: str = "left"
    right_field: str = "right"
    human_field: str = "human_summary"
    generated_field: str = "generated_summary"
    pair_names: tuple[str, str] = ("summary_1", "summary_2")
    passage_seed: int = 0


@dataclass(frozen=True)
class Prompt:
    """One presentation of one item: its variant fields, messages and parsing context."""

    item: Mapping[str, Any]
    variant: Mapping[str, str]
    messages: tuple[dict[str, str], ...]
    text: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)

    @property
    def item_id(self) -> str:
        """The item's ID."""
        return str(self.item["item_id"])

    @property
    def variant_key(self) -> str:
        """The variant as one string (``order=gt_first``), empty when the task has no variants."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.variant.items()))


Expander = Callable[[Mapping[str, Any], PromptTemplate, TaskOptions], list[Prompt]]
Parser = Callable[[str, Prompt], dict[str, Any]]


@dataclass(frozen=True)
class Task:
    """A task: its default template, how items expand into prompts and how answers parse."""

    name: str
    expand: Expander
    parse: Parser
    default_template: str = "baseline"
    lexicon_ok: bool = False  # whether the ``vader`` baseline can answer it


def get_field(item: Mapping[str, Any], path: str) -> Any:
    """Return ``item[path]``, following dots into nested mappings; ``KeyError`` if absent."""
    value: Any = item
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(path)
        value = value[part]
    return value


def _text(item: Mapping[str, Any], path: str) -> str:
    try:
        value = get_field(item, path)
    except KeyError:
        keys = sorted(item)
        raise TaskInputError(
            f"item {item.get('item_id')!r} has no field {path!r} (fields: {keys}); "
            "choose one with --text-field or map columns when loading"
        ) from None
    if value is None or (isinstance(value, float) and value != value):
        raise TaskInputError(f"item {item.get('item_id')!r}: field {path!r} is empty")
    return str(value)


# --- expanders ---


def _expand_text(item: Mapping[str, Any], tpl: PromptTemplate, opts: TaskOptions) -> list[Prompt]:
    text = _text(item, opts.text_field)
    return [Prompt(item, {}, tpl.messages(text=text), text)]


_OPPOSITE = {"positive": "negative", "negative": "positive"}


def _expand_reframe(
    item: Mapping[str, Any], tpl: PromptTemplate, opts: TaskOptions
) -> list[Prompt]:
    text = _text(item, opts.text_field)
    base = _text(item, "base_sentiment").strip().lower()
    if base not in _OPPOSITE:
        raise TaskInputError(
            f"item {item.get('item_id')!r}: base_sentiment must be positive or negative, "
            f"not {base!r}"
        )
    prompts = []
    for position in opts.positions:
        shot = tpl.shots.get(f"{base}-{position}", {})
        messages = tpl.messages(
            text=text,
            base_sentiment=base,
            target_sentiment=_OPPOSITE[base],
            frame_position=position,
            shot_statement=shot.get("statement", ""),
            shot_answer=shot.get("answer", ""),
        )
        prompts.append(Prompt(item, {"frame_position": position}, messages, text))
    return prompts


def shuffled_units(text: str, seed: int | None) -> list[str]:
    """A side's units (:func:`analysis.metrics.text.passages`), shuffled by ``random.Random(seed)``
    (kept in order when ``seed`` is None)."""
    import random

    from analysis.metrics.text import passages

    units = passages(text)
    if seed is not None:
        random.Random(seed).shuffle(units)
    return units


def mix_passages(first: str, second: str, seed: int | None = None) -> str:
    """Interleave two texts unit by unit (lines or paragraphs, or sentences for a single line).

    Units are :func:`analysis.metrics.text.passages`: a side of several lines (PoliSum separates
    its passages by single newlines) is interleaved passage by passage, never sentence by
    sentence; a one-line side is cut into sentences by the shared library splitter. With a
    ``seed``, each side's units are first shuffled (:func:`shuffled_units`, the same seed for
    both sides), so passages that share a perspective do not keep their source order.

    Examples
    --------
    >>> mix_passages("L1. L2.", "R1. R2.")
    'L1.\\n\\nR1.\\n\\nL2.\\n\\nR2.'
    >>> mix_passages("Mr. Li spoke. He left.\\nSen. Ng agreed.", "R1.")
    'Mr. Li spoke. He left.\\n\\nR1.\\n\\nSen. Ng agreed.'
    """
    a, b = shuffled_units(first, seed), shuffled_units(second, seed)
    mixed: list[str] = []
    for i in range(max(len(a), len(b))):
        mixed.extend(u[i] for u in (a, b) if i < len(u))
    return "\n\n".join(mixed)


def _expand_perspective(
    item: Mapping[str, Any], tpl: PromptTemplate, opts: TaskOptions
) -> list[Prompt]:
    from analysis.llm.backends.base import item_seed

    sides = {"left": _text(item, opts.left_field), "right": _text(item, opts.right_field)}
    # One recorded seed per item: both orders show the same shuffled passages, so they differ
    # only in which side leads.
    seed = item_seed(opts.passage_seed, str(item.get("item_id")))
    prompts = []
    for order in ("left_first", "right_first"):
        first, second = ("left", "right") if order == "left_first" else ("right", "left")
        passage = mix_passages(sides[first], sides[second], seed)
        for perspective in opts.perspectives:
            messages = tpl.messages(text=passage, perspective=perspective)
            variant = {"perspective": perspective, "order": order, "passage_seed": str(seed)}
            prompts.append(Prompt(item, variant, messages, passage))
    return prompts


def _expand_pair(item: Mapping[str, Any], tpl: PromptTemplate, opts: TaskOptions) -> list[Prompt]:
    summaries = {
        "gt": _text(item, opts.human_field),
        "generated": _text(item, opts.generated_field),
    }
    try:
        source = _text(item, opts.text_field)
    except TaskInputError:
        source = ""  # a judge may compare summaries without their source
    name_1, name_2 = opts.pair_names
    prompts = []
    for first, second in (("gt", "generated"), ("generated", "gt")):
        messages = tpl.messages(
            text=source,
            name_1=name_1,
            name_2=name_2,
            summary_1=summaries[first],
            summary_2=summaries[second],
        )
        context = {"names": {name_1: first, name_2: second}}
        prompts.append(Prompt(item, {"order": f"{first}_first"}, messages, source, context))
    return prompts


# --- parsers ---


def _parse_summary(answer: str, prompt: Prompt) -> dict[str, Any]:
    return {"output": answer.strip()}


def _parse_reframe(answer: str, prompt: Prompt) -> dict[str, Any]:
    cleaned = parsing.clean_reframing(answer)
    # WildFrame keeps the statement verbatim; flag reframings that changed it.
    kept = prompt.text.strip().rstrip(".").lower() in cleaned.lower()
    return {"output": cleaned, "raw_output": answer, "statement_kept": kept}


def _parse_framing(answer: str, prompt: Prompt) -> dict[str, Any]:
    return {"output": answer, "label": parsing.parse_framing(answer)}


def _parse_fact(answer: str, prompt: Prompt) -> dict[str, Any]:
    label, confidence = parsing.parse_fact_check(answer)
    return {"output": answer, "label": label, "confidence": confidence}


def _parse_perspective(answer: str, prompt: Prompt) -> dict[str, Any]:
    from analysis.metrics.text import first_sentence

    return {"output": first_sentence(answer), "raw_output": answer}


def _parse_pair(answer: str, prompt: Prompt) -> dict[str, Any]:
    return {"output": answer, "label": parsing.parse_choice(answer, prompt.context["names"])}


def _parse_negation(answer: str, prompt: Prompt) -> dict[str, Any]:
    return {"output": parsing.clean_negation(answer), "raw_output": answer}


TASKS: dict[str, Task] = {
    "summarize": Task("summarize", _expand_text, _parse_summary),
    "reframe": Task("reframe", _expand_reframe, _parse_reframe, default_template="wildframe"),
    "judge-framing": Task("judge-framing", _expand_text, _parse_framing, lexicon_ok=True),
    "fact-check": Task("fact-check", _expand_text, _parse_fact),
    "perspective-summary": Task("perspective-summary", _expand_perspective, _parse_perspective),
    "judge-pair": Task("judge-pair", _expand_pair, _parse_pair),
    "negate": Task("negate", _expand_text, _parse_negation),
}


def get_task(name: str) -> Task:
    """Return a task by name, listing the known ones if it is unknown."""
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; choose one of {sorted(TASKS)}") from None


# --- running ---


@dataclass
class RunSummary:
    """Counts of one run: prompts in total, already done, generated now, failed."""

    n_items: int
    n_prompts: int
    n_done_before: int
    n_generated: int = 0
    n_failed: int = 0
    n_output_tokens: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    manifest: Path | None = None
    n_changed: int = 0  # stored prompts whose item changed: generated again

    def describe(self) -> str:
        """One line for the terminal."""
        if self.n_generated == 0 and self.n_failed == 0:
            return (
                f"nothing to generate: all {self.n_prompts} prompts of {self.n_items} items "
                "are already in the output"
            )
        rate = self.n_generated / self.seconds if self.seconds else 0.0
        text = (
            f"generated {self.n_generated} of {self.n_prompts} prompts "
            f"({self.n_done_before} were already done) in {self.seconds:.1f} s, "
            f"{rate:.2f} items/s, {self.n_output_tokens / max(self.seconds, 1e-9):.1f} tokens/s"
        )
        if self.n_failed:
            text += f"; {self.n_failed} failed (re-run to retry them)"
        if self.n_changed:
            text += (
                f"; {self.n_changed} generated again because their input changed "
                "(old records in the .stale.jsonl beside the output)"
            )
        return text


def build_record(
    prompt: Prompt,
    parsed: Mapping[str, Any],
    *,
    backend: Backend,
    task: str,
    method: str,
    template: PromptTemplate,
    template_hash: str,
    dataset: str | None,
    n_prompt_tokens: int | None,
    n_output_tokens: int | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble one output record in the format of ``docs/generation.md``."""
    record: dict[str, Any] = {
        "item_id": prompt.item_id,
        "dataset": prompt.item.get("dataset") or dataset,
        "model": backend.model_id,
        "backend": backend.name,
        "task": task,
        "method": method,
        "template": template.name,
        "template_hash": template_hash,
        "variant": prompt.variant_key,
        **prompt.variant,
        "input": dict(prompt.item),
        "input_hash": input_hash(prompt.item),
        "output": parsed.get("output", ""),
        "label": parsed.get("label"),
        "confidence": parsed.get("confidence"),
        "n_prompt_tokens": n_prompt_tokens,
        "n_output_tokens": n_output_tokens,
        "created_at": utc_now(),
    }
    for key, value in {**parsed, **(extra or {})}.items():
        record.setdefault(key, value)
    return record


def framelab_version() -> str | None:
    """The installed framelab's version, recorded with every result (None if not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("framelab")
    except PackageNotFoundError:
        return None


def settings_of(backend: Backend) -> dict[str, Any]:
    """Every setting of the backend that changes outputs (empty for lexicon backends).

    The decoding settings, plus the backend's loading choices when it has any
    (``output_settings()``: revision, GGUF file, dtype, … of the transformers backend). They
    go into the template hash, hence the resume key, and into the manifest: a run with another
    quantization or dtype is another run, never "nothing to generate".
    """
    settings = getattr(backend, "settings", None)
    fields = settings.hash_fields() if settings is not None else {}
    output_settings = getattr(backend, "output_settings", None)
    if callable(output_settings):
        fields = {**fields, "backend": output_settings()}
    return fields


def run_task(
    task: str,
    items: Iterable[Mapping[str, Any]],
    backend: Backend,
    out: str | Path,
    *,
    template: str | PromptTemplate | None = None,
    method: str = "baseline",
    options: TaskOptions | None = None,
    progress: bool = True,
    argv: Sequence[str] | None = None,
    explicit_decoding: Collection[str] = (),
) -> RunSummary:
    """Run a task over items, appending one record per finished prompt to ``out``.

    Prompts whose resume key (model, task, method, template hash, item ID, variant) is already in
    ``out`` are skipped, so a re-run after a crash continues where it stopped, and a second run
    of a finished job generates nothing. A manifest is written beside ``out``.

    Parameters
    ----------
    task : str
        One of :data:`TASKS`.
    items : iterable of mapping
        Input records, each with an ``item_id``.
    backend : Backend
        Where completions come from.
    out : str or Path
        Output JSONL.
    template : str or PromptTemplate, optional
        Template name, a template file (``.txt``/``.json``) or ``TASK=PATH`` (the task's
        default otherwise; see :func:`analysis.llm.templates.resolve_template`), or a template
        already loaded (e.g. from a ``--prompts`` file).
    method : str
        ``baseline`` or a mitigation method's name (part of the resume key).
    options : TaskOptions, optional
        Presentation choices.
    progress : bool
        Show a tqdm bar with items/s and tokens/s.
    argv : sequence of str, optional
        The command line, recorded in the manifest.
    explicit_decoding : collection of str
        Decoding settings (``do_sample``, ``temperature``, ``top_p``) the caller chose itself:
        the template's paper defaults (:attr:`PromptTemplate.decoding`, e.g. temperature 0.7
        for the overlap paper's judge and rephrase step) apply to every other one, for this run
        only. ``framelab generate`` passes the options given on the command line.

    Returns
    -------
    RunSummary
        Counts, throughput and the manifest path.
    """
    spec = get_task(task)
    tpl = (
        template
        if isinstance(template, PromptTemplate)
        else resolve_template(task, template, spec.default_template)
    )
    with template_decoding(backend, tpl, explicit_decoding) as decoding:
        return _run_task(
            spec, tpl, items, backend, out, method, options or TaskOptions(), progress, argv,
            decoding,
        )  # fmt: skip


@contextmanager
def template_decoding(
    backend: Backend, tpl: PromptTemplate, explicit: Collection[str] = ()
) -> Iterator[dict[str, Any]]:
    """Apply a template's decoding defaults to the backend while the block runs.

    Settings named in ``explicit`` are the caller's and stay. Yields what the manifest records:
    the template's ``declared`` defaults, those ``applied`` and those ``kept`` (the caller's).
    """
    declared = dict(tpl.decoding)
    applied = {k: v for k, v in declared.items() if k not in set(explicit)}
    current = getattr(backend, "settings", None)
    if current is not None and not applied.get("do_sample", current.do_sample):
        # Greedy decoding (the caller's --greedy): a sampling temperature would change nothing
        # but the resume key.
        applied = {k: v for k, v in applied.items() if k == "do_sample"}
    record = {"template": tpl.name, "declared": declared, "applied": applied,
              "kept": sorted(set(declared) - set(applied))}  # fmt: skip
    if not applied or current is None:
        # A lexicon backend has no decoding to change.
        yield {**record, "applied": {} if current is None else applied}
        return
    if applied.get("temperature") is not None:
        applied["temperature"] = float(applied["temperature"])
    backend.settings = dataclasses.replace(current, **applied)
    try:
        yield record
    finally:
        backend.settings = current


def _run_task(
    spec: Task,
    tpl: PromptTemplate,
    items: Iterable[Mapping[str, Any]],
    backend: Backend,
    out: str | Path,
    method: str,
    opts: TaskOptions,
    progress: bool,
    argv: Sequence[str] | None,
    decoding: Mapping[str, Any],
) -> RunSummary:
    from tqdm.auto import tqdm

    task = spec.name
    if backend.name == "vader" and not spec.lexicon_ok:
        raise ValueError(f"the vader baseline only answers judge-framing, not {task}")
    settings = settings_of(backend)
    if opts.text_field != TaskOptions.text_field:
        # Judging sources and their summaries gives the same item IDs; which field was read must
        # be part of the key, or one run would look done to the other in a shared output file.
        settings = {**settings, "text_field": opts.text_field}
    if task == "judge-pair" and opts.pair_names != TaskOptions.pair_names:
        # The names are part of what the judge reads: other names, other results.
        settings = {**settings, "pair_names": list(opts.pair_names)}
    if task == "perspective-summary" and opts.passage_seed != TaskOptions.passage_seed:
        settings = {**settings, "passage_seed": opts.passage_seed}
    thash = tpl.hash(settings)
    started, t0 = utc_now(), time.perf_counter()

    item_list = list(items)
    prompts: list[Prompt] = []
    for item in item_list:
        prompts.extend(spec.expand(item, tpl, opts))
    store = ResultStore(out)
    base = {"model": backend.model_id, "task": task, "method": method, "template_hash": thash}

    def key_of(p: Prompt) -> tuple[str, ...]:
        return result_key({**base, "item_id": p.item_id, "variant": p.variant_key})

    keys = [key_of(p) for p in prompts]
    if len(set(keys)) != len(keys):
        raise TaskInputError("duplicate item IDs in the input: every item needs its own item_id")
    # An item whose content changed since its record was written is not done (docs/generation.md).
    changed = store.retire_changed(
        {k: input_hash(p.item) for p, k in zip(prompts, keys, strict=True)}
    )
    todo = {
        f"{p.item_id}\x1f{p.variant_key}": p
        for p, k in zip(prompts, keys, strict=True)
        if k not in store
    }
    summary = RunSummary(len(item_list), len(prompts), len(prompts) - len(todo))
    summary.n_changed = len(changed)

    requests = [Request(key, p.messages, p.text) for key, p in todo.items()]
    if requests and hasattr(backend, "load"):
        backend.load()  # before the clock starts: throughput should not include loading
    t_gen = time.perf_counter()
    bar = tqdm(total=len(requests), unit="item", disable=not progress or not requests)
    status = "completed"
    try:
        with store, bar:
            for request, completion in backend.generate(requests):
                prompt = todo[request.key]
                if completion.error is not None:
                    summary.n_failed += 1
                    summary.errors.append(
                        f"{prompt.item_id} {prompt.variant_key}: {completion.error}"
                    )
                else:
                    parsed = spec.parse(completion.text, prompt)
                    store.append(
                        build_record(
                            prompt,
                            parsed,
                            backend=backend,
                            task=task,
                            method=method,
                            template=tpl,
                            template_hash=thash,
                            dataset=opts.dataset,
                            n_prompt_tokens=completion.n_prompt_tokens,
                            n_output_tokens=completion.n_output_tokens,
                            extra=completion.extra,
                        )
                    )
                    summary.n_generated += 1
                    summary.n_output_tokens += completion.n_output_tokens or 0
                bar.update(1)
                elapsed = max(bar.format_dict.get("elapsed", 0.0), 1e-9)
                bar.set_postfix(tok_s=f"{summary.n_output_tokens / elapsed:.1f}", refresh=False)
    except BaseException as exc:
        # Ctrl-C, OOM, a dead server: what was stored stays, and the manifest says how far it got.
        status = f"interrupted: {type(exc).__name__}"
        raise
    finally:
        summary.seconds = time.perf_counter() - t_gen
        summary.manifest = write_manifest(
            out,
            {
                "status": status,
                "started_at": started,
                "finished_at": utc_now(),
                "seconds": round(time.perf_counter() - t0, 3),
                "generation_seconds": round(summary.seconds, 3),
                "task": task,
                "method": method,
                "template": tpl.name,
                "template_file": tpl.source,
                "template_text_hash": tpl.hash(),
                "template_hash": thash,
                "decoding_defaults": dict(decoding),
                "settings": settings,
                "seed": settings.get("seed"),
                "backend": backend.info(),
                "counts": {
                    "items": summary.n_items,
                    "prompts": summary.n_prompts,
                    "already_done": summary.n_done_before,
                    "input_changed": summary.n_changed,
                    "generated": summary.n_generated,
                    "failed": summary.n_failed,
                    "output_tokens": summary.n_output_tokens,
                },
                "errors": summary.errors[:20],
                "python": platform.python_version(),
                "framelab": framelab_version(),
                "argv": list(argv) if argv is not None else list(sys.argv),
            },
        )
    return summary
