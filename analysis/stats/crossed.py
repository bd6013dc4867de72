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
from typing import TYPE_CHECKING

from analysis.stats.numdiff import hessian, jacobian
from analysis.stats.singular import SINGULAR_TOL, decision_notes, lmer_decision

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

# Participants x pairs up to which the count table is held dense (8 bytes a cell: 40 MB).
DENSE_COUNT_CELLS = 5_000_000


class ConvergenceError(RuntimeError):
    """No optimizer produced a converged mixed-model fit; nothing is reported."""


class _CrossedProblem:
    """Profiled (RE)ML deviance of ``y ~ X + (1 | large) + (1 | small)`` in a sparse form.

    ``theta = (sd_large, sd_small) / sigma`` (lme4's relative covariance factor for two scalar
    random intercepts). ``A = Lambda' Z' Z Lambda + I`` is solved through the Schur complement
    of its diagonal ``large`` block, an ``n_small x n_small`` dense matrix.
    """

    def __init__(self, X, y, g1, g2):
        import numpy as np
        import scipy.sparse as sp

        n = len(y)
        self.n, self.p = n, X.shape[1]
        W = np.column_stack([X, y])
        q1, q2 = g1.max() + 1, g2.max() + 1
        self.n1 = np.bincount(g1, minlength=q1).astype(float)
        self.n2 = np.bincount(g2, minlength=q2).astype(float)
        self.counts = sp.csr_matrix((np.ones(n), (g1, g2)), shape=(q1, q2))
        # Dense counts when they are small: scipy.sparse's per-call overhead (~1 ms) dominates
        # a 70 x 10 table, and the optimizer needs a few hundred evaluations.
        self.dense = q1 * q2 <= DENSE_COUNT_CELLS
        if self.dense:
            self.counts = self.counts.toarray()
        # Z'W for each factor: per-level column sums of [X | y].
        self.zw1 = np.zeros((q1, self.p + 1))
        self.zw2 = np.zeros((q2, self.p + 1))
        np.add.at(self.zw1, g1, W)
        np.add.at(self.zw2, g2, W)
        self.wtw = W.T @ W
        # Start and bounds of the optimizer on theta, and which entries are SDs (lme4's
        # ``lower == 0``): the fit is singular when one of those is below SINGULAR_TOL.
        self.theta0 = np.array([1.0, 1.0])
        self.bounds = [(0, None), (0, None)]
        self.diag_index = [0, 1]

    def pieces(self, theta):
        """Return ``(W' V^-1 W, log det A)`` with ``V`` in units of ``sigma^2``."""
        import numpy as np
        import scipy.sparse as sp

        t1, t2 = theta
        d1 = t1 * t1 * self.n1 + 1.0
        d2 = t2 * t2 * self.n2 + 1.0
        if self.dense:
            c = self.counts * (t1 * t2)  # off-diagonal block of A
            cd = c / d1[:, None]
            schur = np.diag(d2) - c.T @ cd
        else:
            c = self.counts.multiply(t1 * t2).tocsr()
            cd = sp.diags(1.0 / d1) @ c
            schur = np.diag(d2) - (c.T @ cd).toarray()
        chol = np.linalg.cholesky(schur)
        f = t1 * self.zw1  # Lambda' Z' W, large block
        g = t2 * self.zw2
        # A^{-1} [f; g] through the Schur complement of the diagonal block.
        b = np.linalg.solve(schur, g - cd.T @ f)
        a = (f - c @ b) / d1[:, None]
        m = self.wtw - (f.T @ a + g.T @ b)
        logdet_a = np.log(d1).sum() + 2 * np.log(np.diag(chol)).sum()
        return m, logdet_a

    def _split(self, theta):
        import numpy as np

        m, logdet_a = self.pieces(theta)
        p = self.p
        xtx, xty, yty = m[:p, :p], m[:p, p], m[p, p]
        beta = np.linalg.solve(xtx, xty)
        return xtx, beta, yty - xty @ beta, logdet_a

    def deviance(self, theta, reml: bool = True) -> float:
        """-2 log-likelihood (REML criterion when ``reml``) profiled over beta and sigma."""
        import numpy as np

        xtx, _, r2, logdet_a = self._split(theta)
        dof = self.n - self.p if reml else self.n
        dev = logdet_a + dof * (1 + np.log(2 * np.pi * r2 / dof))
        if reml:
            dev += np.linalg.slogdet(xtx)[1]
        return float(dev)

    def deviance_vp(self, varpar) -> float:
        """REML criterion at ``(theta, sigma)``, sigma not profiled (lmerTest's ``devfun_vp``)."""
        import numpy as np

        *theta, sigma = varpar
        xtx, _, r2, logdet_a = self._split(theta)
        s2 = sigma * sigma
        dof = self.n - self.p
        return float(logdet_a + np.linalg.slogdet(xtx)[1] + dof * np.log(2 * np.pi * s2) + r2 / s2)

    def vcov_vp(self, varpar):
        """Covariance of the fixed effects at ``(theta, sigma)``: ``sigma^2 (X'V^-1X)^-1``."""
        import numpy as np

        *theta, sigma = varpar
        return sigma * sigma * np.linalg.inv(self._split(theta)[0])

    def fit(self, reml: bool = True):
        """Minimise the profiled deviance over ``theta >= 0``; return ``(theta, deviance)``."""
        import numpy as np
        from scipy.optimize import minimize

        def dev(theta):
            return self.deviance(theta, reml)

        # Derivative-free, as lme4 (Nelder-Mead / BOBYQA on theta): finite-difference
        # gradients of a deviance in the hundreds of thousands are too noisy for L-BFGS-B's
        # stopping rules. The tolerances are far below lme4's defaults so that the fit stops
        # *at* the optimum (the reference numbers in tests/analysis/r/ are lme4's at a tightened
        # optimum). Near the optimum a simplex can cycle on the deviance's rounding noise
        # without meeting both tolerances (seen on Penicillin), so convergence is judged over
        # restarts: one run met the tolerances (or shrank its simplex below xatol, see met_by)
        # and a restart from the best point found no lower deviance beyond that noise.
        x0 = self.theta0
        bounds = self.bounds
        scale = abs(dev(x0))
        options = {"xatol": 1e-9, "fatol": 1e-13 * scale, "maxiter": 1000 * len(x0)}

        def run(start):
            return minimize(dev, x0=start, method="Nelder-Mead", bounds=bounds, options=options)

        def met_by(r) -> bool:
            # Both tolerances met; or the simplex has shrunk below xatol and only fatol is
            # missed: its vertices then differ by a few ulps and their deviances by rounding
            # noise (Penicillin: 1 ulp apart in theta, 9e-11 apart in a deviance of 331, above
            # fatol = 3.7e-11), which no number of iterations removes.
            vertices = r.final_simplex[0]
            return bool(r.success) or float(np.max(np.ptp(vertices, axis=0))) <= options["xatol"]

        res = run(x0)
        met = met_by(res)
        settled = False
        for _ in range(3):
            again = run(res.x)
            met = met or met_by(again)
            settled = again.fun >= res.fun - 1e-10 * scale
            if again.fun < res.fun:
                res = again
            if settled and met:
                break
        if not (met and settled):
            raise ConvergenceError(
                f"sparse crossed {'REML' if reml else 'ML'}: Nelder-Mead did not converge "
                f"({res.message}); no estimate"
            )
        return np.asarray(res.x, float), float(res.fun)


