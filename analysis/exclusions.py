"""Explicit, reported exclusion rules for choice, annotation, rating and preference data.

Each rule is a named predicate. A row is excluded by the first rule (in the order listed) that
matches it, so every excluded row carries exactly one reason and the counts add up.
Participant-level rules (status, quiz, attention, authenticity, speed) remove all of that
participant's rows; the duplicate rule removes repeated rows only. An authenticity rule that
is on is refused (``ValueError`` naming the column) when the data lack its ``auth_*`` column or
it is empty in every row; the other rules then screen nobody and the report says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

# The choice rules are the ``analysis:`` block's exclusions: one schema, which the web app
# validates the block with too.
from framelab_schema.analysis_block import ChoiceRules

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "AnnotationRules",
    "ChoiceRules",
    "RaterRules",
    "exclude_annotations",
    "exclude_choice",
    "exclude_raters",
    "exclusion_summary",
]


# Every reason, in the order the rules are checked (choice rules, then annotation rules).
REASONS = (
    "status not completed",
    "failed comprehension quiz",
    "failed attention check",
    "followed the canary instruction",
    "authenticity score above max_score",
    "implausibly fast",
    "duplicate trial",
    "surplus label",
    "low gold accuracy",
    "gold item",
    "duplicate label",
)


@dataclass(frozen=True)
class AnnotationRules:
    """Which exclusion rules apply to annotation labels, in the order they are checked.

    Attributes
    ----------
    drop_surplus : bool
        Drop labels that arrived after their reservation expired (``surplus == 1``).
    drop_gold : bool
        Drop gold/attention items from the analysis (they have a known answer, no base framing).
    min_gold_accuracy : float or None
        Drop all labels of annotators whose share of correct gold answers is below this.
    drop_duplicates : bool
        Keep only the first label of a repeated (annotator, item).
    authenticity_max_score : float or None
        Drop all labels of annotators whose authenticity score (``auth_score``) is above this.
    authenticity_canary : bool
        Drop all labels of annotators whose answers carry the canary word (``auth_canary > 0``).
        Both are checked first, as in :class:`ChoiceRules`.
    """

    drop_surplus: bool = True
    drop_gold: bool = True
    min_gold_accuracy: float | None = None
    drop_duplicates: bool = True
    authenticity_max_score: float | None = None
    authenticity_canary: bool = False

    def as_dict(self) -> dict[str, object]:
        """Return the rules as a plain dict (for ``results.json``)."""
        return _nest_authenticity(asdict(self))


@dataclass(frozen=True)
class RaterRules:
    """Which exclusion rules apply to the raters of a summary-rating or pairwise-preference study.

    Only the participant-level authenticity rules: the loaders leave out surplus answers
    (``include_surplus``), and these studies have no quiz, attention check or gold items.

    Attributes
    ----------
    authenticity_max_score : float or None
        Drop all rows of raters whose authenticity score (``auth_score``) is above this.
    authenticity_canary : bool
        Drop all rows of raters whose answers carry the canary word (``auth_canary > 0``),
        checked first, as in :class:`ChoiceRules`.
    """

    authenticity_max_score: float | None = None
    authenticity_canary: bool = False

    def as_dict(self) -> dict[str, object]:
        """Return the rules as a plain dict (for ``results.json``)."""
        return _nest_authenticity(asdict(self))


def _nest_authenticity(out: dict[str, object]) -> dict[str, object]:
    # As ChoiceRules.as_dict writes the analysis block: one ``authenticity`` entry, only when on.
    max_score = out.pop("authenticity_max_score")
    canary = out.pop("authenticity_canary")
    if max_score is not None or canary:
        out["authenticity"] = {"max_score": max_score, "canary": canary}
    return out


def _split(data: pd.DataFrame, reasons: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    excluded = data[reasons.notna()].copy()
    excluded["reason"] = reasons[reasons.notna()]
    return data[reasons.isna()].copy(), excluded


def _assign(reasons: pd.Series, mask: pd.Series, reason: str) -> None:
    # First matching rule wins: only rows without a reason yet get this one.
    reasons[mask.fillna(False).astype(bool) & reasons.isna()] = reason


def _authenticity(
    reasons: pd.Series, data: pd.DataFrame, rules: ChoiceRules | AnnotationRules | RaterRules
) -> None:
    # Participant-level: the export repeats a participant's auth_* cells in each of their rows.
    # A rule that is on but has nothing to read is refused: the analysis would otherwise run on
    # every participant as if it had screened them.
    import pandas as pd

    checks = (
        ("authenticity_canary", "auth_canary", rules.authenticity_canary),
        ("authenticity_max_score", "auth_score", rules.authenticity_max_score is not None),
    )
    unread = [
        f"{rule} cannot be applied: the data have no {column} column"
        if column not in data.columns
        else f"{rule} cannot be applied: {column} is empty in every row: not recorded"
        for rule, column, on in checks
        if on and (column not in data.columns or (len(data) and data[column].isna().all()))
    ]
    if unread:
        raise ValueError(
            "; ".join(unread) + " (an export written before the platform recorded authenticity, "
            "or a file without its auth_ columns): export the study again (framelab export "
            "SLUG --format long), or leave the rule out"
        )
    if rules.authenticity_canary:
        _assign(reasons, pd.to_numeric(data["auth_canary"]) > 0, "followed the canary instruction")
    if rules.authenticity_max_score is not None:
        above = pd.to_numeric(data["auth_score"]) > rules.authenticity_max_score
        _assign(reasons, above, "authenticity score above max_score")


def _order(data: pd.DataFrame) -> pd.DataFrame:
    if "trial_index" in data.columns:
        return data.sort_values("trial_index", kind="stable")
    return data


def exclude_choice(
    data: pd.DataFrame,
    rules: ChoiceRules | None = None,
    *,
    subject: str = "participant_id",
    pair: str = "pair_id",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Apply the choice exclusion rules.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per choice trial (``analysis.io.load_choice``).
    rules : ChoiceRules, optional
        Defaults to ``ChoiceRules()``.
    subject, pair : str
        Participant and pair columns.

    Returns
    -------
    kept : pandas.DataFrame
        Rows that pass every rule, in the input order.
    excluded : pandas.DataFrame
        The other rows with an added ``reason`` column: ``status not completed``,
        ``failed comprehension quiz``, ``failed attention check``, ``followed the canary
        instruction``, ``authenticity score above max_score``, ``implausibly fast`` or
        ``duplicate trial``.
    """
    import pandas as pd

    rules = rules or ChoiceRules()
    reasons = pd.Series(None, index=data.index, dtype=object)
    if rules.require_completed and "status" in data.columns:
        status = data["status"]
        _assign(reasons, status.notna() & (status != "completed"), "status not completed")
    if rules.require_quiz and "quiz_passed" in data.columns:
        _assign(reasons, pd.to_numeric(data["quiz_passed"]) == 0, "failed comprehension quiz")
    if rules.require_attention and "attention_passed" in data.columns:
        _assign(reasons, pd.to_numeric(data["attention_passed"]) == 0, "failed attention check")
    _authenticity(reasons, data, rules)
    if "duration_s" in data.columns:
        per_person = data.groupby(subject)["duration_s"].first().astype(float)
        limits = []
        if rules.min_duration_s is not None:
            limits.append(rules.min_duration_s)
        if rules.min_duration_frac_median is not None and per_person.notna().any():
            limits.append(rules.min_duration_frac_median * float(per_person.median()))
        if limits:
            too_fast = per_person[per_person < max(limits)].index
            _assign(reasons, data[subject].isin(too_fast), "implausibly fast")
    if rules.drop_duplicates:
        ordered = _order(data)
        dup = ordered.duplicated([subject, pair], keep="first").reindex(data.index)
        _assign(reasons, dup, "duplicate trial")
    return _split(data, reasons)


