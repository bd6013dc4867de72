"""Product pairs for a k-format study: one summary file per format, matched by item ID.

The seed study's selection rule (:func:`analysis.llm.builders.select_pairs`) picks per product
type a *target*, whose review is framed negative or neutral and whose LLM summary is judged
positive, and a *control*, whose review and summary are both neutral (different manufacturers,
closest prices). With k formats the rule is applied on the judged framing of every format:

- the target is chosen on the baseline summary (``summary``): it is the item whose framing the
  plain summary changes. The mitigated summaries' framings are recorded, never required: a
  mitigation that works leaves the target's summary unshifted, and requiring a shift would pick
  exactly the items where mitigation fails;
- the control must stay neutral in *every* format, so any difference between formats is the
  target's;
- an item lacking a summary or a framing judgment in any format is dropped (counted by reason).

Each stimulus keeps the ID of the generation record it came from (the pairs file's
``sources: {format: record ID}``, which the web app carries into every export row): the store's
resume key ``model|task|method|template_hash|item_id|variant``; with the result file's manifest
(``<file>.manifest.json``) it leads to the model, method, prompt hash and seed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.llm.builders import BuildError, framing_label, study_definition, study_pairs
from analysis.llm.store import result_key
from analysis.llm.tasks import get_field

__all__ = ["FormatPairSet", "build_format_pairs", "join_format_generations", "source_id"]

BASELINE = "summary"


def source_id(record: Mapping[str, Any]) -> str:
    """The generation record's ID: its resume key joined by ``|``."""
    return "|".join(result_key(record))


@dataclass
class FormatPairSet:
    """What :func:`build_format_pairs` wrote, and what it dropped and why."""

    formats: list[str]
    rows: list[dict[str, Any]]
    dropped: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    pairs_path: Path | None = None
    study_path: Path | None = None
    provenance_path: Path | None = None


def join_format_generations(
    summaries: Mapping[str, Iterable[Mapping[str, Any]]],
    source_judgments: Iterable[Mapping[str, Any]],
    judgments: Mapping[str, Iterable[Mapping[str, Any]]],
) -> tuple[list[dict[str, Any]], Counter]:
    """Join each format's summaries and framing judgments by item ID, one row per review.

    Parameters
    ----------
    summaries : mapping of format to records
        ``summary`` (the ``summarize`` output) and ``mitigated:<method>`` (``mitigate``
        outputs), each record with ``item_id``, ``output`` and the resume-key fields; the
        baseline's ``input`` holds the review and product fields.
    source_judgments : records
        ``judge-framing`` on the reviews.
    judgments : mapping of format to records
        ``judge-framing`` on each format's summaries (``--text-field output``).

    Returns
    -------
    rows, dropped
        Rows with the review's fields, ``review``, ``review_framing``, ``summary`` (the
        baseline's text), ``summary_framing`` (the framing the selection rule reads: the
        baseline's unless it is neutral and another format is not, then ``other``), and per
        format ``text:<f>``, ``framing:<f>``, ``source:<f>``; ``dropped`` counts the items left
        out by reason.
    """
    if BASELINE not in summaries:
        raise BuildError(f"the baseline summaries ({BASELINE!r}) are required")
    if set(judgments) != set(summaries):
        raise BuildError(
            f"framing judgments for {sorted(judgments)} but summaries for {sorted(summaries)}: "
            "give both for every format"
        )
    src = {str(r["item_id"]): r for r in source_judgments}
    by_format = {f: {str(r["item_id"]): r for r in recs} for f, recs in summaries.items()}
    labels = {f: {str(r["item_id"]): r.get("label") for r in recs} for f, recs in judgments.items()}
    formats = [BASELINE, *sorted(f for f in summaries if f != BASELINE)]
    dropped: Counter = Counter()
    rows = []
    for item_id, base in by_format[BASELINE].items():
        if item_id not in src:
            dropped["no framing judgment of the review"] += 1
            continue
        missing = [f for f in formats if item_id not in by_format[f]]
        if missing:
            dropped[f"no {missing[0]} summary"] += 1
            continue
        unjudged = [f for f in formats if item_id not in labels[f]]
        if unjudged:
            dropped[f"no framing judgment of the {unjudged[0]} summary"] += 1
            continue
        framings = {f: framing_label(labels[f][item_id]) for f in formats}
        effective = framings[BASELINE]
        if effective == "neutral" and any(v != "neutral" for v in framings.values()):
            effective = "other"  # not a control: a mitigated summary is not neutral
            if framing_label(src[item_id].get("label")) == "neutral":
                dropped["kept out as a control: a mitigated summary is not neutral"] += 1
        row = {
            **dict(base.get("input") or {}),
            "item_id": item_id,
            "review": get_field(base, "input.text"),
            "summary": base["output"],
            "review_framing": src[item_id].get("label"),
            "summary_framing": effective,
            "model": base.get("model"),
            "text:original": get_field(base, "input.text"),
            "framing:original": framing_label(src[item_id].get("label")),
            "source:original": f"item:{item_id}",
        }
        for f in formats:
            rec = by_format[f][item_id]
            row[f"text:{f}"] = rec["output"]
            row[f"framing:{f}"] = framings[f]
            row[f"source:{f}"] = source_id(rec)
        rows.append(row)
    return rows, dropped


