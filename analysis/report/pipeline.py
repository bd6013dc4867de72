"""Compute all tables of a choice or annotation study report (pure: no files, no printing)."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from analysis.exclusions import AnnotationRules, ChoiceRules

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Results", "analyze_annotations", "analyze_choice", "library_versions"]


@dataclass
class Results:
    """Everything a report shows.

    Attributes
    ----------
    kind : str
        ``choice`` or ``annotations``.
    tables : dict of str to DataFrame
        Named result tables (each written as ``<name>.csv`` and into ``results.json``).
    meta : dict
        Inputs, rules, model specifications, which model ran and why, library versions, timings.
    """

    kind: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)
    # Observation-level data the figures draw (residuals, per-participant differences): too big
    # for results.json, recomputable from the input; not written as tables.
    plot_data: dict[str, pd.DataFrame] = field(default_factory=dict)


def library_versions() -> dict[str, str]:
    """Return the versions of the libraries that computed the numbers (for the report)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in (
        "framelab",
        "numpy",
        "pandas",
        "scipy",
        "statsmodels",
        "krippendorff",
        "matplotlib",
    ):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


CHOICE_SPECS = {
    "speed": (
        "per participant: duration_s (consent to completion) and the median choice-page time "
        "(rt_ms); the floor the speed rules applied (the larger of min_duration_s and "
        "min_duration_frac_median x the median completion time); suggested min_duration_s = "
        "the relative rule's fraction (0.3 by default) x the study's estimated_minutes, or x "
        "the observed median without an estimate, rounded down to whole seconds"
    ),
    "selection_rates": "share of trials choosing the target per format; Wilson score 95% CI",
    "chi2": (
        "Pearson chi-square test of the 2x2 table format x chose_target, with Yates' continuity "
        "correction (primary; as R chisq.test / scipy chi2_contingency) and without; df = 1; "
        "Cramer's V from the uncorrected statistic"
    ),
    "effects": (
        "risk difference summary - original (Newcombe hybrid score CI, Miettinen-Nurminen score "
        "test p); odds ratio "
        "(Woolf logit CI, Wald test)"
    ),
    "by_pair": (
        "per pair: rates with Wilson CIs; risk difference (Newcombe CI); Yates chi-square, or "
        "Fisher's exact test when an expected count < 5; p-values adjusted across pairs"
    ),
    "clustered": (
        "GEE logistic regression chose_target ~ format, clusters = participants, exchangeable "
        "working correlation, robust sandwich SEs (statsmodels GEE): robustness check for the "
        "repeated choices within participants"
    ),
    "choice_glmm": (
        "logistic GLMM chose_target ~ format + (1 | participant) + (1 | pair), Laplace "
        "approximation with PIRLS as lme4::glmer (nAGQ = 1; matches glmer run to a tightened "
        "tolerance to 3e-6, while glmer with its default tolerances differs from that optimum "
        "in the third decimal): conditional odds ratio with Wald z test and CI, SEs from the "
        "Hessian of the Laplace deviance (lme4's default); random-intercept SDs on the logit "
        "scale; deviance = -2 log-likelihood (summary(glmer)'s, not R's deviance()); "
        "convergence by glmer's scaled-gradient check (0.002); singular as lme4::isSingular. "
        "A fit that did not converge is not reported: its section says why"
    ),
    "wtp_model": (
        "linear mixed model, REML: wtp ~ format + (1 | participant) + (1 | pair), by profiled "
        "REML in a sparse formulation (crossed_sparse, as lme4::lmer; checked against lme4 "
        "and lmerTest to 1e-6); t test with Satterthwaite df (as lmerTest), normal p beside "
        "it; singular = a variance at the boundary (as lme4::isSingular); AIC/BIC of the ML "
        "refit; ICC = each variance over the sum; d = effect / sqrt(sum of the variances) "
        "(Westfall, Kenny & Judd 2014). On request: statsmodels' dense fit (crossed) or pair "
        "as fixed effect (pair_fixed; also when both factors have > 3,000 levels). A fit that "
        "did not converge is never reported: its section says why"
    ),
    "wtp_by_format": "mean of participants' mean premium per format; t 95% CI over participants",
    "wtp_differences": (
        "each participant's mean WTP with the treatment format minus their mean with the "
        "reference format (participants who saw both), mean with a t 95% CI over participants; "
        "the figure shows every participant's difference beside the mixed-model effect"
    ),
    "covariate_adjusted": (
        "the format effect adjusted for participant covariates: GEE logit clustered by "
        "participant (log odds, robust SE, z) and the crossed REML model with the covariates as "
        "fixed effects (Satterthwaite t); numeric covariates centred at the participants' mean, "
        "text covariates as dummies against their most frequent level (levels with < 5 "
        "participants pooled as other); complete cases (rows with a missing covariate dropped "
        "and counted)"
    ),
    "wtp_random_effects": (
        "conditional modes of the participant and pair random intercepts with conditional SDs "
        "(as lme4 ranef(condVar = TRUE); checked against lme4 to 1e-6), at the fitted "
        "parameters; the residual and QQ figures use the conditional residuals y - X beta - Z b"
    ),
    "demographics": (
        "analysed participants (after exclusions), each once: age mean/SD/range, sex and country "
        "of residence counts, from Prolific's demographic export joined by Participant id; "
        "CONSENT_REVOKED and DATA_EXPIRED cells read as not available"
    ),
    "wtp_slopes": (
        "random slopes of format by participant and pair, REML, lme4's formulation (checked "
        "against lmer to 1e-4): the maximal model wtp ~ format + (1 + format | participant) + "
        "(1 + format | pair), simplified while singular (correlations, then zero-variance "
        "terms; every step in the table); every number, and the likelihood-ratio test of the "
        "slopes (ML fits against the same model without them, as anova() in lme4), is the "
        "final model's; singular as lme4::isSingular at the precision of lmer's optimizer; "
        "formulas name a 0/1 format column, which lmer fits as written"
    ),
}


