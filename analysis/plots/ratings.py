"""Figures of summary-rating and pairwise-preference studies.

Each function takes a table from ``analysis.stats.ratings`` / ``analysis.stats.preferences`` (or
``analysis.metrics.overlap.outcome_shares``) and an optional ``ax`` and returns the ``Axes``;
nothing here fits, shows or saves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.plots.axes import axes_or_new, error_lengths

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = [
    "plot_metric_tau",
    "plot_order_consistency",
    "plot_outcomes_by_bin",
    "plot_preference_by_bin",
    "plot_rating_means",
]


OUTCOME_COLORS = {
    "GT": "#4C72B0",
    "Generated": "#DD8452",
    "tied-chose-first": "#8C8C8C",
    "tied-chose-last": "#CCCCCC",
    "other": "#F2F2F2",
}


def plot_rating_means(
    means: pd.DataFrame, *, scale: tuple[int, int] = (1, 4), ax: Axes | None = None
) -> Axes:
    """Grouped bars: mean rating per dimension (groups) and system (bars), with CIs.

    Parameters
    ----------
    means : pandas.DataFrame
        Output of :func:`analysis.stats.ratings.rating_means` (one row per system x dimension).
    scale : tuple of int
        Lowest and highest scale point (the y-axis range).
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    dims = list(dict.fromkeys(means["dimension"]))
    systems = list(dict.fromkeys(means["system"]))
    ax = axes_or_new(ax, (max(6.0, 0.5 * len(dims) * len(systems) + 2), 4.0))
    width = 0.8 / max(len(systems), 1)
    x = np.arange(len(dims))
    for i, system in enumerate(systems):
        sel = means[means["system"] == system].set_index("dimension").reindex(dims)
        ax.bar(
            x + (i - (len(systems) - 1) / 2) * width,
            sel["estimate"] - scale[0],
            width,
            bottom=scale[0],
            yerr=error_lengths(sel["estimate"], sel["ci_low"], sel["ci_high"]),
            capsize=3,
            label=str(system),
        )
    ax.set_xticks(x, [d.capitalize() for d in dims])
    ax.set_ylim(scale[0], scale[1] + 0.2)
    ax.set_ylabel(f"mean rating ({scale[0]}-{scale[1]})")
    ax.set_title("Mean rating per system and dimension, 95% CIs")
    ax.legend(fontsize=8, ncols=min(len(systems), 4))
    return ax


def plot_metric_tau(tau: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Heatmap of Kendall's tau between automatic metrics (rows) and rated dimensions (columns).

    Parameters
    ----------
    tau : pandas.DataFrame
        Output of :func:`analysis.stats.ratings.metric_rating_tau`.
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    wide = tau.pivot(index="metric", columns="dimension", values="estimate")
    ax = axes_or_new(ax, (0.9 * wide.shape[1] + 3, 0.6 * wide.shape[0] + 2))
    image = ax.imshow(wide.to_numpy(float), vmin=-1, vmax=1, cmap="RdBu_r", aspect="auto")
    ax.set_xticks(range(wide.shape[1]), wide.columns.astype(str), rotation=30, ha="right")
    ax.set_yticks(range(wide.shape[0]), wide.index.astype(str))
    for i in range(wide.shape[0]):
        for j in range(wide.shape[1]):
            value = wide.iloc[i, j]
            if value == value:
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="Kendall's tau")
    ax.set_title("Automatic metrics vs human ratings (per summary)")
    return ax


def plot_preference_by_bin(shares: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Share of verdicts preferring the reference summary per similarity bin, one line per system.

    Parameters
    ----------
    shares : pandas.DataFrame
        Output of :func:`analysis.stats.preferences.preference_by_bin` (rows with ``bin`` =
        ``all`` are drawn as a dashed line).
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = axes_or_new(ax, (6.0, 4.0))
    binned = shares[(shares["bin"] != "all") & (shares["n"] > 0)]
    overall = shares[shares["bin"] == "all"]
    systems = list(dict.fromkeys(shares["system"])) if "system" in shares else [None]
    for system in systems:
        sel = binned if system is None else binned[binned["system"] == system]
        mid = (sel["bin_low"] + sel["bin_high"]) / 2
        line = ax.errorbar(
            mid,
            sel["estimate"],
            yerr=error_lengths(sel["estimate"], sel["ci_low"], sel["ci_high"]),
            marker="o",
            capsize=3,
            label=str(system) if system is not None else "all",
        )
        total = overall if system is None else overall[overall["system"] == system]
        if len(total):
            ax.axhline(
                float(total["estimate"].iloc[0]),
                linestyle="--",
                linewidth=0.8,
                color=line[0].get_color(),
            )
    ax.axhline(0.5, color="black", linewidth=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("similarity of the two summaries (mean of BLEU-1/4, ROUGE-1/2)")
    ax.set_ylabel("share preferring the human summary")
    ax.set_title("Human preference for the reference by overlap, 95% Wilson CIs")
    ax.legend(fontsize=8, title="generated by")
    return ax


def plot_outcomes_by_bin(shares: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Stacked outcome shares per judge (humans and LLM judges) and similarity bin.

    Parameters
    ----------
    shares : pandas.DataFrame
        Output of :func:`analysis.stats.preferences.outcomes_side_by_side`.
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    data = shares[shares["share"].notna()]
    judges = list(dict.fromkeys(data["judge"]))
    bins = list(dict.fromkeys(zip(data["bin_low"], data["bin_high"], strict=True)))
    cols = [(j, b) for b in bins for j in judges]
    ax = axes_or_new(ax, (max(6.0, 0.45 * len(cols) + 2), 4.2))
    x = np.arange(len(cols))
    bottom = np.zeros(len(cols))
    keys = ["judge", "bin_low", "bin_high"]
    wide = data.pivot_table(index=keys, columns="outcome", values="share", aggfunc="sum")
    wide = wide.reindex(
        index=[(j, low, high) for j, (low, high) in cols], columns=list(OUTCOME_COLORS)
    )
    for outcome, color in OUTCOME_COLORS.items():
        heights = wide[outcome].fillna(0.0).to_numpy(float)
        if heights.any():
            ax.bar(x, heights, 0.8, bottom=bottom, color=color, label=outcome, edgecolor="white")
        bottom += heights
    ax.set_xticks(x, [f"{j}\n{low:.1f}-{high:.1f}" for j, (low, high) in cols], fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of pairs")
    ax.set_title("Outcomes by similarity bin: humans vs LLM judges")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax


def plot_order_consistency(per_rater: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Each rater's share of verdicts for the summary shown first, with 95% Wilson CIs.

    Parameters
    ----------
    per_rater : pandas.DataFrame
        Output of :func:`analysis.stats.preferences.order_consistency`.
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    ordered = per_rater.sort_values("share_first").reset_index(drop=True)
    ax = axes_or_new(ax, (6.0, 4.0))
    y = np.arange(len(ordered))
    ax.errorbar(
        ordered["share_first"],
        y,
        xerr=error_lengths(ordered["share_first"], ordered["ci_low"], ordered["ci_high"]),
        fmt="o",
        capsize=2,
        color="#55A868",
    )
    ax.axvline(0.5, color="black", linewidth=0.8)
    ax.set_yticks([])
    ax.set_xlim(0, 1)
    ax.set_xlabel("share choosing the summary shown first")
    ax.set_ylabel(f"raters (n = {len(ordered)})")
    ax.set_title("Position preference per rater")
    return ax
