"""Figures of the content-alteration metrics. Each takes a computed table and an optional ``ax``
and returns the ``Axes``; nothing here computes a metric, shows or saves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis.plots.axes import axes_or_new

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "plot_extraction_coverage",
    "plot_framing_transitions",
    "plot_hallucination",
    "plot_judge_outcomes",
    "plot_positional_distribution",
    "plot_primacy",
]


def _label(table: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    cols = [k for k in keys if k in table.columns and table[k].nunique(dropna=False) > 1]
    if not cols:
        cols = [k for k in keys if k in table.columns][:1]
    if not cols:
        return [str(i) for i in range(len(table))]
    return [" / ".join(str(v) for v in row) for row in table[cols].itertuples(index=False)]


def _grouped_bars(ax: Axes, labels: list[str], series: dict[str, np.ndarray]) -> None:
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(labels))
    for i, (name, values) in enumerate(series.items()):
        ax.bar(x - 0.4 + width * (i + 0.5), values, width=width, label=name)
    ax.set_xticks(x, labels, rotation=30 if len(labels) > 3 else 0, ha="right")
    ax.legend(fontsize="small")


def plot_framing_transitions(table: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Bars of the six framing transitions (% of items) per group of :func:`framing_change`."""
    from analysis.metrics.framing import TRANSITION_COLUMNS, TRANSITIONS

    ax = axes_or_new(ax)
    short = {"positive": "Pos", "negative": "Neg", "neutral": "Neu"}
    cols = list(TRANSITION_COLUMNS)
    names = [f"{short[s]}→{short[d]}" for s, d in TRANSITIONS]
    labels = _label(table, ("model", "dataset", "method"))
    _grouped_bars(
        ax,
        names,
        {lab: table.iloc[i][cols].to_numpy(float) for i, lab in enumerate(labels)},
    )
    ax.set_ylabel("% of items")
    ax.set_title("Framing transitions (source → summary)")
    return ax


def plot_primacy(scores: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Mean s_b, s_m, s_e per group of :func:`primacy_scores`, with ψpri in the labels."""
    ax = axes_or_new(ax)
    labels = [
        f"{lab}\nψpri={p:.2f}"
        for lab, p in zip(
            _label(scores, ("model", "dataset", "method")), scores["psi_pri"], strict=True
        )
    ]
    series = {name: scores[col].to_numpy(float) for name, col in
              (("beginning s_b", "s_b"), ("middle s_m", "s_m"), ("end s_e", "s_e"))}  # fmt: skip
    _grouped_bars(ax, labels, series)
    ax.set_ylabel("mean cosine similarity")
    ax.set_title("Summary similarity to source thirds")
    return ax


def plot_positional_distribution(
    dist: pd.DataFrame, ax: Axes | None = None, *, reference: str = "gold"
) -> Axes:
    """Share of summary sentences per segment, reference vs systems (positional_distribution)."""
    ax = axes_or_new(ax)
    systems = [reference] + sorted(s for s in dist["system"].unique() if s != reference)
    segments = sorted(dist["segment"].unique())
    series = {
        s: dist.loc[dist["system"] == s].set_index("segment")["share"].reindex(segments).to_numpy()
        for s in systems
        if (dist["system"] == s).any()
    }
    k = len(segments)
    _grouped_bars(ax, [f"{(j - 0.5) / k:.2f}" for j in segments], series)
    ax.set_xlabel("relative segment centre")
    ax.set_ylabel("share of summary sentences")
    ax.set_title("Positional distribution")
    return ax


def plot_judge_outcomes(shares: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Stacked outcome shares per similarity bin (one judge's rows of :func:`outcome_shares`).

    Each bar is the bin's outcomes as shares summing to 1, as the overlap paper draws them (a
    bin's item count would otherwise dominate the picture); empty bins are left blank.
    """
    from analysis.metrics.overlap import OUTCOMES

    ax = axes_or_new(ax)
    wide = shares.pivot_table(index="bin_low", columns="outcome", values="n", aggfunc="sum")
    wide = wide.reindex(columns=list(OUTCOMES), fill_value=0).fillna(0)
    totals = wide.sum(axis=1).to_numpy(float)
    wide = wide.div(np.where(totals > 0, totals, 1.0), axis=0)
    widths = shares.groupby("bin_low")["bin_high"].first().reindex(wide.index) - wide.index
    bottom = np.zeros(len(wide))
    for outcome in OUTCOMES:
        counts = wide[outcome].to_numpy(float)
        ax.bar(wide.index, counts, width=widths.to_numpy() * 0.9, bottom=bottom, align="edge",
               label=outcome)  # fmt: skip
        bottom += counts
    ax.set_xlabel("similarity to the human summary (mean of BLEU-1, BLEU-4, ROUGE-1, ROUGE-2)")
    ax.set_ylabel("share of items in the bin")
    ax.set_ylim(0, 1)
    ax.legend(fontsize="small")
    ax.set_title("Judge outcome by similarity")
    return ax


def plot_extraction_coverage(table: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Mean coverage per bin and model from :func:`coverage_by` (one ``by`` at a time)."""
    ax = axes_or_new(ax)
    by = str(table["by"].iloc[0]) if len(table) else "position"
    for model, g in table.groupby("model", sort=True) if "model" in table else [("all", table)]:
        ax.plot(g["bin"], g["coverage"], marker="o", label=str(model))
    ax.set_xlabel("passage position" if by == "position" else f"{by} percentile bin")
    value = str(table["value"].iloc[0]) if len(table) else "coverage"
    ax.set_ylabel(f"mean {value}")
    ax.set_title(f"Extraction coverage by {by}")
    ax.legend(fontsize="small")
    return ax


def plot_hallucination(scores: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Strict accuracy s_TH per group (model, method, template) and period."""
    from analysis.metrics.hallucination import HALLUCINATION_GROUPS, PERIODS

    ax = axes_or_new(ax)
    keys = [c for c in HALLUCINATION_GROUPS if c in scores.columns]
    # One bar group per model × method × template: their answers are never pooled.
    labels = scores[keys].astype(str).agg(" / ".join, axis=1).rename("group")
    table = scores.assign(group=labels)
    wide = table.pivot_table(index="group", columns="period", values="strict_acc", aggfunc="first")
    periods = [p for p in PERIODS if p in wide.columns]
    _grouped_bars(ax, list(map(str, wide.index)), {p: wide[p].to_numpy(float) for p in periods})
    ax.set_ylabel("strict accuracy s_TH")
    ax.set_ylim(0, 1)
    ax.set_title("Fact-check strict accuracy around the cutoff")
    return ax
