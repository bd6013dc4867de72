"""Export tables of the ``pairwise_preference`` task type: ``long`` (one row per verdict) and
``pairs`` (one row per pair with both summaries and the order counts).

Column meanings are in ``docs/export.md`` ("long for a pairwise-preference study", "pairs");
:data:`CODEBOOK` repeats them for the codebook export and the Parquet types.
"""

from __future__ import annotations

from typing import Any

from webapp.definition import TaskBlock
from webapp.export_common import ExportScope
from webapp.models import AnnotationState, Study
from webapp.tasks import evaluation_slots as slots
from webapp.tasks.evaluation_slots import answer_cells

PREFERENCE_LONG_COLUMNS: tuple[str, ...] = (
    "study_slug",
    "participant_id",
    "platform",
    "status",
    "pair_id",
    "source_id",
    "system_first",
    "system_second",
    "chosen_system",
    "chose_first",
    "order",
    "reason",
    "trial_index",
    "surplus",
    "rt_ms",
    "answered_at",
)
PAIRS_COLUMNS: tuple[str, ...] = (
    "study_slug",
    "pair_id",
    "source_id",
    "system_a",
    "system_b",
    "summary_a",
    "summary_b",
    "n_judgments",
    "n_a_first",
    "n_b_first",
)
CODEBOOK: dict[str, tuple[str, str, str]] = {
    "source_id": ("str", "ID of the source text both summaries summarise", ""),
    "system_first": ("str", "system of the summary shown first (top/left)", ""),
    "system_second": ("str", "system of the summary shown second", ""),
    "chosen_system": ("str", "system of the summary chosen as better", ""),
    "chose_first": ("int", "1 if the summary shown first was chosen", "0|1"),
    "order": ("str", "which stimulus-set side was shown first", "a_first|b_first"),
    "reason": ("str", "the participant's optional reason (free text)", ""),
    "system_a": ("str", "system of summary a in the stimulus set", ""),
    "system_b": ("str", "system of summary b in the stimulus set", ""),
    "summary_a": ("str", "text of summary a", ""),
    "summary_b": ("str", "text of summary b", ""),
    "n_judgments": ("int", "confirmed (non-surplus) verdicts on the pair", ">= 0"),
    "n_a_first": ("int", "confirmed verdicts with summary a shown first", ">= 0"),
    "n_b_first": ("int", "confirmed verdicts with summary b shown first", ">= 0"),
}


def preference_rows(scope: ExportScope, block: TaskBlock) -> list[dict[str, Any]]:
    """One row per verdict of a ``pairwise_preference`` block.

    Returns
    -------
    list of dict
        Keys :data:`PREFERENCE_LONG_COLUMNS` (plus platform ID columns on request).
    """
    pairs = {it["item_id"]: it for it in block.params["items"]}
    rows = []
    found = slots.answered_rows(scope, block.id)
    for a, item_row, p, response in found:
        pair = pairs.get(item_row.item_id)
        payload = response.payload
        if pair is None or "chosen" not in payload:
            continue
        first, second = ("a", "b") if payload["order"] == "a_first" else ("b", "a")
        row = {
            **answer_cells(scope, a, p),
            "pair_id": pair["item_id"],
            "source_id": pair["source_id"],
            "system_first": pair[first]["system"],
            "system_second": pair[second]["system"],
            "chosen_system": pair[payload["chosen"]]["system"],
            "chose_first": int(payload["chosen"] == first),
            "order": payload["order"],
            "reason": payload.get("reason") or None,
        }
        rows.append(row)
    return rows


def pair_rows(study: Study, block: TaskBlock) -> list[dict[str, Any]]:
    """One row per pair of a ``pairwise_preference`` block, with texts and order counts.

    Counts are of confirmed verdicts by real (not test) participants (what the allocation counts).
    """
    counts: dict[str, dict[str, int]] = {
        it["item_id"]: {"a_first": 0, "b_first": 0} for it in block.params["items"]
    }
    # Real participants, excluded ones too: what the allocation counts.
    rows = slots.answered_rows(ExportScope(study, include_excluded=True), block.id)
    for a, item_row, _p, response in rows:
        order = response.payload.get("order")
        if a.state is AnnotationState.confirmed and item_row.item_id in counts and order:
            counts[item_row.item_id][order] += 1
    out = []
    for it in block.params["items"]:
        c = counts[it["item_id"]]
        out.append(
            {
                "study_slug": study.slug,
                "pair_id": it["item_id"],
                "source_id": it["source_id"],
                "system_a": it["a"]["system"],
                "system_b": it["b"]["system"],
                "summary_a": it["a"]["text"],
                "summary_b": it["b"]["text"],
                "n_judgments": c["a_first"] + c["b_first"],
                "n_a_first": c["a_first"],
                "n_b_first": c["b_first"],
            }
        )
    return out


def long_table(
    scope: ExportScope, blocks: list[TaskBlock]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The verdicts of every preference block (:func:`preference_rows`)."""
    return [r for b in blocks for r in preference_rows(scope, b)], list(PREFERENCE_LONG_COLUMNS)


def pairs_table(
    scope: ExportScope, blocks: list[TaskBlock]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The pairs of every preference block (:func:`pair_rows`)."""
    return [r for b in blocks for r in pair_rows(scope.study, b)], list(PAIRS_COLUMNS)
