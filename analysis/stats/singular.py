"""lme4's singular-fit rule, applied at the precision with which lme4 places the optimum.

``lme4::isSingular(m, tol = 1e-4)`` is ``any(theta[lower == 0] < tol)``: an SD (or a diagonal
entry of a random-slope factor) below 1e-4 relative to the residual SD. It is evaluated where
lmer's optimizer stopped. Near the boundary the REML criterion is flat (even in an SD: it grows
as ``a theta^2``), and lmer's default BOBYQA stops once a step changes it by less than 1e-8; it
stops anywhere from 0 to a few times 1e-4, while an optimizer run to a tighter tolerance goes to
0 and calls the same data singular. The rule here asks the criterion itself: below 1e-4 at the
optimum, and resolved from 1e-4 by more than lmer's stopping tolerance.

Where the criterion at 1e-4 is within 1e-8 of the optimum, lmer (defaults) ends above 1e-4 and
keeps the model, and so does this rule (``tests/analysis/r/lme4_boundary_reference.R``). Where
the criterion rises by 1e-7-ish at 1e-4, lmer's BOBYQA ends on either side of 1e-4 depending on
its path: on 60 seeded 70 x 10 designs this rule agreed with lmer's default ``isSingular`` on 58
and with lmer tightened (rhoend = 1e-12) on 59. No rule on the data can do better: there lmer's
answer rests on rounding (on another of those designs, the same rows in another order change
lmer's own isSingular).
"""

from __future__ import annotations

__all__ = ["LMER_FTOL", "SINGULAR_TOL", "at_boundary", "unresolved_note"]

SINGULAR_TOL = 1e-4  # lme4's isSingular: a relative SD (theta) below this is at the boundary.
# lmer's default optimizer (nloptwrap: NLopt's BOBYQA) stops once a step changes the REML
# criterion by less than this (ftol_abs): the precision at which lme4 places theta.
LMER_FTOL = 1e-8


def at_boundary(deviance, theta, bounded) -> tuple[list[int], list[int]]:
    """Entries of ``theta`` at their bound 0 by lme4's rule, resolved at lme4's precision.

    lme4's ``isSingular`` calls a fit singular when a bounded entry of ``theta`` ends below
    1e-4. Where the criterion is flat near 0, where that entry ends depends on where the
    optimizer stops: lmer's BOBYQA, stopping at changes below 1e-8, ends anywhere from 0 to a few
    times 1e-4, and tightened it goes to 0. An entry is therefore at the boundary when it is
    below 1e-4 at the optimum *and* the criterion with it moved to 1e-4 is worse by more than
    lmer's stopping tolerance: an optimum that lme4's own optimizer can tell from 1e-4.

    Parameters
    ----------
    deviance : callable
        The criterion as a function of ``theta``.
    theta : array_like
        The optimum.
    bounded : sequence of int
        Positions in ``theta`` with lower bound 0 (lme4's ``lower == 0``).

    Returns
    -------
    (list of int, list of int)
        The positions at the boundary, and those below 1e-4 that the criterion does not
        resolve from 1e-4 (reported, not called singular).
    """
    import numpy as np

    theta = np.asarray(theta, float)
    low = [i for i in bounded if abs(theta[i]) < SINGULAR_TOL]
    if not low:
        return [], []
    crit = deviance(theta)
    resolved, unresolved = [], []
    for i in low:
        moved = theta.copy()
        moved[i] = SINGULAR_TOL
        (resolved if deviance(moved) - crit > LMER_FTOL else unresolved).append(i)
    return resolved, unresolved


def unresolved_note(name: str) -> str:
    """The note on a factor with an entry below 1e-4 that the criterion does not resolve."""
    return (
        f"{name}'s covariance factor has an entry below lme4's singularity tolerance 1e-4, but "
        f"the criterion with it at 1e-4 is within {LMER_FTOL:g} of the optimum: not resolved "
        "from the boundary at the precision of lmer's optimizer, so not called singular"
    )
