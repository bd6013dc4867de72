"""Stimulus sets for the human-evaluation tasks, built from the generation engine's records.

* :func:`rating_set` — ``perspective-summary`` records (several models' one-sentence summaries
  of the left and right perspective of mixed passages), plus optional reference summaries,
  become the sources of a ``summary_rating`` study: per (passage pair, perspective) the two
  passages and one summary per system.
* :func:`preference_set` — ``judge-pair`` records (or the items given to ``judge-pair``) become
  the pairs of a ``pairwise_preference`` study: the source, the human summary and the generated
  one, with the pair ID equal to the judge records' ``item_id`` so the analysis can put the LLM
  judges' outcomes beside the people's.
* :func:`summary_metrics` — overlap of each summary with the reference summary of its source
  (BLEU-1/4, ROUGE-1/2, :func:`analysis.metrics.overlap.overlap_similarity`) for
  ``framelab analyze ratings --metrics``.

Both sets are JSONL files, one source or pair per line, in the format the platform loads
(``stimuli/studies/evaluation/README.md``); the webapp validates them again when a study is loaded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from analysis.llm.builders import BuildError, slugify
from analysis.llm.tasks import get_field

__all__ = [
    "preference_set",
    "rating_set",
    "rephrased_pairs",
    "summary_metrics",
    "write_jsonl",
]


def _system_name(model: Any) -> str:
    """A short system name from a model path or hub name (``org/Model-7B`` -> ``model-7b``)."""
    return slugify(str(model or "generated").rstrip("/").rsplit("/", 1)[-1])


def rating_set(
    records: Iterable[Mapping[str, Any]],
    *,
    references: Mapping[tuple[str, str], str] | None = None,
    order: str = "left_first",
    left_field: str = "left",
    right_field: str = "right",
    reference_system: str = "reference",
    systems: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Group ``perspective-summary`` records into the sources of a ``summary_rating`` study.

    Parameters
    ----------
    records : iterable of mapping
        Generation records (``docs/generation.md``) of the ``perspective-summary`` task; other
        tasks are skipped. Their ``input`` holds the two passages.
    references : mapping, optional
        ``(item_id, perspective) -> reference summary`` (e.g. the dataset's human summaries),
        added as the system ``reference_system``.
    order : {"left_first", "right_first"}
        Which presentation's summary to use: the engine summarises each item in both orders.
    left_field, right_field : str
        Input fields with the left and right passages (dotted paths allowed).
    reference_system : str
        System name of the references.
    systems : mapping, optional
        Model identifier -> system name shown in the export (default: the slug of the model's
        last path part).

    Returns
    -------
    list of dict
        One source per (item, perspective), in input order: ``item_id`` (``ITEM.PERSPECTIVE``),
        ``perspective``, ``source_item_id``, ``passages`` (``label``, ``text``) and
        ``summaries`` (``summary_id``, ``system``, ``text``; the reference first).

    Raises
    ------
    BuildError
        No usable record, a source with fewer than two summaries, or two models that map to
        the same system name.
    """
    sources: dict[tuple[str, str], dict[str, Any]] = {}
    names: dict[str, str] = {}
    for rec in records:
        if rec.get("task") != "perspective-summary" or rec.get("order", order) != order:
            continue
        item_id, perspective = str(rec["item_id"]), str(rec.get("perspective", ""))
        if perspective not in ("left", "right"):
            raise BuildError(f"record {item_id!r}: perspective must be left or right")
        model = str(rec.get("model"))
        system = (systems or {}).get(model) or _system_name(model)
        if names.setdefault(system, model) != model:
            raise BuildError(
                f"models {names[system]!r} and {model!r} both become system {system!r}; "
                "pass systems={model: name}"
            )
        key = (item_id, perspective)
        if key not in sources:
            passages = [
                {"label": "Passage 1", "text": str(get_field(rec, f"input.{left_field}"))},
                {"label": "Passage 2", "text": str(get_field(rec, f"input.{right_field}"))},
            ]
            sources[key] = {
                "item_id": f"{item_id}.{perspective}",
                "perspective": perspective,
                "source_item_id": item_id,
                "passages": passages,
                "summaries": [],
            }
            ref = (references or {}).get(key)
            if ref:
                sources[key]["summaries"].append(
                    {
                        "summary_id": f"{item_id}.{perspective}.{reference_system}",
                        "system": reference_system,
                        "text": ref.strip(),
                    }
                )
        summaries = sources[key]["summaries"]
        summary = {
            "summary_id": f"{item_id}.{perspective}.{system}",
            "system": system,
            "text": str(rec.get("output") or "").strip(),
        }
        # A rerun of the same model replaces the earlier summary (the store appends).
        summaries[:] = [s for s in summaries if s["system"] != system] + [summary]
    if not sources:
        raise BuildError(f"no perspective-summary records with order={order!r}")
    out = list(sources.values())
    thin = [s["item_id"] for s in out if len(s["summaries"]) < 2]
    if thin:
        raise BuildError(f"sources with fewer than two summaries to compare: {thin[:5]}")
    return out


