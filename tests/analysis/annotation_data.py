"""Simulated sentiment-annotation studies for the analysis tests: labels in the annotation
``long`` export format and model judgments, a pure function of its arguments and a seed."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit, logit


def simulate_annotation_study(
    n_items: int = 100,
    annotators_per_item: int = 5,
    n_annotators: int = 40,
    *,
    seed: int = 0,
    shift_prob: dict[str, float] | None = None,
    item_sd_logit: float = 1.0,
    models: dict[str, float] | None = None,
    study_slug: str = "sim-annotation",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Simulate a sentiment-annotation study (labels in the ``long`` export) and model judgments.

    Each item has a latent "reframing strength"; a human label shifts (is the opposite sentiment,
    or neutral half as often) with probability ``shift_prob[base]`` moved by that strength, so
    human shift counts and model shifts are positively correlated through the item.

    Parameters
    ----------
    n_items, annotators_per_item, n_annotators : int
        Items; labels per item (distinct annotators); size of the annotator pool.
    seed : int
        Seed of the whole simulation.
    shift_prob : dict, optional
        Probability that a label differs from the base sentiment, per base sentiment at the
        average item; default ``{"positive": 0.3, "negative": 0.5}``.
    item_sd_logit : float
        SD of the item strengths on the logit scale.
    models : dict, optional
        Model name -> weight of the item strength in that model's shift probability;
        default two models.
    study_slug : str
        Value of the ``study_slug`` column.

    Returns
    -------
    labels : pandas.DataFrame
        One row per label with every column of the annotation ``long`` export.
    predictions : pandas.DataFrame
        ``item_id, model, label`` (``positive|negative|neutral|other``).
    """
    rng = np.random.default_rng(seed)
    shift_prob = shift_prob or {"positive": 0.3, "negative": 0.5}
    models = models or {"model-a": 1.0, "model-b": 0.6}
    raw_ids = rng.integers(0, 2**63, size=n_annotators, dtype="int64")
    annotators = [f"p_{int(v):016x}" for v in raw_ids]
    items = [f"item{i + 1:04d}" for i in range(n_items)]
    base = rng.choice(["positive", "negative"], size=n_items)
    strength = rng.normal(0, item_sd_logit, n_items)
    opposite = {"positive": "negative", "negative": "positive"}
    rows = []
    trial_counter = dict.fromkeys(annotators, 0)
    for i, item in enumerate(items):
        chosen = rng.choice(n_annotators, size=annotators_per_item, replace=False)
        p = expit(logit(shift_prob[base[i]]) + strength[i])
        for a in chosen:
            shifted = rng.random() < p
            if shifted:
                label = opposite[base[i]] if rng.random() < 2 / 3 else "neutral"
            else:
                label = base[i]
            rows.append(
                {
                    "study_slug": study_slug,
                    "participant_id": annotators[a],
                    "platform": "prolific",
                    "status": "completed",
                    "item_id": item,
                    "label": label,
                    "base_sentiment": base[i],
                    "is_gold": 0,
                    "gold_correct": None,
                    "surplus": 0,
                    "trial_index": trial_counter[annotators[a]],
                    "rt_ms": int(rng.gamma(4, 1500)),
                    "answered_at": "2026-01-02T10:00:00Z",
                }
            )
            trial_counter[annotators[a]] += 1
    labels = pd.DataFrame(rows)
    pred_rows = []
    for name, weight in models.items():
        p = expit(logit(0.35) + weight * strength)
        draws = rng.random(n_items)
        for i, item in enumerate(items):
            if draws[i] < p[i]:
                label = opposite[base[i]]
            else:
                label = rng.choice([base[i], base[i], "neutral", "other"])
            pred_rows.append({"item_id": item, "model": name, "label": str(label)})
    return labels, pd.DataFrame(pred_rows)
