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


def library_versions(*extra: str) -> dict[str, str]:
    """Return the versions of the libraries that computed the numbers (for the report).

    ``extra`` names the packages a report uses beyond the common ones (e.g. ``pingouin``).
    """
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
        *extra,
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
    "contrasts": (
        "format is a k-level factor (k >= 2): every format against the reference (the first "
        "level), and each mitigated format against the baseline (summary); the models' "
        "multiplicity correction (--padjust, Holm by default) runs across the contrasts of a "
        "model and block; with two formats there is one contrast and nothing to adjust"
    ),
    "selection_rates": "share of trials choosing the target per format; Wilson score 95% CI",
    "chi2": (
        "Pearson chi-square test of the k x 2 table format x chose_target (the seed study's "
        "comparison); with two formats with Yates' continuity correction (primary; as R "
        "chisq.test / scipy chi2_contingency) and without; Cramer's V from the uncorrected "
        "statistic; trials as independent"
    ),
    "effects": (
        "per contrast: risk difference (Newcombe hybrid score CI, Miettinen-Nurminen score "
        "test p) and odds ratio (Woolf logit CI, Wald test); trials as independent"
    ),
    "by_pair": (
        "per pair and contrast: rates with Wilson CIs; risk difference (Newcombe CI); Yates "
        "chi-square, or Fisher's exact test when an expected count < 5; p-values adjusted "
        "across pairs and contrasts"
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
        "in the third decimal): conditional odds ratio per contrast with Wald z test and CI, "
        "SEs from the Hessian of the Laplace deviance (lme4's default); baseline contrasts as "
        "linear combinations of the same fit; random-intercept SDs on the logit scale; "
        "deviance = -2 log-likelihood (summary(glmer)'s, not R's deviance()); convergence by "
        "glmer's scaled-gradient check (0.002); singular as lme4::isSingular. A fit that did "
        "not converge is not reported: its section says why"
    ),
    "wtp_model": (
        "linear mixed model, REML: wtp ~ format + (1 | participant) + (1 | pair), by profiled "
        "REML in a sparse formulation (crossed_sparse, as lme4::lmer; checked against lme4 "
        "and lmerTest to 1e-6); t test per contrast with Satterthwaite df (as "
        "lmerTest::contest(joint = FALSE)), normal p beside it; singular = a variance at the "
        "boundary (as lme4::isSingular); AIC/BIC of the ML refit; ICC = each variance over the "
        "sum; d = effect / sqrt(sum of the variances) (Westfall, Kenny & Judd 2014). On "
        "request: statsmodels' dense fit (crossed) or pair as fixed effect (pair_fixed; also "
        "when both factors have > 3,000 levels). A fit that did not converge is never "
        "reported: its section says why"
    ),
    "wtp_by_format": "mean of participants' mean premium per format; t 95% CI over participants",
    "wtp_differences": (
        "per contrast: each participant's mean WTP with the contrast's level minus their mean "
        "with the compared level (participants who saw both), mean with a t 95% CI over "
        "participants; the figure shows every participant's difference beside the mixed-model "
        "effect"
    ),
    "covariate_adjusted": (
        "the format contrasts adjusted for participant covariates: GEE logit clustered by "
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
        "per contrast, on the trials of its two formats: random slopes by participant and pair, "
        "REML, lme4's formulation (checked against lmer to 1e-4): the maximal model wtp ~ x + "
        "(1 + x | participant) + (1 + x | pair), simplified while singular (correlations, then "
        "zero-variance terms; every step in the table); every number, and the likelihood-ratio "
        "test of the slopes (ML fits against the same model without them, as anova() in lme4), "
        "is the final model's; singular as lme4::isSingular at the precision of lmer's "
        "optimizer; formulas name a 0/1 format column, which lmer fits as written"
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
# The column that names the product-choice block of a trial and of every result row: a block's
# id, ``pooled`` (all blocks' trials in one analysis) or ``all`` (an export without blocks).
BLOCK = "block"


def analyze_choice(
    data: pd.DataFrame,
    *,
    rules: ChoiceRules | None = None,
    levels: Sequence[str] | None = None,
    baseline: str | None = "summary",
    blocks: str = "separate",
    padjust: str = "holm",
    wtp_transform: str | None = None,
    wtp_model: str = "auto",
    optimizers: Sequence[str] | None = None,
    clustered: bool = True,
    glmm: bool = True,
    wtp_slopes: bool = False,
    covariates: Sequence[str] = (),
    on_stage: Callable[[Results, str], None] | None = None,
    estimated_minutes: float | None = None,
) -> Results:
    """Run the whole choice analysis on trial-level data, for any number of formats and blocks.

    Parameters
    ----------
    data : pandas.DataFrame
        ``analysis.io.load_choice`` output (long export or tidy CSV); ``format`` holds
        ``original``, ``summary``, ``mitigated:<method>`` or the block's own names; an optional
        ``block`` column names the product-choice block.
    rules : ChoiceRules, optional
        Exclusion rules (default ``ChoiceRules()``).
    levels : sequence of str, optional
        The formats to analyse, reference first (the reference sets the sign of every effect);
        required unless the column holds ``original``. Trials of other formats are left out
        and counted (``meta["formats_left_out"]``).
    baseline : str, optional
        The level each mitigated format is also compared with (when it is not the reference).
    blocks : {"separate", "pooled"}
        Each block on its own, or all blocks' trials in one analysis.
    padjust : str
        Multiple-comparison correction across the contrasts of a model, and across the pairs
        and contrasts of ``by_pair``.
    wtp_transform : {None, "log"}
        Premium in percent, or ``log(1 + pct/100)``.
    wtp_model : {"auto", "crossed_sparse", "crossed", "pair_fixed"}
        Mixed model for WTP (see :func:`analysis.stats.wtp.wtp_mixed`).
    optimizers : sequence of str, optional
        statsmodels optimizers of the ``crossed`` and ``pair_fixed`` WTP models, in order.
    clustered, glmm : bool
        Fit the GEE and the logistic GLMM of the choices.
    wtp_slopes : bool
        Also fit random slopes of format by participant and pair per contrast
        (:func:`analysis.stats.wtp.wtp_slopes`) and their likelihood-ratio test.
    covariates : sequence of str
        Participant columns (e.g. ``age, sex, country`` from
        :func:`analysis.demographics.join_demographics`) to adjust the choice GEE and the WTP
        model for (:func:`analysis.stats.covariates.adjusted_models`).
    on_stage : callable, optional
        ``on_stage(results, stage)`` is called with the partial results when a stage's tables are
        final: ``"wtp"``, then ``"choice"``. The CLI hands them to its figure worker.
    estimated_minutes : float, optional
        The study's estimated duration: the basis of the suggested absolute speed floor in
        table ``speed`` (:func:`analysis.report.rules.speed_check`; without it, the median).

    Returns
    -------
    Results
        Tables ``exclusions``, ``exclusion_rules``, ``speed`` (when the data carry durations),
        and, each with a ``block`` column first and one row per format or contrast,
        ``selection_rates``, ``chi2``, ``effects``, ``by_pair``, ``clustered``,
        ``choice_glmm``, ``wtp_by_format``, ``wtp_model``, ``wtp_differences``,
        ``wtp_random_effects`` (and ``wtp_slopes``, ``covariate_adjusted``, ``demographics``
        when asked for); a model that fails is left out and ``meta["<table>_failed"]`` says
        why. ``meta`` holds counts (also of test participants), levels, blocks, rules,
        specifications, versions and per-step timings.
    """
    import numpy as np

    from analysis.exclusions import exclude_choice, exclusion_summary
    from analysis.report.rules import authenticity_sensitivity, rule_status, rules_meta, speed_check
    from analysis.stats import choice, wtp
    from analysis.stats.choice import format_contrasts, format_levels

    if blocks not in ("separate", "pooled"):
        raise ValueError(f"blocks must be 'separate' or 'pooled', not {blocks!r}")
    timings: dict[str, float] = {}
    failures: dict[str, list[str]] = {}
    parts: dict[str, list[pd.DataFrame]] = {}
    # A model that fails must not cost the other results: its rows are left out and the
    # failure text goes into its section.
    model_failures = (wtp.ConvergenceError, np.linalg.LinAlgError, ValueError)

    def attempt(name, block, fn, *args, **kwargs) -> pd.DataFrame | None:
        start = time.perf_counter()
        try:
            table = fn(*args, **kwargs)
        except model_failures as exc:
            where = f"block {block}: " if len(groups) > 1 else ""
            failures.setdefault(name, []).append(f"{where}{type(exc).__name__}: {exc}")
            return None
        finally:
            timings[f"{name}:{block}"] = time.perf_counter() - start
        table.insert(0, BLOCK, block)
        parts.setdefault(name, []).append(table)
        return table

    rules = rules or ChoiceRules()
    start = time.perf_counter()
    kept, excluded = exclude_choice(data, rules)
    timings["exclusions"] = time.perf_counter() - start
    left_out: dict[str, int] = {}
    if levels is not None:
        named = kept["format"].isin(levels)
        left_out = {str(k): int(v) for k, v in kept.loc[~named, "format"].value_counts().items()}
        kept = kept[named]
    if kept.empty:
        raise ValueError("every row was excluded; nothing to analyse (see the exclusion rules)")
    all_levels = format_levels(kept, "format", levels)
    has_blocks = BLOCK in kept.columns and kept[BLOCK].notna().any()
    if has_blocks and kept[BLOCK].isna().any():
        raise ValueError(f"{int(kept[BLOCK].isna().sum())} row(s) have an empty {BLOCK!r}")
    if blocks == "pooled" or not has_blocks:
        groups = [("pooled" if has_blocks else "all", kept)]
    else:
        groups = [(str(b), g) for b, g in kept.groupby(BLOCK, sort=True)]
    res = Results(kind="choice")
    res.tables["exclusions"] = exclusion_summary(data, excluded)
    res.tables["exclusion_rules"] = rule_status(data, excluded, rules)
    sensitivity = authenticity_sensitivity(data, rules, levels=levels)
    if sensitivity is not None:
        res.tables["authenticity_sensitivity"] = sensitivity
    speed = speed_check(data, kept, rules, estimated_minutes=estimated_minutes)
    if speed is not None:
        res.tables["speed"] = speed
    block_levels = {b: [v for v in all_levels if v in set(g["format"])] for b, g in groups}

    # The WTP models first, then the choice models: the order changes no number, but a figure
    # worker (``on_stage``) draws the costlier WTP figures while the choice models are fitted.
    wtp_kw = {"transform": wtp_transform, "baseline": baseline, "padjust": padjust}
    model_kw = {"model": wtp_model, **({"optimizers": tuple(optimizers)} if optimizers else {})}
    for block, rows in groups:
        answers = rows[rows["wtp_premium_pct"].notna()]
        if not len(answers):
            continue
        lv = block_levels[block]
        attempt("wtp_by_format", block, wtp.wtp_by_format, answers, levels=lv)
        fit = attempt("wtp_model", block, wtp.wtp_mixed, answers, levels=lv, **wtp_kw, **model_kw)
        if wtp_slopes:
            attempt("wtp_slopes", block, wtp.wtp_slopes, answers, levels=lv, **wtp_kw)
        _wtp_figure_data(res, parts, timings, block, answers, lv, baseline, wtp_transform, fit)
    _collect(res, parts)
    if on_stage is not None:
        on_stage(res, "wtp")

    choice_kw = {"baseline": baseline}
    for block, rows in groups:
        lv = block_levels[block]
        attempt("selection_rates", block, choice.selection_rates, rows, levels=lv)
        attempt("chi2", block, choice.chi2_choice, rows, levels=lv)
        attempt("effects", block, choice.choice_effects, rows, levels=lv, **choice_kw)
        attempt("by_pair", block, choice.choice_by_pair, rows, levels=lv, padjust=padjust,
                **choice_kw)  # fmt: skip
        if clustered:
            attempt("clustered", block, choice.choice_clustered, rows, levels=lv,
                    padjust=padjust, **choice_kw)  # fmt: skip
        if glmm:
            attempt("choice_glmm", block, choice.choice_glmm, rows, levels=lv, padjust=padjust,
                    **choice_kw)  # fmt: skip
    _collect(res, parts)
    if on_stage is not None:
        on_stage(res, "choice")
    if covariates:
        from analysis.stats.covariates import adjusted_models

        for block, rows in groups:
            attempt("covariate_adjusted", block, adjusted_models, rows, list(covariates),
                    levels=block_levels[block], **wtp_kw)  # fmt: skip
    if "demographics_status" in kept.columns:
        from analysis.demographics import describe_demographics

        # Describes the participants analysed (after exclusions), each counted once.
        res.tables["demographics"] = describe_demographics(kept)
    _collect(res, parts)
    # A table not in CHOICE_TABLE_ORDER (a new model) keeps its place after the known ones.
    rank = {name: i for i, name in enumerate(CHOICE_TABLE_ORDER)}
    res.tables = {
        name: res.tables[name] for name in sorted(res.tables, key=lambda n: rank.get(n, len(rank)))
    }

    def status(name: str, asked: bool) -> str:
        if not asked:
            return "not requested"
        return f"not reported: {'; '.join(failures[name])}" if name in failures else "reported"

    base = baseline if baseline in all_levels[1:] else None
    res.meta = {
        "n_rows_input": len(data),
        "n_participants_input": int(data["participant_id"].nunique()),
        "n_rows_analysed": len(kept),
        "n_participants_analysed": int(kept["participant_id"].nunique()),
        "n_pairs": int(kept["pair_id"].nunique()),
        "n_rows_with_wtp": int(kept["wtp_premium_pct"].notna().sum()),
        "test_participants": _test_participants(data, kept),
        "exclusion_rules": rules_meta(res.tables["exclusion_rules"]),
        "padjust": padjust,
        "format_levels": {
            "levels": list(all_levels),
            "reference": all_levels[0],
            "baseline": base,
            "contrasts": [c.name for c in format_contrasts(all_levels, base)],
            "source": "given" if levels else "default (original, summary, then alphabetical)",
            "per_block": block_levels,
        },
        "formats_left_out": left_out,
        "blocks": {
            "mode": blocks if has_blocks else "no block column",
            "analysed": [b for b, _ in groups],
        },
        "clustered_model": status("clustered", clustered),
        "choice_glmm": status("choice_glmm", glmm),
        "specifications": CHOICE_SPECS,
        "versions": library_versions(),
        "timings_s": timings,
    }
    for name, why in failures.items():
        res.meta[f"{name}_failed"] = "; ".join(why)
    if "wtp_model" in res.tables:
        row = res.tables["wtp_model"].iloc[0]
        res.meta["wtp_model_ran"] = {
            k: bool(row[k]) if k == "singular" else row[k]
            for k in ("model", "formula", "reason", "optimizer", "singular", "notes")
        }
    return res


def _collect(res: Results, parts: dict[str, list[pd.DataFrame]]) -> None:
    """Put each table's per-block parts together into ``res.tables``."""
    import pandas as pd

    for name, frames in parts.items():
        res.tables[name] = pd.concat(frames, ignore_index=True)


def _test_participants(data: pd.DataFrame, kept: pd.DataFrame) -> dict[str, object]:
    """How many test participants (bots, previews: ``is_test`` = 1) the export held and how many
    of them were analysed; the export leaves them out unless it was made with --include-test."""
    import pandas as pd

    if "is_test" not in data.columns:
        return {"recorded": False, "n_input": 0, "n_analysed": 0}

    def count(frame: pd.DataFrame) -> int:
        flag = pd.to_numeric(frame["is_test"], errors="coerce").fillna(0) == 1
        return int(frame.loc[flag, "participant_id"].nunique())

    return {"recorded": True, "n_input": count(data), "n_analysed": count(kept)}


def _wtp_figure_data(res, parts, timings, block, answers, levels, baseline, transform, fit) -> None:
    """Per block: within-participant differences per contrast, and the mixed model's residuals
    and random effects (at its estimates) for the diagnostics figure."""
    import pandas as pd

    from analysis.stats import diagnostics, wtp
    from analysis.stats.choice import format_contrasts

    start = time.perf_counter()
    try:
        df, levels, dummies = wtp.prepare_wtp(answers, levels=levels, transform=transform)
    except ValueError:
        return  # the model's own failure says why
    pers, summaries = [], []
    for c in format_contrasts(levels, baseline):
        per, summary = diagnostics.within_differences(df, dv="y", levels=(c.versus, c.level))
        pers.append(per.assign(**{BLOCK: block, "contrast": c.name}))
        summaries.append(summary.assign(**{BLOCK: block, "contrast": c.name}))
    summary = pd.concat(summaries, ignore_index=True).assign(transform=transform or "none")
    parts.setdefault("wtp_differences", []).append(
        summary[[BLOCK, "contrast", *(c for c in summary.columns if c not in (BLOCK, "contrast"))]]
    )
    _append(res.plot_data, "wtp_differences", pd.concat(pers, ignore_index=True))
    if fit is not None and fit["sd_item"].notna().all() and fit["sd_subject"].notna().all():
        row = fit.iloc[0]
        slopes = fit[fit["family"] == "vs reference"].set_index("level")["estimate"]
        residuals, effects = diagnostics.crossed_conditional_modes(
            df,
            y="y",
            x=dummies,
            subject="participant_id",
            item="pair_id",
            beta=[float(row["intercept"]), *(float(slopes[lv]) for lv in levels[1:])],
            sd_subject=float(row["sd_subject"]),
            sd_item=float(row["sd_item"]),
            sd_residual=float(row["sd_residual"]),
        )
        _append(res.plot_data, "wtp_residuals", residuals.assign(**{BLOCK: block}))
        effects.insert(0, BLOCK, block)
        parts.setdefault("wtp_random_effects", []).append(effects)
    timings[f"wtp_figure_data:{block}"] = time.perf_counter() - start


def _append(frames: dict[str, pd.DataFrame], name: str, frame: pd.DataFrame) -> None:
    import pandas as pd

    frames[name] = pd.concat([frames[name], frame], ignore_index=True) if name in frames else frame


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
    human_shift_labels: Sequence[str] = ("opposite",),
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
    human_shift_labels : sequence of str
        What counts as a human shift (:func:`analysis.stats.annotation.shift_counts`): votes for
        the opposite sentiment, the paper's count; add ``"neutral"`` for any departure.

    Returns
    -------
    Results
        Tables ``exclusions``, ``items``, ``shift_distribution``, ``majority_shift``,
        ``annotators``, ``agreement`` and, with predictions, ``model_shifts``,
        ``model_shift_rates``, ``human_model``, ``model_matrix``.
    """
    import pandas as pd

    from analysis.exclusions import exclude_annotations, exclusion_summary
    from analysis.report.rules import rule_status, rules_meta
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
    items = annotation.shift_counts(kept, shift_labels=human_shift_labels)
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
        "human_shift_labels": list(human_shift_labels),
        "prediction_items_without_human_labels": len(missing),
        "unmapped_model_labels": unmapped,
        "exclusion_rules": rules_meta(res.tables["exclusion_rules"]),
        "specifications": ANNOTATION_SPECS,
        "versions": library_versions(),
        "timings_s": timings,
    }
    return res
