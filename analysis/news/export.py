"""Authentic/falsified pairs as fact-check items for ``framelab metrics hallucination``.

Each kept pair becomes two items sharing ``pair_id`` (the article ID): the authentic
description with ``truth = true`` and its negation with ``truth = false``, both with ``date`` =
``published_at``. That is the input ``framelab generate fact-check`` reads, and its records are
what ``framelab metrics hallucination`` scores (``pair_id``, ``truth``, ``date`` reach the metric
as ``input.*`` columns). With ``after_cutoff`` only articles published after the cutoff are
kept, by the metric's own comparison (``published_at > cutoff``, both as UTC timestamps, a bare
date meaning its midnight), so every exported item is ``post`` for a model with that cutoff.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.llm.builders_eval import write_jsonl
from analysis.llm.store import utc_now
from analysis.news.falsify import VALIDATION_FILE, falsified_dir, read_validation
from analysis.news.store import read_articles

REQUIRE = ("auto", "manual", "none")


class ExportError(ValueError):
    """The export cannot be made as asked; the message says what to change."""


@dataclass
class ExportReport:
    """How many pairs were considered and why some were left out."""

    n_pairs: int = 0
    n_rejected_manual: int = 0
    n_unvalidated: int = 0
    n_failed_check: int = 0
    n_not_in_dataset: int = 0
    n_before_cutoff: int = 0
    n_undated: int = 0
    n_exported: int = 0
    # How the exported pairs were validated: by hand, only by the automatic meaning check, or
    # not at all (``--require none``).
    n_exported_manual: int = 0
    n_exported_auto_only: int = 0
    n_exported_unvalidated: int = 0
    falsifier: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for the terminal."""
        return (
            f"{self.n_exported} pairs exported of {self.n_pairs}: left out "
            f"{self.n_failed_check} failing the automatic check, {self.n_rejected_manual} "
            f"rejected by hand, {self.n_unvalidated} not yet validated, {self.n_before_cutoff} "
            f"published on or before the cutoff, {self.n_undated} undated, "
            f"{self.n_not_in_dataset} no longer in the deduplicated dataset. Exported pairs "
            f"validated by hand: {self.n_exported_manual}, by the automatic check only: "
            f"{self.n_exported_auto_only}, not validated: {self.n_exported_unvalidated}"
        )


