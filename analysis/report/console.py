"""What ``framelab analyze choice`` prints: the report's results in a few console lines.

The lines follow the report's order: the pre-registered result (if any), then the clustered
model of the choices, the seed study's chi-square for comparison, and the other models. p-values
keep more digits here than in the report (a console line is for checking, not for a paper):
:func:`format_p`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from analysis.report.numbers import is_missing
from analysis.report.prereg_section import primary_sentence

if TYPE_CHECKING:
    from analysis.report.pipeline import Results

__all__ = ["choice_lines", "format_p"]


def format_p(p: object) -> str:
    """Return ``"= 0.0123"`` or, for a p that underflowed to 0, ``"< 1e-300"``.

    A double underflows below about 2e-308, so an exact 0 only says the p is smaller than any
    printed number; "p = 0" would claim certainty no test gives.

    Examples
    --------
    >>> format_p(0.0123), format_p(3.1e-9), format_p(0.0)
    ('= 0.0123', '= 3.100e-09', '< 1e-300')
    """
    v = float(p)  # type: ignore[arg-type]
    if not math.isfinite(v):
        return "= NA"
    if v == 0.0:
        return "< 1e-300"
    return f"= {v:.3e}" if v < 1e-4 else f"= {v:.4g}"


def choice_lines(
    results: Results, *, covariates: str | None = None, join_summary: dict | None = None
) -> list[str]:
    """The console summary of a choice analysis, one string per line.

    Parameters
    ----------
    results : Results
        Output of :func:`analysis.report.pipeline.analyze_choice` (with the pre-registered
        tables and meta when ``--prereg`` was given).
    covariates : str, optional
        The ``--covariates`` option as given.
    join_summary : dict, optional
        The demographics join's counts.

    Returns
    -------
    list of str
    """
    lines = []
    if "preregistration" in results.meta:
        lines.append(primary_sentence(results))
    lines.append(
        f"{results.meta['n_participants_analysed']} participants, "
        f"{results.meta['n_rows_analysed']} choices analysed"
    )
    unchecked = [
        f"{rule} ({how['why']})"
        for rule, how in results.meta["exclusion_rules"].items()
        if how["status"] == "not checked"
    ]
    if unchecked:
        lines.append(
            f"Exclusion rules not checked (nobody screened by them): {', '.join(unchecked)}"
        )
    if "choice_glmm" in results.tables:
        row = results.tables["choice_glmm"].iloc[0]
        lines.append(
            f"Choice GLMM (logit, (1 | participant) + (1 | pair), Laplace): OR = "
            f"{row['estimate']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}], log OR = "
            f"{row['log_odds']:+.3f} (SE {row['se']:.3f}), z = {row['z']:.3f}, "
            f"p {format_p(row['p_val'])}; -2 log L {row['deviance']:.2f}, max|grad| "
            f"{row['max_grad']:.1e} (glmer's check: < 0.002); "
            + ("SINGULAR fit (a variance at the boundary)" if row["singular"] else "not singular")
        )
    elif results.meta.get("choice_glmm", "").startswith("not reported"):
        lines.append(f"Choice GLMM: {results.meta['choice_glmm']}")
    chi = results.tables["chi2"].iloc[0]
    lines.append(
        f"For comparison with the seed study: chi2 (Yates) = {chi['chi2']:.3f}, "
        f"p {format_p(chi['p_val'])} (every choice treated as independent)"
    )
    if "speed" in results.tables:
        speed = results.tables["speed"].iloc[0]
        if is_missing(speed["min_duration_s"]):
            lines.append(
                f"min_duration_s not set: suggested {int(speed['suggested_min_duration_s'])} s "
                f"({speed['suggestion_basis']}); it would exclude "
                f"{int(speed['n_below_suggestion'])} analysed participant(s)"
            )
    if "wtp_model" in results.tables:
        row = results.tables["wtp_model"].iloc[0]
        test = (
            f"t({row['df']:.1f}) = {row['statistic']:.3f}"
            if row["df"] == row["df"]
            else f"z = {row['statistic']:.3f}"
        )
        lines.append(
            f"WTP ({row['model']}, {row['optimizer']}): {row['estimate']:+.3f} "
            f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}], {test}, p {format_p(row['p_val'])}; "
            + ("SINGULAR fit (a variance at the boundary)" if row["singular"] else "not singular")
        )
    elif "wtp_model_failed" in results.meta:
        lines.append(f"WTP model: not reported ({results.meta['wtp_model_failed']})")
    if "wtp_slopes" in results.tables:
        row = results.tables["wtp_slopes"].iloc[0]
        test = (
            f"its slopes: chi2({row['lrt_df']}) = {row['lrt_chisq']:.2f}, p "
            f"{format_p(row['lrt_p'])}"
            if row["lrt_df"]
            else "no slope variance left to test"
        )
        lines.append(
            f"WTP with random slopes, final model {row['formula']}: {row['estimate']:+.3f} "
            f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}], t({row['df']:.1f}) = "
            f"{row['statistic']:.3f}, p {format_p(row['p_val'])}; {test}; "
            + ("SINGULAR fit" if row["singular"] else "not singular")
        )
        if row.get("simplified"):
            lines.append(
                f"  simplified from the singular maximal model (maximal: "
                f"{row['maximal_estimate']:+.3f}, SE {row['maximal_se']:.3f}); steps: "
                f"{row['simplification']}"
            )
        lines.append(f"  {row['dummy']}")
    elif "wtp_slopes_failed" in results.meta:
        lines.append(f"WTP with random slopes: not reported ({results.meta['wtp_slopes_failed']})")
    if "covariate_adjusted" in results.tables:
        adj = results.tables["covariate_adjusted"]
        for _, row in adj[adj["term"].str.startswith("format[")].iterrows():
            lines.append(
                f"{row['model']} adjusted for {covariates}: {row['estimate']:+.3f} "
                f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}], p {format_p(row['p_val'])} "
                f"({int(row['n_rows_dropped'])} rows without covariates left out)"
            )
        for note in sorted(set(adj.get("notes", [])) - {""}):
            lines.append(f"adjusted models: {note}")
    elif "covariate_adjusted_failed" in results.meta:
        lines.append(
            f"covariate-adjusted models: not reported ({results.meta['covariate_adjusted_failed']})"
        )
    if join_summary is not None:
        lines.append(
            f"demographics: {join_summary['n_matched']} of {join_summary['n_participants']} "
            f"participants matched ({join_summary['n_consent_revoked']} consent revoked, "
            f"{join_summary['n_data_expired']} data expired, {join_summary['n_unmatched']} not "
            "in the demographic export)"
        )
    return lines