class _CrossedSlopesProblem(_CrossedProblem):
    """Profiled (RE)ML deviance of ``y ~ X + (1 + x | large) + (1 + x | small)``.

    lme4's formulation (Bates et al. 2015, section 3): each factor has a 2 x 2 lower-triangular
    relative covariance factor ``T`` (``theta`` = its entries column-wise, as ``getME(m,
    "theta")``: large first, the factor with more levels, as lme4 orders its terms), so that
    the random effects of a level are ``sigma T u``, ``u ~ N(0, I)``. ``A = Lambda' Z' Z
    Lambda + I`` is block diagonal over the ``large`` levels (2 x 2 blocks), so it is solved
    through the Schur complement of that block, a ``2 n_small x 2 n_small`` dense matrix.
    """

    def __init__(self, X, y, x, g1, g2):
        import numpy as np

        n = len(y)
        self.n, self.p = n, X.shape[1]
        W = np.column_stack([X, y])
        z = np.column_stack([np.ones(n), x])  # the random-effect covariates of a row
        q1, q2 = g1.max() + 1, g2.max() + 1
        zz = z[:, :, None] * z[:, None, :]  # per-row 2 x 2
        self.m_cell = np.zeros((q1, q2, 2, 2))
        np.add.at(self.m_cell, (g1, g2), zz)
        self.m1 = self.m_cell.sum(axis=1)
        self.m2 = self.m_cell.sum(axis=0)
        zw = z[:, :, None] * W[:, None, :]  # per-row 2 x (p + 1)
        self.zw1 = np.zeros((q1, 2, self.p + 1))
        self.zw2 = np.zeros((q2, 2, self.p + 1))
        np.add.at(self.zw1, g1, zw)
        np.add.at(self.zw2, g2, zw)
        self.wtw = W.T @ W
        self.q1, self.q2 = q1, q2
        # lme4's start: T = I for both factors; the off-diagonal entries are unbounded.
        self.theta0 = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
        self.bounds = [(0, None), (None, None), (0, None)] * 2
        self.diag_index = [0, 2, 3, 5]

    @staticmethod
    def factor(t):
        import numpy as np

        return np.array([[t[0], 0.0], [t[1], t[2]]])

    def pieces(self, theta):
        """Return ``(W' V^-1 W, log det A)`` with ``V`` in units of ``sigma^2``."""
        import numpy as np

        t1, t2 = self.factor(theta[:3]), self.factor(theta[3:])
        q1, q2 = self.q1, self.q2
        # Everything as stacked 2 x 2 products (matmul broadcasts over the levels): einsum's
        # generic loops were 10x slower here.
        d1 = t1.T @ self.m1 @ t1 + np.eye(2)  # (q1, 2, 2): the diagonal blocks of A
        d2 = t2.T @ self.m2 @ t2 + np.eye(2)  # (q2, 2, 2)
        c = t1.T @ self.m_cell @ t2  # (q1, q2, 2, 2): the off-diagonal block, per cell
        det1 = d1[:, 0, 0] * d1[:, 1, 1] - d1[:, 0, 1] * d1[:, 1, 0]
        inv1 = np.empty_like(d1)
        inv1[:, 0, 0] = d1[:, 1, 1] / det1
        inv1[:, 1, 1] = d1[:, 0, 0] / det1
        inv1[:, 0, 1] = -d1[:, 0, 1] / det1
        inv1[:, 1, 0] = -d1[:, 1, 0] / det1
        cmat = c.transpose(0, 2, 1, 3).reshape(q1, 2, 2 * q2)  # rows (j, a), columns (l, d)
        cd = inv1 @ cmat  # D1^-1 C, per large level
        schur = -(cmat.reshape(2 * q1, 2 * q2).T @ cd.reshape(2 * q1, 2 * q2))
        idx = np.arange(q2)
        schur4 = schur.reshape(q2, 2, q2, 2)
        schur4[idx, :, idx, :] += d2
        chol = np.linalg.cholesky(schur)
        f = t1.T @ self.zw1  # (q1, 2, p + 1): Lambda' Z' W, large block
        g = (t2.T @ self.zw2).reshape(2 * q2, -1)
        ff = f.reshape(2 * q1, -1)
        b = np.linalg.solve(schur, g - cd.reshape(2 * q1, 2 * q2).T @ ff)
        a = inv1 @ (f - cmat @ b)  # (q1, 2, p + 1)
        m = self.wtw - (ff.T @ a.reshape(2 * q1, -1) + g.T @ b)
        logdet_a = np.log(det1).sum() + 2 * np.log(np.diag(chol)).sum()
        return m, logdet_a

    def fit(self, reml: bool = True, start=None):
        """Minimise the profiled deviance over the six entries of ``theta``.

        Nelder-Mead to a moderate tolerance, then L-BFGS-B with central-difference gradients
        from there (six parameters: a simplex alone needs thousands of evaluations to reach
        the tolerance of the intercept-only fit). With ``start`` (where lmer's own optimizer
        stopped, or the REML optimum for the ML fit), L-BFGS-B also runs from there and the
        lower converged end is kept: a bounded simplex can settle with an entry on its bound
        where BOBYQA finds a lower criterion off it.
        """
        import numpy as np
        from scipy.optimize import minimize

        def dev(theta):
            return self.deviance(theta, reml)

        scale = abs(dev(self.theta0))
        first = minimize(
            dev,
            x0=self.theta0,
            method="Nelder-Mead",
            bounds=self.bounds,
            options={"xatol": 1e-6, "fatol": 1e-10 * scale, "maxiter": 6000, "adaptive": True},
        )
        polish = minimize(
            dev,
            x0=first.x,
            method="L-BFGS-B",
            bounds=self.bounds,
            jac="3-point",
            options={"ftol": 1e-15, "gtol": 1e-9, "maxiter": 500},
        )
        best = polish if polish.fun <= first.fun else first
        # Converged: the simplex met its tolerances, and the gradient polish did not move the
        # criterion beyond its rounding noise, or ended by its own convergence test.
        settled = polish.success or abs(polish.fun - first.fun) <= 1e-9 * scale
        ends = [best] if first.success and settled else []
        if start is not None:
            start = np.asarray(start, float)
            other = minimize(
                dev,
                x0=start,
                method="L-BFGS-B",
                bounds=self.bounds,
                jac="3-point",
                options={"ftol": 1e-15, "gtol": 1e-9, "maxiter": 500},
            )
            if other.success or abs(other.fun - dev(start)) <= 1e-9 * scale:
                ends.append(other)
        if not ends:
            raise ConvergenceError(
                f"sparse crossed random-slope {'REML' if reml else 'ML'} fit did not converge "
                f"({first.message}; {polish.message}); no estimate"
            )
        best = min(ends, key=lambda r: r.fun)
        return np.asarray(best.x, float), float(best.fun)


