"""Sparse linear mixed models with crossed random effects, in lme4's formulation.

The engine behind :func:`analysis.stats.wtp.wtp_mixed` and :func:`analysis.stats.wtp.wtp_slopes`:
profiled (RE)ML deviance of ``y ~ X + (1 | large) + (1 | small)`` and of the random-slope model
``y ~ X + (1 + x | large) + (1 + x | small)`` with relative covariance factors (Bates et al.
2015), Satterthwaite degrees of freedom as lmerTest, and lme4's ``isSingular`` rule. Written by
hand because no Python library fits crossed random effects sparsely with lme4's criterion;
checked against lme4 1.1-31 / lmerTest 3.1-3 to 1e-6 (``tests/analysis/r/``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING

from analysis.stats.numdiff import hessian, jacobian
from analysis.stats.singular import (
    BOUNDARY_TOL,
    SINGULAR_TOL,
    TIGHT_NLOPT,
    decision_notes,
    lmer_decision,
    lmer_stop,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ConvergenceError",
    "SINGULAR_TOL",
    "crossed_lmm",
    "crossed_order",
    "crossed_slopes_lmm",
    "one_blas_thread",
    "slopes_lrt",
]

# Doubles up to which the products of the grouped large levels are held (40 MB).
GROUPED_CELLS = 5_000_000
# BOBYQA's first step from a start near the optimum (relative SDs are of order 1).
FIT_STEP = 1e-2


class ConvergenceError(RuntimeError):
    """No optimizer produced a converged mixed-model fit; nothing is reported."""


class _CrossedProblem:
    """Profiled (RE)ML deviance of ``y ~ X + (z | large) + (z | small)`` in a sparse form.

    lme4's formulation (Bates et al. 2015, section 3) for ``r`` random-effect covariates ``z`` of
    a row (``r = 1``, an intercept: the default; ``r = 2``, intercept and slope): each factor
    has an ``r x r`` lower-triangular relative covariance factor ``T`` (``theta`` = its entries
    column-wise, as ``getME(m, "theta")``: large first, the factor with more levels, as lme4
    orders its terms; for ``r = 1`` ``theta = (sd_large, sd_small) / sigma``). ``A = Lambda'
    Z' Z Lambda + I`` is block diagonal over the ``large`` levels (``r x r`` blocks), so it is
    solved through the Schur complement of that block, an ``r n_small`` square dense matrix.

    The Schur complement is ``A22 - sum_j C_j' H_j C_j`` with ``C_j`` the ``z'z`` cell sums of
    large level ``j`` and ``H_j = T1 (T1' M_j T1 + I)^-1 T1'``, which depends on ``theta`` and on
    the level only through its ``z'z`` total ``M_j``. Levels with the same total (in a balanced
    design, all of them) are grouped, and the products of their ``C_j`` (and of their ``Z'W``)
    are summed once: an evaluation then costs one product of the group weights with those
    sums, ``O(groups x (r n_small)^2)`` whatever the number of rows and of large levels. Where
    those sums would be too large to hold (``GROUPED_CELLS``) the products are formed per level
    from a sparse ``C`` at each evaluation instead.
    """

    def __init__(self, X, y, g1, g2, z=None):
        import numpy as np
        import scipy.sparse as sp

        n = len(y)
        self.n, self.p = n, X.shape[1]
        z = np.ones((n, 1)) if z is None else np.asarray(z, float)
        r = self.r = z.shape[1]
        W = np.column_stack([X, y])
        q1, q2 = int(g1.max()) + 1, int(g2.max()) + 1
        p1, rq = self.p + 1, q2 * r
        self.q2 = q2
        zz = (z[:, :, None] * z[:, None, :]).reshape(n, r * r)
        m1 = np.zeros((q1, r * r))
        np.add.at(m1, g1, zz)
        m2 = np.zeros((q2, r * r))
        np.add.at(m2, g2, zz)
        zw2 = np.zeros((q2, r * p1))
        np.add.at(zw2, g2, (z[:, :, None] * W[:, None, :]).reshape(n, -1))
        # [[M2, Z2'W], [W'Z2, W'W]], M2 block diagonal: the part of A and W'W that does not
        # depend on the large levels.
        self.c0 = np.zeros((rq + p1, rq + p1))
        idx = np.arange(q2)
        self.c0[:rq, :rq].reshape(q2, r, q2, r)[idx, :, idx, :] = m2.reshape(q2, r, r)
        self.c0[:rq, rq:] = zw2.reshape(rq, p1)
        self.c0[rq:, :rq] = zw2.reshape(rq, p1).T
        self.c0[rq:, rq:] = W.T @ W
        # Row a of large level j: [C_a | Z'W_a], C_a's column (l, c) the sum of z_a z_c over the
        # rows of cell (j, l), Z'W_a's the sum of z_a W over the rows of j.
        vals = z[:, :, None] * np.column_stack([z, W])[:, None, :]
        rows = np.broadcast_to((g1[:, None] * r + np.arange(r))[:, :, None], vals.shape)
        cols = np.column_stack(
            [g2[:, None] * r + np.arange(r), np.broadcast_to(rq + np.arange(p1), (n, p1))]
        )
        cols = np.broadcast_to(cols[:, None, :], vals.shape)
        dz = sp.csr_matrix((vals.ravel(), (rows.ravel(), cols.ravel())), shape=(q1 * r, rq + p1))
        keys, group, self.count = np.unique(m1, axis=0, return_inverse=True, return_counts=True)
        self.group, self.m1 = group.ravel(), keys.reshape(-1, r, r)
        k = len(keys)
        if k * r * r * (rq + p1) ** 2 <= GROUPED_CELLS and q1 * r * (rq + p1) <= GROUPED_CELLS:
            # Per group v and pair (a, b): the sum over its levels of [C_a | Z'W_a]' [C_b |
            # Z'W_b], one row of ``sums``; an evaluation takes the H-weighted sum of the rows.
            rows_of = dz.toarray().reshape(q1, r * (rq + p1))
            sums = np.stack([x.T @ x for x in (rows_of[self.group == v] for v in range(k))])
            sums = sums.reshape(k, r, rq + p1, r, rq + p1).transpose(0, 1, 3, 2, 4)
            self.sums = sums.reshape(k * r * r, -1)
        else:
            self.sums, self.dz = None, [dz[a::r] for a in range(r)]
        # lme4's start: T = I for both factors, the off-diagonal entries unbounded.
        self.tril = np.triu_indices(r)[::-1]  # lower triangle, column by column
        diag = np.concatenate([self.tril[0] == self.tril[1]] * 2)
        self.theta0 = diag.astype(float)
        self.bounds = [(0, None) if d else (None, None) for d in diag]

    def factor(self, t):
        """The lower-triangular ``r x r`` factor ``T`` with the entries ``t`` column-wise."""
        import numpy as np

        out = np.zeros((self.r, self.r))
        out[self.tril] = t
        return out

    def pieces(self, theta):
        """Return ``(F, log det A)``: ``F`` the lower Cholesky factor of ``W' V^-1 W``.

        ``V`` is in units of ``sigma^2``. One Cholesky factorisation of ``[[S, R], [R',
        W'W - E]]`` (``S`` the Schur complement) gives both ``log det S`` and, as its trailing
        block, ``F``; ``F = [[Fx, 0], [fy', fyy]]`` holds ``X'V^-1X = Fx Fx'``, ``beta = Fx'^-1
        fy`` and the residual sum of squares ``fyy^2`` (as lme4's ``RX`` and ``pwrss``).
        """
        import numpy as np

        r, q2, p1 = self.r, self.q2, self.p + 1
        rq = q2 * r
        half = len(theta) // 2
        t1, t2 = self.factor(theta[:half]), self.factor(theta[half:])
        a1 = t1.T @ self.m1 @ t1  # the diagonal blocks of A less I, per group
        # (A1 + I)^-1 of each 1 x 1 or 2 x 2 block in closed form: numpy's batched inverse and
        # determinant cost more in call overhead than the whole evaluation of a small design.
        inv = np.empty_like(a1)
        if r == 1:
            det = a1[:, 0, 0] + 1.0
            inv[:, 0, 0] = 1.0 / det
        else:
            a, d = a1[:, 0, 0] + 1.0, a1[:, 1, 1] + 1.0
            det = a * d - a1[:, 0, 1] * a1[:, 1, 0]
            inv[:, 0, 0], inv[:, 1, 1] = d / det, a / det
            inv[:, 0, 1], inv[:, 1, 0] = -a1[:, 0, 1] / det, -a1[:, 1, 0] / det
        h = t1 @ inv @ t1.T
        if self.sums is not None:
            big = self.c0 - (h.reshape(-1) @ self.sums).reshape(rq + p1, rq + p1)
        else:
            w = h[self.group]  # per large level
            big = self.c0 - sum(
                (self.dz[a].T @ self.dz[b].multiply(w[:, a, b][:, None]).tocsr()).toarray()
                for a in range(r)
                for b in range(r)
            )
        # big = [[M2 - Q, Z2'W - Pt], [., W'W - E]]; T' big T with T = diag(I x T2, I), plus
        # I on the first block, is [[S, R], [R', W'W - E]]: the Schur complement S = A22 -
        # (I x T2)' Q (I x T2) and R = (I x T2)' (Z2'W - Pt).
        big[:rq] = (t2.T @ big[:rq].reshape(q2, r, -1)).reshape(rq, -1)
        big[:, :rq] = (big[:, :rq].reshape(-1, q2, r) @ t2).reshape(-1, rq)
        big.flat[: rq * (rq + p1) : rq + p1 + 1] += 1.0
        chol = np.linalg.cholesky(big)
        logdet_a = float(self.count @ np.log(det)) + 2 * float(np.log(chol.diagonal()[:rq]).sum())
        return chol[rq:, rq:], logdet_a

    def _split(self, theta):
        """``(X'V^-1X, beta, residual sum of squares, log det A)``."""
        import numpy as np

        f, logdet_a = self.pieces(theta)
        p = self.p
        fx = f[:p, :p]
        return fx @ fx.T, np.linalg.solve(fx.T, f[p, :p]), f[p, p] ** 2, logdet_a

    def _parts(self, theta):
        """``(log det X'V^-1X, residual sum of squares, log det A)`` without a solve."""
        import numpy as np

        f, logdet_a = self.pieces(theta)
        p = self.p
        return 2 * float(np.log(f.diagonal()[:p]).sum()), f[p, p] ** 2, logdet_a

    def deviance(self, theta, reml: bool = True) -> float:
        """-2 log-likelihood (REML criterion when ``reml``) profiled over beta and sigma."""
        import numpy as np

        logdet_x, r2, logdet_a = self._parts(theta)
        dof = self.n - self.p if reml else self.n
        dev = logdet_a + dof * (1 + np.log(2 * np.pi * r2 / dof))
        return float(dev + logdet_x if reml else dev)

    def deviance_vp(self, varpar) -> float:
        """REML criterion at ``(theta, sigma)``, sigma not profiled (lmerTest's ``devfun_vp``)."""
        import numpy as np

        *theta, sigma = varpar
        logdet_x, r2, logdet_a = self._parts(theta)
        s2 = sigma * sigma
        dof = self.n - self.p
        return float(logdet_a + logdet_x + dof * np.log(2 * np.pi * s2) + r2 / s2)

    def vcov_vp(self, varpar):
        """Covariance of the fixed effects at ``(theta, sigma)``: ``sigma^2 (X'V^-1X)^-1``."""
        import numpy as np

        *theta, sigma = varpar
        return sigma * sigma * np.linalg.inv(self._split(theta)[0])

    def fit(self, reml: bool = True, start=None):
        """Minimise the profiled deviance over ``theta``; return ``(theta, deviance)``.

        lmer's own optimizer tightened as in the reference fits of ``tests/analysis/r/``
        (BOBYQA to ``TIGHT_NLOPT``, then lme4's boundary checks: :func:`lmer_stop`), from
        ``start``: where lmer's default optimizer stopped (:func:`lmer_decision`, within about
        1e-4 of the optimum), or the REML optimum for the ML fit; lme4's start by default. From
        a start that close a small first step reaches the optimum in a few dozen evaluations,
        where a simplex from lme4's start needed hundreds (thousands with random slopes).
        """
        import numpy as np

        calls = 0

        def dev(theta):
            nonlocal calls
            calls += 1
            return self.deviance(theta, reml)

        lower = [0.0 if lo == 0 else -np.inf for lo, _ in self.bounds]
        step = None if start is None else FIT_STEP
        start = self.theta0 if start is None else np.asarray(start, float)
        theta, value = lmer_stop(dev, start, lower, TIGHT_NLOPT, step)
        if calls >= TIGHT_NLOPT["maxeval"]:
            raise ConvergenceError(
                f"sparse crossed {'REML' if reml else 'ML'}: BOBYQA stopped after {calls} "
                "evaluations without converging; no estimate"
            )
        # At a boundary optimum the criterion grows as theta^2 off the bound: BOBYQA stops a
        # few 1e-9 from it, where the criterion equals its value on the bound up to rounding.
        # Such an entry is put on the bound (lme4's check.boundary, within rounding), so that
        # an SD at the boundary is reported as 0.
        theta = np.asarray(theta, float)
        for i in np.flatnonzero(np.array(lower) == 0):
            if 0 < theta[i] < BOUNDARY_TOL:
                trial = theta.copy()
                trial[i] = 0.0
                at_bound = dev(trial)
                if at_bound <= value + 1e-12 * abs(value):
                    theta, value = trial, at_bound
        return theta, float(value)


class _ReducedSlopesProblem(_CrossedProblem):
    """``y ~ X + (1 + x | large) + (1 + x | small)`` with some entries of ``theta`` held at 0.

    ``z = (1, x)``; ``free`` marks the entries of lme4's six-entry ``theta`` that are
    estimated. Holding ``T[1, 0]`` at 0 drops the correlation (``(1 + x || g)``, i.e. ``(1 | g)
    + (0 + x | g)``); holding a column at 0 drops that term. The deviance is then exactly that of
    the simpler model (a zero column of ``T`` adds ``log 1`` to ``log det A``), so the same code
    fits it.
    """

    def __init__(self, X, y, x, g1, g2, free):
        import numpy as np

        super().__init__(X, y, g1, g2, np.column_stack([np.ones(len(y)), x]))
        self.free = np.asarray(free, bool)
        self.theta0 = self.theta0[self.free]
        self.bounds = [b for b, f in zip(self.bounds, self.free, strict=True) if f]

    def expand(self, theta):
        import numpy as np

        full = np.zeros(6)
        full[self.free] = theta
        return full

    def pieces(self, theta):
        return super().pieces(self.expand(theta))


def one_blas_thread():
    """Context in which BLAS runs on one thread (a no-op without threadpoolctl).

    Every product in the sparse fit is at most ``n_small`` wide; BLAS threads only add
    synchronisation there, and on a loaded 2-core machine a 20 x 3,000 x 20 product took
    9 ms with OpenBLAS' threads against 1 ms on one (bench/wtp_models.py). threadpoolctl comes
    with scikit-learn, a dependency of the analysis extra.
    """
    from contextlib import nullcontext

    controller = _blas_controller()
    return nullcontext() if controller is None else controller.limit(limits=1, user_api="blas")


@cache
def _blas_controller():
    """The process's threadpoolctl controller: finding the BLAS libraries costs ~3 ms a time."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - scikit-learn brings it
        return None
    return ThreadpoolController()


def crossed_order(df: pd.DataFrame, subject: str, item: str) -> tuple[str, str, int, int]:
    """lme4's order of two crossed grouping factors: ``(large, small, n_subject, n_item)``.

    lme4 puts the factor with more levels first; a factor with one level is refused as lme4
    refuses it ("grouping factors must have > 1 sampled level").
    """
    n_subjects, n_items = df[subject].nunique(), df[item].nunique()
    for group, n in ((subject, n_subjects), (item, n_items)):
        if n < 2:
            raise ValueError(f"{group!r} has {n} level; a random intercept needs at least 2")
    large, small = (subject, item) if n_subjects >= n_items else (item, subject)
    return large, small, n_subjects, n_items


def slopes_lrt(df: pd.DataFrame, *, y: str, x: str, large: str, small: str, free, dev1: float):
    """Likelihood-ratio test of a random-slope model's slope terms: ``(chi2, df, null mask)``.

    The null model is the fitted one (lme4's six ``theta`` entries ``free``, ML deviance
    ``dev1``) without its slope variances and correlations; both are ML fits on the same rows,
    as ``anova(m0, m)`` in lme4. ``chi2`` is NaN when no slope is left to test or no random
    effect is left without them.
    """
    import numpy as np
    import pandas as pd

    free = np.asarray(free, bool)
    null = free & np.array([True, False, False, True, False, False])
    k = int(free.sum() - null.sum())
    if k == 0 or not null.any():
        return np.nan, k, null
    xv = df[x].to_numpy(float)
    X = np.column_stack([np.ones(len(df)), xv])
    yv = df[y].to_numpy(float)
    g1, g2 = pd.factorize(df[large])[0], pd.factorize(df[small])[0]
    if null[0] and null[3]:
        problem = _CrossedProblem(X, yv, g1, g2)  # both intercepts: the faster scalar fit
    else:
        problem = _ReducedSlopesProblem(X, yv, xv, g1, g2, null)
    with one_blas_thread():
        _, dev0 = problem.fit(reml=False)
    return max(dev0 - dev1, 0.0), k, null


def _satterthwaite_df(problem: _CrossedProblem, theta, sigma: float, contrasts):
    """Satterthwaite denominator df of each contrast row ``L`` (as lmerTest).

    ``df = 2 (L C L')^2 / (g' A g)`` with ``C = vcov(beta)`` as a function of the variance
    parameters ``(theta, sigma)``, ``g`` its gradient along ``L``, and ``A = 2 H^-1`` the
    asymptotic covariance of the variance parameters from the Hessian ``H`` of the REML
    criterion (Kuznetsova, Brockhoff & Christensen 2017, section 3.2).
    """
    import numpy as np

    varpar = np.array([*theta, sigma], float)
    hess = hessian(problem.deviance_vp, varpar)
    cov_vp = 2 * np.linalg.pinv(hess)
    cov_beta = problem.vcov_vp(varpar)
    jac = jacobian(problem.vcov_vp, varpar)
    out = []
    for L in np.atleast_2d(contrasts):
        var = float(L @ cov_beta @ L)
        grad = np.array([L @ j @ L for j in jac])
        out.append(2 * var * var / float(grad @ cov_vp @ grad))
    return np.array(out)


def _fixed_row(term: str, est: float, se: float, ddf: float, confidence: float) -> dict:
    """One fixed effect: t test on Satterthwaite's ``ddf`` (the normal reference where it is not
    finite), the normal p beside it, and the interval of ``confidence``."""
    import numpy as np
    from scipy.stats import norm, t

    p_z = float(2 * norm.sf(abs(est / se)))
    if np.isfinite(ddf):
        p_val = float(2 * t.sf(abs(est / se), ddf))
        crit = float(t.ppf(0.5 + confidence / 2, ddf))
    else:
        p_val, crit = p_z, float(norm.ppf(0.5 + confidence / 2))
    return {
        "kind": "fixed",
        "term": term,
        "estimate": est,
        "se": se,
        "statistic": est / se,
        "df": ddf,
        "p_val": p_val,
        "p_val_z": p_z,
        "ci_low": est - crit * se,
        "ci_high": est + crit * se,
    }


def crossed_lmm(
    data: pd.DataFrame,
    *,
    dv: str,
    fixed: Sequence[str] = (),
    large: str,
    small: str,
    reml: bool = True,
    confidence: float = 0.95,
    contrasts: Mapping[str, Sequence[float]] | None = None,
) -> pd.DataFrame:
    """Linear mixed model with two crossed random intercepts, fitted in a sparse formulation.

    ``dv ~ 1 + fixed + (1 | large) + (1 | small)`` by profiled REML, as ``lme4::lmer``
    (Bates et al. 2015, section 3), with lmerTest's Satterthwaite degrees of freedom
    (Kuznetsova et al. 2017). Written by hand because statsmodels fits crossed effects with a
    dense ``n_obs x levels`` design (minutes and gigabytes beyond ~10,000 rows x 1,000
    participants) and no installed library offers a sparse crossed fit. The trick: with one
    factor's block diagonal (each row belongs to one participant) the relative covariance
    ``A = Lambda' Z' Z Lambda + I`` is solved through the Schur complement of that diagonal,
    an ``n_small x n_small`` dense matrix, so each deviance evaluation costs
    O(n_obs + n_large x n_small) instead of O(n_obs x levels).

    Parameters
    ----------
    data : pandas.DataFrame
        Long data; rows with a missing value in the used columns are dropped.
    dv : str
        Outcome column.
    fixed : sequence of str
        Numeric fixed-effect columns (an intercept is always included).
    large, small : str
        Grouping columns: ``large`` may have many levels (participants), ``small`` should have
        at most a few thousand (pairs, items).
    reml : bool
        REML (default) or ML.
    confidence : float
        Coverage of the intervals of the fixed effects.
    contrasts : mapping of str to sequence of float, optional
        Linear combinations ``L beta`` (intercept first), by name: ``kind == "contrast"`` rows
        with the columns of the fixed rows, Satterthwaite's df of ``L`` as lmerTest's
        ``contest(m, L, joint = FALSE)``.

    Returns
    -------
    pandas.DataFrame
        Rows as :func:`lmm`: fixed effects (``kind == "fixed"``: ``term, estimate, se,
        statistic`` (t = estimate / se), ``df`` (Satterthwaite; REML fits only, else NaN),
        ``p_val`` (t with ``df``; normal when ``df`` is NaN), ``p_val_z`` (normal),
        ``ci_low, ci_high`` (t with ``df``); SEs are ``sigma^2 (X' V^-1 X)^-1`` at the optimum,
        as lme4) and SDs of ``large``, ``small`` and ``Residual``; plus, on every row,
        ``optimizer`` (``bobyqa``: lmer's, tightened), ``converged``, ``reml``,
        ``n_obs``, ``singular`` (a relative SD below 1e-4, as ``lme4::isSingular``, where
        lmer's default optimizer stops: :func:`analysis.stats.singular.lmer_stop`),
        ``criterion`` (REML criterion or ML deviance, -2 log L), ``loglik`` (-criterion / 2),
        ``loglik_ml``, ``aic_ml``, ``bic_ml`` (the ML fit, as ``AIC(refitML(m))``; ``k`` = fixed
        effects + 2 SDs + residual), ``notes``.

    Raises
    ------
    ConvergenceError
        The optimizer did not report convergence.

    Notes
    -----
    Checked against lme4 1.1-31 / lmerTest 3.1-3 on ``Penicillin`` and simulated designs
    (``tests/analysis/stats/test_wtp_lme4.py``, R script in ``tests/analysis/r/``) and against
    statsmodels' dense crossed fit (``tests/analysis/stats/test_wtp.py``).
    """
    import numpy as np
    import pandas as pd

    df = data[[dv, *fixed, large, small]].dropna()
    n = len(df)
    X = np.column_stack([np.ones(n), *(df[c].to_numpy(float) for c in fixed)])
    y = df[dv].to_numpy(float)
    p = X.shape[1]
    g1, g2 = pd.factorize(df[large])[0], pd.factorize(df[small])[0]
    problem = _CrossedProblem(X, y, g1, g2)

    def build(order):
        return (
            problem if order is None else _CrossedProblem(X[order], y[order], g1[order], g2[order])
        )

    named = {f"_{i}": row for i, row in enumerate(np.eye(p))}
    named.update({k: np.asarray(v, float) for k, v in (contrasts or {}).items()})
    if any(v.shape != (p,) for v in named.values()):
        raise ValueError(f"every contrast needs {p} weights (intercept first)")
    L = np.array(list(named.values()))
    with one_blas_thread():
        # Where lmer's default optimizer stops decides the singular flag; the optimum is
        # polished from there.
        stop, at_stop, votes = lmer_decision(build, n, [0, 1], reml)
        theta, criterion = problem.fit(reml, start=stop)
        _, dev_ml = (theta, criterion) if not reml else problem.fit(reml=False, start=theta)
        xtx, beta, r2, _ = problem._split(theta)
        dof = n - p if reml else n
        sigma = float(np.sqrt(r2 / dof))
        cov = sigma * sigma * np.linalg.inv(xtx)
        # Satterthwaite df are defined for the REML criterion (as lmerTest); none for ML fits.
        dfs = _satterthwaite_df(problem, theta, sigma, L) if reml else np.full(len(L), np.nan)
    rows: list[dict[str, object]] = []
    for i, (name, weights) in enumerate(named.items()):
        est, s = float(weights @ beta), float(np.sqrt(weights @ cov @ weights))
        term = ["Intercept", *fixed][i] if i < p else name
        row = _fixed_row(term, est, s, float(dfs[i]), confidence)
        rows.append(row if i < p else {**row, "kind": "contrast"})
    rows.append({"kind": "sd", "term": large, "estimate": float(theta[0]) * sigma})
    rows.append({"kind": "sd", "term": small, "estimate": float(theta[1]) * sigma})
    rows.append({"kind": "sd", "term": "Residual", "estimate": sigma})
    differ = decision_notes(
        lambda t: problem.deviance(t, reml), stop, at_stop, votes, theta, (large, small)
    )
    boundary = [(large, small)[i] for i in at_stop]
    notes = [f"singular fit: the SD of {', '.join(boundary)} is at the boundary (0)"]
    notes = notes if boundary else []
    k = p + 3
    # The columns every row shares, set in one go: column by column, pandas' inserts cost
    # more than the fit of a 70 x 10 design.
    common = {
        "optimizer": "bobyqa",
        "converged": True,
        "reml": reml,
        "n_obs": n,
        "singular": bool(boundary),
        "criterion": criterion,
        "loglik": -criterion / 2,
        "loglik_ml": -dev_ml / 2,
        "aic_ml": dev_ml + 2 * k,
        "bic_ml": dev_ml + k * np.log(n),
        "notes": "; ".join(notes + differ),
    }
    return pd.DataFrame([{**row, **common} for row in rows])


def crossed_slopes_lmm(
    data: pd.DataFrame,
    *,
    dv: str,
    x: str,
    large: str,
    small: str,
    confidence: float = 0.95,
    free: Sequence[bool] | None = None,
) -> pd.DataFrame:
    """``dv ~ x + (1 + x | large) + (1 + x | small)`` by profiled REML, as ``lme4::lmer``.

    The maximal random-effects structure of a within-participant, within-pair design (Barr et
    al. 2013): each participant and each pair has its own intercept and its own effect of
    ``x``, correlated. lme4's formulation (relative covariance factor ``Lambda_theta``; Bates et
    al. 2015) with ``A = Lambda' Z' Z Lambda + I`` solved through the Schur complement of its
    block-diagonal ``large`` part; Satterthwaite df as lmerTest.

    Parameters
    ----------
    data : pandas.DataFrame
        Long data; rows with a missing value in the used columns are dropped.
    dv, x : str
        Outcome and the (numeric, e.g. 0/1) predictor that also varies by level.
    large, small : str
        Grouping columns (``large``: the factor with more levels, as lme4 orders them).
    confidence : float
        Coverage of the intervals of the fixed effects.
    free : sequence of 6 bool, optional
        Which entries of lme4's ``theta`` (``T[0,0], T[1,0], T[1,1]`` of ``large``, then of
        ``small``) are estimated; the others are held at 0. Default: all (the maximal model).
        ``T[1,0]`` held at 0 is the zero-correlation model ``(1 + x || g)``; a column held at
        0 drops that term (an SD of 0, no correlation).

    Returns
    -------
    pandas.DataFrame
        Fixed rows as :func:`crossed_lmm` (``Intercept`` and ``x``, with Satterthwaite ``df``);
        ``sd`` rows ``<factor>: Intercept``, ``<factor>: <x>`` and ``Residual``; ``corr`` rows
        ``<factor>: Intercept x <x>`` (NaN when an SD is 0); every row also ``optimizer``,
        ``converged``, ``reml``, ``n_obs``, ``singular`` (an SD or the remaining diagonal of a
        2 x 2 factor below 1e-4, as ``lme4::isSingular``, where lmer's default optimizer
        stops: :func:`analysis.stats.singular.lmer_stop`), ``criterion``, ``loglik``,
        ``loglik_ml``, ``aic_ml``, ``bic_ml`` (``k`` = 2 fixed + the estimated
        entries of theta + residual),
        ``theta`` (lme4's ``getME(m, "theta")`` at the optimum, as text), ``theta_lmer``
        (where lmer with its defaults stops, on which ``singular`` is decided), ``boundary``
        (the positions in ``theta`` at the boundary there, space-separated), ``notes``.
    """
    import numpy as np
    import pandas as pd

    df = data[[dv, x, large, small]].dropna()
    n = len(df)
    xv = df[x].to_numpy(float)
    X = np.column_stack([np.ones(n), xv])
    free = np.ones(6, bool) if free is None else np.asarray(free, bool)
    y = df[dv].to_numpy(float)
    g1, g2 = pd.factorize(df[large])[0], pd.factorize(df[small])[0]
    problem = _ReducedSlopesProblem(X, y, xv, g1, g2, free)

    def build(order):
        if order is None:
            return problem
        return _ReducedSlopesProblem(X[order], y[order], xv[order], g1[order], g2[order], free)

    p = 2
    # lme4's isSingular looks at the diagonal of each factor T (an SD at 0, or the remaining
    # diagonal at 0: a correlation of +-1), entries with lower bound 0.
    diag = [int(np.flatnonzero(np.flatnonzero(free) == i)[0]) for i in (0, 2, 3, 5) if free[i]]
    with one_blas_thread():
        stop, at_stop, votes = lmer_decision(build, n, diag)
    with one_blas_thread():
        theta_free, criterion = problem.fit(reml=True, start=stop)
        _, dev_ml = problem.fit(reml=False, start=theta_free)
        xtx, beta, r2, _ = problem._split(theta_free)
        sigma = float(np.sqrt(r2 / (n - p)))
        cov = sigma * sigma * np.linalg.inv(xtx)
        dfs = _satterthwaite_df(problem, theta_free, sigma, np.eye(p))
    theta = problem.expand(theta_free)
    rows: list[dict[str, object]] = []
    for i, term in enumerate(["Intercept", x]):
        est, s = float(beta[i]), float(np.sqrt(cov[i, i]))
        rows.append(_fixed_row(term, est, s, float(dfs[i]), confidence))
    owner = [large if i < 3 else small for i in np.flatnonzero(free)]
    differ = decision_notes(problem.deviance, stop, at_stop, votes, theta_free, owner)
    at_stop_full = set(np.flatnonzero(free)[at_stop])
    boundary = [name for name, o in ((large, 0), (small, 3)) if at_stop_full & {o, o + 2}]
    for name, th in ((large, theta[:3]), (small, theta[3:])):
        tf = problem.factor(th)
        vc = sigma * sigma * tf @ tf.T
        sd0, sd1 = np.sqrt(np.diag(vc))
        rows.append({"kind": "sd", "term": f"{name}: Intercept", "estimate": float(sd0)})
        rows.append({"kind": "sd", "term": f"{name}: {x}", "estimate": float(sd1)})
        corr = vc[0, 1] / (sd0 * sd1) if sd0 > 0 and sd1 > 0 else np.nan
        rows.append({"kind": "corr", "term": f"{name}: Intercept x {x}", "estimate": float(corr)})
    rows.append({"kind": "sd", "term": "Residual", "estimate": sigma})
    out = pd.DataFrame(rows)
    out["optimizer"] = "bobyqa"
    out["converged"] = True
    out["reml"] = True
    out["n_obs"] = n
    out["singular"] = bool(boundary)
    out["criterion"] = criterion
    out["loglik"] = -criterion / 2
    k = p + int(free.sum()) + 1
    out["loglik_ml"] = -dev_ml / 2
    out["aic_ml"] = dev_ml + 2 * k
    out["bic_ml"] = dev_ml + k * np.log(n)
    out["theta"] = " ".join(f"{v:.8g}" for v in theta)
    out["theta_lmer"] = " ".join(f"{v:.8g}" for v in problem.expand(stop))
    # Positions in lme4's six-entry theta that are at the boundary (what simplification drops).
    out["boundary"] = " ".join(str(i) for i in sorted(at_stop_full))
    notes = [
        f"singular fit: the covariance of {', '.join(boundary)} is at the boundary (an SD of 0 "
        "or a correlation of +-1)"
    ]
    notes = notes if boundary else []
    notes += differ
    out["notes"] = "; ".join(notes)
    return out
