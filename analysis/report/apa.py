"""APA-style results sentences (APA 7, section 6.43-6.46) with every number the reader needs.

Each function takes the rows the statistics functions return and gives one paragraph; nothing
is computed here except rounding, by the rule of :mod:`analysis.report.numbers`: statistics to
two decimals, proportions and correlations bounded by 1 without the leading zero (``.17``),
``p`` to three decimals, ``p < .001`` or ``p > .999``, intervals as ``95% CI [low, high]``.
:func:`model_sentence` writes any model row with ``estimate, se, statistic, p_val`` (and
optionally ``df``, ``ci_low``, ``ci_high``), so a new model's table gets its sentence without
code here.
"""

from __future__ import annotations

from collections.abc import Mapping

from analysis.report.numbers import (
    PADJUST_NAMES,
    fmt_bounded,
    fmt_count,
    fmt_number,
    fmt_p,
    is_missing,
)

__all__ = [
    "adjusted",
    "agreement_sentence",
    "chi2_sentence",
    "count",
    "correlation_sentence",
    "gee_sentence",
    "glmm_sentence",
    "model_sentence",
    "p_apa",
    "rates_sentence",
    "slopes_sentence",
    "within_sentence",
    "wtp_sentence",
]


def _finite(v: object) -> bool:
    return not is_missing(v) and not isinstance(v, str)


def num(v: object, digits: int = 2) -> str:
    """``12.35``, ``−0.53``, ``1,234.00``; ``NA`` for a missing value (the report's rule)."""
    return fmt_number(v, digits, missing="NA")


def bounded(v: object, digits: int = 2) -> str:
    """A number that cannot exceed 1 in size, without the leading zero: ``.17``, ``−.05``."""
    return fmt_bounded(v, digits, missing="NA")


def count(v: object) -> str:
    """A count with thousands separators: ``1,234``; ``NA`` when missing."""
    return fmt_count(v, missing="NA")


def p_apa(p: object) -> str:
    """``p = .032``, ``p < .001``, ``p > .999`` or ``p = NA`` (the report's rule for p).

    Examples
    --------
    >>> p_apa(0.0321), p_apa(2e-9), p_apa(1.0), p_apa(0.05)
    ('p = .032', 'p < .001', 'p > .999', 'p = .050')
    """
    text = fmt_p(p, missing="NA")
    return f"p {text}" if text[0] in "<>" else f"p = {text}"


def ci(
    low: object, high: object, digits: int = 2, *, bound: bool = False, level: str = "95%"
) -> str:
    """``95% CI [low, high]`` (``level`` for another confidence level)."""
    f = bounded if bound else num
    return f"{level} CI [{f(low, digits)}, {f(high, digits)}]"


def _more_or_less(estimate: object, more: str = "higher", less: str = "lower") -> str:
    return more if _finite(estimate) and float(estimate) > 0 else less  # type: ignore[arg-type]


def adjusted(row: Mapping[str, object]) -> str:
    """``Holm-adjusted p = .012`` for a row with ``p_adj`` and ``padjust``."""
    name = PADJUST_NAMES.get(str(row.get("padjust")), str(row.get("padjust")))
    return f"{name}-adjusted {p_apa(row['p_adj'])}"


def _p(row: Mapping[str, object], several: bool) -> str:
    """The p of a contrast, and its adjusted p when the model has several contrasts."""
    return p_apa(row["p_val"]) + (f", {adjusted(row)}" if several else "")


def rates_sentence(rates: list[Mapping[str, object]]) -> str:
    """How often the target was chosen under each format, with the counts.

    Parameters
    ----------
    rates : list of mapping
        ``selection_rates`` rows (``format, estimate, n, n_chose``), in level order.
    """
    parts = [
        f"{float(r['estimate']):.1%} of the {r['format']} trials "  # type: ignore[arg-type]
        f"({count(r['n_chose'])}/{count(r['n'])})"
        for r in rates
    ]
    # "in A and in B" for two formats, "in A, B and C" for more.
    last = " and in " if len(parts) == 2 else " and "
    listed = ", ".join(parts[:-1]) + last + parts[-1] if len(parts) > 1 else parts[0]
    return f"The target was chosen in {listed}."


def chi2_sentence(chi: Mapping[str, object], effects: list[Mapping[str, object]]) -> str:
    """The seed study's test: the chi-square of the format x choice table, for comparison.

    Parameters
    ----------
    chi : mapping
        The primary row of ``chi2`` (``test, chi2, dof, n, p_val, cramer_v``).
    effects : list of mapping
        The ``risk_difference`` rows of ``effects`` (one per contrast).
    """
    yates = " with Yates' continuity correction" if chi["test"] == "pearson_yates" else ""
    rds = "; ".join(
        f"{e['level']} − {e['versus']} RD = {bounded(e['estimate'])}, "
        f"{ci(e['ci_low'], e['ci_high'], bound=True)}"
        for e in effects
    )
    return (
        "For comparison with the seed study, which compared the choice rates by a chi-square "
        f"test: χ²({count(chi['dof'])}, N = {count(chi['n'])}) = {num(chi['chi2'])}, "
        f"{p_apa(chi['p_val'])} (Pearson's test{yates}), Cramér's V = {bounded(chi['cramer_v'])}; "
        f"risk difference{'s' if len(effects) > 1 else ''} {rds} (Newcombe). This test treats "
        "every choice as independent although each participant made several; the "
        "clustering-aware models do not."
    )


