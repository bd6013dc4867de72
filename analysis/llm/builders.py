"""Stimulus-set builders: turn generated text into what the participant platform loads.

* :func:`build_product_pairs` — reviews with summaries and framing labels of both become a
  product-pair file and a study YAML in the format of
  ``stimuli/studies/product_pairs/demo.yaml`` and ``stimuli/studies/product-choice-demo.yaml``
  (checked by ``framelab study load``).
* :func:`build_annotation_items` — base statements and their reframings become the item CSV of a
  ``sentiment_annotation`` study (``item_id, text, base_sentiment`` plus extra columns).

The platform rejects unknown keys in a pairs file, so provenance (which review, which labels,
which model) goes into a JSON file beside it, not into the YAML.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.llm.tasks import get_field

FRAMINGS = {"positive", "negative", "neutral"}
# A product-choice block needs at least two pairs (the platform's pairs file refuses fewer:
# each participant reads some pairs as reviews and some as summaries).
MIN_PAIRS = 2


class BuildError(ValueError):
    """The inputs cannot make a stimulus set; the message says what is missing."""


def slugify(text: str) -> str:
    """Lower-case ASCII id from free text: ``"Wireless Headphones"`` -> ``wireless-headphones``."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:64] or "item"


# --- joining generation outputs into one row per review ---


