"""Export tables of the ``summary_rating`` and ``pairwise_preference`` task types.

``long`` is one row per rating (summary x dimension) or per preference verdict; ``pairs`` is one
row per pair with both summaries and the order counts. Column meanings are in
``docs/export.md`` ("long for a summary-rating study", "long for a pairwise-preference study",
"pairs"); :data:`CODEBOOK` repeats them for the codebook export and the Parquet types.
"""

from __future__ import annotations

from typing import Any

from webapp.export_common import PLATFORM_ID_COLUMNS, TEST_COLUMN, iso_time
from webapp.models import Annotation, AnnotationState, Study
from webapp.tasks import evaluation_slots as slots

RATING_TASK = "summary_rating"
PREFERENCE_TASK = "pairwise_preference"
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
    "summary_id": ("str", "ID of the rated summary (source and system)", ""),
    "system": ("str", "system that wrote the summary (never shown to participants)", ""),
    "perspective": ("str", "perspective the summaries are of; empty if none", ""),
    "dimension": ("str", "rated dimension (e.g. stance, object, intensity)", ""),
    "rating": ("int", "the rating given", "scale_min..scale_max"),
    "scale_min": ("int", "lowest point of the rating scale", ""),
    "scale_max": ("int", "highest point of the rating scale", ""),
    "position": ("int", "0-based position of the summary on the page", ">= 0"),
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


def evaluation_blocks(study: Study) -> list[dict[str, Any]]:
    """The study's rating and preference blocks, in order."""
    tasks = study.definition["tasks"]
    return [b for b in tasks if b["type"] in (RATING_TASK, PREFERENCE_TASK)]


def _base(study: Study, a: Annotation, p: Any) -> dict[str, Any]:
    return {
        "study_slug": study.slug,
        "participant_id": p.code,
        "platform": p.platform.value,
        "status": p.status.value,
        "trial_index": a.trial_index,
        "surplus": int(a.surplus),
        "rt_ms": a.rt_ms,
        "answered_at": iso_time(a.answered_at),
        "is_test": int(p.is_test),
    }


def _platform_ids(row: dict[str, Any], p: Any) -> None:
    ident = p.identity
    row["platform_participant_id"] = ident.external_id if ident else None
    row["platform_study_id"] = ident.external_study_id if ident else None
    row["platform_session_id"] = ident.external_session_id if ident else None


def rating_rows(study: Study, block: dict[str, Any], **scope: bool) -> list[dict[str, Any]]:
    """One row per (rater, summary, dimension) of a ``summary_rating`` block.

    Parameters
    ----------
    study : Study
    block : dict
        The normalised block.
    **scope : bool
        ``include_test``, ``include_excluded``, ``include_platform_ids``.

    Returns
    -------
    list of dict
        Keys :data:`RATING_LONG_COLUMNS` (plus platform ID columns on request), ordered by
        participant, page, position on the page and dimension.
    """
    items = {it["item_id"]: it for it in block["items"]}
    scale = block["scale"]
    rows = []
    found = slots.answered_rows(
        study,
        block["id"],
        scope.get("include_test", False),
        scope.get("include_excluded", False),
    )
    for a, item_row, p, response in found:
        item = items.get(item_row.item_id)
        payload = response.payload
        if item is None or "ratings" not in payload:
            continue
        summaries = {s["summary_id"]: s for s in item["summaries"]}
        for position, summary_id in enumerate(payload["order"]):
            summary = summaries.get(summary_id, {"system": None})
            for dim in block["dimensions"]:
                row = {
                    **_base(study, a, p),
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
                if scope.get("include_platform_ids"):
                    _platform_ids(row, p)
                rows.append(row)
    return rows


def preference_rows(study: Study, block: dict[str, Any], **scope: bool) -> list[dict[str, Any]]:
    """One row per verdict of a ``pairwise_preference`` block.

    Returns
    -------
    list of dict
        Keys :data:`PREFERENCE_LONG_COLUMNS` (plus platform ID columns on request).
    """
    pairs = {it["item_id"]: it for it in block["items"]}
    rows = []
    found = slots.answered_rows(
        study,
        block["id"],
        scope.get("include_test", False),
        scope.get("include_excluded", False),
    )
    for a, item_row, p, response in found:
        pair = pairs.get(item_row.item_id)
        payload = response.payload
        if pair is None or "chosen" not in payload:
            continue
        first, second = ("a", "b") if payload["order"] == "a_first" else ("b", "a")
        row = {
            **_base(study, a, p),
            "pair_id": pair["item_id"],
            "source_id": pair["source_id"],
            "system_first": pair[first]["system"],
            "system_second": pair[second]["system"],
            "chosen_system": pair[payload["chosen"]]["system"],
            "chose_first": int(payload["chosen"] == first),
            "order": payload["order"],
            "reason": payload.get("reason") or None,
        }
        if scope.get("include_platform_ids"):
            _platform_ids(row, p)
        rows.append(row)
    return rows


def pair_rows(study: Study, block: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per pair of a ``pairwise_preference`` block, with texts and order counts.

    Counts are of confirmed verdicts by real (not test) participants (what the allocation counts).
    """
    counts: dict[str, dict[str, int]] = {
        it["item_id"]: {"a_first": 0, "b_first": 0} for it in block["items"]
    }
    rows = slots.answered_rows(study, block["id"], False, True)
    for a, item_row, _p, response in rows:
        order = response.payload.get("order")
        if a.state is AnnotationState.confirmed and item_row.item_id in counts and order:
            counts[item_row.item_id][order] += 1
    out = []
    for it in block["items"]:
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


def evaluation_table(
    study: Study,
    fmt: str,
    *,
    include_platform_ids: bool = False,
    include_test: bool = False,
    include_excluded: bool = False,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows and columns of the ``long`` or ``pairs`` table of a rating or preference study.

    Raises
    ------
    ValueError
        ``pairs`` asked of a study without a preference block.
    """
    blocks = evaluation_blocks(study)
    scope = {
        "include_platform_ids": include_platform_ids,
        "include_test": include_test,
        "include_excluded": include_excluded,
    }
    preference = [b for b in blocks if b["type"] == PREFERENCE_TASK]
    if fmt == "pairs":
        if not preference:
            raise ValueError("the pairs export is for studies with a pairwise_preference block")
        return [r for b in preference for r in pair_rows(study, b)], list(PAIRS_COLUMNS)
    extra = list(PLATFORM_ID_COLUMNS) if include_platform_ids else []
    extra += [TEST_COLUMN] if include_test else []
    # One long table per study kind: a rating block makes it a rating study.
    if any(b["type"] == RATING_TASK for b in blocks):
        rows = [
            r for b in blocks if b["type"] == RATING_TASK for r in rating_rows(study, b, **scope)
        ]
        return rows, [*RATING_LONG_COLUMNS, *extra]
    rows = [r for b in preference for r in preference_rows(study, b, **scope)]
    return rows, [*PREFERENCE_LONG_COLUMNS, *extra]