def _odds(rows: list[Mapping[str, object]]) -> str:
    several = len(rows) > 1
    return "; ".join(
        f"OR = {num(r['estimate'])} times as high with {r['level']} as with {r['versus']}, "
        f"{ci(r['ci_low'], r['ci_high'])}, z = {num(r['z'])}, {_p(r, several)} "
        f"(log OR = {num(r['log_odds'])}, SE = {num(r['se'])})"
        for r in rows
    )


def gee_sentence(rows: list[Mapping[str, object]]) -> str:
    """The GEE odds ratios of the contrasts, clustered by participant."""
    first = rows[0]
    return (
        f"Accounting for the repeated choices of each participant (GEE logistic regression, "
        f"exchangeable working correlation, robust SEs; {count(first['n_obs'])} trials of "
        f"{count(first['n_clusters'])} participants), the odds of choosing the target were "
        f"{_odds(rows)}."
    )


def glmm_sentence(rows: list[Mapping[str, object]]) -> str:
    """The logistic GLMM's conditional odds ratios (crossed random intercepts, Laplace)."""
    row = rows[0]
    text = (
        "In a logistic mixed model with crossed random intercepts for participants and pairs "
        f"(Laplace approximation, as lme4::glmer; {count(row.get('n_obs'))} trials), the "
        f"conditional odds of choosing the target were {_odds(rows)}. Random-intercept SDs on "
        f"the logit scale: participant {num(row.get('sd_subject'))}, pair "
        f"{num(row.get('sd_item'))}; −2 log-likelihood {num(row.get('deviance'))}, what "
        "summary(glmer) prints as deviance."
    )
    if _finite(row.get("max_grad")):
        grad = float(row["max_grad"])  # type: ignore[arg-type]
        text += (
            f" Convergence: largest scaled gradient {num(grad)}, "
            + ("below" if grad <= 0.002 else "above")
            + " glmer's 0.002 check."
        )
    if bool(row.get("singular")):
        text += " Singular fit: a random-intercept variance is at the boundary (0)."
    return text


def _t_or_z(row: Mapping[str, object]) -> str:
    if _finite(row.get("df")):
        return f"t({num(row['df'], 1)}) = {num(row['statistic'])}"
    return f"z = {num(row['statistic'])}"


def wtp_sentence(rows: list[Mapping[str, object]], unit: str) -> str:
    """The WTP mixed model: per contrast b, SE, t(df), p, CI, d; intercept, ICCs, singular."""
    row = rows[0]
    which = "Satterthwaite df" if _finite(row.get("df")) else "normal reference, no df"
    several = len(rows) > 1
    effects = "; ".join(
        f"{_more_or_less(r['estimate'])} with {r['level']} than with {r['versus']} by "
        f"b = {num(r['estimate'])} {unit}, SE = {num(r['se'])}, {_t_or_z(r)}, {_p(r, several)}, "
        f"{ci(r['ci_low'], r['ci_high'])}, d = {num(r['d_standardised'])}"
        for r in rows
    )
    text = (
        f"In a linear mixed model ({row['formula']}; {row['model']}, REML, {which}), the WTP "
        f"premium was {effects} (d: effect over the SD of one observation). The baseline WTP "
        f"({row['versus']}, average participant and pair) was {num(row['intercept'])} {unit}, "
        f"{ci(row['intercept_ci_low'], row['intercept_ci_high'])}; "
        f"SDs: participant {num(row['sd_subject'])}, pair {num(row['sd_item'])}, residual "
        f"{num(row['sd_residual'])}; ICC participant = {bounded(row['icc_subject'])}, "
        f"pair = {bounded(row['icc_item'])}; N = {count(row['n_obs'])} ratings of "
        f"{count(row['n_subjects'])} participants and {count(row['n_items'])} pairs."
    )
    if bool(row.get("singular")):
        text += (
            " Singular fit: a variance component is at the boundary (0), as lme4's isSingular;"
            " the random-effects structure is more than these data support."
        )
    return text