def preference_set(
    records: Iterable[Mapping[str, Any]],
    *,
    human_field: str = "human_summary",
    generated_field: str = "generated_summary",
    text_field: str = "text",
    human_system: str = "human",
    generated_system: str | None = None,
) -> list[dict[str, Any]]:
    """Turn ``judge-pair`` records (or their input items) into ``pairwise_preference`` pairs.

    Parameters
    ----------
    records : iterable of mapping
        ``judge-pair`` generation records (two per item, one per order: the first is used), or
        plain input items with ``item_id`` and the fields below.
    human_field, generated_field, text_field : str
        Fields of the human summary, the generated summary and the source (dotted paths; for
        records they are read from ``input``).
    human_system : str
        System name of the human summary (``--reference`` of the analysis).
    generated_system : str, optional
        System name of the generated summary; default the input's ``model`` field, else
        ``generated``.

    Returns
    -------
    list of dict
        One pair per item: ``pair_id`` (= the judge records' ``item_id``), ``source_id``,
        ``source`` (may be empty), ``a`` (the human summary) and ``b`` (the generated one),
        each with ``system`` and ``text``. Which is shown first is balanced by the platform.

    Raises
    ------
    BuildError
        No pair, or a pair whose two summaries are missing or identical.
    """
    pairs: dict[str, dict[str, Any]] = {}
    for rec in records:
        if "task" in rec and rec["task"] != "judge-pair":
            continue
        base = rec.get("input") if "task" in rec else rec
        base = base if isinstance(base, Mapping) else {}
        item_id = str(rec.get("item_id") or base.get("item_id") or base.get("id") or "")
        if not item_id or item_id in pairs:
            continue
        human = str(base.get(human_field) or "").strip()
        generated = str(base.get(generated_field) or "").strip()
        if not human or not generated:
            raise BuildError(f"item {item_id!r}: needs {human_field!r} and {generated_field!r}")
        if human == generated:
            raise BuildError(f"item {item_id!r}: the two summaries are identical")
        system = generated_system or _system_name(base.get("model") or "generated")
        if system == human_system:
            raise BuildError(f"item {item_id!r}: both summaries would be called {system!r}")
        pairs[item_id] = {
            "pair_id": item_id,
            "source_id": str(base.get("source_id") or item_id),
            "source": str(base.get(text_field) or "").strip(),
            "a": {"system": human_system, "text": human},
            "b": {"system": system, "text": generated},
        }
    if not pairs:
        raise BuildError("no judge-pair records or items with both summaries")
    return list(pairs.values())


def _optional(item: Mapping[str, Any], path: str) -> Any:
    try:
        return get_field(item, path)
    except KeyError:
        return None


def rephrased_pairs(
    records: Iterable[Mapping[str, Any]],
    *,
    generated_field: str = "generated_summary",
    human_field: str = "human_summary",
) -> list[dict[str, Any]]:
    """Turn rephrase outputs into ``judge-pair`` items marked ``rephrased``.

    The overlap paper rewords the human reference summary while keeping its long phrases, to
    obtain candidate summaries of higher overlap with it. Run ``framelab generate summarize
    --template rephrase --text-field human_summary`` on the judge-pair items; each of its
    records holds the item as ``input`` and the reworded reference as ``output``. This gives
    the items back with that rewording as the candidate (``generated_summary``), judged against
    the unchanged human summary, ``rephrased: true``, the item's former generated summary in
    ``original_summary`` and the rephrasing model in ``rephrased_by``; the item's
    ``summarizer`` is kept, so ``framelab metrics judge-overlap`` reports the rephrased pairs
    as that summarizer's ``rephrased`` version.

    Raises
    ------
    BuildError
        A record without an output or without the human summary, or no record at all.
    """
    items = []
    for rec in records:
        if rec.get("task") not in (None, "summarize"):
            continue
        base = rec.get("input")
        if not isinstance(base, Mapping):
            raise BuildError(f"record {rec.get('item_id')!r}: no input item to rephrase")
        item_id = str(rec.get("item_id") or base.get("item_id") or "")
        output = str(rec.get("output") or "").strip()
        if not output:
            raise BuildError(f"item {item_id!r}: the rephrase output is empty")
        if not str(_optional(base, human_field) or "").strip():
            raise BuildError(f"item {item_id!r}: no {human_field!r} to judge against")
        items.append(
            {
                **base,
                "item_id": item_id,
                generated_field: output,
                "original_summary": _optional(base, generated_field),
                "rephrased": True,
                "rephrased_by": rec.get("model"),
            }
        )
    if not items:
        raise BuildError("no summarize records (made with --template rephrase) to turn into pairs")
    return items


def summary_metrics(
    sources: Iterable[Mapping[str, Any]], *, reference_system: str = "reference"
) -> list[dict[str, Any]]:
    """Overlap of every non-reference summary with its source's reference summary.

    Parameters
    ----------
    sources : iterable of mapping
        Output of :func:`rating_set` (or a rating-set JSONL file's records).
    reference_system : str
        The system whose summary is the reference; sources without one are skipped.

    Returns
    -------
    list of dict
        One row per summary: ``summary_id``, ``system``, ``bleu1``, ``bleu4``, ``rouge1``,
        ``rouge2``, ``similarity`` (their mean), as
        :func:`analysis.metrics.overlap.overlap_similarity` computes them.
    """
    import pandas as pd

    from analysis.metrics.overlap import overlap_similarity

    rows = []
    for src in sources:
        refs = [s for s in src["summaries"] if s["system"] == reference_system]
        if not refs:
            continue
        for s in src["summaries"]:
            if s["system"] != reference_system:
                rows.append(
                    {
                        "summary_id": s["summary_id"],
                        "system": s["system"],
                        "generated": s["text"],
                        "reference": refs[0]["text"],
                    }
                )
    if not rows:
        raise BuildError(f"no source has a {reference_system!r} summary to compare with")
    scored = overlap_similarity(pd.DataFrame(rows)).drop(columns=["generated", "reference"])
    return scored.to_dict(orient="records")


def write_jsonl(records: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write a stimulus set as JSONL (UTF-8, one record per line); return the path.

    Parameters
    ----------
    records : iterable of mapping
        Output of :func:`rating_set` or :func:`preference_set`.
    path : str or Path
        Destination; parent folders are created.

    Returns
    -------
    Path
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path
