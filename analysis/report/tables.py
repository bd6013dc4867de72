"""Report tables for people: human column names with units, and wide tables split in two.

The CSV files and ``results.json`` keep the machine names (``ci_low``, ``p_val``); only the HTML
report renames. A column without a label keeps its name, so a new table (a new model's results)
renders without changes here; :func:`split_columns` gives any wide table a main and a details
part.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MAIN_STAT_COLUMNS", "column_label", "html_table", "split_columns"]

# Any table: the usual statistics columns.
GENERIC = {
    "estimate": "Estimate",
    "se": "SE",
    "statistic": "Statistic",
    "df": "df",
    "ci_low": "95% CI lower",
    "ci_high": "95% CI upper",
    "p_val": "p",
    "p_adj": "p (adjusted)",
    "p_val_z": "p (normal)",
    "p_method": "Test of p",
    "method": "Method",
    "n": "N",
    "n_obs": "Observations",
    "n_items": "Items",
    "n_subjects": "Participants",
    "n_raters": "Raters",
    "reference": "Reference level",
    "treatment": "Treatment level",
    "model": "Model",
    "formula": "Formula",
    "notes": "Notes",
    "converged": "Converged",
    "singular": "Singular fit",
    "optimizer": "Optimizer",
    "transform": "Outcome transform",
    "effect": "Effect",
    "term": "Term",
}

# Per table (may use {unit}, the WTP unit, and {ref}/{trt}, the format levels).
TABLES: dict[str, dict[str, str]] = {
    "exclusions": {
        "reason": "Rule",
        "n_rows": "Rows excluded",
        "n_participants": "Participants excluded",
        "share_rows": "Share of rows",
    },
    "exclusion_rules": {
        "rule": "Rule",
        "setting": "Setting",
        "status": "Status",
        "why": "Why",
        "reason": "Reason it gives",
        "n_rows": "Rows excluded",
        "n_participants": "Participants excluded",
    },
    "selection_rates": {
        "format": "Format",
        "n": "Trials",
        "n_chose": "Target chosen",
        "estimate": "Selection rate",
        "ci_low": "Wilson 95% CI lower",
        "ci_high": "Wilson 95% CI upper",
    },
    "chi2": {
        "test": "Test",
        "chi2": "χ²",
        "dof": "df",
        "cramer_v": "Cramér's V",
        "n": "Trials",
        "min_expected": "Smallest expected count",
        "primary": "Primary",
        "estimate": "Risk difference ({trt} − {ref})",
        "ci_low": "RD 95% CI lower (Newcombe)",
        "ci_high": "RD 95% CI upper (Newcombe)",
    },
    "effects": {"method": "CI method"},
    "by_pair": {
        "pair_id": "Pair",
        "estimate": "Risk difference ({trt} − {ref})",
        "ci_low": "RD 95% CI lower",
        "ci_high": "RD 95% CI upper",
        "test": "Test",
        "statistic": "χ² or odds ratio",
        "p_val": "p (unadjusted)",
        "padjust": "Correction",
    },
    "clustered": {
        "estimate": "Odds ratio",
        "ci_low": "OR 95% CI lower",
        "ci_high": "OR 95% CI upper",
        "log_odds": "log OR",
        "se": "SE of log OR (robust)",
        "z": "z",
        "n_obs": "Trials",
        "n_clusters": "Participants (clusters)",
        "working_correlation": "Working correlation",
    },
    "choice_glmm": {
        "estimate": "Odds ratio (conditional)",
        "ci_low": "OR 95% CI lower",
        "ci_high": "OR 95% CI upper",
        "log_odds": "log OR",
        "se": "SE of log OR",
        "z": "z",
        "intercept_log_odds": "Intercept (log odds)",
        "sd_subject": "SD participant (logit)",
        "sd_item": "SD pair (logit)",
        "n_obs": "Trials",
        "n_items": "Pairs",
        "loglik": "Log-likelihood (Laplace)",
        "deviance": "−2 log-likelihood (summary(glmer)'s \"deviance\"; not R's deviance())",
        "aic": "AIC",
        "bic": "BIC",
        "max_grad": "Convergence: largest scaled gradient (glmer warns above 0.002)",
    },
    "wtp_by_format": {
        "format": "Format",
        "n_obs": "Trials",
        "mean_obs": "Mean of trials ({unit})",
        "estimate": "Mean of participant means ({unit})",
        "sd": "SD of participant means ({unit})",
    },
    "wtp_model": {
        "estimate": "Format effect b ({unit})",
        "se": "SE ({unit})",
        "statistic": "t",
        "df": "df (Satterthwaite)",
        "p_val": "p (t, Satterthwaite)",
        "ci_low": "b 95% CI lower",
        "ci_high": "b 95% CI upper",
        "d_standardised": "d (standardised)",
        "n_items": "Pairs",
        "intercept": "Intercept: baseline WTP ({unit})",
        "intercept_se": "Intercept SE",
        "intercept_ci_low": "Intercept 95% CI lower",
        "intercept_ci_high": "Intercept 95% CI upper",
        "icc_subject": "ICC participant",
        "icc_item": "ICC pair",
        "reason": "Why this model",
        "sd_subject": "SD participant ({unit})",
        "sd_item": "SD pair ({unit})",
        "sd_residual": "SD residual ({unit})",
        "loglik_reml": "REML log-likelihood",
        "aic_ml": "AIC (ML refit)",
        "bic_ml": "BIC (ML refit)",
    },
    "wtp_differences": {
        "n_subjects": "Participants with both formats",
        "n_without_both": "Participants with one format",
        "estimate": "Mean difference {trt} − {ref} ({unit})",
        "sd": "SD of differences ({unit})",
        "ci_low": "t 95% CI lower",
        "ci_high": "t 95% CI upper",
    },
    "shift_distribution": {
        "shift_count": "Annotators shifting",
        "n_items": "Items",
        "estimate": "Share of items",
    },
    "majority_shift": {
        "base_sentiment": "Base sentiment",
        "n_shift": "Items with a majority shift",
        "estimate": "Majority-shift rate",
        "source": "Source",
    },
    "model_shift_rates": {
        "source": "Model",
        "base_sentiment": "Base sentiment",
        "n_shift": "Items shifted",
        "estimate": "Shift rate",
    },
    "annotators": {
        "participant_id": "Annotator",
        "n_labels": "Labels",
        "flip_rate": "Flip rate",
        "n_compared": "Items compared",
        "agreement_with_majority": "Agreement with others' majority",
    },
    "agreement": {"statistic": "Coefficient"},
    "human_model": {
        "estimate": "Pearson r",
        "ci_low": "r 95% CI lower (Fisher z)",
        "ci_high": "r 95% CI upper (Fisher z)",
        "p_val": "p (Pearson, t test)",
        "spearman_rho": "Spearman ρ",
        "spearman_p_val": "p (Spearman)",
        "spearman_p_method": "Spearman p method",
        "model_shift_rate": "Model shift rate",
        "n": "Items",
    },
    "model_matrix": {"model_a": "Model A", "model_b": "Model B", "estimate": "Pearson r"},
    "label_mapping": {
        "raw_label": "Label in the file",
        "label": "Read as",
        "how": "How",
        "n": "Judgments",
    },
    "demographics": {
        "variable": "Variable",
        "level": "Level",
        "share": "Share of participants",
        "mean": "Mean",
        "sd": "SD",
        "min": "Min",
        "max": "Max",
    },
}
TABLES["wtp_slopes"] = {
    **TABLES["wtp_model"],
    "formula": "Final model (lme4 formula)",
    "dummy": "The 0/1 column the formulas name",
    "maximal_formula": "Maximal model",
    "maximal_estimate": "Maximal model b ({unit})",
    "maximal_se": "Maximal model SE",
    "maximal_singular": "Maximal model singular",
    "simplified": "Simplified from the maximal model",
    "simplification": "Steps (formula: what was dropped and why)",
    "lrt_null": "LR test: the final model without its slopes",
    "sd_subject_slope": "SD participant slope ({unit})",
    "corr_subject": "Correlation participant intercept-slope",
    "sd_item_slope": "SD pair slope ({unit})",
    "corr_item": "Correlation pair intercept-slope",
    "lrt_chisq": "LR test χ² (the final model's slopes)",
    "lrt_df": "LR test df",
    "lrt_p": "LR test p",
}

# A model table's headline columns, in order; the rest of a wide table goes to its details.
MAIN_STAT_COLUMNS = (
    "effect",
    "term",
    "estimate",
    "se",
    "statistic",
    "z",
    "df",
    "p_val",
    "ci_low",
    "ci_high",
    "d_standardised",
    "lrt_chisq",
    "lrt_df",
    "lrt_p",
    "singular",
    "n_obs",
    "n_subjects",
    "n_items",
    "n_clusters",
)

# Per-level columns of by_pair: rate_original, ci_low_summary, ...
_LEVEL_COLUMN = re.compile(r"^(n|rate|ci_low|ci_high)_(.+)$")
_LEVEL_LABEL = {
    "n": "Trials ({lvl})",
    "rate": "Rate ({lvl})",
    "ci_low": "Rate 95% CI lower ({lvl})",
    "ci_high": "Rate 95% CI upper ({lvl})",
}


def column_label(table: str | None, column: str, **context: str) -> str:
    """The report's name for ``column`` of ``table``, units filled in from ``context``.

    Parameters
    ----------
    table : str, optional
        Table name (``chi2``, ``wtp_model``...); ``None`` uses the generic names only.
    column : str
        Column name in the CSV.
    **context : str
        ``unit``, ``ref``, ``trt``, ``padjust`` placeholders.

    Returns
    -------
    str

    Examples
    --------
    >>> column_label("chi2", "estimate", ref="original", trt="summary")
    'Risk difference (summary − original)'
    """
    context = {"unit": "", "ref": "reference", "trt": "treatment", **context}
    label = TABLES.get(table or "", {}).get(column)
    if label is None and table == "by_pair":
        match = _LEVEL_COLUMN.match(column)
        if column == "p_adj" and context.get("padjust"):
            label = f"p ({context['padjust']}-adjusted)"
        elif match:
            label = _LEVEL_LABEL[match.group(1)].replace("{lvl}", match.group(2))
    if label is None:
        label = GENERIC.get(column, column)
    label = label.format(**context)
    return label.replace(" ()", "")


def split_columns(
    df: pd.DataFrame, *, max_main: int = 12, main: tuple[str, ...] = MAIN_STAT_COLUMNS
) -> tuple[list[str], list[str]]:
    """Split a wide table into headline and detail columns (the 36-column WTP row).

    Parameters
    ----------
    df : pandas.DataFrame
        A table.
    max_main : int
        A table with at most this many columns is not split.
    main : tuple of str
        Headline columns, in display order, where present.

    Returns
    -------
    (list of str, list of str)
        Main columns and detail columns (empty when not split). A key column that identifies
        the rows (``effect``/``term``/``model``/``pair_id``) is repeated in the details.
    """
    cols = list(df.columns)
    if len(cols) <= max_main:
        return cols, []
    head = [c for c in main if c in cols]
    if not head:
        head = cols[:max_main]
    key = next((c for c in ("effect", "term", "model", "pair_id") if c in cols), None)
    details = [c for c in cols if c not in head]
    if key is not None and key in head:
        details = [key, *details]
    return head, details


def _fmt(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else ("yes" if value else "no")
    if isinstance(value, (int, float)):
        v = float(value)
        if not math.isfinite(v):
            return ""
        if isinstance(value, int):
            return str(value)
        if v != 0 and abs(v) < 1e-4:
            return f"{v:.3e}"
        return f"{v:.4g}"
    return str(value)


def _is_p_column(name: object) -> bool:
    return isinstance(name, str) and (
        name.startswith(("p_val", "p_adj")) or name.endswith("_p_val") or name == "lrt_p"
    )


def _fmt_cell(col: object, value: object) -> str:
    if _is_p_column(col) and isinstance(value, float) and value == 0.0:
        return "< 1e-300"
    return _fmt(value)


def html_table(
    df: pd.DataFrame,
    max_rows: int = 60,
    *,
    name: str | None = None,
    columns: list[str] | None = None,
    **context: str,
) -> str:
    """HTML of a table with human column names, rounded numbers and a row limit.

    Parameters
    ----------
    df : pandas.DataFrame
        The table (machine column names).
    max_rows : int
        Rows shown; a note points to the CSV for the rest.
    name : str, optional
        Table name, for its column labels.
    columns : list of str, optional
        Only these columns, in this order.
    **context : str
        ``unit``, ``ref``, ``trt``, ``padjust`` for the labels.

    Returns
    -------
    str
    """
    import numpy as np

    shown = df.head(max_rows)
    if columns is not None:
        shown = shown[[c for c in columns if c in shown.columns]]
    shown = shown.copy()
    for col in shown.columns:
        shown[col] = [
            _fmt_cell(col, v.item() if isinstance(v, np.generic) else v)
            for v in shown[col].tolist()
        ]
    shown.columns = [column_label(name, str(c), **context) for c in shown.columns]
    html = '<div class="tw">' + shown.to_html(index=False, escape=True, border=0) + "</div>"
    if len(df) > max_rows:
        html += f"<p class='note'>First {max_rows} of {len(df)} rows; all rows in the CSV.</p>"
    return html
