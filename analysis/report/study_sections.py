"""Figures and report sections of choice and annotation studies (what ``report.html`` shows).

``figure_jobs`` lists what to draw (``(file, caption, draw(ax), size)``; the writer draws and
saves); ``choice_sections`` / ``annotation_sections`` build the sections: an APA-style paragraph
with every number, then the tables with human column names, then the figures. A table the
sections do not know (a new model's results) is shown by :func:`extra_sections` with a generic
sentence, its columns split into a main and a details table, so new analyses slot in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.report import apa
from analysis.report.pipeline import CHOICE_TABLE_ORDER
from analysis.report.prereg_section import primary_section
from analysis.report.rules import rules_sentence, sensitivity_sentence, speed_sentence
from analysis.report.tables import report_table, split_columns

if TYPE_CHECKING:
    import pandas as pd

    from analysis.report.pipeline import Results

__all__ = [
    "annotation_sections",
    "choice_sections",
    "exclusions_section",
    "extra_sections",
    "figure_jobs",
    "model_tables",
]

# The choice tables these sections present; the covariate-adjusted models are shown by
# extra_sections under their own title (TITLES); a pre-registration's by primary_section.
CHOICE_TABLES = set(CHOICE_TABLE_ORDER) - {"covariate_adjusted"} | {"primary", "looks"}
ANNOTATION_TABLES = {
    "exclusions",
    "exclusion_rules",
    "items",
    "shift_distribution",
    "majority_shift",
    "annotators",
    "agreement",
    "model_shifts",
    "model_shift_rates",
    "human_model",
    "model_matrix",
    "label_mapping",
}
# Failures the known sections report themselves; any other ``<name>_failed`` meta entry gets a
# section of its own from extra_sections.
_KNOWN_FAILURES = {"wtp_model_failed", "wtp_slopes_failed", "primary_failed"}
# Titles of tables that extra_sections shows (otherwise the name, capitalised).
TITLES = {"covariate_adjusted": "Adjusted for participant covariates"}


def _levels(results: Results) -> tuple[str, str]:
    levels = results.meta.get("format_levels", {})
    return levels.get("reference", "original"), levels.get("treatment", "summary")  # type: ignore[union-attr]


def wtp_unit(results: Results) -> str:
    """Unit of WTP effects: percentage points of the other price, or log ratio units."""
    model = results.tables.get("wtp_model")
    transform = model["transform"].iloc[0] if model is not None and len(model) else None
    if transform is None and "wtp_differences" in results.tables:
        transform = results.tables["wtp_differences"]["transform"].iloc[0]
    return "log-ratio units" if transform == "log" else "percentage points"


def _figs(figs: dict[str, str], *names: str) -> list[tuple[str, str]]:
    return [(figs[k], k) for k in names if k in figs]


# Which figures of a choice report are final after each stage of ``analyze_choice`` (its
# ``on_stage``): the figure worker draws them while the next stage is computed. A figure listed
# here must read only tables of its stage or earlier ones.
FIGURES_BY_STAGE = {
    "wtp": ("wtp_differences.png", "wtp_diagnostics.png"),
    "choice": ("format_rates.png", "pair_rates.png"),
}


def figure_jobs(results: Results) -> list[tuple]:
    """What to draw for a choice or annotation report: ``(file, caption, draw(ax), size)``.

    A job with a fifth element ``(rows, cols)`` draws several panels: ``draw`` gets the array
    of axes.
    """
    from analysis.plots import annotation as pa
    from analysis.plots import choice as pc
    from analysis.plots import wtp as pw

    t, m, d = results.tables, results.meta, results.plot_data
    jobs: list[tuple] = []
    if results.kind == "choice":
        # Partial results (a figure worker drawing the WTP stage first, see FIGURES_BY_STAGE)
        # have no choice tables yet.
        if "selection_rates" in t:
            if "choice_glmm" in t:
                star_p = float(t["choice_glmm"]["p_val"].iloc[0])
                star_note = (
                    "stars: p of the logistic GLMM (random intercepts of participant and pair)"
                )
            elif "clustered" in t:
                star_p = float(t["clustered"]["p_val"].iloc[0])
                star_note = "stars: p of the GEE odds ratio (clustered by participant)"
            else:
                star_p = float(t["chi2"]["p_val"].iloc[0])
                star_note = (
                    "stars: p of the Yates chi-square test, which treats trials as independent "
                    "(no clustered model was fitted)"
                )
            jobs.append(
                (
                    "format_rates.png",
                    "Target selection rate by format with 95% Wilson CIs over trials, which "
                    "treat each participant's choices as independent and are narrower than the "
                    f"clustered models' intervals; {star_note} (* .05, ** .01, *** .001)",
                    lambda ax: pc.plot_format_rates(t["selection_rates"], p_val=star_p, ax=ax),
                    (4.5, 4.0),
                )
            )
            padjust = m.get("padjust", "holm")
            jobs.append(
                (
                    "pair_rates.png",
                    "Selection rate per pair, original vs summary, 95% Wilson CIs; stars: "
                    f"{padjust}-adjusted p of each pair's Yates chi-square or Fisher exact test "
                    "(trials within a pair treated as independent) (* .05, ** .01, *** .001)",
                    lambda ax: pc.plot_pair_rates(t["by_pair"], ax=ax),
                    (max(6.0, 0.8 * len(t["by_pair"]) + 2), 4.2),
                )
            )
        unit = wtp_unit(results)
        if "wtp_differences" in d:
            model = t.get("wtp_model")
            jobs.append(
                (
                    "wtp_differences.png",
                    "WTP difference summary − original per participant (dots), their mean "
                    "with a t 95% CI, and the mixed-model effect with its 95% CI"
                    + (
                        "; stars: the mixed model's Satterthwaite t-test p"
                        if model is not None
                        else ""
                    ),
                    lambda ax: pw.plot_wtp_differences(
                        d["wtp_differences"], t["wtp_differences"], effect=model, unit=unit, ax=ax
                    ),
                    (5.2, 4.4),
                )
            )
        if "wtp_residuals" in d and "wtp_random_effects" in t:
            effects = t["wtp_random_effects"]

            def diagnostics(axes, d=d, effects=effects):
                # One figure of four panels: each extra PNG costs a matplotlib render and save,
                # which is much of the report's time on the 70 x 10 design.
                pw.plot_residuals_vs_fitted(d["wtp_residuals"], ax=axes[0, 0])
                pw.plot_residual_qq(d["wtp_residuals"], ax=axes[0, 1])
                pw.plot_caterpillar(effects, group="participant_id", ax=axes[1, 0])
                pw.plot_caterpillar(effects, group="pair_id", ax=axes[1, 1])

            n_levels = min(int((effects["group"] == "participant_id").sum()), 60)
            jobs.append(
                (
                    "wtp_diagnostics.png",
                    "Mixed-model diagnostics. Top: conditional residuals vs fitted values (red: "
                    "binned means; a flat line at 0 = no unmodelled trend, an even band = "
                    "constant variance) and a normal QQ plot of the standardised residuals. "
                    "Bottom: random intercepts of participants and pairs (conditional modes "
                    "±1.96 conditional SD, sorted)",
                    diagnostics,
                    (9.0, 6.5 + 0.06 * n_levels),
                    (2, 2),
                )
            )
        return jobs
    jobs.append(
        (
            "shift_distribution.png",
            "Share of items with 0..K human shifts, 95% Wilson CIs",
            lambda ax: pa.plot_shift_distribution(t["shift_distribution"], ax=ax),
            (5.5, 4.0),
        )
    )
    rates = t["majority_shift"]
    if "model_shift_rates" in t:
        import pandas as pd

        rates = pd.concat([rates, t["model_shift_rates"]], ignore_index=True)
    jobs.append(
        (
            "majority_shift.png",
            "Majority-shift rate (humans) and shift rate (models) by base sentiment, 95% CIs",
            lambda ax: pa.plot_majority_shift(rates, ax=ax),
            (7.0, 4.2),
        )
    )
    if "human_model" in t:
        n = len(t["human_model"])
        longest = int(t["human_model"]["model"].astype(str).str.len().max())
        jobs.append(
            (
                "human_model.png",
                "Pearson r, human shift count vs model shift, 95% Fisher-z CIs; stars: p of "
                "each model's Pearson t test (items as independent units)",
                lambda ax: pa.plot_human_model_correlation(t["human_model"], ax=ax),
                (7.5, max(2.5, 0.45 * n + 1.5)),
            )
        )
        jobs.append(
            (
                "model_heatmap.png",
                "Model x model Pearson correlation of shift indicators",
                lambda ax: pa.plot_model_heatmap(t["model_matrix"], ax=ax),
                # Room for the names on both axes: about 0.08 inch per character at 10 pt.
                (1.0 * n + 3.5 + 0.08 * longest, 0.9 * n + 2.5 + 0.06 * longest),
            )
        )
    return jobs


def model_tables(
    name: str, df: pd.DataFrame, caption: str, main: tuple[str, ...] | None = None, **ctx: str
) -> list[tuple[str, str]]:
    """A table as main columns and, when it is wide, a second table of the details."""
    main, details = split_columns(df) if main is None else split_columns(df, main=main)
    out = [(caption, report_table(df, name=name, columns=main, **ctx))]
    if details:
        out.append(
            (
                f"{caption}: details",
                report_table(df, name=name, columns=details, **ctx),
            )
        )
    return out


def exclusions_section(t: dict[str, pd.DataFrame], caption: str) -> dict[str, object]:
    """Which rules were applied, which could not be checked (and why), and the counts."""
    tables = [(caption, report_table(t["exclusions"], name="exclusions"))]
    text = ""
    if "exclusion_rules" in t:
        text = rules_sentence(t["exclusion_rules"])
        tables.append(
            (
                "Exclusion rules: applied, not checked (the data lack what the rule reads) or off",
                report_table(t["exclusion_rules"], name="exclusion_rules"),
            )
        )
    if "authenticity_sensitivity" in t:
        text += " " + sensitivity_sentence(t["authenticity_sensitivity"])
        tables.append(
            (
                "The primary result with and without the authenticity exclusions",
                report_table(t["authenticity_sensitivity"], name="authenticity_sensitivity"),
            )
        )
    if "speed" in t:
        text += " " + speed_sentence(t["speed"])
        tables.append(
            (
                "Speed: the floor applied, what it let through, and the suggested absolute floor",
                report_table(t["speed"], name="speed"),
            )
        )
    return {"title": "Exclusions", "text": text, "figures": [], "tables": tables}


def _lead(results: Results, ref: str, trt: str) -> str:
    """The report's first paragraph: the clustering-aware test first, the seed study's after.

    Each participant made several choices, so the headline is the logistic GLMM (random
    intercepts of participant and pair), or the GEE when the GLMM is missing; the trial-level
    chi-square follows as the comparison with the seed study, which used it.
    """
    t, m = results.tables, results.meta
    rates = {r["format"]: r for r in t["selection_rates"].to_dict("records")}
    parts = [
        f"{apa.count(m['n_participants_analysed'])} participants made "
        f"{apa.count(m['n_rows_analysed'])} choices between the products of "
        f"{apa.count(m['n_pairs'])} pairs (after exclusions).",
        apa.rates_sentence(rates, ref, trt),
    ]
    if "choice_glmm" in t:
        parts.append(apa.glmm_sentence(t["choice_glmm"].iloc[0], ref, trt))
    elif "clustered" in t:
        parts.append(
            f"Logistic GLMM {m.get('choice_glmm', 'not requested')}. "
            + apa.gee_sentence(t["clustered"].iloc[0], ref, trt)
        )
    else:
        parts.append(
            f"No clustering-aware model of the choices is reported (logistic GLMM "
            f"{m.get('choice_glmm', 'not requested')}; GEE "
            f"{m.get('clustered_model', 'not requested')}), so the only test of the choices is "
            "the chi-square test below, which overstates the evidence when participants differ."
        )
    parts.append(apa.chi2_sentence(t["chi2"].iloc[0], ref, trt))
    return " ".join(parts)


def choice_sections(results: Results, figs: dict[str, str]) -> list[dict[str, object]]:
    """Sections of a choice-study report; the first paragraph reports the clustered test.

    With a pre-registration the first section is the pre-registered primary result, followed by
    the same choice paragraph; without one it is "Main result".
    """
    t, m = results.tables, results.meta
    ref, trt = _levels(results)
    unit = wtp_unit(results)
    ctx = {"ref": ref, "trt": trt, "unit": unit, "padjust": str(m.get("padjust", "holm"))}
    lead = _lead(results, ref, trt)
    # The GLMM leads the report; the GEE (population-averaged odds ratio) is its robustness check.
    text = ""
    if "clustered" in t and "choice_glmm" in t:
        text = apa.gee_sentence(t["clustered"].iloc[0], ref, trt)
    elif "choice_glmm" in t and str(m.get("clustered_model", "")).startswith("not reported"):
        text = f"Clustered model (GEE) {m['clustered_model']}."
    primary = primary_section(results)
    if primary is not None:
        # Two paragraphs: the pre-registered result at its stopping look, then all the data.
        primary["text"] = [primary["text"], lead]
    else:
        primary = {"title": "Main result", "text": lead, "tables": [], "figures": []}
    sections: list[dict[str, object]] = [primary]
    sections.append(exclusions_section(t, "Excluded rows and participants by reason"))
    if "demographics" in t:
        join = m.get("demographics_join", {})
        sections.append(
            {
                "title": "Participants",
                "text": (
                    f"Demographics from Prolific's export, joined by {join.get('key', 'ID')}: "
                    f"{join.get('n_matched', '?')} of {join.get('n_participants', '?')} "
                    f"participants matched; {join.get('n_consent_revoked', 0)} revoked consent "
                    f"and {join.get('n_data_expired', 0)} have expired fields (read as not "
                    f"available); {join.get('n_unmatched', 0)} are not in the demographic "
                    "export. The table describes the participants analysed (after exclusions)."
                ),
                "tables": [
                    ("Analysed participants", report_table(t["demographics"], name="demographics"))
                ],
                "figures": [],
            }
        )
    sections.append(
        {
            "title": "Choice",
            "text": text,
            "tables": [
                (
                    "Selection rates",
                    report_table(t["selection_rates"], name="selection_rates", **ctx),
                ),
                (
                    "Chi-square tests of format x choice (first row: primary); the estimate and "
                    f"CI columns are the risk difference {trt} − {ref} (proportion)",
                    report_table(t["chi2"], name="chi2", **ctx),
                ),
                ("Effect sizes", report_table(t["effects"], name="effects", **ctx)),
            ]
            + (
                [
                    (
                        "Clustered model (GEE, participants as clusters)",
                        report_table(t["clustered"], name="clustered", **ctx),
                    )
                ]
                if "clustered" in t
                else []
            )
            + (
                model_tables(
                    "choice_glmm",
                    t["choice_glmm"],
                    "Logistic GLMM, crossed random intercepts of participant and pair",
                    **ctx,
                )
                if "choice_glmm" in t
                else []
            ),
            "figures": _figs(figs, "format_rates.png"),
        }
    )
    sections.append(
        {
            "title": "Per pair",
            "text": "",
            "tables": model_tables(
                "by_pair",
                t["by_pair"],
                "Per-pair rates and tests",
                main=(
                    "pair_id",
                    f"n_{ref}",
                    f"rate_{ref}",
                    f"n_{trt}",
                    f"rate_{trt}",
                    "estimate",
                    "ci_low",
                    "ci_high",
                    "test",
                    "statistic",
                    "p_val",
                    "p_adj",
                ),
                **ctx,
            ),
            "figures": _figs(figs, "pair_rates.png"),
        }
    )
    sections.extend(_wtp_sections(results, figs, ctx))
    sections.extend(extra_sections(results, CHOICE_TABLES))
    return sections


def _wtp_sections(results: Results, figs: dict[str, str], ctx: dict[str, str]):
    t, m = results.tables, results.meta
    unit = ctx["unit"]
    if "wtp_model" not in t and "wtp_model_failed" not in m:
        return []
    parts: list[str] = []
    tables: list[tuple[str, str]] = []
    if "wtp_model" in t:
        row = t["wtp_model"].iloc[0]
        parts.append(apa.wtp_sentence(row, unit))
        parts.append(
            f"Model that ran: {row['model']}; why: {row['reason']}. Optimizer: "
            f"{row['optimizer']}."
            + ("" if bool(row["singular"]) else " Not singular (no variance at the boundary).")
            + (f" Notes: {str(row['notes']).rstrip('.')}." if row["notes"] else "")
        )
        tables += model_tables(
            "wtp_model", t["wtp_model"], f"Mixed-model format effect ({unit})", **ctx
        )
    else:
        parts.append(
            f"The mixed model was not reported: {m['wtp_model_failed']}. The other sections are "
            "unaffected."
        )
    if "wtp_differences" in t:
        parts.append(apa.within_sentence(t["wtp_differences"].iloc[0], unit))
        tables.append(
            (
                "Within-participant differences",
                report_table(t["wtp_differences"], name="wtp_differences", **ctx),
            )
        )
    if "wtp_slopes" in t:
        slopes = t["wtp_slopes"].iloc[0]
        parts.append(apa.slopes_sentence(slopes, unit))
        which = (
            "final model, simplified from the singular maximal model"
            if bool(slopes["simplified"])
            else "final model: the maximal model, not singular"
        )
        tables += model_tables(
            "wtp_slopes",
            t["wtp_slopes"],
            f"Random slopes of format by participant and pair ({which}: {slopes['formula']}) "
            "and the likelihood-ratio test of its slopes",
            **ctx,
        )
    elif "wtp_slopes_failed" in m:
        parts.append(f"Random-slope model not reported: {m['wtp_slopes_failed']}.")
    if "wtp_by_format" in t:
        tables.append(
            (
                "WTP by format (descriptive)",
                report_table(t["wtp_by_format"], name="wtp_by_format", **ctx),
            )
        )
    sections = [
        {
            "title": "Willingness to pay",
            "text": " ".join(parts),
            "tables": tables,
            "figures": _figs(figs, "wtp_differences.png"),
        }
    ]
    diag = _figs(figs, "wtp_diagnostics.png")
    if diag:
        sections.append(
            {
                "title": "Willingness to pay: model diagnostics",
                "text": (
                    "Residuals are conditional (observed − fixed − random effects), as "
                    "resid() of lme4; random effects are conditional modes with conditional SDs "
                    "(ranef(condVar = TRUE)); all CSV in wtp_random_effects.csv."
                ),
                "tables": [],
                "figures": diag,
            }
        )
    return sections


def _per_item(k: dict[str, int]) -> str:
    if k["min"] == k["max"]:
        return f"{k['min']} per item"
    return f"{k['min']} to {k['max']} per item, most often {k['mode']}"


def annotation_sections(results: Results, figs: dict[str, str]) -> list[dict[str, object]]:
    """Sections of an annotation-study report."""
    t, m = results.tables, results.meta
    text = (
        f"{apa.count(m['n_items'])} items, {apa.count(m['n_annotators'])} annotators, "
        f"{apa.count(m['n_labels_analysed'])} labels ({_per_item(m['labels_per_item'])}). "
        "Agreement: "
        + "; ".join(apa.agreement_sentence(r) for r in t["agreement"].to_dict("records"))
        + "."
    )
    sections: list[dict[str, object]] = [
        exclusions_section(t, "Excluded labels by reason"),
        {
            "title": "Human shifts",
            "text": text,
            "tables": [
                (name, report_table(t[key], name=key))
                for key, name in (
                    ("shift_distribution", "Shift-count distribution"),
                    ("majority_shift", "Majority-shift rate by base sentiment"),
                    ("agreement", "Agreement"),
                    ("annotators", "Annotators"),
                )
            ],
            "figures": _figs(figs, "shift_distribution.png", "majority_shift.png"),
        },
    ]
    if "human_model" in t:
        text = (
            f"Models: {', '.join(m['models'])}; a model shift is: "
            f"{', '.join(m['model_shift_labels'])}. Correlation of the human shift count with "
            "each model's shift: "
            + " ".join(apa.correlation_sentence(r) for r in t["human_model"].to_dict("records"))
        )
        unmapped = m.get("unmapped_model_labels") or []
        if unmapped:
            text += (
                " Model labels neither standard nor in the label map, counted as no shift: "
                + ", ".join(repr(v) for v in unmapped)  # type: ignore[union-attr]
                + " (see the label table)."
            )
        tables = [
            ("Human-model correlation", report_table(t["human_model"], name="human_model")),
            ("Model shift rates", report_table(t["model_shift_rates"], name="model_shift_rates")),
            ("Model x model correlations", report_table(t["model_matrix"], name="model_matrix")),
        ]
        if "label_mapping" in t:
            tables.append(
                (
                    "How the models' labels were read",
                    report_table(t["label_mapping"], name="label_mapping"),
                )
            )
        sections.append(
            {
                "title": "Models",
                "text": text,
                "tables": tables,
                "figures": _figs(figs, "human_model.png", "model_heatmap.png"),
            }
        )
    sections.extend(extra_sections(results, ANNOTATION_TABLES))
    return sections


def extra_sections(results: Results, known: set[str]) -> list[dict[str, object]]:
    """A section per table the report does not know, and per unreported model failure.

    A table whose first row has ``estimate, se, statistic, p_val`` gets an APA sentence
    (:func:`analysis.report.apa.model_sentence`); wide tables are split into main and details.
    ``meta[<name>_failed]`` says why a model is missing.
    """
    sections: list[dict[str, object]] = []
    for name, df in results.tables.items():
        if name in known:
            continue
        title = TITLES.get(name, name.replace("_", " ").capitalize())
        text = ""
        if len(df) and {"estimate", "se", "statistic", "p_val"} <= set(df.columns):
            text = " ".join(
                apa.model_sentence(str(r.get("model", title)), r)
                for r in df.head(10).to_dict("records")
            )
            if "coding" in df.columns:
                text += f" Coding: {df['coding'].iloc[0]}."
        sections.append(
            {"title": title, "text": text, "tables": model_tables(name, df, title), "figures": []}
        )
    for key, why in results.meta.items():
        if key.endswith("_failed") and key not in _KNOWN_FAILURES:
            name = key.removesuffix("_failed")
            sections.append(
                {
                    "title": TITLES.get(name, name.replace("_", " ").capitalize()),
                    "text": f"Not reported: {why}. The other sections are unaffected.",
                    "tables": [],
                    "figures": [],
                }
            )
    return sections
