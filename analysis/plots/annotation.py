"""Figures of the annotation study: shift-count distribution, majority-shift rates, human-model
correlations and the model x model heatmap.

Each function takes a table from ``analysis.stats.annotation`` / ``analysis.stats.correlation``
and an optional ``ax`` and returns the ``Axes``; nothing here fits, shows or saves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.plots.axes import axes_or_new, error_lengths
from analysis.plots.choice import significance_stars

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = [
    "contrast_text_color",
    "plot_human_model_correlation",
    "plot_majority_shift",
    "plot_model_heatmap",
    "plot_shift_distribution",
]


def plot_shift_distribution(dist: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Share of items with 0..K human shifts, with 95% Wilson CIs.

    Parameters
    ----------
    dist : pandas.DataFrame
        Output of :func:`analysis.stats.annotation.shift_distribution`.
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = axes_or_new(ax, (5.0, 3.8))
    ax.bar(
        dist["shift_count"].astype(int),
        dist["estimate"],
        yerr=error_lengths(dist["estimate"], dist["ci_low"], dist["ci_high"]),
        capsize=3,
        color="#55A868",
    )
    ax.set_xticks(dist["shift_count"].astype(int))
    ax.set_xlabel("annotators whose label differs from the base sentiment")
    ax.set_ylabel("share of items")
    ax.set_title(f"Shift-count distribution (n = {int(dist['n_items'].sum())} items)")
    return ax


def plot_majority_shift(rates: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Grouped bars of shift rates by base sentiment for humans (majority) and each model.

    Parameters
    ----------
    rates : pandas.DataFrame
        Rows with ``source`` (``humans`` or a model), ``base_sentiment``, ``estimate``,
        ``ci_low``, ``ci_high``: :func:`~analysis.stats.annotation.majority_shift_rates`
        concatenated with :func:`~analysis.stats.annotation.model_shift_rates`.
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    sources = list(dict.fromkeys(rates["source"]))
    groups = list(dict.fromkeys(rates["base_sentiment"]))
    ax = axes_or_new(ax, (max(5.0, 1.2 * len(groups) * len(sources) / 2 + 3), 4.0))
    width = 0.8 / max(len(sources), 1)
    x = np.arange(len(groups))
    for i, source in enumerate(sources):
        sel = rates[rates["source"] == source].set_index("base_sentiment").reindex(groups)
        ax.bar(
            x + (i - (len(sources) - 1) / 2) * width,
            sel["estimate"],
            width,
            yerr=error_lengths(sel["estimate"], sel["ci_low"], sel["ci_high"]),
            capsize=3,
            label=str(source),
        )
    ax.set_xticks(x, groups)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("base sentiment")
    ax.set_ylabel("share of items shifted")
    ax.set_title("Majority shift (humans) and model shift by base sentiment, 95% CIs")
    ax.legend(fontsize=8)
    return ax


def plot_human_model_correlation(corr: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Horizontal bars of Pearson r between the human shift count and each model's shift.

    Model names (often long: ``meta-llama/Llama-3.1-8B-Instruct``) sit on the y axis where they
    stay readable at any length; 95% CIs as error bars; stars from the Pearson t-test p of each
    model (items as independent units), as the caption says.

    Parameters
    ----------
    corr : pandas.DataFrame
        Output of :func:`analysis.stats.correlation.human_model_correlation`.
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    ax = axes_or_new(ax, (7.0, max(2.5, 0.45 * len(corr) + 1.5)))
    names = corr["model"].astype(str).tolist()
    y = np.arange(len(names))[::-1]  # first model on top
    ax.barh(
        y,
        corr["estimate"],
        xerr=error_lengths(corr["estimate"], corr["ci_low"], corr["ci_high"]),
        capsize=3,
        color="#8172B2",
    )
    for yi, high, p in zip(y, corr["ci_high"], corr["p_val"], strict=True):
        stars = significance_stars(p)
        if stars:
            ax.text(float(high) + 0.02, yi, stars, ha="left", va="center")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(y, names)
    ax.set_xlim(min(-0.1, float(corr["ci_low"].min()) - 0.05), 1.1)
    ax.set_xlabel("Pearson r with the human shift count (95% CI)")
    ax.set_title("Human-model agreement on framing shifts")
    return ax


def contrast_text_color(rgba) -> str:
    """``"black"`` or ``"white"``, whichever contrasts more with a background colour.

    Uses the WCAG relative luminance (sRGB linearised, 0.2126 R + 0.7152 G + 0.0722 B) and
    picks the text colour with the larger contrast ratio, so labels on dark heatmap cells are
    white and on light cells black.

    Parameters
    ----------
    rgba : sequence of float
        Colour with components in 0..1 (alpha ignored).

    Returns
    -------
    str

    Examples
    --------
    >>> contrast_text_color((0.05, 0.1, 0.4, 1.0)), contrast_text_color((0.95, 0.95, 0.9))
    ('white', 'black')
    """

    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(float(c)) for c in tuple(rgba)[:3])
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    # Contrast ratio (L1 + 0.05) / (L2 + 0.05) against white (L = 1) and black (L = 0).
    return "white" if (1.05 / (lum + 0.05)) > ((lum + 0.05) / 0.05) else "black"


def plot_model_heatmap(matrix: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Heatmap of model x model Pearson correlations of shift indicators.

    Parameters
    ----------
    matrix : pandas.DataFrame
        Output of :func:`analysis.stats.correlation.model_correlation_matrix` (long form).
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    wide = matrix.pivot(index="model_a", columns="model_b", values="estimate")
    n = len(wide)
    ax = axes_or_new(ax, (1.0 * n + 3, 0.9 * n + 2))
    image = ax.imshow(wide.to_numpy(float), vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(n), wide.columns.astype(str), rotation=45, ha="right")
    ax.set_yticks(range(n), wide.index.astype(str))
    for i in range(n):
        for j in range(n):
            value = wide.iloc[i, j]
            if value == value:
                color = contrast_text_color(image.cmap(image.norm(value)))
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8, color=color)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="Pearson r")
    ax.set_title("Model x model correlation of shifts")
    return ax