# The order of a choice report's tables (results.json, the CSVs), whatever order computed them.
CHOICE_TABLE_ORDER = (
    "exclusions",
    "exclusion_rules",
    "authenticity_sensitivity",
    "speed",
    "selection_rates",
    "chi2",
    "effects",
    "by_pair",
    "clustered",
    "choice_glmm",
    "wtp_by_format",
    "wtp_model",
    "wtp_slopes",
    "wtp_differences",
    "wtp_random_effects",
    "covariate_adjusted",
    "demographics",
)


def analyze_choice(
    data: pd.DataFrame,
    *,
    rules: ChoiceRules | None = None,
    padjust: str = "holm",
    wtp_transform: str | None = None,
    wtp_model: str = "auto",
    optimizers: Sequence[str] | None = None,
    clustered: bool = True,
    levels: Sequence[str] | None = None,
    wtp_slopes: bool = False,
    covariates: Sequence[str] = (),
    glmm: bool = True,
    on_stage: Callable[[Results, str], None] | None = None,
    estimated_minutes: float | None = None,
) -> Results:
    """Run the whole choice analysis on trial-level data.

    Parameters
    ----------
    data : pandas.DataFrame
        ``analysis.io.load_choice`` output (long export or tidy CSV).
    rules : ChoiceRules, optional
        Exclusion rules (default ``ChoiceRules()``).
    padjust : str
        Multiple-comparison correction across pairs.
    wtp_transform : {None, "log"}
        Premium in percent, or ``log(1 + pct/100)``.
    wtp_model : {"auto", "crossed_sparse", "crossed", "pair_fixed"}
        Mixed model for WTP (see :func:`analysis.stats.wtp.wtp_mixed`).
    optimizers : sequence of str, optional
        Mixed-model optimizers, tried in order.
    clustered : bool
        Also fit the GEE robustness model.
    glmm : bool
        Also fit the logistic GLMM with crossed random intercepts
        (:func:`analysis.stats.choice.choice_glmm`): table ``choice_glmm``.
    levels : sequence of str, optional
        ``(reference, treatment)`` format levels; required unless the column holds only
        ``original`` and ``summary`` (the reference sets the sign of every effect).
    wtp_slopes : bool
        Also fit the maximal model with random slopes of format by participant and pair
        (:func:`analysis.stats.wtp.wtp_slopes`) and its likelihood-ratio test: table
        ``wtp_slopes``.
    covariates : sequence of str
        Participant columns (e.g. ``age, sex, country`` from
        :func:`analysis.demographics.join_demographics`) to adjust the choice GEE and the WTP
        model for: table ``covariate_adjusted`` (:func:`analysis.stats.covariates.adjusted_models`).
    on_stage : callable, optional
        ``on_stage(results, stage)`` is called with the partial results when a stage's tables are
        final: ``"wtp"`` (WTP tables and figure data), then ``"choice"`` (the choice tables and
        models). The CLI hands them to its figure worker, which draws meanwhile.
    estimated_minutes : float, optional
        The study's estimated duration (its YAML's ``estimated_minutes``): the basis of the
        suggested absolute speed floor in table ``speed``
        (:func:`analysis.report.rules.speed_check`; without it, the observed median).

    Returns
    -------
    Results
        Tables ``exclusions``, ``selection_rates``, ``chi2``, ``effects``, ``by_pair``,
        ``clustered``, ``choice_glmm``, ``wtp_by_format``, ``wtp_model``, ``speed`` (when the
        data carry durations); ``meta`` with counts,
        rules, specifications, versions and per-step timings.
    """
    import numpy as np

    from analysis.exclusions import exclude_choice, exclusion_summary
    from analysis.report.rules import authenticity_sensitivity, rule_status, speed_check
    from analysis.stats import choice, wtp

    timings: dict[str, float] = {}

    def timed(name, fn, *args, **kwargs):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        timings[name] = time.perf_counter() - start
        return out

    # A model that fails must not cost the other results: its table is left out and the
    # failure text goes into its section (``None`` when the table was made).
    model_failures = (wtp.ConvergenceError, np.linalg.LinAlgError, ValueError)

    def attempt(name, fn, *args, **kwargs) -> str | None:
        try:
            res.tables[name] = timed(name, fn, *args, **kwargs)
        except model_failures as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    rules = rules or ChoiceRules()
    kept, excluded = timed("exclusions", exclude_choice, data, rules)
    if kept.empty:
        raise ValueError("every row was excluded; nothing to analyse (see the exclusion rules)")
    res = Results(kind="choice")
    res.tables["exclusions"] = exclusion_summary(data, excluded)
    res.tables["exclusion_rules"] = rule_status(data, excluded, rules)
    sensitivity = authenticity_sensitivity(data, rules, levels=levels)
    if sensitivity is not None:
        res.tables["authenticity_sensitivity"] = sensitivity
    speed = speed_check(data, kept, rules, estimated_minutes=estimated_minutes)
    if speed is not None:
        res.tables["speed"] = speed
    wtp_failure = None
    slopes_failure = None
    covariates_failure = None

    # The WTP models first, then the choice models: the order changes no number (each step reads
    # only ``kept``), but a figure worker (``on_stage``) draws the costlier WTP figures while the
    # choice models are fitted. The tables are put back in the report's order at the end.
    wtp_rows = kept[kept["wtp_premium_pct"].notna()]
    wtp_kwargs: dict[str, object] = {
        "transform": wtp_transform,
        "model": wtp_model,
        "levels": levels,
    }
    if optimizers:
        wtp_kwargs["optimizers"] = tuple(optimizers)
    if len(wtp_rows):
        res.tables["wtp_by_format"] = timed(
            "wtp_by_format", wtp.wtp_by_format, wtp_rows, levels=levels
        )
        wtp_failure = attempt("wtp_model", wtp.wtp_mixed, wtp_rows, **wtp_kwargs)
        if wtp_slopes:
            slopes_failure = attempt(
                "wtp_slopes", wtp.wtp_slopes, wtp_rows, transform=wtp_transform, levels=levels
            )
        _wtp_figure_data(res, wtp_rows, levels, wtp_transform, timings)
    if on_stage is not None:
        on_stage(res, "wtp")

    res.tables["selection_rates"] = timed(
        "selection_rates", choice.selection_rates, kept, levels=levels
    )
    res.tables["chi2"] = timed("chi2", choice.chi2_choice, kept, levels=levels)
    res.tables["effects"] = timed("effects", choice.choice_effects, kept, levels=levels)
    res.tables["by_pair"] = timed(
        "by_pair", choice.choice_by_pair, kept, padjust=padjust, levels=levels
    )
    clustered_note = glmm_note = "not requested"
    if clustered:
        failure = attempt("clustered", choice.choice_clustered, kept, levels=levels)
        clustered_note = f"not reported: {failure}" if failure else "reported"
    if glmm:
        failure = attempt("choice_glmm", choice.choice_glmm, kept, levels=levels)
        glmm_note = f"not reported: {failure}" if failure else "reported"
    if on_stage is not None:
        on_stage(res, "choice")
    if covariates:
        from analysis.stats.covariates import adjusted_models

        covariates_failure = attempt(
            "covariate_adjusted",
            adjusted_models,
            kept,
            list(covariates),
            levels=levels,
            transform=wtp_transform,
        )
    if "demographics_status" in kept.columns:
        from analysis.demographics import describe_demographics

        # Describes the participants analysed (after exclusions), each counted once.
        res.tables["demographics"] = describe_demographics(kept)
    # A table not in CHOICE_TABLE_ORDER (a new model) keeps its place after the known ones.
    rank = {name: i for i, name in enumerate(CHOICE_TABLE_ORDER)}
    res.tables = {
        name: res.tables[name] for name in sorted(res.tables, key=lambda n: rank.get(n, len(rank)))
    }
    res.meta = {
        "n_rows_input": len(data),
        "n_participants_input": int(data["participant_id"].nunique()),
        "n_rows_analysed": len(kept),
        "n_participants_analysed": int(kept["participant_id"].nunique()),
        "n_pairs": int(kept["pair_id"].nunique()),
        "n_rows_with_wtp": len(wtp_rows),
        "exclusion_rules": _rules_meta(res.tables["exclusion_rules"]),
        "padjust": padjust,
        "format_levels": {
            "reference": (levels or choice.DEFAULT_LEVELS)[0],
            "treatment": (levels or choice.DEFAULT_LEVELS)[1],
            "source": "given" if levels else "default (original, summary)",
        },
        "clustered_model": clustered_note,
        "choice_glmm": glmm_note,
        "specifications": CHOICE_SPECS,
        "versions": library_versions(),
        "timings_s": timings,
    }
    if wtp_failure is not None:
        res.meta["wtp_model_failed"] = wtp_failure
    if slopes_failure is not None:
        res.meta["wtp_slopes_failed"] = slopes_failure
    if covariates_failure is not None:
        res.meta["covariate_adjusted_failed"] = covariates_failure
    if "wtp_model" in res.tables:
        row = res.tables["wtp_model"].iloc[0]
        res.meta["wtp_model_ran"] = {
            "model": row["model"],
            "formula": row["formula"],
            "reason": row["reason"],
            "optimizer": row["optimizer"],
            "singular": bool(row["singular"]),
            "notes": row["notes"],
        }
    return res


