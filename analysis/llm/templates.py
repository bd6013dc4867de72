"""Named prompt templates, one registry for every task, each default a file.

A template is data: a name, the task it serves, an optional system message and a user message
with ``{placeholders}``. Every task's default prompts are files under ``analysis/llm/prompts/
TASK/NAME.txt`` (the user message) or ``NAME.json`` (``user``, optional ``system`` and
``shots``), loaded at import; a researcher points a task at their own file (a paper's exact
wording) with :func:`load_template_file` or ``framelab generate TASK --template PATH`` (or
``TASK=PATH``), without code changes. Placeholders are checked against what the task fills in.

A template's hash (its text; in records also the generation settings) is part of every result's
resume key and of the manifest, so editing a prompt can never mix old and new answers in one
file. Mitigation methods' own prompts are files too (``prompts/mitigate/STEP.txt``), loaded
and registered by :mod:`analysis.mitigation.prompts` with the fields each step fills in.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROMPT_DIR = Path(__file__).with_name("prompts")

# What each task fills into its template; the first field of each entry must occur (it carries
# the item), the others may.
TASK_FIELDS: dict[str, tuple[str, ...]] = {
    "summarize": ("text",),
    "judge-framing": ("text",),
    "fact-check": ("text",),
    "reframe": (
        "text",
        "base_sentiment",
        "target_sentiment",
        "frame_position",
        "shot_statement",
        "shot_answer",
    ),
    "perspective-summary": ("text", "perspective"),
    "judge-pair": ("summary_1", "summary_2", "name_1", "name_2", "text"),
    "negate": ("text",),
}


class TemplateError(ValueError):
    """A template file that cannot serve its task; the message names the file and the fix."""


@dataclass(frozen=True)
class PromptTemplate:
    """A named prompt.

    Attributes
    ----------
    name : str
        Unique within its task (``baseline``, ``words-100``, ``wildframe``, …).
    task : str
        The task it serves.
    user : str
        The user message; ``{field}`` placeholders are filled by the task.
    system : str, optional
        A system message, if any.
    shots : dict
        Named one-shot examples the task picks from (``reframe`` picks by sentiment and position).
    decoding : dict
        Decoding defaults of the prompt's paper (``do_sample``, ``temperature``, ``top_p``), e.g.
        the overlap paper's rephrase step samples at temperature 0.7. ``run_task`` applies them
        unless the caller set that setting itself (on the command line: ``--sample/--greedy``,
        ``--temperature``, ``--top-p``). Not part of the text hash; the settings actually used
        are, through the record's ``template_hash``.
    """

    name: str
    task: str
    user: str
    system: str | None = None
    shots: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    decoding: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = field(default=None, compare=False)  # the file it was read from

    def messages(self, **fields: Any) -> tuple[dict[str, str], ...]:
        """Render the chat messages with ``fields`` filled in."""
        msgs = []
        if self.system:
            msgs.append({"role": "system", "content": self.system.format(**fields)})
        msgs.append({"role": "user", "content": self.user.format(**fields)})
        return tuple(msgs)

    def hash(self, settings: Mapping[str, Any] | None = None) -> str:
        """Return the first 16 hex digits of SHA-256 over the template text and the settings."""
        payload = {
            "task": self.task,
            "system": self.system,
            "user": self.user,
            "shots": {k: dict(v) for k, v in sorted(self.shots.items())},
            "settings": dict(settings or {}),
        }
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


_REGISTRY: dict[tuple[str, str], PromptTemplate] = {}


def register(template: PromptTemplate, *, replace: bool = False) -> PromptTemplate:
    """Add a template to the registry (an existing name is an error unless ``replace``)."""
    key = (template.task, template.name)
    if key in _REGISTRY and not replace:
        raise ValueError(f"template {template.name!r} for task {template.task!r} already exists")
    _REGISTRY[key] = template
    return template


def get_template(task: str, name: str) -> PromptTemplate:
    """Return a registered template, with the available names in the error if it is unknown."""
    try:
        return _REGISTRY[(task, name)]
    except KeyError:
        names = sorted(n for t, n in _REGISTRY if t == task)
        raise KeyError(f"no template {name!r} for task {task!r}; available: {names}") from None


def list_templates(task: str | None = None) -> list[PromptTemplate]:
    """Return the registered templates, optionally of one task, sorted by task and name."""
    return [t for (k, _), t in sorted(_REGISTRY.items()) if task is None or k == task]


def placeholders(text: str) -> set[str]:
    """The ``{field}`` names a template text uses (``{{`` and ``}}`` are literal braces)."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def load_template_file(
    path: str | Path,
    task: str,
    name: str | None = None,
    *,
    fields: tuple[str, ...] | None = None,
    required: tuple[str, ...] | None = None,
) -> PromptTemplate:
    """Read a template file for ``task``: ``.txt`` (the user message) or ``.json``.

    A ``.json`` file holds ``user`` and optionally ``system``, ``shots`` and ``decoding`` (the
    paper's decoding defaults: ``do_sample``, ``temperature``, ``top_p``). One trailing newline
    of a ``.txt`` file is not part of the prompt. The name defaults to the file's stem.
    ``fields`` (default: what ``task`` fills in, :data:`TASK_FIELDS`) are the placeholders the
    file may use and ``required`` (default: the first of them) those it must use; a mitigation
    step passes its own (a rewrite pass also fills in ``{draft}`` and ``{critique}``).

    Raises
    ------
    TemplateError
        The file is missing or unreadable, or its placeholders are not what ``task`` fills in
        (an unknown ``{field}``, or the item's own field missing); the message lists them.
    """
    path = Path(path)
    if task not in TASK_FIELDS:
        raise TemplateError(f"unknown task {task!r}; choose one of {sorted(TASK_FIELDS)}")
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"cannot read template file {path}: {exc.strerror}") from None
    system: str | None = None
    shots: dict[str, dict[str, str]] = {}
    decoding: dict[str, Any] = {}
    if path.suffix == ".json":
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TemplateError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(data, dict) or not isinstance(data.get("user"), str):
            raise TemplateError(f'{path}: a JSON template needs a "user" string')
        user, system = data["user"], data.get("system")
        shots = {
            str(k): {str(a): str(b) for a, b in v.items()} for k, v in data.get("shots", {}).items()
        }
        decoding = _check_decoding(path, data.get("decoding", {}))
    else:
        user = raw[:-1] if raw.endswith("\n") else raw
    check_placeholders(user, system, task, name, where=str(path), fields=fields, required=required)
    return PromptTemplate(
        name or path.stem,
        task,
        user,
        system=system,
        shots=shots,
        decoding=decoding,
        source=str(path),
    )


