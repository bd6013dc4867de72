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

    from analysis.exclusions import AnnotationRules, ChoiceRules

__all__ = ["rule_status", "rules_sentence"]

# Rule -> (the column it reads, the exclusion reason it gives) for choice data.
_CHOICE = {
    "require_completed": ("status", "status not completed"),
    "require_quiz": ("quiz_passed", "failed comprehension quiz"),
    "require_attention": ("attention_passed", "failed attention check"),
    "min_duration_s": ("duration_s", "implausibly fast"),
    "min_duration_frac_median": ("duration_s", "implausibly fast"),
    "drop_duplicates": (None, "duplicate trial"),
}
_ANNOTATION = {
    "drop_surplus": ("surplus", "surplus label"),
    "drop_gold": ("is_gold", "gold item"),
    "min_gold_accuracy": ("gold_correct", "low gold accuracy"),
    "drop_duplicates": (None, "duplicate label"),
}


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
    data: pd.DataFrame, excluded: pd.DataFrame, rules: ChoiceRules | AnnotationRules
) -> pd.DataFrame:
    """One row per exclusion rule: applied, not checked (and why) or off.

    Parameters
    ----------
    data : pandas.DataFrame
        All rows (trials or labels, ``participant_id`` the person) before exclusion.
    excluded : pandas.DataFrame
        What :func:`analysis.exclusions.exclude_choice` or ``exclude_annotations`` excluded,
        with its ``reason``.
    rules : analysis.exclusions.ChoiceRules or AnnotationRules
        The rules as configured.

    Returns
    -------
    pandas.DataFrame
        ``rule``, ``setting`` (as configured), ``status`` (``applied``, ``not checked`` or
        ``off``), ``why`` (the column the rule reads, or why it could not be read), ``reason``
        (the exclusion reason it gives), ``n_rows``, ``n_participants`` (excluded by it; the two
        duration rules share one reason and count it both).
    """
    from analysis.exclusions import ChoiceRules

    spec = _CHOICE if isinstance(rules, ChoiceRules) else _ANNOTATION
    return _status(data, excluded, rules.as_dict(), spec, "participant_id")


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
