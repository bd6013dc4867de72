"""BERTScore of perspective summaries against their reference summaries (PoliSum).

Deas & McKeown (COLING 2025) score each perspective summary against the dataset's reference
summary of that perspective with ROUGE and BERTScore (Zhang et al., ICLR 2020). BERTScore is
computed by the ``bert-score`` package from a *local* checkpoint directory: nothing is
downloaded on the machines this runs on, so the model must be a path (a copy of
``roberta-large``, the package's English default, or any BERT-family encoder).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.metrics.records import column, group_means, select_task

__all__ = ["bertscore", "bertscore_means", "default_num_layers", "perspective_references"]


def default_num_layers(model: str | Path) -> int:
    """The layer whose embeddings BERTScore compares for a local checkpoint.

    ``bert-score`` keeps a table of the best layer per published model (e.g. 17 for
    ``roberta-large``), chosen by its authors on WMT16 correlations. A local directory named like
    one of those models (``…/roberta-large``) uses that layer; any other model uses its last
    layer (the checkpoint's ``num_hidden_layers``), which the report then states.
    """
    from bert_score.utils import model2layers
    from transformers import AutoConfig

    name = Path(model).name
    if name in model2layers:
        return int(model2layers[name])
    return int(AutoConfig.from_pretrained(str(model)).num_hidden_layers)


def bertscore(
    candidates: Sequence[str],
    references: Sequence[str],
    *,
    model: str | Path,
    num_layers: int | None = None,
    idf: bool = False,
    batch_size: int = 64,
    device: str | None = None,
    baseline_path: str | Path | None = None,
) -> pd.DataFrame:
    """BERTScore precision, recall and F1 of each candidate against its reference.

    With contextual embeddings x (reference tokens) and x̂ (candidate tokens), L2-normalised:
    R = mean over x_i of max_j x_iᵀx̂_j, P = mean over x̂_j of max_i x_iᵀx̂_j, F = 2PR/(P + R)
    (Zhang et al. 2020, §3). As the authors' package does it, the means run over the word
    pieces (``[CLS]``/``[SEP]`` weigh 0) while the max may match the other text's
    ``[CLS]``/``[SEP]`` embedding; with ``idf`` the means are IDF-weighted over the references.

    Parameters
    ----------
    candidates, references : sequence of str
        Pairs of texts of equal length.
    model : str or Path
        A local checkpoint directory (weights and tokenizer).
    num_layers : int, optional
        Layer to compare; default :func:`default_num_layers`.
    idf : bool, default False
        IDF weighting computed on ``references`` (the package's option).
    batch_size : int, default 64
    device : str, optional
        ``"cpu"``, ``"cuda"``, …; default the package's choice.
    baseline_path : str or Path, optional
        A rescaling baseline file (the package's ``rescale_baseline`` CSV for this model and
        layer); without it scores are not rescaled.

    Returns
    -------
    pandas.DataFrame
        One row per pair: ``bertscore_p``, ``bertscore_r``, ``bertscore_f``.
    """
    if len(candidates) != len(references):
        raise ValueError(
            f"{len(candidates)} candidates but {len(references)} references: they must pair up"
        )
    if not Path(model).is_dir():
        raise ValueError(
            f"BERTScore needs a local checkpoint directory, got {str(model)!r} "
            "(no model can be downloaded here; copy e.g. roberta-large to a folder)"
        )
    if len(candidates) == 0:
        return pd.DataFrame(columns=["bertscore_p", "bertscore_r", "bertscore_f"])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from bert_score import BERTScorer

    try:
        layers = num_layers if num_layers is not None else default_num_layers(model)
        with _length_bounded(Path(model)) as checkpoint:
            scorer = BERTScorer(
                model_type=str(checkpoint),
                num_layers=layers,
                idf=idf,
                idf_sents=list(references) if idf else None,
                batch_size=batch_size,
                device=device,
                rescale_with_baseline=baseline_path is not None,
                baseline_path=str(baseline_path) if baseline_path is not None else None,
                lang="en" if baseline_path is not None else None,
            )
    except (OSError, ValueError) as exc:  # transformers: no or an unknown checkpoint
        raise ValueError(f"cannot load a BERTScore checkpoint from {str(model)!r}: {exc}") from exc
    p, r, f = scorer.score([str(c) for c in candidates], [str(t) for t in references])
    return pd.DataFrame(
        {"bertscore_p": p.numpy(), "bertscore_r": r.numpy(), "bertscore_f": f.numpy()}
    )


@contextmanager
def _length_bounded(model: Path) -> Iterator[Path]:
    """The checkpoint with its tokenizer's length bounded by the model's positions.

    A checkpoint saved without ``model_max_length`` reports a huge sentinel, which fast
    tokenizers reject when ``bert-score`` truncates to it; the model can read no more than its
    position embeddings anyway. ``bert-score`` loads the tokenizer itself, so the bound goes
    where ``from_pretrained`` reads it: a folder of links to the checkpoint's files whose
    ``tokenizer_config.json`` states it (the checkpoint itself is not changed).
    """
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(model))
    limit = getattr(config, "max_position_embeddings", None)
    # RoBERTa-family position ids start after the padding index, leaving two fewer slots.
    bound = limit - (2 if config.model_type == "roberta" else 0) if limit else None
    settings_file = model / "tokenizer_config.json"
    settings = json.loads(settings_file.read_text("utf-8")) if settings_file.is_file() else {}
    declared = settings.get("model_max_length")
    if bound is None or (isinstance(declared, int) and declared <= bound):
        yield model
        return
    with tempfile.TemporaryDirectory(prefix="bertscore-") as tmp:
        view = Path(tmp)
        for entry in model.iterdir():
            if entry.name != settings_file.name:
                (view / entry.name).symlink_to(entry.resolve())
        settings["model_max_length"] = bound
        (view / settings_file.name).write_text(json.dumps(settings), encoding="utf-8")
        yield view


def perspective_references(
    inputs: pd.DataFrame,
    records: pd.DataFrame,
    *,
    reference_field: str = "{perspective}_summary",
) -> pd.DataFrame:
    """Pair each perspective summary with its perspective's reference summary.

    Parameters
    ----------
    inputs : pandas.DataFrame
        :func:`analysis.metrics.extraction.perspective_inputs` of ``records``.
    records : pandas.DataFrame
        The ``perspective-summary`` records (for the reference fields of their input).
    reference_field : str, default "{perspective}_summary"
        Field of the reference summary; ``{perspective}`` becomes ``left`` or ``right``
        (PoliSum's ``left_summary``/``right_summary``).

    Returns
    -------
    pandas.DataFrame
        ``item_id``, ``dataset``, ``model``, ``method``, ``perspective``, ``order``,
        ``summary`` and ``reference``; summaries without a reference are left out.
    """
    rows = select_task(records, "perspective-summary").reset_index(drop=True)
    if len(rows) != len(inputs):
        raise ValueError("inputs must be perspective_inputs(records) of the same records")
    refs = []
    for rec in rows.to_dict(orient="records"):
        name = reference_field.format(perspective=rec.get("perspective"))
        try:
            value = rec[column(rows, name)]
        except KeyError:
            value = None
        refs.append(None if value is None or pd.isna(value) else str(value))
    out = inputs.drop(columns=["passages"]).reset_index(drop=True).copy()
    out["reference"] = refs
    return out.dropna(subset=["reference"]).reset_index(drop=True)


def bertscore_means(
    table: pd.DataFrame,
    *,
    by: Sequence[str] = ("model", "method", "perspective"),
    scale: float = 100.0,
) -> pd.DataFrame:
    """Mean BERTScore P, R and F1 per group, times ``scale``.

    PoliSum reports BERTScore multiplied by 100 (001 Table 3), so the means are on that scale by
    default; the per-pair scores of :func:`bertscore` stay in [0, 1] (``scale=1`` keeps the
    means there too).

    Returns
    -------
    pandas.DataFrame
        The ``by`` columns present, ``n``, ``bertscore_p``, ``bertscore_r``, ``bertscore_f``.
    """
    keys = [c for c in by if c in table.columns]
    cols = ["bertscore_p", "bertscore_r", "bertscore_f"]
    out = group_means(table, keys, cols, "n")
    out[cols] *= scale
    return out.astype({"n": np.int64})