class _ReducedSlopesProblem(_CrossedSlopesProblem):
    """The random-slope model with some entries of ``theta`` held at 0: a simpler structure.

    ``free`` marks the entries of lme4's six-entry ``theta`` that are estimated. Holding
    ``T[1, 0]`` at 0 drops the correlation (``(1 + x || g)``, i.e. ``(1 | g) + (0 + x | g)``);
    holding a column at 0 drops that term. The deviance is then exactly that of the simpler
    model (a zero column of ``T`` adds ``log 1`` to ``log det A``), so the same code fits it.
    """

    def __init__(self, X, y, x, g1, g2, free):
        import numpy as np

        super().__init__(X, y, x, g1, g2)
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

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings it
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


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
        ``optimizer`` (``nelder-mead``, bounded, on the relative SDs), ``converged``, ``reml``,
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

    with one_blas_thread():
        theta, criterion = problem.fit(reml)
        _, dev_ml = (theta, criterion) if not reml else problem.fit(reml=False)
        xtx, beta, r2, _ = problem._split(theta)
        dof = n - p if reml else n
        sigma = float(np.sqrt(r2 / dof))
        cov = sigma * sigma * np.linalg.inv(xtx)
        # Satterthwaite df are defined for the REML criterion (as lmerTest); none for ML fits.
        named = {f"_{i}": row for i, row in enumerate(np.eye(p))}
        named.update({k: np.asarray(v, float) for k, v in (contrasts or {}).items()})
        if any(v.shape != (p,) for v in named.values()):
            raise ValueError(f"every contrast needs {p} weights (intercept first)")
        L = np.array(list(named.values()))
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
    out = pd.DataFrame(rows)
    out["optimizer"] = "nelder-mead"
    out["converged"] = True
    out["reml"] = reml
    out["n_obs"] = n
    with one_blas_thread():
        stop, at_stop, votes = lmer_decision(build, n, [0, 1], reml)
    differ = decision_notes(
        lambda t: problem.deviance(t, reml), stop, at_stop, votes, theta, (large, small)
    )
    boundary = [(large, small)[i] for i in at_stop]
    out["singular"] = bool(boundary)
    out["criterion"] = criterion
    out["loglik"] = -criterion / 2
    k = p + 3
    out["loglik_ml"] = -dev_ml / 2
    out["aic_ml"] = dev_ml + 2 * k
    out["bic_ml"] = dev_ml + k * np.log(n)
    notes = [f"singular fit: the SD of {', '.join(boundary)} is at the boundary (0)"]
    notes = notes if boundary else []
    notes += differ
    out["notes"] = "; ".join(notes)
    return out


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
        tf = _CrossedSlopesProblem.factor(th)
        vc = sigma * sigma * tf @ tf.T
        sd0, sd1 = np.sqrt(np.diag(vc))
        rows.append({"kind": "sd", "term": f"{name}: Intercept", "estimate": float(sd0)})
        rows.append({"kind": "sd", "term": f"{name}: {x}", "estimate": float(sd1)})
        corr = vc[0, 1] / (sd0 * sd1) if sd0 > 0 and sd1 > 0 else np.nan
        rows.append({"kind": "corr", "term": f"{name}: Intercept x {x}", "estimate": float(corr)})
    rows.append({"kind": "sd", "term": "Residual", "estimate": sigma})
    out = pd.DataFrame(rows)
    out["optimizer"] = "nelder-mead + l-bfgs-b"
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