def _rules_meta(status: pd.DataFrame) -> dict[str, dict[str, object]]:
    """The rules for results.json: each one's setting, and whether it was applied and why."""
    return {
        r["rule"]: {"setting": r["setting"], "status": r["status"], "why": r["why"]}
        for r in status.to_dict("records")
    }


def _wtp_figure_data(res, wtp_rows, levels, transform, timings) -> None:
    """Within-participant differences and the mixed model's residuals and random effects."""
    from analysis.stats import diagnostics, wtp

    start = time.perf_counter()
    df, ref, trt = wtp._prepare(
        wtp_rows, "wtp_premium_pct", "format", levels, transform, ["participant_id", "pair_id"]
    )
    per, summary = diagnostics.within_differences(
        df, dv="y", between="format", subject="participant_id", levels=(ref, trt)
    )
    res.plot_data["wtp_differences"] = per
    res.tables["wtp_differences"] = summary.assign(transform=transform or "none")
    model = res.tables.get("wtp_model")
    if model is not None and model["sd_item"].notna().all() and model["sd_subject"].notna().all():
        row = model.iloc[0]
        residuals, effects = diagnostics.crossed_conditional_modes(
            df,
            y="y",
            x="x",
            subject="participant_id",
            item="pair_id",
            intercept=float(row["intercept"]),
            slope=float(row["estimate"]),
            sd_subject=float(row["sd_subject"]),
            sd_item=float(row["sd_item"]),
            sd_residual=float(row["sd_residual"]),
        )
        res.plot_data["wtp_residuals"] = residuals
        res.tables["wtp_random_effects"] = effects
    timings["wtp_figure_data"] = time.perf_counter() - start