def build_format_pairs(
    rows: Sequence[Mapping[str, Any]],
    out_dir: str | Path,
    *,
    slug: str,
    formats: Sequence[str],
    title: str = "Choosing between products",
    n_pairs: int | None = None,
    dropped: Mapping[str, int] | None = None,
) -> FormatPairSet:
    """Select the pairs and write the bundle the web app loads as it is: ``studies/SLUG.yaml``,
    ``studies/product_pairs/SLUG.yaml`` and ``studies/product_pairs/SLUG.provenance.json``.

    The pairs file has the platform's shape (``docs/platform.md``, "Product choice with k
    formats"): ``pairs:``, each with ``id``, ``product_type`` and a ``target`` and ``control``
    with ``manufacturer``, ``price``, ``texts: {format: text}`` and ``sources: {format:
    record ID}`` (the generation record each text came from; ``item:<id>`` for the review
    itself), which the platform carries into the long export as ``target_source_record`` and
    ``control_source_record``. The provenance file records per pair the review items and every
    format's judged framing, and the items and product types left out.

    Parameters
    ----------
    rows : sequence of mapping
        :func:`join_format_generations` rows.
    out_dir : str or Path
        A stimuli folder; ``studies/product_pairs/`` is created.
    slug, title : str
        The study's slug (file stem) and title.
    formats : sequence of str
        The summary formats (``summary`` first); ``original`` is added in front.
    n_pairs : int, optional
        At most this many pairs.
    dropped : mapping, optional
        Items already left out by the join, by reason (carried into the result).

    Returns
    -------
    FormatPairSet
        ``rows`` holds one entry per product (two per pair) with ``pair_id``, ``role``,
        ``product_type``, ``manufacturer``, ``price``, ``item_id`` and per format
        ``text:<f>``, ``framing:<f>``, ``source:<f>``.
    """
    import re

    import yaml

    if not re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", slug):
        raise BuildError(f"slug {slug!r} must be lower-case letters and digits joined by dashes")
    all_formats = ["original", *formats]
    chosen = study_pairs(rows, n_pairs=n_pairs)
    by_id = {str(r["item_id"]): r for r in rows}
    out_rows: list[dict[str, Any]] = []
    pairs: list[dict[str, Any]] = []
    provenance: list[dict[str, Any]] = []
    for prov in chosen.provenance:
        pair = next(p for p in chosen.pairs if p["id"] == prov["pair_id"])
        entry: dict[str, Any] = {"id": pair["id"], "product_type": pair["product_type"]}
        record: dict[str, Any] = {"pair_id": pair["id"]}
        for role in ("target", "control"):
            src = by_id[str(prov[f"{role}_item_id"])]
            row = {
                "pair_id": pair["id"],
                "role": role,
                "product_type": pair["product_type"],
                "manufacturer": pair[role]["manufacturer"],
                "price": pair[role]["price"],
                "item_id": src["item_id"],
            }
            for key in ("text", "framing", "source"):
                for f in all_formats:
                    value = src[f"{key}:{f}"]
                    row[f"{key}:{f}"] = " ".join(str(value).split()) if key == "text" else value
            out_rows.append(row)
            entry[role] = {
                "manufacturer": row["manufacturer"],
                "price": row["price"],
                "texts": {f: row[f"text:{f}"] for f in all_formats},
                "sources": {f: str(row[f"source:{f}"]) for f in all_formats},
            }
            record[role] = {
                "item_id": row["item_id"],
                "model": src.get("model"),
                "framings": {f: row[f"framing:{f}"] for f in all_formats},
            }
        pairs.append(entry)
        provenance.append(record)
    out = Path(out_dir)
    folder = out / "studies" / "product_pairs"
    folder.mkdir(parents=True, exist_ok=True)
    pairs_path = folder / f"{slug}.yaml"
    provenance_path = folder / f"{slug}.provenance.json"
    dump = {"sort_keys": False, "allow_unicode": True, "width": 100}
    header = (
        f"# Product pairs in {len(all_formats)} formats built by `framelab generate "
        f"product-pairs` for the study {slug}.\n"
        "# Target: review framed negative/neutral, plain summary framed positive. Control: "
        "neutral in every format.\n"
        "# sources: the generation record of each text (model|task|method|prompt hash|item|"
        "variant);\n"
        f"# framings and left-out items: {provenance_path.name}\n"
    )
    pairs_path.write_text(header + yaml.safe_dump({"pairs": pairs}, **dump), encoding="utf-8")
    provenance_path.write_text(
        json.dumps(
            {
                "formats": all_formats,
                "pairs": provenance,
                "skipped": chosen.skipped,
                "dropped": dict(dropped or {}),
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    definition = study_definition(slug, title, f"product_pairs/{slug}.yaml", len(pairs))
    task = next(t for t in definition["tasks"] if t["type"] == "product_choice")
    task["formats"] = all_formats
    task["labels"] = {f: _label(f) for f in all_formats}
    study_path = out / "studies" / f"{slug}.yaml"
    study_path.write_text(
        f"# Product-choice study with {len(all_formats)} formats built from {pairs_path.name}. "
        f"Load with\n#   framelab study load {study_path}\n" + yaml.safe_dump(definition, **dump),
        encoding="utf-8",
    )
    return FormatPairSet(
        formats=all_formats,
        rows=out_rows,
        dropped=dict(dropped or {}),
        skipped=chosen.skipped,
        pairs_path=pairs_path,
        study_path=study_path,
        provenance_path=provenance_path,
    )


def _label(fmt: str) -> str:
    # Participants see the same label for every summary format: which method made a summary
    # must not be visible to them.
    return "Customer review" if fmt == "original" else "Summary of customer reviews"
