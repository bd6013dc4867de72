"""Figure of a k-format choice study: the shift in target choice each format causes.

Takes the risk-difference rows of :func:`analysis.stats.choice.choice_effects` and an optional
``ax``, draws,
returns the ``Axes``; nothing here fits, shows or saves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.plots.axes import axes_or_new

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = ["plot_format_shifts"]


def plot_format_shifts(differences: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Shift in the target-choice rate per format, in percentage points, with its interval.

    Parameters
    ----------
    differences : pandas.DataFrame
        The ``risk_difference`` rows of :func:`analysis.stats.choice.choice_effects` of one
        block: the rows of family
        ``vs reference`` are drawn as dots (the shift against the reference), those of family
        ``vs baseline`` as open squares beside them (the shift against the baseline summary).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure's axes otherwise.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    ax = axes_or_new(ax, (6, 0.6 * len(differences) + 1.5))
    levels = list(dict.fromkeys(differences["level"]))
    y = {lv: i for i, lv in enumerate(levels)}
    styles = {"vs reference": ("o", "#4C72B0", 0.0), "vs baseline": ("s", "#DD8452", 0.2)}
    for family, (marker, color, dy) in styles.items():
        part = differences[differences["family"] == family]
        if part.empty:
            continue
        est = 100 * part["estimate"].to_numpy(float)
        err = np.vstack(
            [
                est - 100 * part["ci_low"].to_numpy(float),
                100 * part["ci_high"].to_numpy(float) - est,
            ]
        )
        ys = np.array([y[lv] for lv in part["level"]]) + dy
        ax.errorbar(
            est,
            ys,
            xerr=err,
            fmt=marker,
            color=color,
            mfc=color if marker == "o" else "white",
            capsize=3,
            label=f"{family} ({part['versus'].iloc[0]})",
        )
    ax.axvline(0, color="0.5", lw=0.8, ls="--")
    ax.set_yticks(range(len(levels)), levels)
    ax.invert_yaxis()
    ax.set_xlabel("shift in target choice (percentage points, 95% CI)")
    ax.legend(loc="best", fontsize="small", frameon=False)
    return ax
