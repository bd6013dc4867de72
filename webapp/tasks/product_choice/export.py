"""The product-choice study's export: ``long`` (one row per trial) and its ``wide`` columns.

Column meanings are in ``docs/export.md`` ("long", "wide"); :data:`CODEBOOK` repeats them for
the codebook export and the Parquet types.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from webapp.definition import TaskBlock
from webapp.definition_cache import study_definition
from webapp.export_common import ExportScope, column_name, iso_time
from webapp.extensions import db
from webapp.models import ChoiceResponse, Participant, Study

TASK = "product_choice"
LONG_CHOICE_COLUMNS: tuple[str, ...] = (
    "study_slug",
    "participant_id",
    "platform",
    "status",
    "sequence",
    "seed",
    "block",
    "trial_index",
    "pair_id",
    "product_type",
    "format",
    "target_source_record",
    "control_source_record",
    "target_side",
    "chosen_side",
    "chose_target",
    "currency",
    "other_price",
    "wtp_premium",
    "wtp_premium_pct",
    "rt_ms",
    "wtp_rt_ms",
    "server_rt_ms",
    "answered_at",
    "quiz_passed",
    "quiz_attempts",
    "attention_passed",
    "duration_s",
    "finished_at",
)
# Columns ending in ``*`` name a family of wide columns, one per pair (``{}``: its ID).
CODEBOOK: dict[str, tuple[str, str, str]] = {
    "block": ("str", "ID of the product-choice block the trial belongs to", ""),
    "pair_id": ("str", "product pair ID from the stimulus set", ""),
    "product_type": ("str", "product type of the pair", ""),
    "format": (
        "str",
        "how the products were described: one of the block's formats",
        "original|summary|another format name of the study",
    ),
    "target_source_record": (
        "str",
        "generation record ID of the target's text in this format (the pairs file's sources); "
        "empty if not given",
        "",
    ),
    "control_source_record": (
        "str",
        "generation record ID of the control's text in this format; empty if not given",
        "",
    ),
    "target_side": ("str", "side of the target manufacturer", "left|right"),
    "chosen_side": ("str", "side chosen", "left|right"),
    "chose_target": ("int", "1 if the target manufacturer was chosen", "0|1"),
    "currency": (
        "str",
        "ISO 4217 code of the amounts (the study's payment.currency; before it, USD)",
        "USD|GBP|EUR",
    ),
    "other_price": ("float", "price of the product not chosen, in `currency`", ">= 0"),
    "wtp_premium": ("float", "stated premium over the other price, in `currency`", ">= 0"),
    "wtp_premium_pct": ("float", "100 * wtp_premium / other_price", ">= 0"),
    "wtp_rt_ms": ("int", "client-measured time on the WTP page, ms", ">= 0"),
    "server_rt_ms": ("int", "server time between serving the page and the answer, ms", ">= 0"),
    "n_choices": ("int", "choice trials answered", ">= 0"),
    "n_chose_target": ("int", "trials on which the target manufacturer was chosen", ">= 0"),
    "format__*": ("str", "format of pair {}", "original|summary"),
    "chose_target__*": ("int", "1 if the target was chosen in pair {}", "0|1"),
    "wtp_premium_pct__*": ("float", "WTP premium in pair {}, percent of the other price", ">= 0"),
}


def long_table(
    scope: ExportScope, blocks: list[TaskBlock]
) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per trial: the participant-level columns and the trial's (see
    :data:`LONG_CHOICE_COLUMNS`), by participant, then block (in study order) and trial."""
    product_types = {p["id"]: p["product_type"] for b in blocks for p in b.params["pairs"]}
    # Each text's generation record, when the pairs file names it (``sources:``).
    sources = {
        (b.id, p["id"], role): p[role]["sources"]
        for b in blocks
        for p in b.params["pairs"]
        for role in ("target", "control")
        if "sources" in p[role]
    }
    query = (
        select(Participant)
        .where(Participant.study_id == scope.study.id)
        .options(selectinload(Participant.choices), selectinload(Participant.identity))
        .order_by(Participant.id)
    )
    currency = study_definition(scope.study).payment.currency
    rows: list[dict[str, Any]] = []
    for p in db.session.scalars(scope.where(query)):
        base = {**scope.participant(p), "currency": currency}
        rows += [{**base, **_choice_cells(c, product_types, sources)} for c in p.choices]
    return rows, list(LONG_CHOICE_COLUMNS)


def choice_rows(study: Study, **options: bool) -> list[dict[str, Any]]:
    """The ``long`` rows of a product-choice study; ``options`` as :class:`ExportScope`'s."""
    scope = ExportScope(study, **options)
    return long_table(scope, scope.blocks(TASK))[0]


def _choice_cells(
    c: ChoiceResponse,
    product_types: Mapping[str, str],
    sources: Mapping[tuple[str, str, str], Mapping[str, str]],
) -> dict[str, Any]:
    def source(role: str) -> str | None:
        return sources.get((c.block_id, c.pair_id, role), {}).get(c.format)

    return {
        "block": c.block_id,
        "trial_index": c.trial_index,
        "pair_id": c.pair_id,
        "product_type": product_types.get(c.pair_id),
        "format": c.format,
        "target_source_record": source("target"),
        "control_source_record": source("control"),
        "target_side": c.target_side,
        "chosen_side": c.chosen_side,
        "chose_target": int(c.chose_target),
        "other_price": c.other_price_usd,
        "wtp_premium": c.wtp_premium_usd,
        "wtp_premium_pct": c.wtp_premium_pct,
        "rt_ms": c.rt_ms,
        "wtp_rt_ms": c.wtp_rt_ms,
        "server_rt_ms": c.server_rt_ms,
        "answered_at": iso_time(c.answered_at),
    }


def wide(
    scope: ExportScope, blocks: list[TaskBlock]
) -> tuple[list[str], Callable[[Participant], dict[str, Any]]]:
    """The choice counts (in every study's wide table, 0 without choices) and, per pair in
    study order, ``format__PAIR``, ``chose_target__PAIR`` and ``wtp_premium_pct__PAIR``."""
    columns = ["n_choices", "n_chose_target"]
    for pair in (p["id"] for b in blocks for p in b.params["pairs"]):
        name = column_name(pair)
        columns += [f"format__{name}", f"chose_target__{name}", f"wtp_premium_pct__{name}"]
    by_participant: dict[int, list[ChoiceResponse]] = defaultdict(list)
    query = (
        select(ChoiceResponse)
        .join(Participant, Participant.id == ChoiceResponse.participant_id)
        .where(Participant.study_id == scope.study.id)
        .order_by(ChoiceResponse.id)
    )
    for c in db.session.scalars(scope.where(query)):
        by_participant[c.participant_id].append(c)

    def cells(p: Participant) -> dict[str, Any]:
        choices = by_participant.get(p.id, [])
        row: dict[str, Any] = {
            "n_choices": len(choices),
            "n_chose_target": sum(int(c.chose_target) for c in choices),
        }
        for c in choices:
            name = column_name(c.pair_id)
            row[f"format__{name}"] = c.format
            row[f"chose_target__{name}"] = int(c.chose_target)
            row[f"wtp_premium_pct__{name}"] = c.wtp_premium_pct
        return row

    return columns, cells
