"""Figures of the choice study: selection rates per pair and per format, WTP by format.

Each function takes the table computed by ``analysis.stats.choice`` / ``analysis.stats.wtp`` and an
optional ``ax``, draws, and returns the ``Axes``. Nothing here fits a model, shows or saves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from analysis.plots.axes import axes_or_new, error_lengths

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = ["plot_format_rates", "plot_pair_rates", "significance_stars"]

COLORS = {"original": "#4C72B0", "summary": "#DD8452"}


def significance_stars(p: float) -> str:
    """Return ``***`` (p < .001), ``**`` (p < .01), ``*`` (p < .05) or ``""`` (also for NaN).

    Parameters
    ----------
    p : float
        A p-value.

    Returns
    -------
    str
        The stars.

    Examples
    --------
    >>> significance_stars(0.003)
    '**'
    """
    if p is None or p != p:  # NaN
        return ""
    if p < 0.001:
        return "***"
    if p < 0.01:
        return "**"
    if p < 0.05:
        return "*"
    return ""


def plot_pair_rates(
    by_pair: pd.DataFrame,
    *,
    pair: str = "pair_id",
    levels: Sequence[str] = ("original", "summary"),
    p_col: str | None = "p_adj",
    ax: Axes | None = None,
) -> Axes:
    """Grouped bars of the target selection rate per pair and format, 95% CIs, stars.

    Parameters
    ----------
    by_pair : pandas.DataFrame
        Output of :func:`analysis.stats.choice.choice_by_pair`.
    pair : str
        Pair column.
    levels : sequence of str
        The formats, in plotting order.
    p_col : str, optional
        Which p-value sets the stars (``p_adj``, corrected; or ``p_val``); none without.
    ax : matplotlib Axes, optional
        Where to draw; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    ax = axes_or_new(ax, (max(6.0, 0.8 * len(by_pair) + 2), 4.0))
    x = np.arange(len(by_pair))
    width = 0.76 / len(levels)
    for i, level in enumerate(levels):
        est = by_pair[f"rate_{level}"]
        ax.bar(
            x + (i - (len(levels) - 1) / 2) * width,
            est,
            width,
            yerr=error_lengths(est, by_pair[f"ci_low_{level}"], by_pair[f"ci_high_{level}"]),
            capsize=3,
            color=COLORS.get(level),
            label=level,
        )
    tops = np.nanmax(
        np.vstack([by_pair[f"ci_high_{level}"].to_numpy(float) for level in levels]), axis=0
    )
    for xi, top, p in zip(x, tops, by_pair[p_col] if p_col else [None] * len(x), strict=True):
        stars = significance_stars(p)
        if stars:
            ax.text(xi, min(top, 1.0) + 0.03, stars, ha="center", va="bottom")
    ax.set_xticks(x, by_pair[pair].astype(str), rotation=45, ha="right")
    ax.set_ylim(0, 1.3)
    ax.set_ylabel("target selection rate")
    ax.set_xlabel("product pair")
    ax.legend(title="format", loc="upper left", ncols=2, fontsize=8)
    stars = f"; stars: {p_col}" if p_col else ""
    ax.set_title(f"Selection rate by pair (95% Wilson CIs{stars})")
    return ax


def plot_format_rates(
    rates: pd.DataFrame,
    *,
    between: str = "format",
    p_val: float | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Bars of the overall selection rate per format with trial-level 95% Wilson CIs.

    Parameters
    ----------
    rates : pandas.DataFrame
        Output of :func:`analysis.stats.choice.selection_rates`.
    between : str
        Format column.
    p_val : float, optional
        p-value of the format comparison (e.g. the chi-square test), shown as stars.
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = axes_or_new(ax, (4.0, 4.0))
    labels = rates[between].astype(str).tolist()
    ax.bar(
        labels,
        rates["estimate"],
        yerr=error_lengths(rates["estimate"], rates["ci_low"], rates["ci_high"]),
        capsize=4,
        color=[COLORS.get(level, "#888888") for level in labels],
    )
    if p_val is not None and significance_stars(p_val):
        top = float(rates["ci_high"].max())
        ax.plot([0, 0, 1, 1], [top + 0.03, top + 0.05, top + 0.05, top + 0.03], color="black")
        ax.text(0.5, top + 0.06, significance_stars(p_val), ha="center")
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("target selection rate")
    # The figure travels without its caption: it names its intervals itself. Wilson intervals
    # over trials treat a participant's choices as independent, so they are narrower than the
    # clustered models' beside the stars.
    ax.set_title("Selection rate by format\n(95% Wilson CIs over trials, clustering ignored)")
    return ax
