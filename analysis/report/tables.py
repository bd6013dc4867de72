"""Report tables for people: human column names with units, numbers rounded by one rule.

The CSV files and ``results.json`` keep the machine names (``ci_low``, ``p_val``) at full
precision; only the report renames and rounds. :func:`report_table` turns any result table into
a :class:`~analysis.report.typeset.ReportTable` (the one path of every table of every report to
HTML and LaTeX): each column's kind of number (:func:`column_kind`) picks its rounding
(:mod:`analysis.report.numbers`), machine values such as ``fisher_exact`` are named, columns
empty in every row are left out, and a one-row table too wide to read across is turned on its
side. A column without a label keeps its name, so a new table (a new model's results) renders
without changes here; :func:`split_columns` gives any wide table a main and a details part.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from analysis.report.numbers import DASH, PADJUST_NAMES, format_value, is_missing
from analysis.report.typeset import ReportTable

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAIN_STAT_COLUMNS",
    "column_kind",
    "column_label",
    "report_table",
    "split_columns",
]

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
    "contrast": "Contrast",
    "family": "Compared with",
    "level": "Format",
    "versus": "Compared format",
    "rate_level": "Rate (format)",
    "rate_versus": "Rate (compared format)",
    "padjust": "Correction",
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
    "authenticity_sensitivity": {
        "analysis": "Analysis",
        "n_participants": "Participants",
        "n_trials": "Trials",
        "estimate": "Difference in choice rates ({trt} − {ref})",
        "ci_low": "95% CI lower",
        "ci_high": "95% CI upper",
        "p_val": "p (chi-square)",
    },
    "speed": {
        "min_duration_s": "min_duration_s (s)",
        "min_duration_frac_median": "min_duration_frac_median",
        "median_duration_s": "Median completion time (s)",
        "floor_s": "Floor applied (s)",
        "fastest_analysed_s": "Fastest analysed participant (s)",
        "fastest_page_s": "Fastest median choice-page time (s)",
        "estimated_minutes": "Study's estimated duration (min)",
        "suggested_min_duration_s": "Suggested min_duration_s (s)",
        "suggestion_basis": "Basis of the suggestion",
        "n_below_suggestion": "Analysed participants under the suggestion",
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
    },
    "effects": {"method": "CI method", "p_val": "p (trials independent)"},
    "by_pair": {
        "pair_id": "Pair",
        "estimate": "Risk difference",
        "ci_low": "RD 95% CI lower",
        "ci_high": "RD 95% CI upper",
        "test": "Test",
        "statistic": "χ² or odds ratio",
        "p_val": "p (unadjusted)",
    },
    "clustered": {
        "estimate": "Odds ratio (population-averaged)",
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
        "estimate": "Difference b ({unit})",
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
        "estimate": "Mean difference ({unit})",
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
    "software": {"library": "Library", "version": "Version"},
    "primary": {
        "test": "Pre-registered test",
        "direction": "Direction",
        "alpha": "α (pre-registered)",
        "look": "Stopping look",
        "n_looks": "Looks planned",
        "stopped": "Stopped",
        "n_analysed": "Participants analysed",
        "p_val": "p (stage-wise adjusted)",
        "p_naive": "p (fixed design)",
        "estimate": "Estimate (median unbiased)",
        "estimate_naive": "Estimate (fixed design)",
        "ci_low": "Adjusted CI lower",
        "ci_high": "Adjusted CI upper",
        "confidence": "Confidence level",
        "reject": "Null hypothesis rejected",
        "later_looks": "Looks after the stopping look",
        "odds_ratio": "Odds ratio (median unbiased)",
        "or_ci_low": "OR adjusted CI lower",
        "or_ci_high": "OR adjusted CI upper",
    },
    "looks": {
        "look": "Look",
        "n_planned": "Participants planned",
        "reached": "Reached",
        "n_analysed": "Participants analysed",
        "se_z": "SE (normal scale)",
        "p_val": "p (fixed design)",
        "n_participants": "Participants in the model",
        "fraction": "Information fraction",
        "efficacy_z": "Efficacy bound (z)",
        "futility_z": "Futility bound (z)",
        "decision": "Decision",
        "crossed": "Bound crossed",
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
    "contrast",
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
    >>> column_label("choice_glmm", "p_adj", padjust="holm")
    'p (Holm-adjusted)'
    >>> column_label("by_pair", "rate_summary")
    'Rate (summary)'
    """
    context = {"unit": "", "ref": "reference", "trt": "treatment", **context}
    label = TABLES.get(table or "", {}).get(column)
    if label is None and column == "p_adj" and context.get("padjust"):
        label = f"p ({PADJUST_NAMES.get(context['padjust'], context['padjust'])}-adjusted)"
    if label is None and table == "by_pair":
        match = _LEVEL_COLUMN.match(column)
        if match:
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
    keys = [c for c in ("pair_id", "contrast", "effect", "term", "model") if c in head]
    details = [c for c in cols if c not in head]
    if keys:
        details = [*keys[:2], *details]
    return head, details


