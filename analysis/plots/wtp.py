"""Figures of the WTP model: within-participant differences and the mixed-model diagnostics.

Each function takes a table computed in ``analysis.stats.diagnostics`` (or the ``wtp_model`` row)
and an optional ``ax``, draws, and returns the ``Axes``; nothing here fits, shows or saves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.plots.axes import axes_or_new
from analysis.plots.choice import significance_stars

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = [
    "plot_caterpillar",
    "plot_residual_qq",
    "plot_residuals_vs_fitted",
    "plot_wtp_differences",
]


def plot_wtp_differences(
    per_subject: pd.DataFrame,
    summary: pd.DataFrame,
    *,
    effect: pd.DataFrame | None = None,
    unit: str = "percentage points",
    seed: int = 0,
    ax: Axes | None = None,
) -> Axes:
    """Every participant's WTP difference (treatment - reference), their mean and the model effect.

    Parameters
    ----------
    per_subject : pandas.DataFrame
        Per-participant differences (``difference``) from
        :func:`analysis.stats.diagnostics.within_differences`.
    summary : pandas.DataFrame
        Its one-row summary (``estimate, ci_low, ci_high, reference, treatment``).
    effect : pandas.DataFrame, optional
        The ``wtp_model`` row: its estimate and CI are drawn beside the raw mean, and its
        p (the mixed model respects both participants and pairs) sets the stars.
    unit : str
        Unit of the differences, for the axis label.
    seed : int
        Seed of the horizontal jitter (the figure is reproducible).
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    ax = axes_or_new(ax, (5.0, 4.2))
    d = per_subject["difference"].to_numpy(float)
    jitter = np.random.default_rng(seed).uniform(-0.12, 0.12, len(d))
    ax.scatter(jitter, d, s=10, alpha=0.45, color="#4C72B0", label="participants", zorder=2)
    row = summary.iloc[0]
    ax.errorbar(
        [0.35],
        [row["estimate"]],
        yerr=[[row["estimate"] - row["ci_low"]], [row["ci_high"] - row["estimate"]]],
        fmt="o",
        color="black",
        capsize=5,
        label="mean of participants (t 95% CI)",
        zorder=3,
    )
    labels = ["participants", "raw mean"]
    if effect is not None and len(effect):
        e = effect.iloc[0]
        ax.errorbar(
            [0.7],
            [e["estimate"]],
            yerr=[[e["estimate"] - e["ci_low"]], [e["ci_high"] - e["estimate"]]],
            fmt="s",
            color="#C44E52",
            capsize=5,
            label="mixed-model effect (95% CI)",
            zorder=3,
        )
        labels.append("mixed model")
        stars = significance_stars(float(e["p_val"]))
        if stars:
            ax.text(0.7, float(e["ci_high"]), " " + stars, ha="left", va="bottom")
    ax.axhline(0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks([0, 0.35, 0.7][: len(labels)], labels)
    ax.set_xlim(-0.3, 0.95)
    ax.set_ylabel(f"WTP {row['treatment']} - {row['reference']} ({unit})")
    ax.set_title(
        f"Within-participant WTP difference (n = {int(row['n_subjects'])} participants)",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="best")
    return ax


def plot_residuals_vs_fitted(
    residuals: pd.DataFrame, *, max_points: int = 5000, ax: Axes | None = None
) -> Axes:
    """Conditional residuals against fitted values, with binned means to show curvature.

    Parameters
    ----------
    residuals : pandas.DataFrame
        ``fitted`` and ``residual`` (:func:`analysis.stats.diagnostics.crossed_conditional_modes`).
    max_points : int
        Points drawn at most (a seeded random subsample beyond; the title says so).
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    ax = axes_or_new(ax, (5.0, 4.0))
    fitted = residuals["fitted"].to_numpy(float)
    resid = residuals["residual"].to_numpy(float)
    n = len(fitted)
    # 60,000 points draw slowly and print as one blot: above max_points a seeded random
    # subsample is drawn (the binned means below use every point).
    shown = np.arange(n)
    if n > max_points:
        shown = np.sort(np.random.default_rng(0).choice(n, max_points, replace=False))
    ax.scatter(fitted[shown], resid[shown], s=6, alpha=0.35, color="#4C72B0", rasterized=True)
    ax.axhline(0, color="grey", linewidth=0.8)
    if len(fitted) >= 20:
        # Means of residuals in 20 quantile bins of the fitted values: a flat line = no trend.
        edges = np.quantile(fitted, np.linspace(0, 1, 21))
        idx = np.clip(np.searchsorted(edges, fitted, side="right") - 1, 0, 19)
        centers = [fitted[idx == k].mean() for k in range(20) if (idx == k).any()]
        means = [resid[idx == k].mean() for k in range(20) if (idx == k).any()]
        ax.plot(centers, means, color="#C44E52", linewidth=1.5, label="binned mean")
        ax.legend(fontsize=7)
    ax.set_xlabel("fitted value (fixed + random effects)")
    ax.set_ylabel("residual")
    title = "Residuals vs fitted"
    if n > max_points:
        title += f" ({max_points:,} of {n:,} points shown)"
    ax.set_title(title, fontsize=9)
    return ax


def plot_residual_qq(
    residuals: pd.DataFrame, *, max_points: int = 2000, ax: Axes | None = None
) -> Axes:
    """Normal QQ plot of the standardised conditional residuals.

    Parameters
    ----------
    residuals : pandas.DataFrame
        ``residual`` column.
    max_points : int
        Above this many residuals, evenly spaced order statistics (extremes included) are drawn.
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np
    from scipy.special import ndtri  # = scipy.stats.norm.ppf, without scipy.stats' 0.5 s import

    ax = axes_or_new(ax, (4.2, 4.0))
    r = np.sort(residuals["residual"].to_numpy(float))
    n = len(r)
    z = (r - r.mean()) / r.std(ddof=1) if n > 1 else r
    theory = ndtri((np.arange(1, n + 1) - 0.5) / n)
    if n > max_points:
        # Evenly spaced order statistics, both extremes included: the same curve, fewer marks.
        keep = np.unique(np.linspace(0, n - 1, max_points).round().astype(int))
        z, theory = z[keep], theory[keep]
    ax.scatter(theory, z, s=6, alpha=0.5, color="#4C72B0", rasterized=True)
    lim = float(np.nanmax(np.abs(np.concatenate([theory, z])))) if n else 1.0
    ax.plot([-lim, lim], [-lim, lim], color="#C44E52", linewidth=1)
    ax.set_xlabel("normal quantile")
    ax.set_ylabel("standardised residual")
    ax.set_title("Normal QQ plot of residuals", fontsize=9)
    return ax


def plot_caterpillar(
    effects: pd.DataFrame,
    *,
    group: str,
    max_levels: int = 60,
    ax: Axes | None = None,
) -> Axes:
    """Random effects of one grouping factor, sorted, with +-1.96 conditional SD.

    Parameters
    ----------
    effects : pandas.DataFrame
        :func:`analysis.stats.diagnostics.crossed_conditional_modes` random effects.
    group : str
        Which ``group`` to draw.
    max_levels : int
        Above this many levels every k-th of the sorted levels is drawn (labels are dropped), so
        3,000 participants stay readable; the title says so.
    ax : matplotlib Axes, optional
        Where to draw.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np

    sel = effects[effects["group"] == group].sort_values("estimate")
    n = len(sel)
    ax = axes_or_new(ax, (5.0, max(3.0, 0.16 * min(n, max_levels) + 1.2)))
    shown = sel
    if n > max_levels:
        shown = sel.iloc[np.linspace(0, n - 1, max_levels).round().astype(int)]
    y = np.arange(len(shown))
    half = 1.96 * shown["cond_sd"].to_numpy(float)
    ax.errorbar(
        shown["estimate"], y, xerr=half, fmt="o", markersize=3, color="#4C72B0", elinewidth=0.8
    )
    ax.axvline(0, color="grey", linewidth=0.8)
    if n <= max_levels:
        ax.set_yticks(y, shown["level"].astype(str), fontsize=7)
    else:
        ax.set_yticks([])
    ax.set_xlabel("random intercept (conditional mode ± 1.96 conditional SD)")
    title = f"Random effects: {group} ({n} levels"
    title += f"; {max_levels} evenly spaced shown)" if n > max_levels else ")"
    ax.set_title(title, fontsize=9)
    return ax
