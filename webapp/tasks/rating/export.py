"""Export table of the ``summary_rating`` task type: ``long``, one row per rating (summary x
dimension).

Column meanings are in ``docs/export.md`` ("long for a summary-rating study"); :data:`CODEBOOK`
repeats them for the codebook export and the Parquet types.
"""

from __future__ import annotations

from typing import Any

from webapp.definition import TaskBlock
from webapp.export_common import ExportScope
from webapp.tasks import evaluation_slots as slots
from webapp.tasks.evaluation_slots import answer_cells

RATING_LONG_COLUMNS: tuple[str, ...] = (
    "study_slug",
    "participant_id",
    "platform",
    "status",
    "item_id",
    "summary_id",
    "system",
    "perspective",
    "dimension",
    "rating",
    "scale_min",
    "scale_max",
    "position",
    "trial_index",
    "surplus",
    "rt_ms",
    "answered_at",
)
CODEBOOK: dict[str, tuple[str, str, str]] = {
    "summary_id": ("str", "ID of the rated summary (source and system)", ""),
    "system": ("str", "system that wrote the summary (never shown to participants)", ""),
    "perspective": ("str", "perspective the summaries are of; empty if none", ""),
    "dimension": ("str", "rated dimension (e.g. stance, object, intensity)", ""),
    "rating": ("int", "the rating given", "scale_min..scale_max"),
    "scale_min": ("int", "lowest point of the rating scale", ""),
    "scale_max": ("int", "highest point of the rating scale", ""),
    "position": ("int", "0-based position of the summary on the page", ">= 0"),
}


def rating_rows(scope: ExportScope, block: TaskBlock) -> list[dict[str, Any]]:
    """One row per (rater, summary, dimension) of a ``summary_rating`` block.

    Parameters
    ----------
    scope : ExportScope
    block : dict
        The normalised block.

    Returns
    -------
    list of dict
        Keys :data:`RATING_LONG_COLUMNS` (plus platform ID columns on request), ordered by
        participant, page, position on the page and dimension.
    """
    items = {it["item_id"]: it for it in block.params["items"]}
    scale = block.params["scale"]
    rows = []
    found = slots.answered_rows(scope, block.id)
    for a, item_row, p, response in found:
        item = items.get(item_row.item_id)
        payload = response.payload
        if item is None or "ratings" not in payload:
            continue
        summaries = {s["summary_id"]: s for s in item["summaries"]}
        for position, summary_id in enumerate(payload["order"]):
            summary = summaries.get(summary_id, {"system": None})
            for dim in block.params["dimensions"]:
                row = {
                    **answer_cells(scope, a, p),
                    "item_id": item["item_id"],
                    "summary_id": summary_id,
                    "system": summary["system"],
                    "perspective": item["perspective"] or None,
                    "dimension": dim["id"],
                    "rating": payload["ratings"][summary_id][dim["id"]],
                    "scale_min": scale["min"],
                    "scale_max": scale["max"],
                    "position": position,
                }
                rows.append(row)
    return rows


def long_table(
    scope: ExportScope, blocks: list[TaskBlock]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The rating rows of every rating block (:func:`rating_rows`)."""
    return [r for b in blocks for r in rating_rows(scope, b)], list(RATING_LONG_COLUMNS)
