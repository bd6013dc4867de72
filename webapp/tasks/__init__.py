"""The registry of task types. A study block's ``type`` names one of these.

Each task type is one folder here, like an oTree app (``product_choice/``, ``sentiment/``, ...):
its :class:`~webapp.tasks.base.TaskType` subclass (schema, pages, form, save, bot answer, slots,
export tables and codebook entries) and its ``templates/``. The flow, the bots, the allocation
and the export ask the registered type; none of them names one. What several types share sits
beside them (``base``, ``widgets``, ``evaluation_slots``); a task type never imports another.

Types installed from another package are found through the ``framelab.tasks`` entry-point
group: each entry point names a ``TaskType`` subclass (docs/development.md).
"""

from __future__ import annotations

from webapp.tasks.base import TaskType
from webapp.tasks.preference import PairwisePreferenceTask
from webapp.tasks.product_choice import ProductChoiceTask
from webapp.tasks.questions import AttentionCheckTask, DemographicsTask, QuizTask
from webapp.tasks.rating import SummaryRatingTask
from webapp.tasks.registry import (
    ENTRY_POINT_GROUP,
    bp,
    get_task_type,
    load_installed,
    register,
    task_type_names,
    task_types,
    unregister,
)
from webapp.tasks.sentiment import SentimentAnnotationTask, SentimentQualificationTask
from webapp.tasks.text_pages import ConsentTask, DebriefTask, InstructionsTask

__all__ = [
    "ENTRY_POINT_GROUP",
    "bp",
    "get_task_type",
    "load_installed",
    "register",
    "task_type_names",
    "task_types",
    "unregister",
]

# The order is the order of the types' columns in the wide export (product choice, then
# demographics) and of their extra export formats (items, then pairs).
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
for _cls in _BUILTIN:
    register(_cls())
load_installed()
