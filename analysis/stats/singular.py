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
    from collections.abc import Callable, Mapping, Sequence

    import numpy as np

__all__ = [
    "BOUNDARY_TOL",
    "LMER_NLOPT",
    "ROW_ORDERS",
    "SINGULAR_TOL",
    "TIGHT_NLOPT",
    "decision_notes",
    "lmer_decision",
    "lmer_stop",
    "singular_entries",
]

SINGULAR_TOL = 1e-4  # lme4's isSingular: a relative SD (theta) below this is at the boundary.
# lme4's nloptwrap defaults, and nloptr's default xtol_rel, which lme4 does not override.
LMER_NLOPT = {"xtol_rel": 1e-4, "xtol_abs": 1e-8, "ftol_abs": 1e-8, "maxeval": 100_000}
# lmer's BOBYQA tightened, as the reference fits of tests/analysis/r/ (rhoend = 1e-12): the
# optimum itself, where FrameLab's estimates are taken.
TIGHT_NLOPT = {"xtol_rel": 0.0, "xtol_abs": 1e-10, "ftol_abs": 0.0, "maxeval": 100_000}
BOUNDARY_TOL = 1e-5  # lmerControl(boundary.tol); also restart_edge's step off the bound.
# Row orders on which lmer's stopping point is taken when the first three disagree on lme4's
# singular decision (lmer's own decision then depends on the order of the rows).
ROW_ORDERS = 9


def _bobyqa(deviance, start, lower, tolerances, step):
    """One ``nloptwrap`` run: NLopt's BOBYQA with the stopping rules ``tolerances``."""
    import nlopt
    import numpy as np

    n = len(start)
    opt = nlopt.opt(nlopt.LN_BOBYQA, n)
    opt.set_lower_bounds(list(lower))
    opt.set_upper_bounds([np.inf] * n)
    opt.set_xtol_rel(tolerances["xtol_rel"])
    opt.set_xtol_abs([tolerances["xtol_abs"]] * n)
    opt.set_ftol_abs(tolerances["ftol_abs"])
    opt.set_maxeval(int(tolerances["maxeval"]))
    if step is not None:
        opt.set_initial_step([step] * n)
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
    tolerances: Mapping[str, float] = LMER_NLOPT,
    step: float | None = None,
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
    tolerances : mapping
        NLopt's stopping rules, as ``LMER_NLOPT`` (lmer's defaults, the default);
        ``TIGHT_NLOPT`` is lmer's optimizer tightened as in the reference fits.
    step : float, optional
        BOBYQA's initial step (NLopt's default: from the start and the bounds); a small one
        from a start already near the optimum saves most of the evaluations.

    Returns
    -------
    (numpy.ndarray, float)
        ``theta`` where lmer stops and the criterion there.
    """
    import numpy as np

    lower = np.asarray(lower, float)
    theta, fval = _bobyqa(deviance, start, lower, tolerances, step)
    # restart_edge: an entry exactly on its bound, with the criterion falling off it.
    on_bound = np.flatnonzero(theta == lower)
    if on_bound.size:
        d0 = deviance(theta)
        for i in on_bound:
            moved = theta.copy()
            moved[i] = lower[i] + BOUNDARY_TOL
            if (deviance(moved) - d0) / BOUNDARY_TOL < 0:
                theta, fval = _bobyqa(deviance, theta, lower, tolerances, step)
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


def _problem_stop(problem, reml: bool):
    """:func:`lmer_stop` on a profiled problem (``deviance``, ``theta0``, ``bounds``)."""
    import numpy as np

    lower = [0.0 if lo == 0 else -np.inf for lo, _ in problem.bounds]
    return lmer_stop(lambda t: problem.deviance(t, reml), problem.theta0, lower)[0]


def lmer_decision(build: Callable, n: int, bounded: Sequence[int], reml: bool = True):
    """lme4's singular decision where lmer stops, on the rows as given and, if needed, reordered.

    Where lmer's path is well conditioned its stop does not depend on the order of the rows;
    where the criterion is flat to its rounding it does, for lmer itself too (the same rows in
    another order change lmer's own ``isSingular``). The stop is taken on the rows as given and
    on two other orders; if they disagree, on ``ROW_ORDERS`` orders in all, and an entry is at
    the boundary where most of them stop below 1e-4.

    Parameters
    ----------
    build : callable
        ``build(order)``: the profiled problem (``deviance(theta, reml)``, ``theta0``,
        ``bounds``) on the rows in ``order``, an index array (``None``: as given).
    n : int
        Number of rows.
    bounded : sequence of int
        Positions in ``theta`` with lower bound 0.
    reml : bool
        The criterion lmer minimises.

    Returns
    -------
    (numpy.ndarray, list of int, dict)
        The stop on the rows as given, the positions decided singular, and per position of
        ``bounded`` ``(orders that stopped below 1e-4, orders tried)``.
    """
    import numpy as np

    rng = np.random.default_rng(ROW_ORDERS)  # fixed: the same data give the same decision
    first = _problem_stop(build(None), reml)
    below = [singular_entries(first, bounded)]
    while len(below) < ROW_ORDERS and not (len(below) == 3 and below.count(below[0]) == 3):
        below.append(singular_entries(_problem_stop(build(rng.permutation(n)), reml), bounded))
    votes = {i: (sum(i in b for b in below), len(below)) for i in bounded}
    decided = [i for i in bounded if 2 * votes[i][0] > len(below)]
    return first, decided, votes


def decision_notes(deviance, stop, decided, votes, theta, names) -> list[str]:
    """Notes on the decision of :func:`lmer_decision` beside the optimum ``theta``.

    One per position whose orders split, and one per position where the optimum is on the
    other side of 1e-4 than lmer's stop; ``names[i]`` names the factor of position ``i``.
    """
    notes, split = [], set()
    for i, (k, tried) in votes.items():
        if 0 < k < tried:
            split.add(i)
            notes.append(
                f"{names[i]}: where lmer's default optimizer stops depends on the order of the "
                f"rows here ({k} of {tried} orders stop with an entry of its covariance factor "
                "below lme4's singularity tolerance 1e-4): "
                f"{'singular' if i in decided else 'not singular'}, as in most orders"
            )
    at_optimum = singular_entries(theta, list(votes))
    for i in sorted((set(decided) ^ set(at_optimum)) - split):
        where = f"{names[i]}: lmer's default optimizer stops with an entry of its covariance factor"
        if i in decided:
            notes.append(
                f"{where} at {stop[i]:.2g}, below lme4's singularity tolerance 1e-4, short of "
                f"the optimum ({theta[i]:.2g}): singular, as lme4 reports it"
            )
        else:
            gap = deviance(stop) - deviance(theta)
            notes.append(
                f"{where} at {stop[i]:.2g}, the criterion there within {gap:.2g} of the "
                f"optimum, where it is {theta[i]:.2g} (below lme4's singularity tolerance "
                "1e-4): not singular, as lme4 reports it"
            )
    return notes
