"""Logistic mixed model with crossed random intercepts, by Laplace approximation (as ``glmer``).

``y ~ X + (1 | large) + (1 | small)``, binomial logit, fitted as ``lme4::glmer`` with
``nAGQ = 1`` (Bates et al. 2015, section 5 of the lme4 vignette "Fitting linear mixed-effects
models using lme4" and Bates' "Computational methods for mixed models"): penalised iteratively
reweighted least squares (PIRLS) finds the conditional mode ``u~`` of the spherical random
effects for given ``theta`` (relative SDs) and ``beta``; the Laplace deviance

    -2 log L(theta, beta) ~ sum_i d_i(mu_i) + ||u~||^2 + log det(Lambda' Z' W Z Lambda + I)

(``d_i`` the Bernoulli deviance of row ``i``, ``W`` the GLM weights at ``u~``) is minimised over
``(theta, beta)`` jointly, as glmer's second stage. The standard errors are lme4's default:
twice the ``beta`` block of the inverse Hessian of that deviance over ``(theta, beta)``.

The matrix ``A = Lambda' Z' W Z Lambda + I`` has the same crossed structure as in
:mod:`analysis.stats.crossed` (diagonal blocks per factor, a weighted count table between
them) and is solved the same way: through the Schur complement of the ``large`` factor's
diagonal, an ``n_small x n_small`` dense matrix. Written by hand because no installed Python
library fits a crossed GLMM by Laplace (statsmodels' ``BinomialBayesMixedGLM`` is a
variational-Bayes / posterior-mode approximation, not glmer's likelihood). Checked against
lme4 1.1-31 ``glmer`` (``tests/analysis/r/glmer_reference.R``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from analysis.stats.crossed import SINGULAR_TOL, ConvergenceError, one_blas_thread
from analysis.stats.numdiff import hessian, jacobian

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["crossed_glmm"]

# Participants x pairs up to which the weighted count table is held dense.
DENSE_CELLS = 2_000_000
# glmer's check.conv.grad tolerance on the scaled gradient of the deviance (glmerControl()).
GRAD_TOL = 0.002


class _LogitCrossedProblem:
    """Laplace deviance of ``logit P(y = 1) = X beta + Z Lambda_theta u`` with two crossed
    random intercepts; ``theta = (sd_large, sd_small)`` (lme4's relative covariance factor of a
    binomial model, whose scale is fixed at 1)."""

    def __init__(self, X, y, g1, g2):
        import numpy as np

        self.X, self.y, self.g1, self.g2 = X, y, g1, g2
        self.n, self.p = X.shape
        self.q1, self.q2 = int(g1.max()) + 1, int(g2.max()) + 1
        # Cells of the participant x pair table that hold rows, in row-major order: the
        # weighted count table is rebuilt from them at every PIRLS step.
        cell = g1.astype(np.int64) * self.q2 + g2
        self.cells, self.cell_of_row = np.unique(cell, return_inverse=True)
        self.cell_rows, self.cell_cols = np.divmod(self.cells, self.q2)
        self.one_per_cell = len(self.cells) == self.n
        if self.one_per_cell:
            self.row_of_cell = np.argsort(self.cell_of_row)
        self.dense = self.q1 * self.q2 <= DENSE_CELLS
        if not self.dense:
            self.indptr = np.concatenate(
                [[0], np.cumsum(np.bincount(self.cell_rows, minlength=self.q1))]
            )
        self.u = np.zeros(self.q1 + self.q2)  # warm start of PIRLS between evaluations
        self.beta = np.zeros(self.p)

    def _weighted_table(self, w):
        import numpy as np
        import scipy.sparse as sp

        if self.one_per_cell:  # the seed design: every participant sees a pair once
            wc = w[self.row_of_cell]
            if self.dense and len(wc) == self.q1 * self.q2:  # and every pair: a full table
                return wc.reshape(self.q1, self.q2)
        else:
            wc = np.bincount(self.cell_of_row, weights=w, minlength=len(self.cells))
        if self.dense:
            table = np.zeros((self.q1, self.q2))
            table[self.cell_rows, self.cell_cols] = wc
            return table
        return sp.csr_matrix((wc, self.cell_cols, self.indptr), shape=(self.q1, self.q2))

    def _system(self, theta, mu):
        """Factor ``A`` at the weights of ``mu``: return a solver of ``A x = r`` and log det A."""
        import numpy as np

        t1, t2 = theta
        w = mu * (1 - mu)
        d1 = t1 * t1 * np.bincount(self.g1, weights=w, minlength=self.q1) + 1.0
        d2 = t2 * t2 * np.bincount(self.g2, weights=w, minlength=self.q2) + 1.0
        c = self._weighted_table(w) * (t1 * t2)  # off-diagonal block of A
        if self.dense:
            schur = np.diag(d2) - (c / d1[:, None]).T @ c
        else:
            import scipy.sparse as sp

            schur = np.diag(d2) - (c.T @ (sp.diags(1.0 / d1) @ c)).toarray()
        chol = np.linalg.cholesky(schur)
        logdet = float(np.log(d1).sum() + 2 * np.log(np.diag(chol)).sum())

        def solve(r):
            from scipy.linalg import cho_solve

            r1, r2 = r[: self.q1], r[self.q1 :]
            b = cho_solve((chol, True), r2 - c.T @ (r1 / d1))
            a = (r1 - c @ b) / d1
            return np.concatenate([a, b])

        return solve, logdet

    def _eta(self, theta, beta, u):
        return self.X @ beta + theta[0] * u[: self.q1][self.g1] + theta[1] * u[self.q1 :][self.g2]

    def _objective(self, eta, u) -> float:
        import numpy as np

        # Bernoulli deviance, -2 log p(y | eta), written stably: 2 (log(1 + e^eta) - y eta).
        return float(2 * (np.logaddexp(0.0, eta) - self.y * eta).sum() + u @ u)

    def _zt(self, theta, v):
        """``Lambda' Z' v`` for a vector over the rows."""
        import numpy as np

        return np.concatenate(
            [
                theta[0] * np.bincount(self.g1, weights=v, minlength=self.q1),
                theta[1] * np.bincount(self.g2, weights=v, minlength=self.q2),
            ]
        )

    def pirls(self, theta, beta=None, maxiter: int = 60):
        """Conditional mode ``u~`` for ``(theta, beta)`` by Newton steps with step halving on
        the penalised deviance; with ``beta=None`` the mode of ``(beta, u)`` jointly (glmer's
        ``nAGQ = 0`` step, its first stage). Return ``(beta, u~, penalised deviance, log det
        A)``; the last ``u~`` and ``beta`` warm-start the next call."""
        import numpy as np
        from scipy.special import expit

        theta = np.asarray(theta, float)
        joint = beta is None
        beta = self.beta.copy() if joint else np.asarray(beta, float)
        u = self.u.copy()
        eta = self._eta(theta, beta, u)
        obj = self._objective(eta, u)
        if not np.isfinite(obj):
            u = np.zeros_like(u)
            eta = self._eta(theta, beta, u)
            obj = self._objective(eta, u)
        p = self.p
        for _ in range(maxiter):
            mu = expit(eta)
            solve, logdet = self._system(theta, mu)
            resid = self.y - mu
            grad_u = self._zt(theta, resid) - u  # half the negative gradient in u
            if joint:
                w = mu * (1 - mu)
                b = np.column_stack([self._zt(theta, w * self.X[:, k]) for k in range(p)])
                ainv_b = np.column_stack([solve(b[:, k]) for k in range(p)])
                grad_b = self.X.T @ resid
                ainv_gu = solve(grad_u)
                schur = self.X.T @ (w[:, None] * self.X) - b.T @ ainv_b
                step_b = np.linalg.solve(schur, grad_b - b.T @ ainv_gu)
                step_u = ainv_gu - ainv_b @ step_b
                decrement = float(grad_u @ step_u + grad_b @ step_b)
            else:
                step_b = np.zeros(p)
                step_u = solve(grad_u)
                decrement = float(grad_u @ step_u)  # Newton decrement
            if decrement < 1e-20 * max(1.0, obj):
                break  # at the mode: ``logdet`` is that of the weights there
            for _half in range(30):
                new_u, new_b = u + step_u, beta + step_b
                new_eta = self._eta(theta, new_b, new_u)
                new_obj = self._objective(new_eta, new_u)
                if new_obj <= obj + 1e-12 * abs(obj):
                    break
                step_u, step_b = step_u / 2, step_b / 2
            else:
                break  # no descent along the Newton direction: at the mode to rounding
            u, beta, eta, obj = new_u, new_b, new_eta, new_obj
        else:
            raise ConvergenceError("PIRLS did not find the conditional mode; no estimate")
        self.u = u
        if joint:
            self.beta = beta
        return beta, u, obj, logdet

    def deviance(self, par) -> float:
        """Laplace deviance at ``par = (theta, beta)`` (lme4's ``devFunOnly`` of ``glmer``)."""
        import numpy as np

        theta, beta = np.abs(par[:2]), np.asarray(par[2:], float)
        _, _, obj, logdet = self.pirls(theta, beta)
        return obj + logdet

    def deviance0(self, theta) -> float:
        """glmer's first-stage (``nAGQ = 0``) criterion: ``beta`` in PIRLS with ``u``."""
        import numpy as np

        _, _, obj, logdet = self.pirls(np.abs(theta))
        return obj + logdet

    def gradient(self, par):
        """Analytic gradient of the Laplace deviance over ``(theta, beta)`` (dense table only).

        At the mode ``u~`` the penalised deviance has zero derivative in ``u``, so its total
        derivative is the partial one; ``log det A`` changes with ``theta`` directly (through
        ``Lambda``) and through the weights ``W`` at ``eta~``, whose derivative includes
        ``d u~`` by implicit differentiation of the mode equation ``Lambda' Z' (y - mu) = u``.
        ``d log det A / d eta_i = h_i w'_i``, ``h_i = z_i' Lambda A^-1 Lambda' z_i``, from the
        blocks of ``A^-1`` given by the Schur complement.
        """
        import numpy as np
        from scipy.linalg import cho_solve
        from scipy.special import expit

        theta, beta = np.abs(par[:2]), np.asarray(par[2:], float)
        t1, t2 = theta
        _, u, _, _ = self.pirls(theta, beta)
        q1, g1, g2 = self.q1, self.g1, self.g2
        eta = self._eta(theta, beta, u)
        mu = expit(eta)
        w = mu * (1 - mu)
        dw = w * (1 - 2 * mu)  # d w / d eta
        r = self.y - mu
        n1w = np.bincount(g1, weights=w, minlength=q1)
        n2w = np.bincount(g2, weights=w, minlength=self.q2)
        d1 = t1 * t1 * n1w + 1.0
        d2 = t2 * t2 * n2w + 1.0
        cw = self._weighted_table(w)
        c = cw * (t1 * t2)
        cd = c / d1[:, None]
        schur = np.diag(d2) - cd.T @ c
        chol = np.linalg.cholesky(schur)
        sinv = cho_solve((chol, True), np.eye(self.q2))
        m = cd @ sinv
        p_diag = 1.0 / d1 + (m * cd).sum(axis=1)  # diagonal of the (1, 1) block of A^-1
        a12 = -m  # the (1, 2) block
        q_diag = np.diag(sinv)
        h = t1 * t1 * p_diag[g1] + t2 * t2 * q_diag[g2] + 2 * t1 * t2 * a12[g1, g2]
        v = h * dw
        solve, _ = self._system(theta, mu)
        ainv_ztv = solve(self._zt(theta, v))
        grad = np.empty(2 + self.p)
        for k in range(self.p):
            xk = self.X[:, k]
            grad[2 + k] = -2 * xk @ r + xk @ v - self._zt(theta, w * xk) @ ainv_ztv
        cross = float((a12 * cw).sum())
        direct = (
            2 * (t1 * (p_diag * n1w).sum() + t2 * cross),
            2 * (t2 * (q_diag * n2w).sum() + t1 * cross),
        )
        for k, (g, block) in enumerate(((g1, slice(0, q1)), (g2, slice(q1, None)))):
            s_k = u[block][g]  # d eta / d theta_k at fixed u
            ztr = np.zeros(len(u))
            ztr[block] = np.bincount(g, weights=r, minlength=len(u[block]))
            du = solve(ztr - self._zt(theta, w * s_k))
            grad[k] = -2 * r @ s_k + direct[k] + v @ s_k + self._zt(theta, v) @ du
        # The deviance is even in each theta (u -> -u): differentiate through |theta|.
        grad[:2] *= np.where(np.asarray(par[:2]) < 0, -1.0, 1.0)
        return grad

    def start(self):
        """The ordinary logistic regression's ``beta`` (glmer's start), by IRLS."""
        import numpy as np
        from scipy.special import expit

        beta = np.zeros(self.p)
        try:
            with np.errstate(all="ignore"):
                for _ in range(50):
                    mu = expit(self.X @ beta)
                    w = mu * (1 - mu)
                    xwx = self.X.T @ (w[:, None] * self.X)
                    step = np.linalg.solve(xwx, self.X.T @ (self.y - mu))
                    beta = beta + step
                    if np.max(np.abs(step)) < 1e-10:
                        break
        except np.linalg.LinAlgError:
            beta = np.full(self.p, np.inf)  # the weights vanished: fitted 0s and 1s
        if not np.all(np.isfinite(beta)) or np.max(np.abs(beta)) > 30:
            raise ConvergenceError(
                "the outcome is (quasi-)separated by the fixed effects (e.g. one format never "
                "or always chosen); the logistic model has no finite estimate"
            )
        return beta

    def fit(self):
        """Minimise the Laplace deviance over ``(theta >= 0, beta)``; return ``(par, dev)``.

        L-BFGS-B on the Laplace deviance over ``(theta, beta)`` (glmer's second stage). On the
        dense path it has the analytic gradient and starts from glmer's own start (``theta =
        1``, ``beta`` of PIRLS at ``nAGQ = 0`` there); if that does not converge, and always on
        the sparse path (central-difference gradients), it starts from glmer's first stage:
        ``theta`` by Nelder-Mead on the ``nAGQ = 0`` criterion (``beta`` inside PIRLS).
        Converged when L-BFGS-B meets its tolerances or its projected gradient is below 1e-4
        (deviance units; its line search can stop on the deviance's rounding noise).

        An SD that ends at 0 is then checked off the boundary (:meth:`_leave_boundary`): the
        deviance is even in each ``theta``, so ``theta = 0`` has a zero gradient whether or not
        it is a minimum, and a gradient method that lands there stops.
        """
        import numpy as np

        self.beta = self.start()
        if self.dense:
            self.pirls(np.array([1.0, 1.0]))  # beta of the nAGQ = 0 mode at theta = 1
            try:
                return self._leave_boundary(
                    *self._second_stage(np.concatenate([[1.0, 1.0], self.beta]))
                )
            except ConvergenceError:
                self.beta = self.start()
                self.u = np.zeros_like(self.u)
        theta = self._first_stage()
        self.pirls(theta)  # beta at the first stage's theta
        return self._leave_boundary(*self._second_stage(np.concatenate([theta, self.beta])))

    def _leave_boundary(self, par, dev, rounds: int = 4):
        """Move an SD at 0 off the boundary while that lowers the deviance; ``(par, dev)``.

        At ``theta_k = 0`` the deviance is ``dev_0 + c theta_k^2 + O(theta_k^4)``: a minimum
        along ``theta_k`` only when ``c >= 0``. With ``c < 0`` (a small but non-zero variance)
        the optimizer stopped at a saddle, where glmer's derivative-free search would not. The
        probe evaluates the deviance (``beta`` held) at ``theta_k`` = 0.01 (the curvature at 0,
        well above PIRLS' rounding), 0.1 and 0.5 (a variance further out) and restarts the
        second stage from the lowest point when it is lower than the boundary's. Three points:
        each is a PIRLS solve, and a genuinely singular fit pays for all of them.
        """
        import numpy as np

        for _ in range(rounds):
            best, best_dev = None, dev - 1e-9 * max(1.0, abs(dev))
            for k in np.flatnonzero(np.abs(par[:2]) < SINGULAR_TOL):
                for h in (1e-2, 0.1, 0.5):
                    trial = par.copy()
                    trial[k] = h
                    trial_dev = self.deviance(trial)
                    if trial_dev < best_dev:
                        best, best_dev = trial, trial_dev
            if best is None:
                return par, dev
            par, dev = self._second_stage(best)
        return par, dev

    def _first_stage(self):
        import numpy as np
        from scipy.optimize import minimize

        first = minimize(
            self.deviance0,
            x0=np.array([1.0, 1.0]),
            method="Nelder-Mead",
            bounds=[(0, None), (0, None)],
            options={"xatol": 1e-3, "fatol": 1e-6, "maxiter": 2000},
        )
        if not first.success:
            raise ConvergenceError(
                f"logistic GLMM, first stage (nAGQ = 0) did not converge ({first.message})"
            )
        return np.asarray(first.x, float)

    def _second_stage(self, x0):
        import numpy as np
        from scipy.optimize import minimize

        bounds = [(0, None), (0, None)] + [(None, None)] * self.p
        res = minimize(
            self.deviance,
            x0=x0,
            method="L-BFGS-B",
            bounds=bounds,
            # The analytic gradient on the dense path (4-6x fewer deviance evaluations than
            # central differences); differences on the sparse one.
            jac=self.gradient if self.dense else "3-point",
            options={"ftol": 1e-13, "gtol": 1e-5, "maxiter": 1000},
        )
        grad = np.asarray(res.jac, float)
        at_bound = (np.arange(len(grad)) < 2) & (res.x <= 0) & (grad > 0)
        projected = np.where(at_bound, 0.0, grad)
        if not (res.success or np.max(np.abs(projected)) < 1e-4):
            raise ConvergenceError(
                f"logistic GLMM (Laplace) did not converge ({res.message}; largest gradient "
                f"{np.max(np.abs(projected)):.2g}); no estimate"
            )
        return np.asarray(res.x, float), float(res.fun)

    def rx_covariance(self, par):
        """``beta``'s covariance given ``theta`` (lme4's ``vcov(use.hessian = FALSE)``)."""
        import numpy as np
        from scipy.special import expit

        theta, beta = np.abs(par[:2]), par[2:]
        _, u, _, _ = self.pirls(theta, beta)
        mu = expit(self._eta(theta, beta, u))
        w = mu * (1 - mu)
        solve, _ = self._system(theta, mu)
        wx = w[:, None] * self.X
        zwx = np.vstack(
            [
                theta[0]
                * np.stack([np.bincount(self.g1, wx[:, k], self.q1) for k in range(self.p)], 1),
                theta[1]
                * np.stack([np.bincount(self.g2, wx[:, k], self.q2) for k in range(self.p)], 1),
            ]
        )
        ainv_zwx = np.column_stack([solve(zwx[:, k]) for k in range(self.p)])
        return np.linalg.inv(self.X.T @ wx - zwx.T @ ainv_zwx)


def crossed_glmm(
    data: pd.DataFrame,
    *,
    dv: str,
    fixed: Sequence[str] = (),
    large: str,
    small: str,
    confidence: float = 0.95,
    contrasts: Mapping[str, Sequence[float]] | None = None,
) -> pd.DataFrame:
    """Logistic GLMM ``dv ~ 1 + fixed + (1 | large) + (1 | small)`` by Laplace, as ``glmer``.

    Parameters
    ----------
    data : pandas.DataFrame
        Long data, one row per binary trial; rows with a missing value in the used columns are
        dropped.
    dv : str
        0/1 outcome column.
    fixed : sequence of str
        Numeric fixed-effect columns (an intercept is always included).
    large, small : str
        Grouping columns: ``large`` may have many levels (participants), ``small`` should have
        at most a few thousand (pairs, items). lme4 orders its terms the same way (more levels
        first), so ``theta`` is comparable with ``getME(m, "theta")``.
    confidence : float
        Coverage of the Wald intervals of the fixed effects.
    contrasts : mapping of str to sequence of float, optional
        Linear combinations ``L beta`` of the fixed effects (intercept first), by name: each
        gives a ``kind == "contrast"`` row with ``L beta``, its SE ``sqrt(L V L')`` from the
        same covariance ``V`` as the fixed rows, the z test and the Wald interval.

    Returns
    -------
    pandas.DataFrame
        Fixed rows (``kind == "fixed"``: ``term, estimate`` (log odds), ``se`` (lme4's default:
        from the Hessian of the Laplace deviance over ``(theta, beta)``), ``se_rx`` (given
        theta, lme4's ``use.hessian = FALSE``), ``statistic`` (z), ``p_val`` (normal),
        ``ci_low, ci_high`` (Wald, log odds)) and ``sd`` rows of ``large`` and ``small`` (on
        the logit scale); on every row ``optimizer``, ``converged``, ``n_obs``, ``singular``
        (a relative SD below 1e-4, as ``lme4::isSingular``), ``deviance`` (the Laplace
        deviance, -2 log L), ``loglik``, ``aic``, ``bic`` (``k`` = fixed effects + 2 SDs),
        ``theta``, ``max_grad`` (glmer's convergence statistic at the optimum: the largest of
        ``min(|scaled gradient|, |gradient|)`` of the deviance over ``(theta, beta)``, checked
        against 0.002 as ``check.conv.grad``; a failed check is named in ``notes``),
        ``notes``.

    Raises
    ------
    ConvergenceError
        The outcome is separated, PIRLS found no mode, or the optimizer did not converge.
    ValueError
        The outcome is not 0/1.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import norm

    df = data[[dv, *fixed, large, small]].dropna()
    y = df[dv].to_numpy(float)
    if len(y) == 0 or not np.isin(y, (0.0, 1.0)).all():
        raise ValueError(f"{dv!r} must be 0/1 (chosen or not) for a logistic model")
    n = len(df)
    X = np.column_stack([np.ones(n), *(df[c].to_numpy(float) for c in fixed)])
    p = X.shape[1]
    problem = _LogitCrossedProblem(X, y, pd.factorize(df[large])[0], pd.factorize(df[small])[0])
    with one_blas_thread():
        par, dev = problem.fit()
        cov_rx = problem.rx_covariance(par)
        if problem.dense:
            grad = problem.gradient(par)
            # Central differences of the analytic gradient (error O(h^2), h = 1e-4 relative).
            jac = np.array(jacobian(problem.gradient, par))
            hess = (jac + jac.T) / 2
        else:
            grad = np.array(jacobian(problem.deviance, par))
            hess = hessian(problem.deviance, par)
    theta = par[:2]
    max_grad = _max_grad(grad, hess)
    try:
        cov = 2 * np.linalg.inv(hess)[2:, 2:]
        hess_ok = bool(np.all(np.linalg.eigvalsh(hess) > 0))
    except np.linalg.LinAlgError:
        hess_ok = False
    notes = []
    if not hess_ok:
        # As lme4: a Hessian that is not positive definite gives no usable vcov; fall back to
        # the covariance given theta and say so.
        cov = cov_rx
        notes.append("Hessian not positive definite: SEs given theta (use.hessian = FALSE)")
    crit = float(norm.ppf(0.5 + confidence / 2))

    def wald(kind: str, term: str, est: float, var: float, var_rx: float) -> dict[str, object]:
        se = float(np.sqrt(var))
        return {
            "kind": kind,
            "term": term,
            "estimate": est,
            "se": se,
            "se_rx": float(np.sqrt(var_rx)),
            "statistic": est / se,
            "p_val": float(2 * norm.sf(abs(est / se))),
            "ci_low": est - crit * se,
            "ci_high": est + crit * se,
        }

    rows = [
        wald("fixed", term, float(par[2 + i]), cov[i, i], cov_rx[i, i])
        for i, term in enumerate(["Intercept", *fixed])
    ]
    for name, weights in (contrasts or {}).items():
        L = np.asarray(weights, float)
        if L.shape != (p,):
            raise ValueError(f"contrast {name!r} has {L.size} weights; the model has {p} effects")
        rows.append(wald("contrast", name, float(L @ par[2:]), L @ cov @ L, L @ cov_rx @ L))
    rows.append({"kind": "sd", "term": large, "estimate": float(theta[0])})
    rows.append({"kind": "sd", "term": small, "estimate": float(theta[1])})
    out = pd.DataFrame(rows)
    out["optimizer"] = "pirls + nelder-mead + l-bfgs-b (laplace)"
    out["converged"] = True
    out["n_obs"] = n
    boundary = [name for name, th in zip((large, small), theta, strict=True) if th < SINGULAR_TOL]
    out["singular"] = bool(boundary)
    k = p + 2
    out["deviance"] = dev
    out["loglik"] = -dev / 2
    out["aic"] = dev + 2 * k
    out["bic"] = dev + k * np.log(n)
    out["theta"] = " ".join(f"{v:.8g}" for v in theta)
    out["max_grad"] = max_grad
    if max_grad > GRAD_TOL:
        notes.append(
            f"convergence check failed: max|grad| = {max_grad:.3g} > {GRAD_TOL} (as glmer's "
            "check.conv.grad)"
        )
    if boundary:
        notes.insert(0, f"singular fit: the SD of {', '.join(boundary)} is at the boundary (0)")
    out["notes"] = "; ".join(notes)
    return out


def _max_grad(grad, hess) -> float:
    """glmer's convergence statistic: the largest ``min(|H^-1/2 g|, |g|)`` over the parameters.

    lme4's ``checkConv`` scales the gradient of the deviance by the Cholesky factor of its
    Hessian (``solve(chol(H), g)``), takes the smaller of the scaled and the raw value per
    parameter, and warns when the largest exceeds 0.002. Where the Hessian is not positive
    definite (a singular fit) only the raw gradient is left.
    """
    import numpy as np
    from scipy.linalg import solve_triangular

    grad = np.abs(np.asarray(grad, float))
    try:
        upper = np.linalg.cholesky(hess).T  # R's chol(): H = R'R, R upper triangular
        scaled = np.abs(solve_triangular(upper, grad))
    except np.linalg.LinAlgError:
        return float(grad.max())
    return float(np.minimum(scaled, grad).max())
