"""Helpers shared by the analysis tests."""

from __future__ import annotations


def make_gee_never_converge(monkeypatch) -> None:
    """Make every statsmodels GEE fit report non-convergence (the real fits converge at once)."""
    import statsmodels.api as sm

    original = sm.GEE.fit

    def not_converged(self, *args, **kwargs):
        res = original(self, *args, **kwargs)
        res.converged = False
        return res

    monkeypatch.setattr(sm.GEE, "fit", not_converged)