# --- Kinds of number -------------------------------------------------------------------------
# Columns that hold p-values (the report's p rule: ".032", "< .001", "> .999").
_P_NAMES = {"lrt_p", "p_naive", "p_val_z"}
# Quantities bounded by 1 in size, printed without the leading zero, wherever they appear.
_BOUNDED_NAMES = {
    "cramer_v",
    "share",
    "share_rows",
    "share_first",
    "flip_rate",
    "agreement_with_majority",
    "order_consistency",
    "repeat_consistency",
    "pref_reference_first",
    "pref_reference_second",
    "spearman_rho",
    "model_shift_rate",
    "similarity",
    "bleu1",
    "bleu4",
    "rouge1",
    "rouge2",
    "bin_low",
    "bin_high",
    "confidence",
    "fraction",
}
# Significance levels and what a design spends of them: three decimals (.025), as pre-registered.
_LEVEL_NAMES = {"alpha", "alpha_spent", "nominal_p"}
_BOUNDED_PREFIXES = ("rate_", "icc_", "corr_", "ci_low_", "ci_high_")
# Tables whose estimate and its interval are a proportion, correlation or agreement coefficient.
_BOUNDED_ESTIMATE_TABLES = {
    "selection_rates",
    "chi2",
    "by_pair",
    "shift_distribution",
    "majority_shift",
    "model_shift_rates",
    "human_model",
    "model_matrix",
    "agreement",
    "icc",
    "alpha",
    "preference_by_bin",
    "order_consistency",
    "metric_tau",
}
# Rows of a mixed table (``effects``) whose estimate is bounded, by their effect's name.
_BOUNDED_EFFECTS = {"risk_difference", "fleiss_kappa", "krippendorff_alpha_nominal"}
_ESTIMATE_COLUMNS = {"estimate", "ci_low", "ci_high"}
_DF_NAMES = {"df", "dof", "df1", "df2", "lrt_df"}
_COUNT_NAMES = {"n", "look", "n_looks", "later_looks", "shift_count", "n_shift"}

# Machine values of the columns that name a test, an effect or a method, as a reader names them.
VALUE_LABELS = {
    "pearson_yates": "Pearson χ², Yates' correction",
    "pearson": "Pearson χ²",
    "fisher_exact": "Fisher's exact",
    "risk_difference": "Risk difference",
    "odds_ratio": "Odds ratio",
    "wilson": "Wilson",
    "newcombe": "Newcombe",
    "woolf": "Woolf (logit)",
    "fleiss_kappa": "Fleiss' κ",
    "krippendorff_alpha_nominal": "Krippendorff's α (nominal)",
}
_VALUE_LABEL_COLUMNS = {"test", "effect", "method", "statistic"}
# One-row tables with more columns than this are shown on their side (a quantity per line), and
# on request tables of up to MAX_SIDEWAYS_ROWS rows (a line per quantity, a column per row).
MAX_ACROSS = 6
MAX_SIDEWAYS_ROWS = 6


def column_kind(table: str | None, column: str, dtype: object = None) -> str:
    """Which rounding rule a column's numbers follow.

    Parameters
    ----------
    table : str, optional
        Table name (``chi2``, ``icc``...): some tables' ``estimate`` is a proportion.
    column : str
        Column name in the CSV.
    dtype : numpy dtype, optional
        The column's dtype: integer columns are counts, text columns stay text.

    Returns
    -------
    {"p", "level", "bounded", "count", "df", "number", "text"}

    Examples
    --------
    >>> column_kind("selection_rates", "estimate"), column_kind("clustered", "estimate")
    ('bounded', 'number')
    >>> column_kind(None, "p_adj"), column_kind(None, "dof"), column_kind(None, "pair_id")
    ('p', 'df', 'text')
    """
    import pandas as pd

    if column == "id" or column.endswith("_id"):
        return "text"
    if column.startswith(("p_val", "p_adj")) or column.endswith("_p_val") or column in _P_NAMES:
        return "p"
    if column in _DF_NAMES:
        return "df"
    if column in _LEVEL_NAMES:
        return "level"
    if column in _ESTIMATE_COLUMNS and table in _BOUNDED_ESTIMATE_TABLES:
        return "bounded"
    if column in _BOUNDED_NAMES or column.startswith(_BOUNDED_PREFIXES):
        return "bounded"
    if column in _COUNT_NAMES or column.startswith("n_"):
        return "count"
    if dtype is not None and pd.api.types.is_integer_dtype(dtype):
        return "count"
    # Text columns are "number" too: a text cell prints as it is, and a column that mixes
    # flags, numbers and text (an exclusion rule's setting) prints each cell by its own type.
    return "number"


def _blank(value: object) -> bool:
    return is_missing(value) or (isinstance(value, str) and not value.strip())