def slopes_sentence(row: Mapping[str, object], unit: str) -> str:
    """The random-slope model: how it was reached from the maximal model, its effect and test.

    Every number is the final model's; when the maximal model was singular the sentence says so
    and names what was dropped (the steps are ``row['simplification']``), with the maximal
    model's estimate beside it.
    """
    steps = [s.strip() for s in str(row.get("simplification", "")).split("; ")]
    dropped = [s.split(": ", 1)[1].rsplit(";", 1)[0] for s in steps[1:] if ": " in s]
    if bool(row.get("simplified")):
        how = (
            f"The maximal model ({row['maximal_formula']}) was singular (lme4's isSingular at "
            "the precision of lmer's optimizer) and was reduced, refitting after each step: "
            + "; then ".join(d.removeprefix("singular: ") for d in dropped)
            + f". The final model is {row['formula']}"
            f" (maximal model: b = {num(row['maximal_estimate'])} {unit}, SE = "
            f"{num(row['maximal_se'])})."
        )
    else:
        how = f"The maximal model ({row['formula']}) was not singular and is the final model."
    text = (
        f"Random slopes of format by participant and pair, {row['level']} vs {row['versus']} "
        f"(the trials of these two formats). {how} In the final model, "
        f"b = {num(row['estimate'])} {unit}, SE = {num(row['se'])}, {_t_or_z(row)}, "
        f"{p_apa(row['p_val'])}, {ci(row['ci_low'], row['ci_high'])}."
    )
    if int(row.get("lrt_df", 0) or 0) > 0:  # type: ignore[call-overload]
        improved = _finite(row["lrt_p"]) and float(row["lrt_p"]) < 0.05  # type: ignore[arg-type]
        text += (
            f" Its slopes {'improved' if improved else 'did not improve'} the fit over "
            f"{row['lrt_null']}, χ²({int(row['lrt_df'])}) = {num(row['lrt_chisq'])}, "
            f"{p_apa(row['lrt_p'])} (likelihood-ratio test of the ML fits; conservative at "
            "the boundary)."
        )
    else:
        text += " No slope variance is left in it, so there is no test of the slopes."
    if bool(row.get("singular")):
        text += " The final fit is still singular: a variance or correlation is at its boundary."
    text += f" The formulas name {row.get('dummy', 'a 0/1 format code')}."
    if row.get("notes"):
        text += f" Note: {row['notes']}."
    return text


def within_sentence(row: Mapping[str, object], unit: str) -> str:
    """Participants' mean within-person difference."""
    return (
        f"Within participants ({count(row['n_subjects'])} who saw both formats), the mean "
        f"difference {row['treatment']} − {row['reference']} was M = {num(row['estimate'])} "
        f"{unit}, SD = {num(row['sd'])}, {ci(row['ci_low'], row['ci_high'])} (t interval over "
        "participants; pairs not modelled)."
    )


def correlation_sentence(row: Mapping[str, object]) -> str:
    """One model's human-model correlation: Pearson r(df) with CI and p, Spearman rho and p."""
    n = int(row["n"])  # type: ignore[call-overload]
    return (
        f"{row['model']}: r({n - 2}) = {bounded(row['estimate'])}, "
        f"{ci(row['ci_low'], row['ci_high'], bound=True)}, {p_apa(row['p_val'])}; Spearman ρ = "
        f"{bounded(row['spearman_rho'])}, {p_apa(row['spearman_p_val'])}, "
        f"{row.get('spearman_p_method', 'p method not recorded')}."
    )


def agreement_sentence(row: Mapping[str, object]) -> str:
    """An agreement coefficient with its bootstrap CI."""
    names = {"fleiss_kappa": "Fleiss' κ", "krippendorff_alpha_nominal": "Krippendorff's α"}
    name = names.get(str(row["statistic"]), str(row["statistic"]))
    text = f"{name} = {bounded(row['estimate'])}, {ci(row['ci_low'], row['ci_high'], bound=True)}"
    if _finite(row.get("p_val")):
        text += f", {p_apa(row['p_val'])}"
    return text


def model_sentence(title: str, row: Mapping[str, object], unit: str = "") -> str:
    """Any model row with ``estimate, se, statistic, p_val`` (a new model slots in).

    Parameters
    ----------
    title : str
        What the model is (the section title).
    row : mapping
        ``estimate, se, statistic, p_val`` and optionally ``effect``/``term``, ``df``,
        ``ci_low``, ``ci_high``, ``singular``, ``n_obs``.
    unit : str
        Unit of the estimate (e.g. ``log odds``).

    Examples
    --------
    >>> model_sentence("GLMM", {"effect": "format[summary]", "estimate": 0.8, "se": 0.2,
    ...     "statistic": 4.0, "p_val": 6e-5, "ci_low": 0.41, "ci_high": 1.19}, "log odds")
    'GLMM: format[summary] b = 0.80 log odds, SE = 0.20, z = 4.00, p < .001, 95% CI [0.41, 1.19].'
    """
    what = row.get("effect") or row.get("term") or "effect"
    text = (
        f"{title}: {what} b = {num(row['estimate'])}{' ' + unit if unit else ''}, "
        f"SE = {num(row['se'])}, {_t_or_z(row)}, {p_apa(row['p_val'])}"
    )
    if _finite(row.get("ci_low")) and _finite(row.get("ci_high")):
        text += f", {ci(row['ci_low'], row['ci_high'])}"
    text += "."
    if bool(row.get("singular")):
        text += " Singular fit (a variance component at the boundary)."
    return text
