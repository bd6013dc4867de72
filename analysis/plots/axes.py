"""What every figure module shares: the ``Axes`` to draw on and error-bar lengths."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def axes_or_new(ax: Axes | None, figsize: tuple[float, float] = (7.0, 4.0)) -> Axes:
    """``ax``, or the ``Axes`` of a new figure of ``figsize`` inches when it is None."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def error_lengths(est, low, high):
    """Error-bar lengths below and above each estimate, never negative (a 2 x n array).

    A Wilson bound can sit 1e-16 on the wrong side of a share of exactly 0 or 1, and matplotlib
    refuses negative error lengths.

    Examples
    --------
    >>> error_lengths([0.5, 1.0], [0.4, 1.0 + 1e-16], [0.7, 1.0]).tolist()
    [[0.09999999999999998, 0.0], [0.19999999999999996, 0.0]]
    """
    import numpy as np

    est, low, high = (np.asarray(v, dtype=float) for v in (est, low, high))
    return np.clip(np.vstack([est - low, high - est]), 0, None)