def join_generations(
    summaries: Iterable[Mapping[str, Any]],
    source_judgments: Iterable[Mapping[str, Any]],
    summary_judgments: Iterable[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Join summarize and judge-framing outputs by item ID into one row per review.

    Parameters
    ----------
    summaries : iterable of mapping
        ``summarize`` records; their ``input`` holds the review and product fields.
    source_judgments : iterable of mapping
        ``judge-framing`` records on the reviews (``--text-field text``).
    summary_judgments : iterable of mapping
        ``judge-framing`` records on the summaries (``--text-field output``).

    Returns
    -------
    list of dict
        The review's input fields plus ``review``, ``summary``, ``review_framing``,
        ``summary_framing`` and ``model``. Reviews without both judgments are left out.
    """
    src = {str(r["item_id"]): r.get("label") for r in source_judgments}
    summ = {str(r["item_id"]): r.get("label") for r in summary_judgments}
    rows = []
    for rec in summaries:
        item_id = str(rec["item_id"])
        if item_id not in src or item_id not in summ:
            continue
        rows.append(
            {
                **dict(rec.get("input") or {}),
                "item_id": item_id,
                "review": get_field(rec, "input.text"),
                "summary": rec["output"],
                "review_framing": src[item_id],
                "summary_framing": summ[item_id],
                "model": rec.get("model"),
            }
        )
    return rows


# --- product pairs ---


@dataclass
class PairSet:
    """What :func:`build_product_pairs` wrote and why product types were skipped."""

    pairs: list[dict[str, Any]]
    provenance: list[dict[str, Any]]
    skipped: dict[str, str] = field(default_factory=dict)
    pairs_path: Path | None = None
    study_path: Path | None = None
    provenance_path: Path | None = None


def _price(row: Mapping[str, Any]) -> float | None:
    for key in ("price_usd", "price"):
        value = row.get(key)
        if value in (None, ""):
            continue
        try:
            price = float(str(value).replace("$", "").replace(",", ""))
        except ValueError:
            continue
        if math.isfinite(price) and price > 0:
            return round(price, 2)
    return None


def framing_label(value: Any) -> str:
    """A framing judgment as one of :data:`FRAMINGS`, ``other`` when it is none of them."""
    label = str(value or "").strip().lower()
    return label if label in FRAMINGS else "other"


def study_pairs(
    rows: Iterable[Mapping[str, Any]],
    *,
    target_from: Sequence[str] = ("negative", "neutral"),
    n_pairs: int | None = None,
) -> PairSet:
    """:func:`select_pairs`, refusing fewer pairs than a study can load (:data:`MIN_PAIRS`).

    Raises
    ------
    BuildError
        ``n_pairs`` below :data:`MIN_PAIRS`, or too few product types with both a target and a
        control; the message gives each skipped type's reason. Nothing is written.
    """
    if n_pairs is not None and n_pairs < MIN_PAIRS:
        raise BuildError(
            f"--n-pairs {n_pairs}: a product-choice study needs at least {MIN_PAIRS} pairs "
            "(`framelab study load` refuses fewer)"
        )
    result = select_pairs(rows, target_from=target_from, n_pairs=n_pairs)
    if len(result.pairs) < MIN_PAIRS:
        reasons = "; ".join(f"{k}: {v}" for k, v in result.skipped.items()) or "no rows"
        found = (
            "no product type has both a target and a control"
            if not result.pairs
            else f"only {len(result.pairs)} product type has both a target and a control, and "
            f"a product-choice study needs at least {MIN_PAIRS} pairs (`framelab study load` "
            "refuses fewer); nothing was written"
        )
        raise BuildError(f"{found} ({reasons})")
    return result


def select_pairs(
    rows: Iterable[Mapping[str, Any]],
    *,
    target_from: Sequence[str] = ("negative", "neutral"),
    n_pairs: int | None = None,
) -> PairSet:
    """Pick per product type a target whose framing shifts to positive and a neutral control.

    The target's review is framed negative or neutral (``target_from``) and its summary positive;
    the control's review and summary are both neutral. Target and control must come from
    different manufacturers and have prices; among the candidates the pair with the closest
    prices is taken (so price does not drive the choice), ties broken by item ID.

    Parameters
    ----------
    rows : iterable of mapping
        One row per review: ``item_id, product_type, manufacturer`` (or ``store``),
        ``price_usd`` (or ``price``), ``review, summary, review_framing, summary_framing``.
    target_from : sequence of str
        Review framings a target may start from.
    n_pairs : int, optional
        Keep the first ``n_pairs`` product types (alphabetically).

    Returns
    -------
    PairSet
        ``pairs`` in the platform's format, ``provenance`` per pair and ``skipped`` reasons.
    """
    by_type: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        missing = [k for k in ("item_id", "product_type", "review", "summary") if not row.get(k)]
        if missing:
            raise BuildError(f"row {row.get('item_id')!r} lacks {missing}")
        by_type[str(row["product_type"])].append(row)
    result = PairSet([], [])
    for product_type in sorted(by_type):
        cands = by_type[product_type]
        priced = [r for r in cands if _price(r) is not None and _maker(r)]
        targets = [
            r
            for r in priced
            if framing_label(r.get("review_framing")) in target_from
            and framing_label(r.get("summary_framing")) == "positive"
        ]
        controls = [
            r
            for r in priced
            if framing_label(r.get("review_framing")) == "neutral"
            and framing_label(r.get("summary_framing")) == "neutral"
        ]
        options = [
            (abs(_price(t) - _price(c)), str(t["item_id"]), str(c["item_id"]), t, c)  # type: ignore[operator]
            for t in targets
            for c in controls
            if _maker(t) != _maker(c)
        ]
        if not options:
            result.skipped[product_type] = (
                f"{len(cands)} reviews, {len(priced)} with price and manufacturer, "
                f"{len(targets)} shift to positive, {len(controls)} stay neutral, "
                "no target/control of different manufacturers"
            )
            continue
        _, _, _, target, control = min(options, key=lambda o: o[:3])
        pair_id = slugify(product_type)
        result.pairs.append(
            {
                "id": pair_id,
                "product_type": product_type,
                "target": _product(target),
                "control": _product(control),
            }
        )
        result.provenance.append(
            {
                "pair_id": pair_id,
                **{
                    f"{role}_{key}": row.get(src)
                    for role, row in (("target", target), ("control", control))
                    for key, src in (
                        ("item_id", "item_id"),
                        ("review_framing", "review_framing"),
                        ("summary_framing", "summary_framing"),
                        ("model", "model"),
                    )
                },
            }
        )
        if n_pairs is not None and len(result.pairs) >= n_pairs:
            break
    return result


def _maker(row: Mapping[str, Any]) -> str:
    return str(row.get("manufacturer") or row.get("store") or "").strip()


def _product(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "manufacturer": _maker(row),
        "price": _price(row),
        "review": " ".join(str(row["review"]).split()),
        "summary": " ".join(str(row["summary"]).split()),
    }


def _code(prefix: str, slug: str) -> str:
    return prefix + hashlib.sha256(f"{prefix}:{slug}".encode()).hexdigest()[:7].upper()


def study_definition(slug: str, title: str, pairs_file: str, n_pairs: int) -> dict[str, Any]:
    """Return a product-choice study definition that uses ``pairs_file``.

    The same flow as ``stimuli/studies/product-choice-demo.yaml``: consent, instructions, a
    comprehension quiz, the choices with willingness to pay, an attention check, debrief.
    """
    n = str(n_pairs)
    return {
        "slug": slug,
        "title": title,
        "description": f"Read descriptions of products from two manufacturers and choose the "
        f"one you would buy, {n} times.",
        "estimated_minutes": max(5, round(1.2 * n_pairs)),
        # Codes derived from the slug so a built study loads at once; replace them with the
        # recruiting platform's own completion codes before launching.
        "recruitment": {
            "platforms": ["prolific", "mturk", "link"],
            "completion_codes": {
                "completed": _code("C", slug),
                "screened_out": _code("S", slug),
            },
            "exclude_ids": [],
        },
        # The reviews' prices are in dollars, so the study pays and asks in dollars too.
        "payment": {"currency": "USD", "base": 2.0, "bonus": {"amount": 0, "rule": "none"}},
        "tasks": [
            {
                "type": "consent",
                "id": "consent",
                "text": "You will read short descriptions of products and choose between them. "
                "Taking part is voluntary; you may stop at any time by closing this window. We "
                "record your answers and response times with a pseudonymous ID, not your name, "
                "e-mail or IP address. By continuing you confirm that you are at least 18 years "
                "old and agree to take part.\n",
            },
            {
                "type": "instructions",
                "id": "instructions",
                "text": f"You will see {n} product types. For each, two manufacturers offer the "
                "product, each described either by a customer review or by a summary of customer "
                "reviews. Choose the product you would buy; then we show the price of the other "
                "one and ask how much more you would pay for yours.\n",
            },
            {
                "type": "quiz",
                "id": "quiz",
                "attempts": 2,
                "on_fail": "screen_out",
                "questions": [
                    {
                        "id": "how_many",
                        "text": "How many times will you choose between two products?",
                        "options": sorted(
                            {str(max(1, n_pairs // 2)), n, str(2 * n_pairs)}, key=int
                        ),
                        "correct": n,
                    },
                    {
                        "id": "what_choose",
                        "text": "What do you choose each time?",
                        "options": [
                            "The product you would buy",
                            "The review you find best written",
                            "The cheaper product",
                        ],
                        "correct": "The product you would buy",
                    },
                ],
            },
            {
                "type": "product_choice",
                "id": "choices",
                "pairs": pairs_file,
                "labels": {"original": "Customer review", "summary": "Summary of customer reviews"},
                "prompt": "Which product would you buy?",
                "wtp": {
                    "max_premium": 500,
                    "question": "The other product costs {price}. How much more than {price} "
                    "would you pay for the one you chose?",
                },
            },
            {
                "type": "attention_check",
                "id": "attention",
                "questions": [
                    {
                        "id": "instructed",
                        "text": 'To show that you are reading carefully, please choose "Somewhat '
                        'disagree".',
                        "options": [
                            "Strongly agree",
                            "Somewhat agree",
                            "Somewhat disagree",
                            "Strongly disagree",
                        ],
                        "correct": "Somewhat disagree",
                    }
                ],
            },
            {
                "type": "debrief",
                "id": "debrief",
                "text": "Thank you! This study asks whether AI-written summaries of customer "
                "reviews change what people choose. For one manufacturer in each pair the AI "
                "summary was more positive than the review it summarised.\n",
            },
        ],
    }


def build_product_pairs(
    rows: Iterable[Mapping[str, Any]],
    out_dir: str | Path,
    *,
    slug: str,
    title: str = "Choosing between products",
    n_pairs: int | None = None,
    target_from: Sequence[str] = ("negative", "neutral"),
) -> PairSet:
    """Select pairs and write ``studies/SLUG.yaml``, ``studies/product_pairs/SLUG.yaml`` and
    provenance (a study names only files of its own folder: its bundle).

    Parameters
    ----------
    rows : iterable of mapping
        Reviews with summaries and framing labels (see :func:`select_pairs`, or
        :func:`join_generations` to build them from ``framelab generate`` outputs).
    out_dir : str or Path
        A stimuli folder (e.g. ``stimuli/``); ``studies/product_pairs/`` is created.
    slug : str
        Study slug and file stem.
    title : str
        Study title.
    n_pairs : int, optional
        At most this many pairs.
    target_from : sequence of str
        Review framings a target may start from.

    Returns
    -------
    PairSet
        The pairs, provenance, skipped product types and the three paths written.
    """
    import yaml

    if not re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", slug):
        raise BuildError(f"slug {slug!r} must be lower-case letters and digits joined by dashes")
    result = study_pairs(rows, target_from=target_from, n_pairs=n_pairs)
    out = Path(out_dir)
    (out / "studies" / "product_pairs").mkdir(parents=True, exist_ok=True)
    pairs_path = out / "studies" / "product_pairs" / f"{slug}.yaml"
    header = (
        f"# Product pairs built by `framelab` (analysis.llm.builders) for the study {slug}.\n"
        "# Target: review framed negative/neutral, LLM summary framed positive. Control: review\n"
        f"# and summary neutral. Provenance (review IDs, labels, model): {slug}.provenance.json\n"
    )
    dump = {"sort_keys": False, "allow_unicode": True, "width": 100}
    pairs_path.write_text(
        header + yaml.safe_dump({"pairs": result.pairs}, **dump), encoding="utf-8"
    )
    provenance_path = out / "studies" / "product_pairs" / f"{slug}.provenance.json"
    provenance_path.write_text(
        json.dumps({"pairs": result.provenance, "skipped": result.skipped}, indent=2) + "\n",
        encoding="utf-8",
    )
    study_path = out / "studies" / f"{slug}.yaml"
    definition = study_definition(slug, title, f"product_pairs/{slug}.yaml", len(result.pairs))
    study_path.write_text(
        f"# Product-choice study built from {pairs_path.name}. Load with\n"
        f"#   framelab study load {study_path}\n" + yaml.safe_dump(definition, **dump),
        encoding="utf-8",
    )
    result.pairs_path, result.study_path, result.provenance_path = (
        pairs_path,
        study_path,
        provenance_path,
    )
    return result


# --- annotation items ---

ITEM_COLUMNS = [
    "item_id",
    "text",
    "base_sentiment",
    "base_text",
    "frame_position",
    "model",
    "source_item_id",
]


def annotation_items(
    reframings: Iterable[Mapping[str, Any]], *, keep_changed: bool = False
) -> tuple[list[dict[str, Any]], int]:
    """Turn ``reframe`` records into ``sentiment_annotation`` items.

    Parameters
    ----------
    reframings : iterable of mapping
        ``reframe`` records (``input.text``, ``input.base_sentiment``, ``output``,
        ``frame_position``, ``model``).
    keep_changed : bool
        Keep reframings that did not preserve the base statement verbatim (dropped by default:
        the design requires the statement itself to stay the same).

    Returns
    -------
    items : list of dict
        Columns :data:`ITEM_COLUMNS`; ``item_id`` is ``SOURCE.POSITION`` (plus the model's slug
        when several models are present).
    n_dropped : int
        Reframings left out (empty, or statement changed).
    """
    records = list(reframings)
    models = {r.get("model") for r in records}
    items, dropped = [], 0
    for rec in records:
        text = str(rec.get("output") or "").strip()
        if not text or (rec.get("statement_kept") is False and not keep_changed):
            dropped += 1
            continue
        source = str(rec["item_id"])
        position = rec.get("frame_position") or "none"
        item_id = f"{source}.{position}"
        if len(models) > 1:
            item_id += f".{slugify(str(rec.get('model')))}"
        items.append(
            {
                "item_id": item_id,
                "text": text,
                "base_sentiment": str(get_field(rec, "input.base_sentiment")).lower(),
                "base_text": get_field(rec, "input.text"),
                "frame_position": position,
                "model": rec.get("model"),
                "source_item_id": source,
            }
        )
    ids = [i["item_id"] for i in items]
    if len(set(ids)) != len(ids):
        raise BuildError("duplicate annotation item IDs: the reframe file mixes methods/templates")
    return items, dropped


def write_items_csv(items: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write annotation items as UTF-8 CSV with the :data:`ITEM_COLUMNS` header.

    Written verbatim, not through :func:`analysis.safecsv.write_csv`: this file is a stimulus
    the platform reads and shows to participants as it is (a spreadsheet's ``'`` mark would
    reach their screens). The platform's export neutralises formula-like cells on the way out.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=ITEM_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(items)
    return path
