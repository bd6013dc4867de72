"""The sentiment study's export tables: ``long`` (one row per label) and ``items`` (per item).

Column meanings are in ``docs/export.md`` ("long for a sentiment-annotation study" and
"items"); :data:`CODEBOOK` repeats them for the codebook export and the Parquet types.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from webapp.definition import TaskBlock
from webapp.export_common import ExportScope, iso_time
from webapp.extensions import db
from webapp.models import Annotation, AnnotationItem, Participant, Study, utcnow

ANNOTATION_LONG_COLUMNS: tuple[str, ...] = (
    "study_slug",
    "participant_id",
    "platform",
    "status",
    "item_id",
    "label",
    "base_sentiment",
    "is_gold",
    "gold_correct",
    "surplus",
    "trial_index",
    "rt_ms",
    "answered_at",
)
ITEM_COLUMNS: tuple[str, ...] = (
    "study_slug",
    "item_id",
    "text",
    "base_sentiment",
    "n_labels",
    "n_surplus",
    "n_reserved",
    "needed",
    "shift_count",
)
_SENT = "positive|negative"
CODEBOOK: dict[str, tuple[str, str, str]] = {
    "item_id": ("str", "item ID from the item CSV", ""),
    "label": ("str", "the participant's label", "positive|negative|neutral"),
    "base_sentiment": ("str", "the item's base sentiment", _SENT),
    "is_gold": ("int", "1 for gold/attention items with a known answer", "0|1"),
    "gold_correct": ("int", "for gold items, 1 if the label matched the known answer", "0|1"),
    "surplus": ("int", "1 if the label arrived after its reservation expired (not counted)", "0|1"),
    "text": ("str", "the text shown", ""),
    "n_labels": ("int", "confirmed (non-surplus) labels", ">= 0"),
    "n_surplus": ("int", "surplus labels (late answers from expired reservations)", ">= 0"),
    "n_reserved": ("int", "open reservations at export time", ">= 0"),
    "needed": ("int", "annotators_per_item - n_labels, never below 0", ">= 0"),
    "shift_count": (
        "int",
        "confirmed labels of the sentiment opposite to base_sentiment (neutral is no shift)",
        ">= 0",
    ),
}


def long_table(
    scope: ExportScope, blocks: list[TaskBlock]
) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per label (the sentiment study's ``long`` export), by participant and
    ``trial_index``; keys :data:`ANNOTATION_LONG_COLUMNS`.

    Reservations without a label are not rows; surplus labels are, with ``surplus = 1``.
    """
    query = (
        select(Annotation, AnnotationItem, Participant)
        .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
        .join(Participant, Participant.id == Annotation.participant_id)
        .where(AnnotationItem.study_id == scope.study.id, Annotation.label.is_not(None))
        .options(selectinload(Participant.identity))
        .order_by(Participant.id, AnnotationItem.block_id, Annotation.trial_index)
    )
    rows = []
    for a, item, p in db.session.execute(scope.where(query)):
        rows.append(
            {
                **scope.who(p),
                "item_id": item.item_id,
                "label": a.label,
                "base_sentiment": item.base_sentiment,
                "is_gold": int(item.is_gold),
                "gold_correct": int(a.label == item.gold_label) if item.is_gold else None,
                "surplus": int(a.surplus),
                "trial_index": a.trial_index,
                "rt_ms": a.rt_ms,
                "answered_at": iso_time(a.answered_at),
            }
        )
    return rows, list(ANNOTATION_LONG_COLUMNS)


def item_rows(study: Study) -> tuple[list[dict[str, Any]], list[str]]:
    """Return one row per (non-gold) item (the ``items`` export) and its columns.

    Counts are those the allocation uses: confirmed labels of real (not test) participants.
    Extra item CSV columns follow as ``item_<column>``.

    Returns
    -------
    rows : list of dict
        Keys :data:`ITEM_COLUMNS` plus ``item_*``.
    columns : list of str
    """
    from webapp.services.slot_report import item_status

    statuses = item_status(study, utcnow())
    extra: list[str] = []
    for st in statuses:
        for key in st.item.extra:
            if f"item_{key}" not in extra:
                extra.append(f"item_{key}")
    rows = []
    for st in statuses:
        it = st.item
        row = {
            "study_slug": study.slug,
            "item_id": it.item_id,
            "text": it.text,
            "base_sentiment": it.base_sentiment,
            "n_labels": st.n_labels,
            "n_surplus": st.n_surplus,
            "n_reserved": st.n_reserved,
            "needed": st.needed,
            "shift_count": st.shift_count,
        }
        row.update({f"item_{k}": v for k, v in it.extra.items()})
        rows.append(row)
    return rows, [*ITEM_COLUMNS, *extra]


def items_table(
    scope: ExportScope, blocks: list[TaskBlock]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``items`` table (:func:`item_rows`); it has no participants to scope."""
    return item_rows(scope.study)
