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


def _test(row) -> str:
    if row["df"] == row["df"]:
        return f"t({row['df']:.1f}) = {row['statistic']:.3f}"
    return f"z = {row['statistic']:.3f}"


def _where(row, several_blocks: bool) -> str:
    """``[block] contrast: `` (the block only when the report has several)."""
    return (f"[{row['block']}] " if several_blocks else "") + f"{row['contrast']}: "


def _adjusted(row, several: bool) -> str:
    return f", {row['padjust']} p {format_p(row['p_adj'])}" if several else ""


def _singular(row) -> str:
    return "SINGULAR fit (a variance at the boundary)" if row["singular"] else "not singular"


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
        One line per contrast (and block) of each model.
    """
    m, t = results.meta, results.tables
    blocks = len(m.get("blocks", {}).get("analysed", ["all"])) > 1  # type: ignore[union-attr]
    lines = []
    if "preregistration" in m:
        lines.append(primary_sentence(results))
    levels = m.get("format_levels", {})
    lines.append(
        f"{m['n_participants_analysed']} participants, {m['n_rows_analysed']} choices analysed; "
        f"formats {', '.join(levels.get('levels', []))} (reference {levels.get('reference')})"  # type: ignore[union-attr]
    )
    test = m.get("test_participants", {})
    if test.get("n_input"):  # type: ignore[union-attr]
        lines.append(
            f"test participants in the export: {test['n_input']}, analysed: {test['n_analysed']}"  # type: ignore[index]
        )
    if m.get("formats_left_out"):
        left = ", ".join(f"{f} ({n} trials)" for f, n in m["formats_left_out"].items())  # type: ignore[union-attr]
        lines.append(f"formats not named by --levels, left out: {left}")
    unchecked = [
        f"{rule} ({how['why']})"
        for rule, how in m["exclusion_rules"].items()  # type: ignore[union-attr]
        if how["status"] == "not checked"
    ]
    if unchecked:
        lines.append(
            f"Exclusion rules not checked (nobody screened by them): {', '.join(unchecked)}"
        )
    if "choice_glmm" in t:
        glmm = t["choice_glmm"]
        several = len(glmm) > glmm["block"].nunique()
        for _, row in glmm.iterrows():
            lines.append(
                f"Choice GLMM {_where(row, blocks)}OR = {row['estimate']:.3f} "
                f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}], log OR = {row['log_odds']:+.3f} "
                f"(SE {row['se']:.3f}), z = {row['z']:.3f}, p {format_p(row['p_val'])}"
                f"{_adjusted(row, several)}; -2 log L {row['deviance']:.2f}, max|grad| "
                f"{row['max_grad']:.1e} (glmer's check: < 0.002); " + _singular(row)
            )
    if str(m.get("choice_glmm", "")).startswith("not reported"):
        lines.append(f"Choice GLMM: {m['choice_glmm']}")
    for _, chi in t["chi2"].iterrows() if "chi2" in t else []:
        if chi["primary"]:
            yates = " (Yates)" if chi["test"] == "pearson_yates" else ""
            where = f" [{chi['block']}]" if blocks else ""
            lines.append(
                f"For comparison with the seed study{where}: "
                f"chi2({chi['dof']}){yates} = {chi['chi2']:.3f}, p {format_p(chi['p_val'])} "
                "(every choice treated as independent)"
            )
    if "speed" in t:
        speed = t["speed"].iloc[0]
        if is_missing(speed["min_duration_s"]):
            lines.append(
                f"min_duration_s not set: suggested {int(speed['suggested_min_duration_s'])} s "
                f"({speed['suggestion_basis']}); it would exclude "
                f"{int(speed['n_below_suggestion'])} analysed participant(s)"
            )
    if "wtp_model" in t:
        wtp = t["wtp_model"]
        several = len(wtp) > wtp["block"].nunique()
        for _, row in wtp.iterrows():
            lines.append(
                f"WTP ({row['model']}, {row['optimizer']}) {_where(row, blocks)}"
                f"{row['estimate']:+.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}], "
                f"{_test(row)}, p {format_p(row['p_val'])}{_adjusted(row, several)}; "
                + _singular(row)
            )
    if "wtp_model_failed" in m:
        lines.append(f"WTP model: not reported ({m['wtp_model_failed']})")
    if "wtp_slopes" in t:
        for _, row in t["wtp_slopes"].iterrows():
            test = (
                f"its slopes: chi2({row['lrt_df']}) = {row['lrt_chisq']:.2f}, p "
                f"{format_p(row['lrt_p'])}"
                if row["lrt_df"]
                else "no slope variance left to test"
            )
            lines.append(
                f"WTP with random slopes {_where(row, blocks)}final model {row['formula']}: "
                f"{row['estimate']:+.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}], "
                f"t({row['df']:.1f}) = {row['statistic']:.3f}, p {format_p(row['p_val'])}; "
                f"{test}; " + ("SINGULAR fit" if row["singular"] else "not singular")
            )
            if row.get("simplified"):
                lines.append(
                    f"  simplified from the singular maximal model (maximal: "
                    f"{row['maximal_estimate']:+.3f}, SE {row['maximal_se']:.3f}); steps: "
                    f"{row['simplification']}"
                )
            lines.append(f"  {row['dummy']}")
    if "wtp_slopes_failed" in m:
        lines.append(f"WTP with random slopes: not reported ({m['wtp_slopes_failed']})")
    if "covariate_adjusted" in t:
        adj = t["covariate_adjusted"]
        for _, row in adj[adj["family"] != "covariate"].iterrows():
            lines.append(
                f"{row['model']} adjusted for {covariates}: {row['term']}: {row['estimate']:+.3f} "
                f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}], p {format_p(row['p_val'])} "
                f"({int(row['n_rows_dropped'])} rows without covariates left out)"
            )
        for note in sorted(set(adj.get("notes", [])) - {""}):
            lines.append(f"adjusted models: {note}")
    for key, why in m.items():
        name = key.removesuffix("_failed")
        if key.endswith("_failed") and name not in ("wtp_model", "wtp_slopes", "choice_glmm",
                                                     "primary"):  # fmt: skip
            lines.append(f"{name.replace('_', ' ')}: not reported ({why})")
    if join_summary is not None:
        lines.append(
            f"demographics: {join_summary['n_matched']} of {join_summary['n_participants']} "
            f"participants matched ({join_summary['n_consent_revoked']} consent revoked, "
            f"{join_summary['n_data_expired']} data expired, {join_summary['n_unmatched']} not "
            "in the demographic export)"
        )
    return lines
