"""Which exclusion rules were applied to the data, which could not be checked, and why.

A rule that is switched on is only applied when the export carries the column it reads: a
study without a comprehension quiz has no ``quiz_passed``, and ``require_quiz`` then screens
nobody. The report says so rule by rule instead of listing the configured switches as if each
had been applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from analysis.exclusions import AnnotationRules, ChoiceRules, RaterRules

__all__ = [
    "authenticity_sensitivity",
    "rule_status",
    "rules_meta",
    "rules_sentence",
    "sensitivity_sentence",
    "speed_check",
    "speed_sentence",
]

# Rule -> (the column it reads, the exclusion reason it gives) for choice data.
_CHOICE = {
    "require_completed": ("status", "status not completed"),
    "require_quiz": ("quiz_passed", "failed comprehension quiz"),
    "require_attention": ("attention_passed", "failed attention check"),
    "authenticity_canary": ("auth_canary", "followed the canary instruction"),
    "authenticity_max_score": ("auth_score", "authenticity score above max_score"),
    "min_duration_s": ("duration_s", "implausibly fast"),
    "min_duration_frac_median": ("duration_s", "implausibly fast"),
    "drop_duplicates": (None, "duplicate trial"),
}
_ANNOTATION = {
    "authenticity_canary": _CHOICE["authenticity_canary"],
    "authenticity_max_score": _CHOICE["authenticity_max_score"],
    "drop_surplus": ("surplus", "surplus label"),
    "drop_gold": ("is_gold", "gold item"),
    "min_gold_accuracy": ("gold_correct", "low gold accuracy"),
    "drop_duplicates": (None, "duplicate label"),
}
_RATER = {rule: _CHOICE[rule] for rule in ("authenticity_canary", "authenticity_max_score")}


def _status(
    data: pd.DataFrame, excluded: pd.DataFrame, settings: dict[str, object], spec, subject: str
) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for rule, (column, reason) in spec.items():
        setting = settings[rule]
        hit = excluded[excluded["reason"] == reason] if len(excluded) else excluded
        if setting is None or setting is False:
            status, why = "off", "switched off"
        elif column is not None and column not in data.columns:
            status, why = "not checked", f"the data have no {column} column"
        elif column is not None and data[column].isna().all():
            status, why = "not checked", f"{column} is empty in every row: not recorded"
        else:
            status, why = "applied", f"reads {column}" if column else "reads the ids"
        rows.append(
            {
                "rule": rule,
                "setting": setting,
                "status": status,
                "why": why,
                "reason": reason,
                "n_rows": len(hit) if status == "applied" else 0,
                "n_participants": int(hit[subject].nunique()) if status == "applied" else 0,
            }
        )
    return pd.DataFrame(rows)


def rule_status(
    data: pd.DataFrame,
    excluded: pd.DataFrame,
    rules: ChoiceRules | AnnotationRules | RaterRules,
) -> pd.DataFrame:
    """One row per exclusion rule: applied, not checked (and why) or off.

    Parameters
    ----------
    data : pandas.DataFrame
        All rows (trials, labels, ratings or verdicts; ``participant_id`` the person) before
        exclusion.
    excluded : pandas.DataFrame
        What :func:`analysis.exclusions.exclude_choice`, ``exclude_annotations`` or
        ``exclude_raters`` excluded, with its ``reason``.
    rules : analysis.exclusions.ChoiceRules, AnnotationRules or RaterRules
        The rules as configured.

    Returns
    -------
    pandas.DataFrame
        ``rule``, ``setting`` (as configured), ``status`` (``applied``, ``not checked`` or
        ``off``), ``why`` (the column the rule reads, or why it could not be read), ``reason``
        (the exclusion reason it gives), ``n_rows``, ``n_participants`` (excluded by it; the two
        duration rules share one reason and count it both).
    """
    from dataclasses import asdict

    from analysis.exclusions import AnnotationRules, ChoiceRules

    spec = (
        _CHOICE
        if isinstance(rules, ChoiceRules)
        else _ANNOTATION
        if isinstance(rules, AnnotationRules)
        else _RATER
    )
    return _status(data, excluded, asdict(rules), spec, "participant_id")


def rules_meta(status: pd.DataFrame) -> dict[str, dict[str, object]]:
    """The rules for ``results.json``'s ``meta.exclusion_rules``: each one's setting, and whether
    it was applied and why.

    Parameters
    ----------
    status : pandas.DataFrame
        Output of :func:`rule_status`.

    Returns
    -------
    dict
        Rule name to ``setting``, ``status`` and ``why``.
    """
    return {
        r["rule"]: {"setting": r["setting"], "status": r["status"], "why": r["why"]}
        for r in status.to_dict("records")
    }


def authenticity_sensitivity(
    data: pd.DataFrame, rules: ChoiceRules, *, levels=None
) -> pd.DataFrame | None:
    """The primary choice result with and without the authenticity exclusions.

    Parameters
    ----------
    data : pandas.DataFrame
        All trials before exclusion.
    rules : analysis.exclusions.ChoiceRules
        The rules as configured; ``None`` is returned when no authenticity rule is on.
    levels : sequence of str, optional
        ``(reference, treatment)``, as for :func:`analysis.stats.choice.chi2_choice`.

    Returns
    -------
    pandas.DataFrame or None
        Two rows, ``analysis`` ``with authenticity exclusions`` (as run) and ``without``:
        ``n_participants``, ``n_trials``, ``estimate`` (risk difference of the first contrast,
        treatment minus reference), ``ci_low``, ``ci_high`` (Newcombe; both from
        :func:`analysis.stats.choice.choice_effects`) and ``p_val`` of the primary chi-square
        test (:func:`analysis.stats.choice.chi2_choice`, its first row).
    """
    import pandas as pd

    from analysis.exclusions import exclude_choice
    from analysis.stats.choice import chi2_choice, choice_effects

    if not rules.has_authenticity:
        return None
    rows = []
    for name, applied in (
        ("with authenticity exclusions", rules),
        ("without", rules.without_authenticity()),
    ):
        kept, _ = exclude_choice(data, applied)
        primary = chi2_choice(kept, levels=levels).iloc[0]
        effects = choice_effects(kept, levels=levels)
        difference = effects[effects["effect"] == "risk_difference"].iloc[0]
        rows.append(
            {
                "analysis": name,
                "n_participants": int(kept["participant_id"].nunique()),
                "n_trials": len(kept),
                "estimate": float(difference["estimate"]),
                "ci_low": float(difference["ci_low"]),
                "ci_high": float(difference["ci_high"]),
                "p_val": float(primary["p_val"]),
            }
        )
    return pd.DataFrame(rows)


def sensitivity_sentence(table: pd.DataFrame) -> str:
    """The report's sensitivity line of :func:`authenticity_sensitivity`.

    Returns
    -------
    str
        E.g. "Sensitivity of the primary result to the authenticity exclusions: with them,
        60 participants, difference in choice rates .21, 95% CI [.12, .30], p = .001; without
        them, 68 participants, .15, 95% CI [.06, .24], p = .002."
    """
    from analysis.report.apa import bounded, ci, count, p_apa

    def part(r) -> str:
        return (
            f"{count(r.n_participants)} participants, difference in choice rates "
            f"{bounded(r.estimate)}, {ci(r.ci_low, r.ci_high, bound=True)}, {p_apa(r.p_val)}"
        )

    with_rules, without = table.iloc[0], table.iloc[1]
    return (
        "Sensitivity of the primary result to the authenticity exclusions: with them, "
        f"{part(with_rules)}; without them, {part(without)}."
    )


def rules_sentence(status: pd.DataFrame) -> str:
    """The exclusions paragraph: rules applied (with their counts), not checked (why), off.

    Parameters
    ----------
    status : pandas.DataFrame
        Output of :func:`rule_status`.

    Returns
    -------
    str
        E.g. "Exclusion rules applied: drop_duplicates (3 rows of 2 participants excluded).
        Not checked, so no participant was screened by them: require_quiz (the data have no
        quiz_passed column)."
    """
    applied = status[status["status"] == "applied"]
    unchecked = status[status["status"] == "not checked"]
    off = status[status["status"] == "off"]
    parts = []
    if len(applied):
        listed = ", ".join(
            f"{r.rule} ({r.n_rows} rows of {r.n_participants} participants excluded)"
            for r in applied.itertuples()
        )
        parts.append(f"Exclusion rules applied: {listed}.")
    else:
        parts.append("No exclusion rule could be applied to these data.")
    if len(unchecked):
        listed = ", ".join(f"{r.rule} ({r.why})" for r in unchecked.itertuples())
        parts.append(f"Not checked, so no participant was screened by them: {listed}.")
    if len(off):
        parts.append(f"Switched off: {', '.join(off['rule'])}.")
    return " ".join(parts)


def speed_check(
    data: pd.DataFrame,
    kept: pd.DataFrame,
    rules: ChoiceRules,
    *,
    estimated_minutes: float | None = None,
) -> pd.DataFrame | None:
    """What the speed rules let through, and an absolute floor the study could set.

    The relative rule (faster than a fraction of the median completion time) moves with the
    sample: when many fast bots arrive, the median falls and so does the floor, and bots that
    take a second per page pass. An absolute ``min_duration_s`` written into the study before
    data come in does not move. It is suggested from the study's own estimate of its duration
    (``estimated_minutes`` of the study YAML) at the relative rule's fraction, or, without an
    estimate, from the observed median completion time (for the next study or the next look:
    these data are already screened by the rules as configured).

    Parameters
    ----------
    data : pandas.DataFrame
        All trials before exclusion (``participant_id``, ``duration_s``; ``rt_ms`` if recorded).
    kept : pandas.DataFrame
        The trials analysed.
    rules : analysis.exclusions.ChoiceRules
        The rules as configured.
    estimated_minutes : float, optional
        The study's estimated duration (its YAML's ``estimated_minutes``).

    Returns
    -------
    pandas.DataFrame or None
        One row: ``min_duration_s``, ``min_duration_frac_median`` (as configured),
        ``median_duration_s`` (of everyone with a duration), ``floor_s`` (the floor the rules
        applied; NaN for none), ``fastest_analysed_s``, ``fastest_page_s`` (the smallest median
        choice-page time, ``rt_ms``, of an analysed participant), ``estimated_minutes``,
        ``suggested_min_duration_s``, ``suggestion_basis``, ``n_below_suggestion`` (analysed
        participants faster than the suggestion). ``None`` when the data carry no durations.
    """
    import math

    import pandas as pd

    if "duration_s" not in data.columns or data["duration_s"].isna().all():
        return None
    every = data.groupby("participant_id")["duration_s"].first().astype(float).dropna()
    analysed = kept.groupby("participant_id")["duration_s"].first().astype(float).dropna()
    median = float(every.median())
    frac = rules.min_duration_frac_median
    limits = [v for v in (rules.min_duration_s, frac * median if frac else None) if v is not None]
    share = frac or 0.3
    if estimated_minutes is not None:
        suggested = math.floor(share * 60 * estimated_minutes)
        basis = f"{share:g} × the study's estimated {estimated_minutes:g} minutes"
    else:
        suggested = math.floor(share * median)
        basis = f"{share:g} × the observed median completion time of {median:,.0f} s"
    pages = float("nan")
    if "rt_ms" in kept.columns and kept["rt_ms"].notna().any():
        pages = float(kept.groupby("participant_id")["rt_ms"].median().min()) / 1000
    row = {
        "min_duration_s": rules.min_duration_s,
        "min_duration_frac_median": frac,
        "median_duration_s": median,
        "floor_s": max(limits) if limits else float("nan"),
        "fastest_analysed_s": float(analysed.min()) if len(analysed) else float("nan"),
        "fastest_page_s": pages,
        "estimated_minutes": estimated_minutes,
        "suggested_min_duration_s": suggested,
        "suggestion_basis": basis,
        "n_below_suggestion": int((analysed < suggested).sum()),
    }
    return pd.DataFrame([row])


def speed_sentence(speed: pd.DataFrame) -> str:
    """The speed paragraph: the floor applied, what it let through, the suggested absolute floor.

    Parameters
    ----------
    speed : pandas.DataFrame
        Output of :func:`speed_check`.

    Returns
    -------
    str
    """
    from analysis.report.numbers import fmt_count, fmt_number, is_missing

    r = speed.iloc[0]
    absolute, frac, floor = r["min_duration_s"], r["min_duration_frac_median"], r["floor_s"]
    relative = (
        ""  # no relative rule (e.g. --min-duration-frac 0): nothing to describe
        if is_missing(frac)
        else f"{frac:g} × the median completion time ({fmt_count(r['median_duration_s'])} s)"
    )
    if not is_missing(absolute) and not is_missing(frac):
        text = (
            f"Participants faster than {fmt_count(floor)} s were excluded: the larger of "
            f"min_duration_s ({fmt_count(absolute)} s) and {relative}."
        )
    elif not is_missing(absolute):
        text = f"Participants faster than {fmt_count(floor)} s were excluded (min_duration_s)."
    elif not is_missing(frac):
        text = (
            "The absolute rule min_duration_s is not set, so only the relative rule screened for "
            "speed: "
            f"participants faster than {relative}, i.e. {fmt_count(floor)} s, were excluded."
        )
    else:
        text = "No speed rule is set: nobody was screened for speed."
    text += f" The fastest analysed participant took {fmt_count(r['fastest_analysed_s'])} s"
    if not is_missing(r["fastest_page_s"]):
        page = fmt_number(r["fastest_page_s"], 1)
        text += f"; the fastest median time on a choice page was {page} s"
    text += "."
    if is_missing(absolute):
        n = int(r["n_below_suggestion"])
        text += (
            f" Suggested min_duration_s: {fmt_count(r['suggested_min_duration_s'])} "
            f"({r['suggestion_basis']}), an absolute floor that does not fall when fast bots "
            "lower the median; set it in the study's analysis: exclusions (or --min-duration-s) "
            f"before data come in. On these data it would exclude {n} more of the analysed "
            f"participant{'' if n == 1 else 's'}."
        )
    return text
