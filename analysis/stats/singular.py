"""lme4's singular-fit decision, taken where lmer's default optimizer stops.

``lme4::isSingular(m, tol = 1e-4)`` is ``any(theta[lower == 0] < tol)``: an SD (or a diagonal
entry of a random-slope factor) below 1e-4 relative to the residual SD, evaluated at the
``theta`` where lmer stopped. Near the boundary the REML criterion is flat (even in an SD it grows
as ``a theta^2``), and lmer's default optimizer stops once a step changes it by less than 1e-8:
anywhere from 0 to a few times 1e-4, while an optimizer run to a tighter tolerance goes to 0 and
calls the same data singular. What an lme4 user reports is therefore decided by lmer's stopping
point, not by the optimum.

:func:`lmer_stop` runs lmer's own optimization on FrameLab's profiled criterion (the same
parameterisation, lme4's relative covariance factor ``theta``): ``lmerControl()``'s default
``nloptwrap``, i.e. NLopt's BOBYQA (``NLOPT_LN_BOBYQA``) from lme4's start (1 for the diagonal
entries, 0 for the off-diagonal ones) with ``xtol_abs = ftol_abs = 1e-8``, ``maxeval = 1e5`` and
nloptr's ``xtol_rel = 1e-4``, then lme4's ``restart_edge`` (restart once when an entry sits on
its bound and the criterion falls moving off it) and ``check.boundary`` (an entry within 1e-5 of
its bound is set to it when that lowers the criterion) (lme4 1.1-31, ``optimizeLmer``). The same
NLopt algorithm from the same start on the same criterion follows lmer's path evaluation for
evaluation until the rounding of the two implementations (about 1e-12 of a criterion in the
thousands, i.e. a few 1e-9, against the stopping tolerance of 1e-8) sends them apart; where it
does, the two stopping points are as far apart as two runs of lmer itself on the same rows in
another order. On sixty seeded 70 x 10 designs near the boundary
(``tests/analysis/r/lme4_singular_agreement.R``) the decision agreed with lmer's default
``isSingular`` on 59; the one left is such a path divergence (docs/analysis.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy as np

__all__ = ["BOUNDARY_TOL", "LMER_NLOPT", "SINGULAR_TOL", "lmer_stop", "singular_entries"]

SINGULAR_TOL = 1e-4  # lme4's isSingular: a relative SD (theta) below this is at the boundary.
# lme4's nloptwrap defaults, and nloptr's default xtol_rel, which lme4 does not override.
LMER_NLOPT = {"xtol_rel": 1e-4, "xtol_abs": 1e-8, "ftol_abs": 1e-8, "maxeval": 100_000}
BOUNDARY_TOL = 1e-5  # lmerControl(boundary.tol); also restart_edge's step off the bound.


def _bobyqa(deviance, start, lower):
    """One ``nloptwrap`` run: NLopt's BOBYQA with lme4's default stopping rules."""
    import nlopt
    import numpy as np

    n = len(start)
    opt = nlopt.opt(nlopt.LN_BOBYQA, n)
    opt.set_lower_bounds(list(lower))
    opt.set_upper_bounds([np.inf] * n)
    opt.set_xtol_rel(LMER_NLOPT["xtol_rel"])
    opt.set_xtol_abs([LMER_NLOPT["xtol_abs"]] * n)
    opt.set_ftol_abs(LMER_NLOPT["ftol_abs"])
    opt.set_maxeval(LMER_NLOPT["maxeval"])
    best = {"f": np.inf, "x": np.asarray(start, float)}

    def objective(x, grad):
        f = float(deviance(np.array(x)))
        if f < best["f"]:
            best["f"], best["x"] = f, np.array(x)
        return f

    opt.set_min_objective(objective)
    try:
        x = np.asarray(opt.optimize(np.asarray(start, float)), float)
        return x, float(opt.last_optimum_value())
    except nlopt.RoundoffLimited:
        # lme4 warns (convergence code -4) and keeps NLopt's best point, as here.
        return best["x"], best["f"]


def lmer_stop(
    deviance: Callable[[np.ndarray], float],
    start: Sequence[float],
    lower: Sequence[float],
) -> tuple[np.ndarray, float]:
    """Where lmer with its default control stops on ``deviance`` (module docstring).

    Parameters
    ----------
    deviance : callable
        The profiled criterion as a function of lme4's ``theta``.
    start : sequence of float
        lme4's start: 1 for the diagonal entries of each relative covariance factor, 0 for the
        off-diagonal ones.
    lower : sequence of float
        lme4's ``lower``: 0 for the diagonal entries, ``-inf`` for the others.

    Returns
    -------
    (numpy.ndarray, float)
        ``theta`` where lmer stops and the criterion there.
    """
    import numpy as np

    lower = np.asarray(lower, float)
    theta, fval = _bobyqa(deviance, start, lower)
    # restart_edge: an entry exactly on its bound, with the criterion falling off it.
    on_bound = np.flatnonzero(theta == lower)
    if on_bound.size:
        d0 = deviance(theta)
        for i in on_bound:
            moved = theta.copy()
            moved[i] = lower[i] + BOUNDARY_TOL
            if (deviance(moved) - d0) / BOUNDARY_TOL < 0:
                theta, fval = _bobyqa(deviance, theta, lower)
                break
    # check.boundary: an entry within boundary.tol of its bound goes to it if that is lower.
    gap = theta - lower
    edge = np.flatnonzero((gap > 0) & (gap < BOUNDARY_TOL))
    if edge.size:
        moved = theta.copy()
        for i in edge:
            trial = moved.copy()
            trial[i] = lower[i]
            if deviance(trial) < fval:
                moved[i] = lower[i]
        theta, fval = moved, float(deviance(moved))
    return theta, fval


def singular_entries(theta: np.ndarray, bounded: Sequence[int]) -> list[int]:
    """The positions of ``bounded`` (lme4's ``lower == 0``) where ``theta`` is below 1e-4."""
    return [i for i in bounded if abs(theta[i]) < SINGULAR_TOL]
