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
from analysis.report.numbers import PADJUST_NAMES
from analysis.report.pipeline import BLOCK, CHOICE_TABLE_ORDER
from analysis.report.prereg_section import primary_section
from analysis.report.rules import rules_sentence, sensitivity_sentence, speed_sentence
from analysis.report.tables import report_table, split_columns

if TYPE_CHECKING:
    import pandas as pd

    from analysis.report.pipeline import Results

__all__ = [
    "annotation_sections",
    "choice_sections",
    "design_sentence",
    "exclusions_section",
    "extra_sections",
    "figure_jobs",
    "model_tables",
    "stage_figures",
    "wtp_unit",
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
_KNOWN_FAILURES = {
    "wtp_model_failed",
    "wtp_slopes_failed",
    "primary_failed",
    "clustered_failed",
    "choice_glmm_failed",
}
# Titles of tables that extra_sections shows (otherwise the name, capitalised).
TITLES = {"covariate_adjusted": "Adjusted for participant covariates"}


def wtp_unit(results: Results) -> str:
    """Unit of WTP effects: percentage points of the other price, or log ratio units."""
    for name in ("wtp_model", "wtp_differences"):
        table = results.tables.get(name)
        if table is not None and len(table):
            return "log-ratio units" if table["transform"].iloc[0] == "log" else "percentage points"
    return "percentage points"


def _figs(figs: dict[str, str], *names: str) -> list[tuple[str, str]]:
    return [(figs[k], k) for k in names if k in figs]


def _blocks(results: Results) -> list[str]:
    """The analysed blocks (``all`` for an export without blocks), in the report's order."""
    return list(results.meta.get("blocks", {}).get("analysed", ["all"]))  # type: ignore[union-attr]


def _part(t: dict[str, pd.DataFrame], name: str, block: str) -> pd.DataFrame | None:
    """One block's rows of a table, without the block column (None when there are none)."""
    df = t.get(name)
    if df is None:
        return None
    part = df[df[BLOCK] == block].drop(columns=BLOCK) if BLOCK in df.columns else df
    return part.reset_index(drop=True) if len(part) else None


def _suffix(results: Results, block: str) -> str:
    """File-name suffix of a block's figures (none when the report has one block)."""
    return "" if len(_blocks(results)) == 1 else f"_{block}"


def _block_title(results: Results, title: str, block: str) -> str:
    if len(_blocks(results)) == 1:
        return title
    return f"{title}: all blocks pooled" if block == "pooled" else f"{title}: block {block}"


def stage_figures(results: Results, stage: str) -> list[str]:
    """The figures final after a stage of ``analyze_choice`` (its ``on_stage``): the WTP
    figures after ``"wtp"``, the choice figures after ``"choice"``; a figure worker draws them
    while the next stage is computed."""
    return [
        name for name, *_ in figure_jobs(results) if name.startswith("wtp_") == (stage == "wtp")
    ]


def _choice_jobs(results: Results) -> list[tuple]:
    """Per block: rates per format, per pair, the shifts per contrast, the WTP figures."""
    from analysis.plots import choice as pc
    from analysis.plots import wtp as pw
    from analysis.plots.formats import plot_format_shifts

    t, m, d = results.tables, results.meta, results.plot_data
    unit = wtp_unit(results)
    padjust = PADJUST_NAMES.get(str(m.get("padjust", "holm")), m.get("padjust", "holm"))
    jobs: list[tuple] = []
    for block in _blocks(results):
        sfx = _suffix(results, block)
        rates = _part(t, "selection_rates", block)
        if rates is not None:
            # Stars only for a single contrast: with several, one bracket cannot say which.
            one = len(rates) == 2
            glmm, gee = _part(t, "choice_glmm", block), _part(t, "clustered", block)
            star_p, star_note = None, "no stars: several contrasts (their tests are in the tables)"
            if one and glmm is not None:
                star_p = float(glmm["p_val"].iloc[0])
                star_note = (
                    "stars: p of the logistic GLMM (random intercepts of participant and pair)"
                )
            elif one and gee is not None:
                star_p = float(gee["p_val"].iloc[0])
                star_note = "stars: p of the GEE odds ratio (clustered by participant)"
            elif one:
                star_p = float(_part(t, "chi2", block)["p_val"].iloc[0])  # type: ignore[index]
                star_note = (
                    "stars: p of the Yates chi-square test, which treats trials as independent "
                    "(no clustered model was fitted)"
                )
            jobs.append(
                (
                    f"format_rates{sfx}.png",
                    "Target selection rate by format with 95% Wilson CIs over trials, which "
                    "treat each participant's choices as independent and are narrower than the "
                    f"clustered models' intervals; {star_note} (* .05, ** .01, *** .001)",
                    lambda ax, r=rates, p=star_p: pc.plot_format_rates(r, p_val=p, ax=ax),
                    (max(4.5, 1.3 * len(rates) + 1.5), 4.0),
                )
            )
        pairs = _part(t, "by_pair", block)
        if pairs is not None:
            contrasts = list(dict.fromkeys(pairs["contrast"]))
            first = pairs[pairs["contrast"] == contrasts[0]]
            levels = [c.removeprefix("rate_") for c in pairs.columns if c.startswith("rate_")]
            stars = len(contrasts) == 1
            jobs.append(
                (
                    f"pair_rates{sfx}.png",
                    f"Selection rate per pair and format ({', '.join(levels)}), 95% Wilson CIs"
                    + (
                        f"; stars: {padjust}-adjusted p of each pair's Yates chi-square or "
                        "Fisher exact test (trials within a pair treated as independent) "
                        "(* .05, ** .01, *** .001)"
                        if stars
                        else "; the tests of each contrast per pair are in the table"
                    ),
                    lambda ax, f=first, lv=levels, s=stars: pc.plot_pair_rates(
                        f, levels=lv, p_col="p_adj" if s else None, ax=ax
                    ),
                    (max(6.0, 0.3 * len(levels) * len(first) + 2), 4.2),
                )
            )
        effects = _part(t, "effects", block)
        if effects is not None and effects["contrast"].nunique() > 1:
            shifts = effects[effects["effect"] == "risk_difference"]
            jobs.append(
                (
                    f"format_shifts{sfx}.png",
                    "Shift in the target-choice rate per format in percentage points, 95% "
                    "Newcombe CIs over trials (narrower than the clustered models'): dots "
                    "against the reference format, squares against the baseline",
                    lambda ax, r=shifts: plot_format_shifts(r, ax=ax),
                    (6.0, 0.6 * len(shifts) + 1.6),
                )
            )
        per = d.get("wtp_differences")
        summary = _part(t, "wtp_differences", block)
        if per is not None and summary is not None:
            per = per[per[BLOCK] == block]
            model = _part(t, "wtp_model", block)
            n = len(summary)

            def differences(axes, per=per, summary=summary, model=model):
                import numpy as np

                for ax, row in zip(np.atleast_1d(axes), summary.to_dict("records"), strict=True):
                    c = row["contrast"]
                    effect = None if model is None else model[model["contrast"] == c]
                    pw.plot_wtp_differences(
                        per[per["contrast"] == c],
                        summary[summary["contrast"] == c],
                        effect=effect,
                        unit=unit,
                        ax=ax,
                    )

            jobs.append(
                (
                    f"wtp_differences{sfx}.png",
                    "WTP difference per participant (dots) for each contrast, their mean with a "
                    "t 95% CI, and the mixed-model effect with its 95% CI"
                    + (
                        "; stars: the mixed model's Satterthwaite t-test p"
                        if model is not None
                        else ""
                    ),  # fmt: skip
                    differences,
                    (5.2 * n, 4.4),
                    (1, n),
                )
            )
        residuals = d.get("wtp_residuals")
        effects_re = _part(t, "wtp_random_effects", block)
        if residuals is not None and effects_re is not None:
            residuals = residuals[residuals[BLOCK] == block]

            def diagnostics(axes, r=residuals, e=effects_re):
                # One figure of four panels: each extra PNG costs a matplotlib render and save,
                # which is much of the report's time on the 70 x 10 design.
                pw.plot_residuals_vs_fitted(r, ax=axes[0, 0])
                pw.plot_residual_qq(r, ax=axes[0, 1])
                pw.plot_caterpillar(e, group="participant_id", ax=axes[1, 0])
                pw.plot_caterpillar(e, group="pair_id", ax=axes[1, 1])

            n_levels = min(int((effects_re["group"] == "participant_id").sum()), 60)
            jobs.append(
                (
                    f"wtp_diagnostics{sfx}.png",
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


def figure_jobs(results: Results) -> list[tuple]:
    """What to draw for a choice or annotation report: ``(file, caption, draw(ax), size)``.

    A job with a fifth element ``(rows, cols)`` draws several panels: ``draw`` gets the array
    of axes.
    """
    from analysis.plots import annotation as pa

    if results.kind == "choice":
        return _choice_jobs(results)
    t = results.tables
    jobs: list[tuple] = []
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
    """A table as main columns and, when it is wide, its details: the quantities of the whole
    fit (the same on every row: SDs, deviance, the formula) once, then those of each row."""
    main, details = split_columns(df) if main is None else split_columns(df, main=main)
    out = [(caption, report_table(df, name=name, columns=main, **ctx))]
    keys = [c for c in details if c in main]
    fit = [
        c
        for c in details
        if c not in keys and len(df) > 1 and df[c].astype(str).nunique(dropna=False) == 1
    ]
    rows = [c for c in details if c not in fit]
    if fit:
        out.append((f"{caption}: the fit", report_table(df.head(1), name=name, columns=fit, **ctx)))
    if len(rows) > len(keys):
        out.append(
            (
                f"{caption}: details",
                report_table(df, name=name, columns=rows, sideways=True, **ctx),
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


def _records(df: pd.DataFrame | None) -> list[dict]:
    return [] if df is None else df.to_dict("records")


def design_sentence(results: Results) -> str:
    """Who and what was analysed: participants, choices, pairs, formats, blocks, test
    participants and formats left out."""
    m = results.meta
    levels = m.get("format_levels", {})
    text = (
        f"{apa.count(m['n_participants_analysed'])} participants made "
        f"{apa.count(m['n_rows_analysed'])} choices between the products of "
        f"{apa.count(m['n_pairs'])} pairs (after exclusions), each shown in one of "
        f"{len(levels.get('levels', []))} formats: {', '.join(levels.get('levels', []))} "  # type: ignore[arg-type]
        f"(reference: {levels.get('reference')})."  # type: ignore[union-attr]
    )
    blocks = m.get("blocks", {})
    if len(blocks.get("analysed", [])) > 1:  # type: ignore[union-attr]
        names = ", ".join(blocks["analysed"])  # type: ignore[index]
        text += f" Each product-choice block is analysed on its own: {names}."
    elif blocks.get("analysed") == ["pooled"]:  # type: ignore[union-attr]
        text += " The trials of all product-choice blocks are analysed together (pooled)."
    test = m.get("test_participants", {})
    if test.get("n_input"):  # type: ignore[union-attr]
        text += (
            f" The export held {apa.count(test['n_input'])} test participant(s) (is_test = 1: "  # type: ignore[index]
            f"bots or previews, exported with --include-test); {apa.count(test['n_analysed'])} "  # type: ignore[index]
            "of them are analysed here like any other participant."
        )
    elif test.get("recorded"):  # type: ignore[union-attr]
        text += " The export held no test participants."
    left = m.get("formats_left_out") or {}
    if left:
        text += (
            " Not analysed (formats not named by --levels): "
            + ", ".join(f"{apa.count(n)} {f} trials" for f, n in left.items())  # type: ignore[union-attr]
            + "."
        )
    return text


def _lead(results: Results, block: str) -> str:
    """A block's headline: the clustering-aware test of every contrast first, the seed
    study's chi-square after.

    Each participant made several choices, so the headline is the logistic GLMM (random
    intercepts of participant and pair), or the GEE when the GLMM is missing; the trial-level
    chi-square follows as the comparison with the seed study, which used it.
    """
    t, m = results.tables, results.meta
    parts = [apa.rates_sentence(_records(_part(t, "selection_rates", block)))]
    glmm, gee = _records(_part(t, "choice_glmm", block)), _records(_part(t, "clustered", block))
    if glmm:
        parts.append(apa.glmm_sentence(glmm))
    elif gee:
        parts.append(f"Logistic GLMM {m.get('choice_glmm', 'not requested')}. ")
        parts[-1] += apa.gee_sentence(gee)
    else:
        parts.append(
            f"No clustering-aware model of the choices is reported (logistic GLMM "
            f"{m.get('choice_glmm', 'not requested')}; GEE "
            f"{m.get('clustered_model', 'not requested')}), so the only test of the choices is "
            "the chi-square test below, which overstates the evidence when participants differ."
        )
    chi2 = _records(_part(t, "chi2", block))
    effects = [e for e in _records(_part(t, "effects", block)) if e["effect"] == "risk_difference"]
    if chi2:
        parts.append(apa.chi2_sentence(chi2[0], effects))
    if len(_blocks(results)) > 1:
        parts.insert(0, "All blocks pooled:" if block == "pooled" else f"Block {block}:")
    return " ".join(parts)


def _ctx(results: Results, block: str) -> dict[str, str]:
    """Placeholders of the column labels: WTP unit, levels of a single contrast, correction."""
    levels = results.meta.get("format_levels", {}).get("per_block", {}).get(block, [])  # type: ignore[union-attr]
    ctx = {"unit": wtp_unit(results), "padjust": str(results.meta.get("padjust", "holm"))}
    if len(levels) == 2:
        ctx.update(ref=levels[0], trt=levels[1])
    return ctx


def choice_sections(results: Results, figs: dict[str, str]) -> list[dict[str, object]]:
    """Sections of a choice-study report; the first paragraph reports the clustered test.

    With a pre-registration the first section is the pre-registered primary result, followed by
    the same paragraphs; without one it is "Main result". Then, per block, the choice models,
    the pairs and willingness to pay.
    """
    t, m = results.tables, results.meta
    lead = [design_sentence(results), *(_lead(results, b) for b in _blocks(results))]
    primary = primary_section(results)
    if primary is not None:
        # The pre-registered result at its stopping look, then all the data.
        primary["text"] = [primary["text"], *lead]
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
    for build in (_choice_block, _wtp_sections):
        for block in _blocks(results):
            sections.extend(build(results, figs, block))
    sections.extend(extra_sections(results, CHOICE_TABLES))
    return sections


def _choice_block(results: Results, figs: dict[str, str], block: str) -> list[dict[str, object]]:
    """A block's Choice and Per pair sections."""
    t, m = results.tables, results.meta
    ctx = _ctx(results, block)
    sfx = _suffix(results, block)
    adj = PADJUST_NAMES.get(ctx["padjust"], ctx["padjust"])
    glmm, gee = _part(t, "choice_glmm", block), _part(t, "clustered", block)
    several = glmm is not None and len(glmm) > 1 or gee is not None and len(gee) > 1
    p_caption = f"p raw and {adj}-adjusted across the contrasts" if several else "p"
    # The GLMM leads the report; the GEE (population-averaged odds ratio) is its robustness check.
    text = ""
    if gee is not None and glmm is not None:
        text = apa.gee_sentence(_records(gee))
    elif glmm is not None and str(m.get("clustered_model", "")).startswith("not reported"):
        text = f"Clustered model (GEE) {m['clustered_model']}."
    tables = []
    for name, caption in (
        ("selection_rates", "Target-choice rate per format (Wilson 95% CIs over trials)"),
        (
            "chi2",
            "Chi-square test of format × choice (first row: primary), trials as independent",
        ),
        (
            "effects",
            "Effect sizes per contrast, trials as independent: risk difference (proportion; "
            "Newcombe 95% CI, Miettinen-Nurminen score test p) and odds ratio (Woolf 95% CI, "
            "Wald p)",
        ),
        (
            "clustered",
            "GEE contrasts (participants as clusters): population-averaged odds ratios with "
            f"robust 95% CIs; {p_caption}",
        ),
        (
            "choice_glmm",
            "Logistic GLMM contrasts, crossed random intercepts of participant and pair: "
            f"conditional odds ratios with Wald 95% CIs; {p_caption}",
        ),
    ):
        part = _part(t, name, block)
        if part is not None:
            tables += model_tables(name, part, caption, main=MAIN_COLUMNS.get(name), **ctx)
    pairs = _part(t, "by_pair", block)
    out = [
        {
            "title": _block_title(results, "Choice", block),
            "text": text,
            "tables": tables,
            "figures": _figs(figs, f"format_rates{sfx}.png", f"format_shifts{sfx}.png"),
        }
    ]
    if pairs is not None:
        # Two tables: the rates of every format per pair, then each contrast's test per pair.
        rates = ["pair_id", *(c for c in pairs.columns if c.startswith("rate_"))]
        tests = ["pair_id", "contrast", "estimate", "ci_low", "ci_high", "test", "statistic",
                 "p_val", "p_adj"]  # fmt: skip
        out.append(
            {
                "title": _block_title(results, "Per pair", block),
                "text": "",
                "tables": [
                    (
                        "Per-pair selection rates by format (proportion of trials; the trials "
                        "per pair and format are in by_pair.csv)",
                        report_table(
                            pairs.drop_duplicates("pair_id"), name="by_pair", columns=rates, **ctx
                        ),  # fmt: skip
                    ),
                    (
                        "Per-pair tests of each contrast: risk difference (proportion) with "
                        f"Newcombe 95% CI, p raw and {adj}-adjusted across pairs and contrasts",
                        report_table(pairs, name="by_pair", columns=tests, **ctx),
                    ),
                ],
                "figures": _figs(figs, f"pair_rates{sfx}.png"),
            }
        )
    return out


# The headline columns of a table (estimate, its interval, the p the caption names); the rest
# goes to its details table.
MAIN_COLUMNS = {
    "effects": ("contrast", "effect", "rate_level", "rate_versus", "estimate", "ci_low",
                "ci_high", "p_val"),
    "clustered": ("contrast", "estimate", "ci_low", "ci_high", "z", "p_val", "p_adj"),
    "choice_glmm": ("contrast", "estimate", "ci_low", "ci_high", "z", "p_val", "p_adj"),
    "wtp_model": ("contrast", "estimate", "ci_low", "ci_high", "statistic", "df", "p_val",
                  "p_adj"),
    "wtp_slopes": ("contrast", "estimate", "ci_low", "ci_high", "statistic", "df", "p_val",
                   "p_adj", "lrt_p"),
}  # fmt: skip


def _wtp_sections(results: Results, figs: dict[str, str], block: str):
    t, m = results.tables, results.meta
    ctx = _ctx(results, block)
    unit = ctx["unit"]
    sfx = _suffix(results, block)
    model = _part(t, "wtp_model", block)
    failed = m.get("wtp_model_failed")
    if model is None and not failed:
        return []
    adj = PADJUST_NAMES.get(ctx["padjust"], ctx["padjust"])
    several = model is not None and len(model) > 1
    p_caption = f"p raw and {adj}-adjusted across the contrasts" if several else "p"
    parts: list[str] = []
    tables: list[tuple[str, object]] = []
    if model is not None:
        row = model.iloc[0]
        parts.append(apa.wtp_sentence(_records(model), unit))
        parts.append(
            f"Model that ran: {row['model']}; why: {row['reason']}. Optimizer: "
            f"{row['optimizer']}."
            + ("" if bool(row["singular"]) else " Not singular (no variance at the boundary).")
            + (f" Notes: {str(row['notes']).rstrip('.')}." if row["notes"] else "")
        )
        tables += model_tables(
            "wtp_model",
            model,
            f"Mixed-model format contrasts: difference in mean WTP ({unit}) with 95% CIs (t, "
            f"Satterthwaite df); {p_caption}",
            main=MAIN_COLUMNS["wtp_model"],
            **ctx,
        )
    else:
        parts.append(
            f"The mixed model was not reported: {failed}. The other sections are unaffected."
        )
    within = _part(t, "wtp_differences", block)
    if within is not None:
        parts += [apa.within_sentence(r, unit) for r in _records(within)]
        tables.append(
            (
                f"Within-participant differences per contrast ({unit}; t 95% CIs)",
                report_table(within, name="wtp_differences", **ctx),
            )
        )
    slopes = _part(t, "wtp_slopes", block)
    if slopes is not None:
        parts += [apa.slopes_sentence(r, unit) for r in _records(slopes)]
        which = "; ".join(
            f"{r['contrast']}: "
            + (
                "final model, simplified from the singular maximal model"
                if bool(r["simplified"])
                else "final model: the maximal model, not singular"
            )
            + f", {r['formula']}"
            for r in _records(slopes)
        )
        tables += model_tables(
            "wtp_slopes",
            slopes,
            f"Random slopes of format by participant and pair ({which}) and the "
            f"likelihood-ratio test of its slopes; {p_caption}",
            main=MAIN_COLUMNS["wtp_slopes"],
            **ctx,
        )
    elif "wtp_slopes_failed" in m:
        parts.append(f"Random-slope model not reported: {m['wtp_slopes_failed']}.")
    by_format = _part(t, "wtp_by_format", block)
    if by_format is not None:
        tables.append(
            (
                f"WTP by format (descriptive; {unit})",
                report_table(by_format, name="wtp_by_format", **ctx),
            )
        )
    sections = [
        {
            "title": _block_title(results, "Willingness to pay", block),
            "text": " ".join(parts),
            "tables": tables,
            "figures": _figs(figs, f"wtp_differences{sfx}.png"),
        }
    ]
    diag = _figs(figs, f"wtp_diagnostics{sfx}.png")
    if diag:
        sections.append(
            {
                "title": _block_title(results, "Willingness to pay: model diagnostics", block),
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
            f"Models: {', '.join(m['models'])}; a human shift is: "
            f"{', '.join(m.get('human_shift_labels', ['opposite']))}; a model shift is: "
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
