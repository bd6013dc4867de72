"""Central-difference derivatives of the mixed models' deviance functions.

Used where lme4 differentiates numerically too: the Hessian of the deviance in the variance
parameters (Satterthwaite's df, ``vcov(use.hessian = TRUE)``) and the Jacobian of the gradient.
"""

from __future__ import annotations

__all__ = ["hessian", "jacobian"]


def hessian(fun, x, rel_step: float = 1e-4):
    """Central-difference Hessian of a scalar function (Richardson-extrapolated once)."""
    import numpy as np

    x = np.asarray(x, float)
    k = len(x)

    def at(h):
        out = np.empty((k, k))
        f0 = fun(x)
        for i in range(k):
            ei = np.zeros(k)
            ei[i] = h[i]
            out[i, i] = (fun(x + ei) - 2 * f0 + fun(x - ei)) / h[i] ** 2
            for j in range(i):
                ej = np.zeros(k)
                ej[j] = h[j]
                val = (
                    fun(x + ei + ej) - fun(x + ei - ej) - fun(x - ei + ej) + fun(x - ei - ej)
                ) / (4 * h[i] * h[j])
                out[i, j] = out[j, i] = val
        return out

    h = rel_step * np.maximum(np.abs(x), 1e-2) * 64
    h1, h2 = at(h), at(h / 2)
    return (4 * h2 - h1) / 3


def jacobian(fun, x, rel_step: float = 1e-4):
    """Central-difference Jacobian of an array-valued function: ``out[i] = d fun / d x_i``."""
    import numpy as np

    x = np.asarray(x, float)
    out = []
    for i in range(len(x)):
        h = rel_step * max(abs(x[i]), 1e-2)
        e = np.zeros(len(x))
        e[i] = h
        out.append((fun(x + e) - fun(x - e)) / (2 * h))
    return out