ANNOTATION_SPECS = {
    "items": (
        "per item: shift_count = labels different from the base sentiment (0..K), "
        "majority_shift = shift_count >= ceil(K/2)"
    ),
    "shift_distribution": "share of items with 0..K shifts (items with the modal K); Wilson CIs",
    "majority_shift": "share of items with a majority shift by base sentiment; Wilson CIs",
    "annotators": (
        "per annotator: flip rate (labels != base) and agreement with the majority label of the "
        "other annotators on the same item (items with a tie among the others are skipped)"
    ),
    "agreement": (
        "Fleiss' kappa (z under kappa = 0, SE of Fleiss, Nee & Landis 1979, as irr::kappam.fleiss; "
        "percentile bootstrap CI over items) and Krippendorff's alpha, nominal (krippendorff "
        "package; bootstrap CI over items)"
    ),
    "model_shift_rates": "share of items each model shifts by base sentiment; Wilson CIs",
    "human_model": (
        "per model: Pearson r between the human shift count and the model's 0/1 shift "
        "(Fisher-z CI, t-test p, as R cor.test) and Spearman rho"
    ),
    "model_matrix": "Pearson r between every pair of models' shift indicators (common items)",
    "label_mapping": (
        "how each model's raw labels were read: as is (positive/negative/neutral/other, any "
        "case), by the researcher's --label-map, or unknown (no entry): kept, counted as no shift"
    ),
}


