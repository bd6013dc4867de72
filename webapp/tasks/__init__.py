"""The registry of task types. A study block's ``type`` names one of these.

Each task type is one package here (``product_choice/``, ``rating/`` with its ``export``,
``sentiment/`` with its ``items`` and ``export``, ...). To add one (e.g. ``sentiment_annotation``):
write a package whose ``__init__`` holds a :class:`~webapp.tasks.base.TaskType` subclass (schema
in ``validate``, form in ``build_form``, template name, storage in ``save``), add its template
under ``templates/tasks/``, and list the class in ``_BUILTIN`` below. What several task types
share sits beside them (``base``, ``widgets``, ``evaluation_slots``); a task type never imports
another one.
"""

from __future__ import annotations

from flask import Blueprint

from webapp.tasks.base import TaskType
from webapp.tasks.preference import PairwisePreferenceTask
from webapp.tasks.product_choice import ProductChoiceTask
from webapp.tasks.questions import AttentionCheckTask, DemographicsTask, QuizTask
from webapp.tasks.rating import SummaryRatingTask
from webapp.tasks.sentiment import SentimentAnnotationTask, SentimentQualificationTask
from webapp.tasks.text_pages import ConsentTask, DebriefTask, InstructionsTask

# Only serves the task templates; task pages are routed by the participant blueprint.
bp = Blueprint("tasks", __name__, template_folder="templates")

_BUILTIN: tuple[type[TaskType], ...] = (
    ConsentTask,
    InstructionsTask,
    QuizTask,
    ProductChoiceTask,
    AttentionCheckTask,
    DemographicsTask,
    SentimentQualificationTask,
    SentimentAnnotationTask,
    SummaryRatingTask,
    PairwisePreferenceTask,
    DebriefTask,
)
_REGISTRY: dict[str, TaskType] = {cls.name: cls() for cls in _BUILTIN}


def register(task_type: TaskType) -> None:
    """Add a task type (used by extensions and tests)."""
    _REGISTRY[task_type.name] = task_type


def get_task_type(name: str) -> TaskType | None:
    """Return the task type called ``name`` or ``None``."""
    return _REGISTRY.get(name)


def task_type_names() -> list[str]:
    """Return the registered task type names, sorted."""
    return sorted(_REGISTRY)
