"""A researcher's own prompts for every task and mitigation method from one file.

``--prompts FILE`` (YAML or JSON) maps names to prompt texts, so a paper's exact wording can be
run without code changes::

    summarize: "Give the gist of this text: {text}"          # a generate task's prompt
    cot: "… {text} … FINAL_SUMMARY:"                         # a mitigation step
    prompt-calibration: "… {text}"                           # a method with one prompt
    cognitive-counterfactual:                                # a method with several prompts
      ccs-draft: "… {text} … DRAFT_SUMMARY: … DEVIATIONS: …"
      ccs-rewrite: "… {text} … {draft} … {counterfactuals} … FINAL_SUMMARY:"
    self-help-debias:
      self-help-rewrite: "… {draft} … FINAL_SUMMARY:"        # the draft only, as 000 A.8
    attention-sort: "CONTEXT: {segments} … FINAL_SUMMARY:"   # numbered "Segment N:" lines
    mirostat: "Summarize briefly: {text}"                    # that method's own summarize prompt
    self-debias:
      summarize: "Summarize: {text}"
      debias-prefix: "A summary that ignores the middle:"

A key is a generate task (``summarize``, ``fact-check``, ``judge-framing``, ``reframe``,
``perspective-summary``, ``judge-pair``, ``negate``: that task's prompt, and for ``summarize``
and ``fact-check`` the baseline every method built on it uses), a step of
:data:`analysis.mitigation.prompts.STEPS`, or one of the 18 methods. A method's value is a text
when the method has one prompt of its own (its step, or for the decoding methods without a step
the summarisation prompt they decode), else a mapping of its prompts. A value is the user message
or a mapping with ``user`` and optionally ``system``. Every text is checked against what its
task or step fills in; an unknown name is refused with the list of names. The templates keep
the names of the defaults they replace, and their source (``FILE#KEY``) and text enter the
manifest and the resume key as a ``--template`` file's do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from analysis.llm.templates import (
    TASK_FIELDS,
    PromptTemplate,
    TemplateError,
    check_placeholders,
    get_template,
)
from analysis.mitigation.prompts import STEPS
from analysis.mitigation.registry import METHODS

__all__ = ["METHOD_SCOPE", "load_prompts", "method_prompts", "scoped"]

# A method-specific copy of a task's prompt is stored as "TASK@METHOD".
METHOD_SCOPE = "@"


def method_prompts(method: str) -> list[str]:
    """The prompts of a method a prompts file may replace: its steps, and ``summarize`` for the
    decoding methods (they decode the baseline summarisation prompt)."""
    own = [name for name, step in STEPS.items() if method in step.methods]
    if METHODS[method].family == "decoding":
        own.append("summarize")
    return own


def _text_of(value: Any, where: str) -> tuple[str, str | None]:
    if isinstance(value, str):
        return value, None
    if isinstance(value, Mapping) and isinstance(value.get("user"), str):
        unknown = sorted(set(value) - {"user", "system"})
        if unknown:
            raise TemplateError(f"{where}: a prompt has 'user' and 'system', not {unknown}")
        system = value.get("system")
        if system is not None and not isinstance(system, str):
            raise TemplateError(f"{where}: 'system' must be a text")
        return value["user"], system
    raise TemplateError(f"{where}: expected a prompt text (or 'user'/'system'), got {value!r}")


def _task_template(task: str, value: Any, where: str) -> PromptTemplate:
    from analysis.llm.tasks import TASKS

    user, system = _text_of(value, where)
    check_placeholders(user, system, task, where=where)
    name = TASKS[task].default_template
    return PromptTemplate(name, task, user, system=system, source=where)


def _step_template(step: str, value: Any, where: str) -> PromptTemplate:
    spec = STEPS[step]
    user, system = _text_of(value, where)
    check_placeholders(
        user, system, spec.task, f"mitigate-{step}", where=where, fields=spec.fields,
        required=spec.required,
    )  # fmt: skip
    default = get_template(spec.task, f"mitigate-{step}")
    own = PromptTemplate(default.name, spec.task, user, system=system, source=where)
    return spec.check(own, where)


def _names() -> str:
    return (
        f"tasks {', '.join(sorted(TASK_FIELDS))}; steps {', '.join(sorted(STEPS))}; "
        f"methods {', '.join(sorted(METHODS))}"
    )


def load_prompts(path: str | Path) -> dict[str, PromptTemplate]:
    """Read a prompts file into ``{key: PromptTemplate}`` for ``templates=`` of the runners.

    Keys of the result are task names, step names and ``summarize@METHOD`` (a decoding
    method's own summarisation prompt; :func:`scoped` turns it into that method's
    ``summarize``).

    Raises
    ------
    TemplateError
        The file cannot be read or parsed, names something unknown, gives a method a text where
        it has several prompts, or a text whose placeholders do not fit; the message names the
        file and the key.
    """
    import analysis.llm.tasks  # noqa: F401  (registers the task templates)

    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"cannot read prompts file {path}: {exc.strerror}") from None
    try:
        if path.suffix == ".json":
            data = json.loads(raw)
        else:
            import yaml

            data = yaml.safe_load(raw)
    except (json.JSONDecodeError, ValueError) as exc:
        raise TemplateError(f"{path}: cannot be parsed ({exc})") from None
    if not isinstance(data, Mapping) or not data:
        raise TemplateError(f"{path}: expected a mapping of names to prompts")
    out: dict[str, PromptTemplate] = {}
    for key, value in data.items():
        key = str(key)
        where = f"{path}#{key}"
        if key in TASK_FIELDS:
            out[key] = _task_template(key, value, where)
        elif key in STEPS:
            out[key] = _step_template(key, value, where)
        elif key in METHODS:
            out.update(_method_templates(key, value, path))
        else:
            raise TemplateError(f"{where}: unknown name {key!r}; the file may name {_names()}")
    return out


def _method_templates(method: str, value: Any, path: Path) -> dict[str, PromptTemplate]:
    own = method_prompts(method)
    where = f"{path}#{method}"
    if isinstance(value, str) or (isinstance(value, Mapping) and "user" in value):
        if len(own) != 1:
            raise TemplateError(
                f"{where}: {method} has several prompts; give a mapping of {', '.join(own)}"
            )
        value = {own[0]: value}
    if not isinstance(value, Mapping):
        raise TemplateError(f"{where}: expected a prompt text or a mapping of {', '.join(own)}")
    out = {}
    for part, text in value.items():
        part = str(part)
        if part not in own:
            raise TemplateError(
                f"{where}: {part!r} is not a prompt of {method}; it has {', '.join(own)}"
            )
        if part == "summarize":
            out[f"summarize{METHOD_SCOPE}{method}"] = _task_template(
                "summarize", text, f"{where}.{part}"
            )
        else:
            out[part] = _step_template(part, text, f"{where}.{part}")
    return out


def scoped(
    method: str, templates: Mapping[str, PromptTemplate] | None
) -> dict[str, PromptTemplate]:
    """The replacements one method sees: method-specific copies win over the shared ones."""
    out = {k: v for k, v in (templates or {}).items() if METHOD_SCOPE not in k}
    suffix = f"{METHOD_SCOPE}{method}"
    for key, tpl in (templates or {}).items():
        if key.endswith(suffix):
            out[key[: -len(suffix)]] = tpl
    return out
