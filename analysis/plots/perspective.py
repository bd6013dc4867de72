"""Figure of perspective-summary extraction: how much each perspective's summaries take from
passages of its own and of the opposite side (PoliSum, Deas & McKeown 2025). Takes a computed
table and an optional ``ax``; computes nothing, never shows or saves."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from analysis.plots.axes import axes_or_new

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_coverage_by_perspective"]


def plot_coverage_by_perspective(table: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Mean coverage by passage position, one line per summary perspective × passage side.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`analysis.metrics.extraction.coverage_by_perspective` (models are
        averaged with equal weight when there are several).
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = axes_or_new(ax, (7, 4))
    # One value per model first, so a model with more items does not outweigh the others.
    cells = table.groupby(["perspective", "side", "passage"], sort=True)["coverage"].mean()
    for (perspective, side), line in cells.groupby(level=[0, 1], sort=True):
        same = perspective == side
        ax.plot(
            line.index.get_level_values("passage"),
            line.to_numpy(),
            marker="o" if same else "x",
            linestyle="-" if same else "--",
            label=f"{perspective} summary ← {side} passages",
        )
    ax.set_xlabel("passage position in the input")
    ax.set_ylabel("mean extraction coverage")
    ax.set_ylim(0, None)
    ax.set_title("Extraction coverage by perspective")
    ax.legend(fontsize="small")
    return ax
