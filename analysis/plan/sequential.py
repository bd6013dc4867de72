"""Group-sequential designs: Lan-DeMets spending boundaries and stage-wise ordering inference.

The statistics ``Z_1 .. Z_K`` at the looks, with information fractions ``t_1 < .. < t_K = 1``,
follow the canonical joint distribution (Jennison & Turnbull 2000, *Group Sequential Methods
with Applications to Clinical Trials*, ch. 3): ``Z_k ~ N(theta sqrt(t_k), 1)`` and
``cov(Z_j, Z_k) = sqrt(t_j / t_k)``; ``theta`` is the drift (the expected ``Z`` of a fixed
design at full information). The partial sums ``S_k = Z_k sqrt(t_k)`` have independent normal
increments, so the probability of crossing a boundary at look ``k`` without having stopped
before is an integral of the sub-density of ``S_{k-1}`` over the continuation region
(Armitage, McPherson & Rowe 1969; Jennison & Turnbull ch. 19). Those sub-densities are smooth
inside their region, so a composite Gauss-Legendre rule on panels narrower than the kernel
integrates them to rounding; a boundary is the root of its crossing probability minus what the
spending function allows at that look.

Spending functions (Lan & DeMets 1983), as ``rpact::getDesignGroupSequential`` names them:

- ``obrien-fleming`` (``typeOfDesign = "asOF"``):
  ``alpha(t) = 2 - 2 Phi(Phi^-1(1 - alpha / 2) / sqrt(t))`` for a one-sided ``alpha``; a
  two-sided design spends this function of ``alpha / 2`` on each side, as rpact does;
- ``pocock`` (``"asP"``): ``alpha(t) = alpha log(1 + (e - 1) t)`` (on each side, half).

Futility is optional: fixed ``z`` bounds at the interim looks (binding or not), or
non-binding beta spending (``typeBetaSpending = "bsOF"`` / ``"bsP"``: the same functions of
``beta``, with the drift at which the final futility and efficacy bounds meet). Non-binding
futility leaves the efficacy bounds as without it, so stopping for futility is allowed but not
required. Checked against rpact 3.3.4 to 1e-6 (``tests/analysis/r/rpact_reference.R``).

The adjusted inference after stopping uses the stage-wise ordering (Armitage 1957; Tsiatis,
Rosner & Mehta 1984; Jennison & Turnbull ch. 8.4): an outcome is more extreme when it crossed
the efficacy bound at an earlier look, or stopped at the same look with a larger ``Z``. The
p-value is the probability of a more extreme outcome under ``theta = 0``; the confidence limits
and the median-unbiased estimate are the ``theta`` at which it is ``(1 - level) / 2``,
``(1 + level) / 2`` and ``1 / 2``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from framelab_schema.analysis_block import SPENDING

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "SequentialDesign",
    "boundaries",
    "look_decision",
    "spent",
    "stagewise_inference",
    "stopping_look",
]

# Gauss-Legendre points per panel, and a panel's width in SDs of the narrowest kernel.
_ORDER = 8
_PANEL_SD = 1.0
# Regions open to one side are cut this many SDs from the mean (tail mass ~1e-23).
_TAIL = 10.0
# Largest |z| of a boundary search.
_ZMAX = 40.0


def spent(fractions, alpha: float, spending: str, sided: int = 1):
    """Cumulative error spent at information fractions ``fractions`` (Lan-DeMets).

    Parameters
    ----------
    fractions : array-like
        Information fractions in ``(0, 1]``.
    alpha : float
        Total error spent at ``t = 1`` (alpha, or beta for futility).
    spending : {"obrien-fleming", "pocock"}
        Lan-DeMets O'Brien-Fleming-type or Pocock-type function.
    sided : {1, 2}
        Two-sided: the sum of both sides, each spending the one-sided function of
        ``alpha / 2`` (rpact's two-sided designs).

    Returns
    -------
    numpy.ndarray
        ``alpha(t)`` at each fraction.

    Examples
    --------
    >>> round(float(spent([0.5], 0.025, "obrien-fleming")[0]), 6)
    0.001525
    >>> round(float(spent([1.0], 0.025, "pocock")[0]), 6)
    0.025
    """
    import numpy as np
    from scipy.stats import norm

    t = np.asarray(fractions, float)
    if sided == 2:
        return 2 * spent(t, alpha / 2, spending)
    if spending == "obrien-fleming":
        return 2 * norm.sf(norm.isf(alpha / 2) / np.sqrt(t))
    if spending == "pocock":
        return alpha * np.log1p((math.e - 1) * t)
    raise ValueError(f"unknown spending function {spending!r}; use one of {SPENDING}")


@dataclass(frozen=True)
class SequentialDesign:
    """A group-sequential design: when to look and how to spend the error.

    Attributes
    ----------
    fractions : tuple of float
        Planned information fractions of the looks, increasing, the last one 1 (e.g. the
        shares of the planned N: ``(0.5, 0.75, 1.0)``).
    alpha : float
        One-sided alpha when ``sided == 1``, the two-sided total when ``sided == 2``.
    sided : {1, 2}
        One-sided (efficacy in the stated direction) or two-sided symmetric bounds.
    spending : {"obrien-fleming", "pocock"}
        Alpha-spending function.
    futility_z : tuple of float, optional
        Fixed futility bounds on the ``Z`` scale at the interim looks (one per look but the
        last); one-sided designs only.
    binding_futility : bool
        Whether the fixed futility bounds are binding (the efficacy bounds then account for
        them; stopping for futility becomes obligatory).
    beta : float, optional
        Type-II error for beta-spending futility (non-binding).
    beta_spending : {"obrien-fleming", "pocock"}, optional
        Beta-spending function of the futility bounds; one-sided designs only.
    """

    fractions: tuple[float, ...]
    alpha: float = 0.025
    sided: int = 1
    spending: str = "obrien-fleming"
    futility_z: tuple[float, ...] | None = None
    binding_futility: bool = False
    beta: float | None = None
    beta_spending: str | None = None

    def __post_init__(self) -> None:
        t = tuple(float(v) for v in self.fractions)
        object.__setattr__(self, "fractions", t)
        if not t or any(b <= a for a, b in zip(t, t[1:], strict=False)) or t[0] <= 0:
            raise ValueError(f"look fractions must increase from above 0, got {list(t)}")
        if abs(t[-1] - 1.0) > 1e-12:
            raise ValueError(f"the last look must be at fraction 1 (the planned N), got {t[-1]}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be between 0 and 1, got {self.alpha}")
        if self.sided not in (1, 2):
            raise ValueError(f"sided must be 1 or 2, got {self.sided}")
        if self.spending not in SPENDING:
            raise ValueError(f"unknown spending {self.spending!r}; use one of {SPENDING}")
        if self.futility_z is not None:
            fz = tuple(float(v) for v in self.futility_z)
            object.__setattr__(self, "futility_z", fz)
            if len(fz) != len(t) - 1:
                raise ValueError(
                    f"give one futility bound per interim look ({len(t) - 1}), got {len(fz)}"
                )
        if self.beta_spending is not None:
            if self.beta_spending not in SPENDING:
                raise ValueError(
                    f"unknown beta spending {self.beta_spending!r}; use one of {SPENDING}"
                )
            if self.beta is None or not 0 < self.beta < 1:
                raise ValueError("beta spending needs beta between 0 and 1")
            if self.futility_z is not None:
                raise ValueError("give fixed futility bounds or beta spending, not both")
        if (self.futility_z is not None or self.beta_spending is not None) and self.sided != 1:
            raise ValueError("futility bounds need a one-sided design (sided = 1)")


def _rule(lo: float, hi: float, width: float):
    """Composite Gauss-Legendre nodes and weights on ``[lo, hi]``, panels at most ``width``."""
    import numpy as np

    xi, wi = np.polynomial.legendre.leggauss(_ORDER)
    n = max(1, math.ceil((hi - lo) / width))
    edges = np.linspace(lo, hi, n + 1)
    half = (edges[1:] - edges[:-1]) / 2
    mid = (edges[1:] + edges[:-1]) / 2
    return (mid[:, None] + half[:, None] * xi).ravel(), (half[:, None] * wi).ravel()


class _Paths:
    """Sub-densities of ``S_k`` on the continuation regions, look by look, at one drift."""

    def __init__(self, fractions, theta: float):
        import numpy as np

        self.t = np.asarray(fractions, float)
        self.theta = float(theta)
        self.x = None  # nodes of S_{k-1} on its continuation region
        self.g = None  # quadrature weight x sub-density at the nodes

    def _step(self, k: int) -> float:
        return float(self.t[k] - (self.t[k - 1] if k else 0.0))

    def crossing(self, k: int, upper: float, lower: float) -> tuple[float, float]:
        """``P(Z_k >= upper)`` and ``P(Z_k <= lower)``, both with no stop before look ``k``."""
        import numpy as np
        from scipy.stats import norm

        root = math.sqrt(self.t[k])
        if k == 0:
            mean = self.theta * root
            up = float(norm.sf(upper - mean)) if upper < math.inf else 0.0
            low = float(norm.cdf(lower - mean)) if lower > -math.inf else 0.0
            return up, low
        if self.x is None or len(self.x) == 0:
            return 0.0, 0.0
        step = self._step(k)
        sd = math.sqrt(step)
        mu = self.x + self.theta * step
        up = float(self.g @ norm.sf((upper * root - mu) / sd)) if upper < math.inf else 0.0
        low = float(self.g @ norm.cdf((lower * root - mu) / sd)) if lower > -math.inf else 0.0
        return up, float(np.maximum(low, 0.0))

    def advance(self, k: int, upper: float, lower: float) -> None:
        """Move to look ``k``'s continuation region ``lower < Z_k < upper``."""
        import numpy as np
        from scipy.stats import norm

        root = math.sqrt(self.t[k])
        mean, sd_k = self.theta * self.t[k], root
        hi = min(upper * root, mean + _TAIL * sd_k) if upper < math.inf else mean + _TAIL * sd_k
        lo = max(lower * root, mean - _TAIL * sd_k) if lower > -math.inf else mean - _TAIL * sd_k
        if lo >= hi:
            self.x, self.g = np.empty(0), np.empty(0)
            return
        # Panels scaled to the narrowest kernel the density meets (this step's, the next's).
        scales = [self._step(k)]
        if k + 1 < len(self.t):
            scales.append(self._step(k + 1))
        x, w = _rule(lo, hi, math.sqrt(min(scales)) * _PANEL_SD)
        if k == 0:
            f = norm.pdf((x - mean) / sd_k) / sd_k
        else:
            step = self._step(k)
            sd = math.sqrt(step)
            mu = self.x + self.theta * step
            f = np.exp(-0.5 * ((x[:, None] - mu[None, :]) / sd) ** 2) @ self.g
            f /= sd * math.sqrt(2 * math.pi)
        self.x, self.g = x, w * f


def _solve(fun, lo: float = -_ZMAX, hi: float = _ZMAX) -> float:
    from scipy.optimize import brentq

    return float(brentq(fun, lo, hi, xtol=1e-13, rtol=1e-15, maxiter=500))


def _efficacy(design: SequentialDesign, fractions) -> list[float]:
    """Efficacy bounds at ``fractions`` (Lan-DeMets: the spending function at those fractions)."""
    import numpy as np

    cum = spent(fractions, design.alpha, design.spending, design.sided)
    paths = _Paths(fractions, 0.0)
    bounds: list[float] = []
    for k in range(len(fractions)):
        target = float(cum[k] - (cum[k - 1] if k else 0.0))
        if design.sided == 2:

            def excess(u, k=k, target=target):
                up, low = paths.crossing(k, u, -u)
                return up + low - target

            u = _solve(excess, 0.0) if target > 0 else math.inf
            lower = -u
        else:
            lower = -math.inf
            if design.binding_futility and design.futility_z is not None and k < len(cum) - 1:
                lower = design.futility_z[k]

            def excess(u, k=k, target=target):
                return paths.crossing(k, u, -math.inf)[0] - target

            u = _solve(excess) if target > 0 else math.inf
        bounds.append(u)
        if k < len(fractions) - 1:
            paths.advance(k, u, lower)
    return list(np.asarray(bounds, float))


def _beta_futility(design: SequentialDesign, fractions, upper) -> tuple[list[float], float]:
    """Non-binding beta-spending futility bounds and the drift at which the last ones meet."""
    cum = spent(fractions, float(design.beta), str(design.beta_spending))
    last = len(fractions) - 1

    def bounds_at(theta: float) -> list[float]:
        paths = _Paths(fractions, theta)
        out = []
        for k in range(len(fractions)):
            target = float(cum[k] - (cum[k - 1] if k else 0.0))
            if k == 0:
                from scipy.stats import norm

                a = theta * math.sqrt(fractions[0]) + float(norm.ppf(target))
            else:

                def short(a, k=k, target=target):
                    return paths.crossing(k, math.inf, a)[1] - target

                # At a large drift few paths are left: all of them may be less than the beta
                # this look may spend. The bound then closes the region (it meets the efficacy
                # bound; at the last look the drift is too large).
                cap = upper[k] if k < last else _ZMAX
                a = _solve(short, -_ZMAX, cap) if short(cap) > 0 else cap
            out.append(a)
            if k < last:
                paths.advance(k, upper[k], a)
        return out

    from scipy.stats import norm

    # The drift of a fixed design with this alpha and power; the sequential one needs a little
    # more. Past twice that the interim bounds swallow the last look's region.
    fixed = float(norm.isf(design.alpha / design.sided) + norm.isf(float(design.beta)))
    theta = _solve(lambda th: bounds_at(th)[last] - upper[last], 0.0, 2 * fixed)
    return bounds_at(theta)[:last] + [upper[last]], theta


def boundaries(design: SequentialDesign, fractions: Sequence[float] | None = None) -> pd.DataFrame:
    """Efficacy (and futility) bounds of a group-sequential design on the ``Z`` scale.

    Parameters
    ----------
    design : SequentialDesign
        Looks, alpha, sidedness, spending and futility.
    fractions : sequence of float, optional
        The information fractions at which the looks were actually taken (the spending
        function is evaluated there, as Lan-DeMets allows); default the planned ones. The
        last one may differ from 1 when the final sample differs from the plan.

    Returns
    -------
    pandas.DataFrame
        One row per look: ``look`` (1-based), ``fraction``, ``efficacy_z`` (reject when ``Z``
        reaches it; two-sided: ``|Z|``), ``futility_z`` (NaN without futility), ``alpha_spent``
        (cumulative), ``alpha_look``, ``nominal_p`` (the one-sided p-value that reaches the
        efficacy bound, ``1 - Phi(efficacy_z)``), ``beta_spent`` (cumulative; NaN without beta
        spending), ``drift`` (beta spending: the drift ``theta`` at which the final bounds meet,
        i.e. the design's power ``1 - beta`` there; else NaN), ``spending``, ``alpha``,
        ``sided``, ``binding_futility``.

    Examples
    --------
    >>> d = SequentialDesign((0.5, 0.75, 1.0), alpha=0.025)
    >>> boundaries(d)["efficacy_z"].round(4).tolist()
    [2.9626, 2.359, 2.0141]
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import norm

    t = np.asarray(design.fractions if fractions is None else fractions, float)
    if np.any(np.diff(t) <= 0) or t[0] <= 0:
        raise ValueError(f"look fractions must increase from above 0, got {t.tolist()}")
    # Spending uses min(t, 1): a final sample above the plan spends all of alpha there.
    rates = np.minimum(t, 1.0)
    if len(rates) > 1 and np.any(np.diff(rates) <= 0):
        raise ValueError("only the last look may be at or beyond the planned N")
    upper = _efficacy(design, rates)
    futility = [math.nan] * len(t)
    beta_cum = [math.nan] * len(t)
    drift = math.nan
    if design.futility_z is not None:
        futility = [*design.futility_z[: len(t) - 1], math.nan][: len(t)]
        if len(t) - 1 > len(design.futility_z):
            raise ValueError("more looks than the design's futility bounds")
    elif design.beta_spending is not None:
        futility, drift = _beta_futility(design, rates, upper)
        beta_cum = list(spent(rates, float(design.beta), design.beta_spending))
    cum = spent(rates, design.alpha, design.spending, design.sided)
    return pd.DataFrame(
        {
            "look": np.arange(1, len(t) + 1),
            "fraction": t,
            "efficacy_z": upper,
            "futility_z": futility,
            "alpha_spent": cum,
            "alpha_look": np.diff(cum, prepend=0.0),
            "nominal_p": norm.sf(upper),
            "beta_spent": beta_cum,
            "drift": drift,
            "spending": design.spending,
            "alpha": design.alpha,
            "sided": design.sided,
            "binding_futility": design.binding_futility,
        }
    )


def stopping_look(z, bounds: pd.DataFrame) -> tuple[int, str]:
    """The look at which a sequence of statistics stops, and why.

    Parameters
    ----------
    z : sequence of float
        The statistic at each look taken so far (oriented so that large values favour the
        hypothesis; two-sided designs compare ``|z|``).
    bounds : pandas.DataFrame
        :func:`boundaries` at those looks.

    Returns
    -------
    (int, str)
        1-based look and ``"efficacy"`` (the efficacy bound was reached: the null hypothesis is
        rejected), ``"futility"`` (a futility bound was reached), ``"not rejected"`` (the final
        look of the design, below its efficacy bound) or ``"continue"`` (no bound crossed
        yet; the look is the last one given).
    """
    sided = int(bounds["sided"].iloc[0])
    for k, value in enumerate(z):
        decision = look_decision(value, bounds.iloc[k], sided, final=k == len(bounds) - 1)
        if decision != "continue":
            return k + 1, decision
    return len(z), "continue"


def look_decision(z: float, bound, sided: int, *, final: bool) -> str:
    """What one look's statistic means against its bounds (see :func:`stopping_look`)."""
    if (abs(z) if sided == 2 else z) >= bound["efficacy_z"]:
        return "efficacy"
    if not math.isnan(bound["futility_z"]) and z <= bound["futility_z"]:
        return "futility"
    return "not rejected" if final else "continue"


def _more_extreme(theta: float, z_stop: float, look: int, upper, lower, fractions) -> float:
    """P(outcome at least as extreme as ``z_stop`` at ``look``) under drift ``theta``."""
    paths = _Paths(fractions, theta)
    total = 0.0
    for k in range(look - 1):
        total += paths.crossing(k, upper[k], lower[k])[0]
        paths.advance(k, upper[k], lower[k])
    return total + paths.crossing(look - 1, z_stop, -math.inf)[0]


def stagewise_inference(
    z,
    bounds: pd.DataFrame,
    *,
    se: float,
    look: int | None = None,
    confidence: float | None = None,
) -> pd.DataFrame:
    """Stopping-rule-adjusted p-value, median-unbiased estimate and CI (stage-wise ordering).

    Parameters
    ----------
    z : sequence of float
        The statistic at each look up to and including the stopping look, oriented so that
        large values favour the hypothesis (``estimate / se`` for "greater", its negative for
        "less").
    bounds : pandas.DataFrame
        :func:`boundaries` at the looks taken.
    se : float
        Standard error of the estimate at the stopping look; it sets the scale of the
        estimate and interval (information ``1 / se^2``, proportional to the fraction).
    look : int, optional
        1-based stopping look; default :func:`stopping_look`.
    confidence : float, optional
        Coverage; default ``1 - 2 alpha`` for one-sided designs (rpact's convention) and
        ``1 - alpha`` for two-sided ones.

    Returns
    -------
    pandas.DataFrame
        One row: ``look``, ``decision`` (as :func:`stopping_look`), ``z``,
        ``p_val`` (stage-wise adjusted: one-sided for one-sided designs, two-sided otherwise),
        ``p_naive`` (the same side(s) from ``z`` alone, as if the look were a fixed design),
        ``estimate`` (median unbiased, on the scale of the effect, in the oriented direction),
        ``estimate_naive`` (``z * se``), ``ci_low``, ``ci_high`` (stage-wise ordering),
        ``confidence``, ``ordering`` (``stage-wise``).

    Notes
    -----
    Non-binding futility bounds are ignored here (as rpact does): the inference holds whether
    or not the study stopped at one. With one look this is the fixed-design z test and Wald
    interval.
    """
    import pandas as pd
    from scipy.stats import norm

    z = [float(v) for v in z]
    if look is None:
        look, decision = stopping_look(z, bounds)
    else:
        decision = stopping_look(z[:look], bounds.iloc[:look])[1]
    sided = int(bounds["sided"].iloc[0])
    alpha = float(bounds["alpha"].iloc[0])
    if confidence is None:
        confidence = 1 - 2 * alpha if sided == 1 else 1 - alpha
    fractions = bounds["fraction"].to_numpy(float)[:look]
    upper = bounds["efficacy_z"].to_numpy(float)[:look]
    binding = bool(bounds["binding_futility"].iloc[0])
    futility = bounds["futility_z"].to_numpy(float)[:look]
    if sided == 2:
        lower = [-u for u in upper]
    else:
        lower = [f if binding and not math.isnan(f) else -math.inf for f in futility]
    z_stop = z[look - 1]
    # Drift per unit effect: Z ~ N(theta sqrt(t), 1) with theta = effect * sqrt(I(t = 1)).
    scale = 1.0 / (se * math.sqrt(fractions[-1]))

    def tail(theta: float, z_value: float) -> float:
        return _more_extreme(theta, z_value, look, upper, lower, fractions)

    if sided == 2:
        # Symmetric bounds: the one-sided tail on the side of the observed statistic, doubled.
        sign = 1.0 if z_stop >= 0 else -1.0
        p_one = tail(0.0, abs(z_stop))
        p_val = min(1.0, 2 * p_one)
        p_naive = float(2 * norm.sf(abs(z_stop)))
    else:
        sign = 1.0
        p_val = tail(0.0, z_stop)
        p_naive = float(norm.sf(z_stop))

    def theta_at(level: float) -> float:
        # P(more extreme | theta) rises with theta; the root is near the naive estimate.
        centre = sign * z_stop / math.sqrt(fractions[-1])
        return _solve(
            lambda th: tail(th, sign * z_stop) - level, centre - 2 * _ZMAX, centre + 2 * _ZMAX
        )

    low_q, high_q = (1 - confidence) / 2, (1 + confidence) / 2
    limits = sorted(sign * theta_at(q) / scale for q in (low_q, high_q))
    return pd.DataFrame(
        {
            "look": [look],
            "decision": [decision],
            "z": [z_stop],
            "p_val": [p_val],
            "p_naive": [p_naive],
            "estimate": [sign * theta_at(0.5) / scale],
            "estimate_naive": [z_stop * se],
            "ci_low": [limits[0]],
            "ci_high": [limits[1]],
            "confidence": [confidence],
            "ordering": ["stage-wise"],
        }
    )