def analyze_annotations(
    labels: pd.DataFrame,
    predictions: pd.DataFrame | None = None,
    *,
    rules: AnnotationRules | None = None,
    model_shift_labels: Sequence[str] = ("opposite",),
) -> Results:
    """Run the whole annotation analysis.

    Parameters
    ----------
    labels : pandas.DataFrame
        One row per label (``load_annotations`` or ``load_mturk``).
    predictions : pandas.DataFrame, optional
        ``item_id, model, label`` (``load_predictions``).
    rules : AnnotationRules, optional
        Exclusion rules.
    model_shift_labels : sequence of str
        What counts as a model shift (see :func:`analysis.stats.annotation.model_shifts`).

    Returns
    -------
    Results
        Tables ``exclusions``, ``items``, ``shift_distribution``, ``majority_shift``,
        ``annotators``, ``agreement`` and, with predictions, ``model_shifts``,
        ``model_shift_rates``, ``human_model``, ``model_matrix``.
    """
    import pandas as pd

    from analysis.exclusions import exclude_annotations, exclusion_summary
    from analysis.report.rules import rule_status
    from analysis.stats import agreement, annotation, correlation

    rules = rules or AnnotationRules()
    timings: dict[str, float] = {}
    start = time.perf_counter()
    kept, excluded = exclude_annotations(labels, rules)
    if kept.empty:
        raise ValueError("every label was excluded; nothing to analyse")
    res = Results(kind="annotations")
    res.tables["exclusions"] = exclusion_summary(labels, excluded)
    res.tables["exclusion_rules"] = rule_status(labels, excluded, rules)
    items = annotation.shift_counts(kept)
    res.tables["items"] = items
    res.tables["shift_distribution"] = annotation.shift_distribution(items)
    res.tables["majority_shift"] = annotation.majority_shift_rates(items)
    res.tables["annotators"] = annotation.annotator_stats(kept)
    kappa = agreement.fleiss_kappa(kept).assign(statistic="fleiss_kappa")
    alpha = agreement.krippendorff_alpha(kept, level="nominal").assign(
        statistic="krippendorff_alpha_nominal"
    )
    res.tables["agreement"] = pd.concat([kappa, alpha], ignore_index=True)[
        ["statistic", "estimate", "ci_low", "ci_high", "p_val", "n_items", "n_raters"]
    ]
    timings["humans"] = time.perf_counter() - start
    models: list[str] = []
    unmapped: list[str] = []
    if predictions is not None and len(predictions):
        start = time.perf_counter()
        shifts = annotation.model_shifts(predictions, items, shift_labels=model_shift_labels)
        res.tables["model_shifts"] = shifts
        res.tables["model_shift_rates"] = annotation.model_shift_rates(shifts)
        res.tables["human_model"] = correlation.human_model_correlation(shifts)
        res.tables["model_matrix"] = correlation.model_correlation_matrix(shifts)
        if "raw_label" in predictions.columns:
            from analysis.external import UNMAPPED_LABEL, label_mapping

            mapping = label_mapping(predictions)
            res.tables["label_mapping"] = mapping
            unknown = mapping[mapping["label"] == UNMAPPED_LABEL]
            unmapped = sorted(set(unknown["raw_label"]))
        models = sorted(shifts["model"].unique())
        missing = sorted(set(predictions["item_id"]) - set(items["item_id"]))
        timings["models"] = time.perf_counter() - start
    else:
        missing = []
    k = items["n_labels"]
    res.meta = {
        "n_labels_input": len(labels),
        "n_labels_analysed": len(kept),
        "n_items": len(items),
        "n_annotators": int(kept["participant_id"].nunique()),
        "labels_per_item": {"min": int(k.min()), "max": int(k.max()), "mode": int(k.mode()[0])},
        "models": models,
        "model_shift_labels": list(model_shift_labels),
        "prediction_items_without_human_labels": len(missing),
        "unmapped_model_labels": unmapped,
        "exclusion_rules": _rules_meta(res.tables["exclusion_rules"]),
        "specifications": ANNOTATION_SPECS,
        "versions": library_versions(),
        "timings_s": timings,
    }
    return res