def exclude_annotations(
    data: pd.DataFrame,
    rules: AnnotationRules | None = None,
    *,
    rater: str = "participant_id",
    item: str = "item_id",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Apply the annotation exclusion rules.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per label (``analysis.io.load_annotations`` or ``analysis.external.load_mturk``).
    rules : AnnotationRules, optional
        Defaults to ``AnnotationRules()``.
    rater, item : str
        Annotator and item columns.

    Returns
    -------
    kept : pandas.DataFrame
        Labels that enter the analysis.
    excluded : pandas.DataFrame
        The other labels with a ``reason``: ``followed the canary instruction``,
        ``authenticity score above max_score``, ``surplus label``, ``gold item``,
        ``low gold accuracy`` or ``duplicate label``.
    """
    import pandas as pd

    rules = rules or AnnotationRules()
    reasons = pd.Series(None, index=data.index, dtype=object)
    _authenticity(reasons, data, rules)
    if rules.drop_surplus and "surplus" in data.columns:
        _assign(reasons, pd.to_numeric(data["surplus"]) == 1, "surplus label")
    is_gold = (
        pd.to_numeric(data["is_gold"]) == 1
        if "is_gold" in data.columns
        else pd.Series(False, index=data.index)
    )
    if rules.min_gold_accuracy is not None and "gold_correct" in data.columns:
        gold = data[is_gold.fillna(False)]
        accuracy = pd.to_numeric(gold["gold_correct"]).groupby(gold[rater]).mean()
        low = accuracy[accuracy < rules.min_gold_accuracy].index
        _assign(reasons, data[rater].isin(low), "low gold accuracy")
    if rules.drop_gold:
        _assign(reasons, is_gold, "gold item")
    if rules.drop_duplicates:
        ordered = _order(data)
        dup = ordered.duplicated([rater, item], keep="first").reindex(data.index)
        _assign(reasons, dup, "duplicate label")
    return _split(data, reasons)


def exclude_raters(
    data: pd.DataFrame, rules: RaterRules | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Apply the rater rules: all rows of a flagged rater are excluded before the analysis.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per rating or verdict (``analysis.io.load_ratings`` or ``load_preferences``),
        the rater's ``auth_*`` columns repeated in each of their rows.
    rules : RaterRules, optional
        Defaults to ``RaterRules()`` (nothing excluded).

    Returns
    -------
    kept : pandas.DataFrame
        Rows that enter the analysis.
    excluded : pandas.DataFrame
        The other rows with a ``reason``: ``followed the canary instruction`` or
        ``authenticity score above max_score``.
    """
    import pandas as pd

    reasons = pd.Series(None, index=data.index, dtype=object)
    _authenticity(reasons, data, rules or RaterRules())
    return _split(data, reasons)


def exclusion_summary(
    data: pd.DataFrame, excluded: pd.DataFrame, *, subject: str = "participant_id"
) -> pd.DataFrame:
    """Count excluded rows and participants per reason.

    Parameters
    ----------
    data : pandas.DataFrame
        All rows before exclusion.
    excluded : pandas.DataFrame
        The ``excluded`` output of :func:`exclude_choice`, :func:`exclude_annotations` or
        :func:`exclude_raters`.
    subject : str
        Participant column.

    Returns
    -------
    pandas.DataFrame
        One row per reason (in rule order) plus a ``total`` row, with ``n_rows``,
        ``n_participants`` (participants who lost at least one row for this reason) and
        ``share_rows`` (of all input rows).
    """
    import pandas as pd

    rows = []
    # Report reasons in the order the rules are checked, whatever order the rows came in.
    order = {reason: i for i, reason in enumerate(REASONS)}
    groups = sorted(excluded.groupby("reason"), key=lambda kv: order.get(kv[0], len(order)))
    for reason, group in groups:
        rows.append(
            {
                "reason": reason,
                "n_rows": len(group),
                "n_participants": group[subject].nunique(),
            }
        )
    rows.append(
        {
            "reason": "total",
            "n_rows": len(excluded),
            "n_participants": excluded[subject].nunique() if len(excluded) else 0,
        }
    )
    out = pd.DataFrame(rows, columns=["reason", "n_rows", "n_participants"])
    out["share_rows"] = out["n_rows"] / len(data) if len(data) else float("nan")
    return out
