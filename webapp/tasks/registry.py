"""The registry of task types: what a block's ``type`` names, and where its templates are.

:mod:`webapp.tasks` registers the built-in types and the installed ones when it is imported
(importing this module imports it first); modules that task types import (the allocation, the
design) look types up here, so no task type depends on another through the registry's imports.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from flask import Blueprint
from jinja2 import BaseLoader, FileSystemLoader, PrefixLoader

from webapp.tasks.base import TaskType

ENTRY_POINT_GROUP = "framelab.tasks"

_REGISTRY: dict[str, TaskType] = {}
# Each type's templates under its name; the loader reads this dict at every lookup, so a type
# registered after the app was created renders too.
_TEMPLATES: dict[str, BaseLoader] = {}

# Serves the task types' templates; task pages are routed by the participant blueprint.
bp = Blueprint("tasks", __name__)
bp.jinja_loader = PrefixLoader(_TEMPLATES)


def register(task_type: TaskType) -> None:
    """Add a task type: its name for study blocks, its folder's ``templates/`` for its pages.

    Raises
    ------
    ValueError
        The name is taken by another type (registering the same class again does nothing).
    """
    known = _REGISTRY.get(task_type.name)
    if known is not None and type(known) is not type(task_type):
        raise ValueError(
            f"task type {task_type.name!r} is already registered ({type(known).__module__}."
            f"{type(known).__qualname__}); choose another name"
        )
    _REGISTRY[task_type.name] = task_type
    _TEMPLATES[task_type.name] = FileSystemLoader(task_type.folder() / "templates")


def unregister(name: str) -> None:
    """Remove a task type (for tests that register throwaway ones)."""
    _REGISTRY.pop(name, None)
    _TEMPLATES.pop(name, None)


def load_installed() -> list[str]:
    """Register the task types that installed packages name in the ``framelab.tasks``
    entry-point group; return their names.

    Each entry point loads a :class:`~webapp.tasks.base.TaskType` subclass; anything else
    is refused naming the entry point.
    """
    names = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, TaskType)):
            raise TypeError(f"entry point {ep.name} = {ep.value}: not a TaskType subclass")
        register(cls())
        names.append(cls.name)
    return names


def get_task_type(name: str) -> TaskType | None:
    """Return the task type called ``name`` or ``None``."""
    return _REGISTRY.get(name)


def task_types() -> list[TaskType]:
    """The registered task types, built-in ones first, in registration order."""
    return list(_REGISTRY.values())


def task_type_names() -> list[str]:
    """Return the registered task type names, sorted."""
    return sorted(_REGISTRY)