def check_placeholders(
    user: str,
    system: str | None,
    task: str,
    name: str | None = None,
    *,
    where: str,
    fields: tuple[str, ...] | None = None,
    required: tuple[str, ...] | None = None,
) -> None:
    """Refuse a template text whose placeholders are not what its task or step fills in.

    ``where`` names the text in messages (a file, or ``FILE: KEY`` for a prompts file).

    Raises
    ------
    TemplateError
        An empty text, a malformed brace, an unknown ``{field}``, or a required one missing.
    """
    if not user.strip():
        raise TemplateError(f"{where}: the template is empty")
    allowed = TASK_FIELDS[task] if fields is None else fields
    must = allowed[:1] if required is None else required
    try:
        used = placeholders(user) | placeholders(system or "")
    except ValueError as exc:
        raise TemplateError(f"{where}: {exc} (write literal braces as {{{{ and }}}})") from None
    unknown = sorted(used - set(allowed))
    if unknown:
        raise TemplateError(
            f"{where}: placeholder(s) {unknown} are not filled in by {name or task}; it provides "
            f"{', '.join('{' + f + '}' for f in allowed) or 'none'}"
        )
    missing = [f for f in must if f not in used]
    if missing:
        raise TemplateError(
            f"{where}: a {name or task} template must contain "
            f"{', '.join('{' + f + '}' for f in missing)}"
        )


# What a template's "decoding" may set, with the type each value must have.
DECODING_KEYS: dict[str, tuple[type, ...]] = {
    "do_sample": (bool,),
    "temperature": (int, float),
    "top_p": (int, float),
}


def _check_decoding(path: Path, decoding: Any) -> dict[str, Any]:
    if not isinstance(decoding, dict):
        raise TemplateError(f'{path}: "decoding" must be an object, e.g. {{"temperature": 0.7}}')
    for key, value in decoding.items():
        kinds = DECODING_KEYS.get(key)
        if kinds is None:
            raise TemplateError(
                f'{path}: "decoding" may set {", ".join(DECODING_KEYS)}, not {key!r}'
            )
        if isinstance(value, bool) is not (kinds == (bool,)) or not isinstance(value, kinds):
            what = "true or false" if kinds == (bool,) else "a number"
            raise TemplateError(f'{path}: "decoding" {key} must be {what}, not {value!r}')
    return dict(decoding)


def resolve_template(task: str, spec: str | None, default: str) -> PromptTemplate:
    """A template by name, by file path, or by ``TASK=PATH`` (the task must match).

    This is what ``--template`` accepts: a registered name (``words-100``), a path to a ``.txt``
    or ``.json`` file, or ``TASK=PATH`` to say which task the file is for.
    """
    if not spec:
        return get_template(task, default)
    target, sep, value = spec.partition("=")
    if sep and target in TASK_FIELDS:
        if target != task:
            raise TemplateError(f"--template {spec}: this command runs {task}, not {target}")
        spec = value
    if (task, spec) in _REGISTRY:
        return _REGISTRY[(task, spec)]
    if sep or Path(spec).suffix in {".txt", ".json"} or Path(spec).exists():
        return load_template_file(spec, task)
    return get_template(task, spec)


def _load_defaults() -> None:
    # prompts/mitigate/ holds the mitigation steps' prompts: analysis.mitigation.prompts loads
    # them with the fields each step fills in.
    for task_dir in sorted(p for p in PROMPT_DIR.iterdir() if p.name in TASK_FIELDS):
        for path in sorted(task_dir.iterdir()):
            if path.suffix in {".txt", ".json"}:
                register(load_template_file(path, task_dir.name), replace=True)


_load_defaults()
