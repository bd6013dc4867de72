"""Falsified descriptions: the ``negate`` task, a meaning check, a manual-validation sheet.

Generation goes through the LLM engine (:func:`analysis.llm.tasks.run_task`), so any backend
works and a run is resumable: records land in ``falsified/negate.jsonl`` keyed by model, template
hash and article ID, and a second run generates only what is missing.

The automatic check compares each authentic description with its falsified one:

- ``word_change``: share of words changed (1 − difflib's matching ratio over word lists);
- ``embed_cosine``: cosine similarity of their sentence embeddings (all-MiniLM-L6-v2 offline by
  default, the embedder of the primacy metric).

- ``nli_contradiction`` (optional): the probability an NLI model (a local sequence
  classification checkpoint with a ``contradiction`` label, e.g. an MNLI model) gives to
  "the falsified text contradicts the authentic one".

A negation should stay on topic (high cosine) but change words; the verdict ``auto_check`` is
``empty`` (no text), ``unchanged`` (``word_change`` below ``min_change``), ``off_topic``
(cosine below ``min_cosine``: a new story, not a counterpart), ``not_contradiction`` (with an
NLI model, contradiction below ``min_contradiction``) or ``differs``. An embedding cannot tell
"passed" from "failed to pass", so without NLI ``differs`` is necessary, not sufficient: the
researcher confirms each pair in ``manual_valid`` of ``falsified/validation.csv`` (the seed
validated its pairs by hand). Regenerating the sheet keeps what was filled in.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.news.store import read_articles
from analysis.safecsv import read_csv, write_csv

NEGATE_FILE = "negate.jsonl"
VALIDATION_FILE = "validation.csv"
MANUAL_COLUMNS = ("manual_valid", "manual_note")
KEY = ["article_id", "model", "template_hash"]


@dataclass(frozen=True)
class CheckOptions:
    """Thresholds of the automatic meaning check (docs/newslens.md says how they were chosen)."""

    min_change: float = 0.05
    min_cosine: float = 0.5
    min_contradiction: float = 0.5


NLIScorer = Callable[[Sequence[str], Sequence[str]], np.ndarray]


def nli_scorer(model: str, *, device: str = "auto", batch_size: int = 16) -> NLIScorer:
    """Load a local NLI checkpoint; return ``(premises, hypotheses) -> P(contradiction)``.

    Parameters
    ----------
    model : str
        A local ``AutoModelForSequenceClassification`` directory whose ``id2label`` names a
        contradiction label (MNLI-style models do).
    device : str
        Torch device; ``auto`` takes CUDA when there is one.
    batch_size : int
        Pairs per forward pass.

    Returns
    -------
    callable
        Scores in [0, 1], one per pair.
    """
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model)
    classifier = AutoModelForSequenceClassification.from_pretrained(model).to(device).eval()
    labels = {str(v).lower(): int(k) for k, v in classifier.config.id2label.items()}
    found = [i for name, i in labels.items() if name.startswith("contradict")]
    if not found:
        raise ValueError(f"{model}: no contradiction label among {sorted(labels)}")

    def score(premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        out = []
        for start in range(0, len(premises), batch_size):
            batch = tokenizer(
                list(premises[start : start + batch_size]),
                list(hypotheses[start : start + batch_size]),
                padding=True,
                truncation=True,
                return_tensors="pt",
            ).to(device)
            with torch.no_grad():
                logits = classifier(**batch).logits
            out.append(torch.softmax(logits.float(), dim=-1)[:, found[0]].cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)

    return score


def falsified_dir(root: str | Path) -> Path:
    """Where falsify writes (``DATASET_DIR/falsified``)."""
    return Path(root) / "falsified"


def negate_items(root: str | Path) -> tuple[list[dict[str, Any]], Any]:
    """The deduplicated articles with a description, as ``negate`` task items."""
    rows, report = read_articles(root)
    items = []
    for row in rows.to_dict("records"):
        text = row.get("description")
        if not text or not str(text).strip():
            continue
        items.append(
            {
                "item_id": row["article_id"],
                "dataset": "newslens",
                "text": str(text).strip(),
                "published_at": row["published_at"],
                "domain": row["domain"],
                "description_source": row["description_source"],
            }
        )
    return items, report


def word_change(a: str, b: str) -> float:
    """Share of words changed between two texts (0 = same words in the same order).

    Examples
    --------
    >>> word_change("the bill passed", "the bill failed")
    0.33333333333333337
    """
    left, right = a.lower().split(), b.lower().split()
    if not left and not right:
        return 0.0
    return 1.0 - difflib.SequenceMatcher(a=left, b=right, autojunk=False).ratio()


def meaning_check(
    pairs: pd.DataFrame,
    *,
    embedder: Callable[[Sequence[str]], np.ndarray],
    options: CheckOptions | None = None,
    nli: NLIScorer | None = None,
) -> pd.DataFrame:
    """Check that each falsified text differs from its authentic one and stays on topic.

    Parameters
    ----------
    pairs : pandas.DataFrame
        Columns ``authentic`` and ``falsified``.
    embedder : callable
        ``texts -> ndarray`` (rows L2-normalised or not).
    options : CheckOptions, optional
        Thresholds.
    nli : callable, optional
        ``(premises, hypotheses) -> P(contradiction)`` (:func:`nli_scorer`).

    Returns
    -------
    pandas.DataFrame
        ``pairs`` plus ``word_change``, ``embed_cosine``, ``nli_contradiction`` (NaN without
        ``nli``) and ``auto_check`` (``empty``/``unchanged``/``off_topic``/
        ``not_contradiction``/``differs``).
    """
    opts = options or CheckOptions()
    out = pairs.copy()
    authentic = out["authentic"].fillna("").astype(str).tolist()
    falsified = out["falsified"].fillna("").astype(str).tolist()
    out["word_change"] = [word_change(a, f) for a, f in zip(authentic, falsified, strict=True)]
    cosine = np.full(len(out), np.nan)
    nonempty = [i for i, f in enumerate(falsified) if f.strip()]
    if nonempty:
        vectors = np.asarray(
            embedder([authentic[i] for i in nonempty] + [falsified[i] for i in nonempty]),
            dtype=float,
        )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        a, f = vectors[: len(nonempty)], vectors[len(nonempty) :]
        cosine[nonempty] = np.sum(a * f, axis=1)
    out["embed_cosine"] = cosine
    contradiction = np.full(len(out), np.nan)
    if nli is not None and nonempty:
        contradiction[nonempty] = nli(
            [authentic[i] for i in nonempty], [falsified[i] for i in nonempty]
        )
    out["nli_contradiction"] = contradiction
    verdict = np.select(
        [
            [not f.strip() for f in falsified],
            out["word_change"].to_numpy() < opts.min_change,
            cosine < opts.min_cosine,
            contradiction < opts.min_contradiction,  # False where NaN (no NLI model)
        ],
        ["empty", "unchanged", "off_topic", "not_contradiction"],
        default="differs",
    )
    out["auto_check"] = verdict
    return out


def read_negations(root: str | Path) -> pd.DataFrame:
    """The negate records of the dataset as authentic/falsified pairs (one row per record)."""
    from analysis.llm.store import read_records

    path = falsified_dir(root) / NEGATE_FILE
    rows = [
        {
            "article_id": r["item_id"],
            "model": r.get("model"),
            "backend": r.get("backend"),
            "template": r.get("template"),
            "template_hash": r.get("template_hash"),
            "published_at": (r.get("input") or {}).get("published_at"),
            "authentic": (r.get("input") or {}).get("text"),
            "falsified": r.get("output") or "",
            "created_at": r.get("created_at"),
        }
        for r in read_records(path)
        if r.get("task") == "negate"
    ]
    columns = [*KEY, "backend", "template", "published_at", "authentic", "falsified", "created_at"]
    return pd.DataFrame(rows, columns=columns)


def write_validation(root: str | Path, checked: pd.DataFrame) -> Path:
    """Write the validation sheet, keeping the manual columns already filled in.

    Rows are keyed by (article, model, template hash). A row of the old sheet that is no longer
    produced (its record was removed by hand) is kept as it was, so no judgement is ever lost.
    """
    path = falsified_dir(root) / VALIDATION_FILE
    sheet = checked.copy()
    for col in MANUAL_COLUMNS:
        sheet[col] = ""
    if path.exists():
        old = read_csv(path, dtype=str, keep_default_na=False)
        missing = [c for c in (*KEY, *MANUAL_COLUMNS) if c not in old.columns]
        if missing:
            raise ValueError(f"{path}: columns {missing} are missing; restore them or move it away")
        manual = old.set_index(KEY)[list(MANUAL_COLUMNS)]
        index = pd.MultiIndex.from_frame(sheet[KEY].astype(str))
        for col in MANUAL_COLUMNS:
            sheet[col] = manual[col].reindex(index).fillna("").to_numpy()
        gone = old.loc[~pd.MultiIndex.from_frame(old[KEY]).isin(index)]
        sheet = pd.concat([sheet.astype(object), gone], ignore_index=True)
    tmp = path.with_suffix(".csv.tmp")
    write_csv(sheet, tmp)
    tmp.replace(path)
    return path


def parse_manual(value: object) -> bool | None:
    """A researcher's verdict: yes/true/1/valid → True, no/false/0/invalid → False, blank → None.

    Examples
    --------
    >>> [parse_manual(v) for v in ("yes", "0", "", "Valid")]
    [True, False, None, True]
    """
    text = str(value if value is not None else "").strip().lower()
    if text in ("", "nan", "none"):
        return None
    if text in ("yes", "y", "true", "t", "1", "valid", "ok"):
        return True
    if text in ("no", "n", "false", "f", "0", "invalid", "bad"):
        return False
    raise ValueError(f"manual_valid must be yes/no (or blank), not {value!r}")


def read_validation(root: str | Path) -> pd.DataFrame:
    """The validation sheet with ``manual_valid`` parsed (a bad value names its row)."""
    path = falsified_dir(root) / VALIDATION_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: run `framelab news falsify` first")
    sheet = read_csv(path, dtype=str, keep_default_na=False)
    parsed = []
    for number, value in enumerate(sheet["manual_valid"], start=2):
        try:
            parsed.append(parse_manual(value))
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
    sheet["manual_valid"] = pd.Series(parsed, dtype=object)
    sheet["embed_cosine"] = pd.to_numeric(sheet["embed_cosine"], errors="coerce")
    sheet["word_change"] = pd.to_numeric(sheet["word_change"], errors="coerce")
    return sheet


def check_and_write(
    root: str | Path,
    *,
    embedder: Callable[[Sequence[str]], np.ndarray],
    options: CheckOptions | None = None,
    nli: NLIScorer | None = None,
) -> tuple[pd.DataFrame, Path]:
    """Check every negate record and regenerate the validation sheet.

    Returns
    -------
    (pandas.DataFrame, Path)
        The checked pairs and the sheet's path.
    """
    pairs = read_negations(root)
    checked = meaning_check(pairs, embedder=embedder, options=options, nli=nli)
    return checked, write_validation(root, checked)