def export_pairs(
    root: str | Path,
    *,
    after_cutoff: str | None = None,
    require: str = "manual",
    falsifier: str | None = None,
) -> tuple[list[dict[str, Any]], ExportReport]:
    """Select the pairs to evaluate and turn them into fact-check items.

    Parameters
    ----------
    root : str or Path
        The dataset directory (after ``framelab news falsify``).
    after_cutoff : str, optional
        ISO date or datetime: keep only articles published after it.
    require : {"manual", "auto", "none"}
        ``manual`` (default, as the seed study validated its pairs by hand): a researcher
        marked the pair valid; ``auto``: the automatic check said ``differs`` and nobody
        rejected the pair; ``none``: every pair not rejected.
    falsifier : str, optional
        The model whose negations to use, when several models falsified the dataset.

    Returns
    -------
    (list of dict, ExportReport)
        Two items per pair (``item_id``, ``pair_id``, ``truth``, ``text``, ``date``, ``url``,
        ``domain``, ``falsifier``, ``dataset``, ``validated``: ``manual``, ``auto`` or
        ``none``) and the counts.

    Raises
    ------
    ExportError
        With ``require="manual"``, when no pair is validated by hand yet: the message gives the
        count and how to validate (nothing is written).
    """
    if require not in REQUIRE:
        raise ExportError(f"require must be one of {REQUIRE}, not {require!r}")
    cutoff = None
    if after_cutoff:
        try:
            cutoff = pd.Timestamp(after_cutoff)
        except ValueError as exc:
            raise ExportError(f"--after-cutoff {after_cutoff!r} is not an ISO date") from exc
        cutoff = cutoff.tz_localize("UTC") if cutoff.tzinfo is None else cutoff.tz_convert("UTC")
    sheet = read_validation(root)
    combos = sheet[["model", "template_hash"]].drop_duplicates()
    if falsifier is not None:
        sheet = sheet.loc[sheet["model"] == falsifier]
        if sheet.empty:
            raise ExportError(
                f"no negations by {falsifier!r}; falsifiers: {sorted(combos['model'].unique())}"
            )
    elif len(combos) > 1:
        listing = ", ".join(f"{m} (template {h})" for m, h in combos.itertuples(index=False))
        raise ExportError(
            f"several falsifiers in the dataset ({listing}): choose one with --falsifier"
        )
    if sheet["template_hash"].nunique() > 1:
        raise ExportError(
            f"{falsifier!r} falsified with several templates "
            f"{sorted(sheet['template_hash'].unique())}; keep one in validation.csv"
        )
    articles, _ = read_articles(root)
    articles = articles.set_index("article_id")
    report = ExportReport(n_pairs=len(sheet))
    if len(sheet):
        report.falsifier = {"model": sheet["model"].iloc[0],
                            "template_hash": sheet["template_hash"].iloc[0]}  # fmt: skip
    items: list[dict[str, Any]] = []
    for row in sheet.to_dict("records"):
        if not str(row["falsified"] or "").strip():
            report.n_failed_check += 1  # nothing to fact-check, whatever the sheet says
            continue
        if row["manual_valid"] is False:
            report.n_rejected_manual += 1
            continue
        if require == "manual" and row["manual_valid"] is not True:
            report.n_unvalidated += 1
            continue
        if require == "auto" and row["auto_check"] != "differs" and row["manual_valid"] is not True:
            report.n_failed_check += 1
            continue
        if row["article_id"] not in articles.index:
            report.n_not_in_dataset += 1  # a near-duplicate dropped since it was falsified
            continue
        article = articles.loc[row["article_id"]]
        published = article["published_at"]
        when = pd.to_datetime(published, utc=True, errors="coerce") if published else pd.NaT
        if cutoff is not None and pd.isna(when):
            report.n_undated += 1
            continue
        if cutoff is not None and when <= cutoff:
            report.n_before_cutoff += 1
            continue
        validated = (
            "manual"
            if row["manual_valid"] is True
            else "auto"
            if row["auto_check"] == "differs"
            else "none"
        )
        common = {
            "pair_id": row["article_id"],
            "date": published,
            "url": article["url"],
            "domain": article["domain"],
            "falsifier": row["model"],
            "dataset": "newslens",
            "validated": validated,
        }
        items.append({"item_id": f"{row['article_id']}-authentic", "truth": True,
                      "text": row["authentic"], **common})  # fmt: skip
        items.append({"item_id": f"{row['article_id']}-falsified", "truth": False,
                      "text": row["falsified"], **common})  # fmt: skip
        report.n_exported += 1
        if validated == "manual":
            report.n_exported_manual += 1
        elif validated == "auto":
            report.n_exported_auto_only += 1
        else:
            report.n_exported_unvalidated += 1
    if require == "manual" and report.n_unvalidated and not report.n_exported:
        raise ExportError(
            f"none of the {report.n_unvalidated} falsified pairs is validated by hand yet, and "
            "export requires manual validation (the seed study's pairs were checked by hand). "
            f"Fill in manual_valid (yes/no) in {falsified_dir(root) / VALIDATION_FILE}, "
            "then run this command again; or pass --require auto to export the pairs that "
            "passed the automatic meaning check (the manifest then says so)."
        )
    return items, report


def write_items(
    items: list[dict[str, Any]], out: str | Path, *, report: ExportReport, settings: dict
) -> Path:
    """Write the items as JSONL and a ``.manifest.json`` beside them (counts and settings)."""
    path = write_jsonl(items, out)
    manifest = {"created_at": utc_now(), **settings, "counts": asdict(report)}
    path.with_suffix(".manifest.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return path