def _cell(column: str, kind: str, value: object, row: dict) -> str:
    import numpy as np

    if isinstance(value, np.generic):
        value = value.item()
    if _blank(value):
        return DASH
    if kind == "number" and column in _ESTIMATE_COLUMNS:
        key = row.get("effect", row.get("statistic"))
        if isinstance(key, str) and key in _BOUNDED_EFFECTS:
            kind = "bounded"
    if isinstance(value, str) and column in _VALUE_LABEL_COLUMNS:
        return VALUE_LABELS.get(value, value)
    return format_value(value, kind)


def _name_tests(cells: pd.DataFrame, raw: pd.DataFrame) -> pd.DataFrame:
    """Per-pair tests: "χ²(1) = 1.71 (Yates)" or "Fisher's exact", in one column.

    A Fisher row has no χ² statistic; a separate statistic column would be blank there, so the
    test column says which test each row ran and carries its statistic.
    """
    if not {"test", "statistic"} <= set(cells.columns):
        return cells
    named = []
    for test, statistic in zip(raw["test"], cells["statistic"], strict=True):
        if test in ("pearson_yates", "pearson") and statistic != DASH:
            fix = " (Yates)" if test == "pearson_yates" else ""
            named.append(f"χ²(1) = {statistic}{fix}")
        else:
            named.append(VALUE_LABELS.get(test, str(test)))
    return cells.assign(test=named).drop(columns="statistic")


def report_table(
    df: pd.DataFrame,
    max_rows: int = 60,
    *,
    name: str | None = None,
    columns: list[str] | None = None,
    notes: tuple[str, ...] = (),
    sideways: bool = False,
    **context: str,
) -> ReportTable:
    """A result table as the report shows it: labelled, rounded, typeset as HTML and LaTeX.

    Parameters
    ----------
    df : pandas.DataFrame
        The table (machine column names, full precision).
    max_rows : int
        Rows shown; the note points to the CSV for the rest.
    name : str, optional
        Table name, for its column labels and kinds of number (also the CSV's name).
    columns : list of str, optional
        Only these columns, in this order.
    notes : tuple of str
        Sentences for the table's note.
    sideways : bool
        A table of up to :data:`MAX_SIDEWAYS_ROWS` rows is shown on its side whatever its width
        (a model's details per contrast).
    **context : str
        ``unit``, ``ref``, ``trt``, ``padjust`` for the labels.

    Returns
    -------
    ReportTable
        Columns empty in every row are left out (the CSV keeps them); a missing cell is an
        em dash, which the note explains; a one-row table of more than :data:`MAX_ACROSS`
        columns has one line per quantity, and so has a ``sideways`` table of up to
        :data:`MAX_SIDEWAYS_ROWS` rows (a column per row, headed by its first column).
    """
    import pandas as pd

    shown = df.head(max_rows)
    if columns is not None:
        shown = shown[[c for c in columns if c in shown.columns]]
    if len(shown):
        shown = shown[[c for c in shown.columns if not shown[c].map(_blank).all()]]
    rows = shown.to_dict("records")
    cells = pd.DataFrame(
        {
            str(c): [
                _cell(str(c), column_kind(name, str(c), shown[c].dtype), r[c], r) for r in rows
            ]
            for c in shown.columns
        },
        index=range(len(rows)),
    )
    cells = _name_tests(cells, shown) if name == "by_pair" else cells
    labels = {c: column_label(name, c, **context) for c in cells.columns}
    numeric = re.compile(r"^[<>]?\s?−?[\d.,]+(e−?\d+)?$")
    notes_out = list(notes)
    label_column = None
    if len(cells) == 1 and len(cells.columns) > MAX_ACROSS:
        cells = pd.DataFrame(
            {"quantity": [labels[c] for c in cells.columns], "value": cells.iloc[0].tolist()}
        )
        labels = {"quantity": "Quantity", "value": "Value"}
        label_column = "quantity"
    elif sideways and 1 < len(cells) <= MAX_SIDEWAYS_ROWS:
        # A few rows of many quantities (a model's details per contrast): a line per quantity
        # and a column per row, headed by the row's key (its first column).
        key, *rest = cells.columns
        heads = [f"_{i}" for i in range(len(cells))]
        sideways = {"quantity": [labels[c] for c in rest]}
        sideways.update({h: cells[rest].iloc[i].tolist() for i, h in enumerate(heads)})
        # A numbered row (look 1, 2, ...) is headed with the key's label: "Look 1".
        names = [f"{labels[key]} {v}" if v.isdigit() else v for v in cells[key]]
        labels = {"quantity": "Quantity", **dict(zip(heads, names, strict=True))}
        cells = pd.DataFrame(sideways)
        label_column = "quantity"
    right = {
        c
        for c in cells.columns
        if any(v != DASH for v in cells[c]) and all(v == DASH or numeric.match(v) for v in cells[c])
    }
    if (cells == DASH).any().any():
        notes_out.append(f"{DASH} = not applicable or not estimated.")
    if len(df) > max_rows:
        where = f"{name}.csv" if name else "the CSV"
        notes_out.append(f"First {max_rows} of {len(df):,} rows; all rows in {where}.")
    return ReportTable(
        cells=cells, labels=labels, right=right, notes=notes_out, label_column=label_column
    )
