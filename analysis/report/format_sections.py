"""Report sections, figures and console lines of a k-format choice study.

One paragraph per contrast and block: the difference in target-choice rate in percentage
points with its interval, the GLMM's odds ratio and its Holm-adjusted p, the GEE beside it and
the WTP contrast. Figures are described as jobs (drawn by the writer or its worker).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from analysis.report import apa
from analysis.report.format_pipeline import FORMAT_TABLES
from analysis.report.study_sections import exclusions_section, extra_sections, model_tables

if TYPE_CHECKING:
    import pandas as pd

    from analysis.report.pipeline import Results

__all__ = [
    "clustered_summary",
    "contrast_paragraph",
    "format_figure_jobs",
    "format_label",
    "format_lines",
    "format_sections",
]

KNOWN = set(FORMAT_TABLES) | {"exclusions", "exclusion_rules"}


def format_label(level: str) -> str:
    """How the report names a format: ``original reviews``, ``plain summaries``, ``summaries
    mitigated by <method>``; another name as it is."""
    if level == "original":
        return "original reviews"
    if level == "summary":
        return "plain summaries"
    if level.startswith("mitigated:"):
        return f"summaries mitigated by {level.removeprefix('mitigated:')}"
    return level


def _points(v: object) -> str:
    return apa.num(100 * float(v), 1)  # type: ignore[arg-type]


def contrast_paragraph(
    diff: Mapping[str, object],
    glmm: Mapping[str, object] | None = None,
    gee: Mapping[str, object] | None = None,
    wtp: Mapping[str, object] | None = None,
    unit: str = "percentage points",
) -> str:
    """The paragraph of one contrast.

    Parameters
    ----------
    diff : mapping
        Its row of :func:`analysis.stats.formats.format_differences`.
    glmm, gee, wtp : mapping, optional
        Its rows of ``format_glmm``, ``format_gee`` and ``format_wtp``.
    unit : str
        Unit of the WTP premium's difference.

    Returns
    -------
    str

    Examples
    --------
    >>> contrast_paragraph({"level": "mitigated:cot", "versus": "summary", "estimate": -0.05,
    ...                     "ci_low": -0.1, "ci_high": 0.0, "rate_level": 0.55,
    ...                     "rate_versus": 0.6})[:73]
    'Summaries mitigated by cot were chosen 5.0 points less often than plain s'
    """
    est = float(diff["estimate"])  # type: ignore[arg-type]
    level, versus = str(diff["level"]), str(diff["versus"])
    direction = "more" if est > 0 else "less"
    label = format_label(level)
    parts = [
        f"{label[0].upper()}{label[1:]} were chosen {_points(abs(est))} points {direction} often "
        f"than {format_label(versus)} ({_points(diff['rate_level'])}% vs "
        f"{_points(diff['rate_versus'])}% of trials chose the target; difference "
        f"{_points(est)} points, 95% CI [{_points(diff['ci_low'])}, {_points(diff['ci_high'])}], "
        "Newcombe, trials as independent)."
    ]
    if glmm is not None:
        parts.append(
            f"In the logistic GLMM (random intercepts of participant and pair) the odds ratio is "
            f"{apa.num(glmm['estimate'])}, {apa.ci(glmm['ci_low'], glmm['ci_high'])}, "
            f"z = {apa.num(glmm['z'])}, {apa.p_apa(glmm['p_val'])}, Holm-adjusted "
            f"{apa.p_apa(glmm['p_adj'])}."
        )
    if gee is not None:
        parts.append(
            f"The GEE (clustered by participant) gives OR = {apa.num(gee['estimate'])}, "
            f"{apa.ci(gee['ci_low'], gee['ci_high'])}, Holm-adjusted {apa.p_apa(gee['p_adj'])}."
        )
    if wtp is not None:
        w = float(wtp["estimate"])  # type: ignore[arg-type]
        parts.append(
            f"The stated premium was {apa.num(abs(w))} {unit} "
            f"{'higher' if w > 0 else 'lower'} ({apa.ci(wtp['ci_low'], wtp['ci_high'])}, "
            f"t({apa.num(wtp['df'], 1)}) = {apa.num(wtp['statistic'])}, "
            f"Holm-adjusted {apa.p_apa(wtp['p_adj'])})."
        )
    return " ".join(parts)


def _row(t: dict[str, pd.DataFrame], name: str, block: str, contrast: str):
    df = t.get(name)
    if df is None:
        return None
    sel = df[(df["block"] == block) & (df["contrast"] == contrast)]
    return sel.iloc[0].to_dict() if len(sel) else None


def _unit(t: dict[str, pd.DataFrame]) -> str:
    wtp = t.get("format_wtp")
    log = wtp is not None and len(wtp) and wtp["transform"].iloc[0] == "log"
    return "log-ratio units" if log else "percentage points"


def format_sections(results: Results, figs: dict[str, str]) -> list[dict[str, object]]:
    """Sections of a k-format report: per block, a paragraph per contrast, then the tables."""
    t, m = results.tables, results.meta
    unit = _unit(t)
    levels = m.get("format_levels", {})
    lead = (
        f"{apa.count(m['n_participants_analysed'])} participants made "
        f"{apa.count(m['n_rows_analysed'])} choices between the products of "
        f"{apa.count(m['n_pairs'])} pairs, each shown in one of the formats "
        f"{', '.join(levels.get('levels', []))}. Each format is compared with "
        f"{format_label(str(levels.get('reference')))}"
        + (
            f", and each mitigated format with {format_label(str(levels['baseline']))}"
            if levels.get("baseline")
            else ""
        )
        + "; Holm's correction runs across all contrasts of a model."
    )
    diffs = t.get("format_differences")
    blocks = list(dict.fromkeys(diffs["block"])) if diffs is not None else []
    lead += clustered_summary(t, m, blocks)
    sections: list[dict[str, object]] = [
        {"title": "Main result", "text": lead, "tables": [], "figures": []},
        exclusions_section(t, "Excluded rows and participants by reason"),
    ]
    for block in blocks:
        paragraphs = []
        for d in diffs[diffs["block"] == block].to_dict("records"):  # type: ignore[index]
            c = str(d["contrast"])
            paragraphs.append(
                contrast_paragraph(
                    d,
                    _row(t, "format_glmm", block, c),
                    _row(t, "format_gee", block, c),
                    _row(t, "format_wtp", block, c),
                    unit,
                )
            )
        tables = []
        for name, caption in (
            ("format_rates", "Target-choice rate per format (Wilson 95% CI)"),
            ("format_chi2", "Chi-square test of format x choice (k x 2)"),
            ("format_differences", "Rate differences per contrast (proportion)"),
            ("format_glmm", "Logistic GLMM contrasts (odds ratios; Holm)"),
            ("format_gee", "GEE contrasts (odds ratios; Holm)"),
            ("format_wtp", f"WTP mixed-model contrasts ({unit}; Holm)"),
        ):
            if name in t:
                part = t[name][t[name]["block"] == block]
                tables.extend(model_tables(name, part, caption))
        title = "Formats" if block in ("all", "pooled") else f"Block {block}"
        if block == "pooled":
            title += " (all blocks pooled)"
        sections.append(
            {
                "title": title,
                "text": paragraphs,
                "tables": tables,
                "figures": [(figs[k], k) for k in (f"format_shifts_{block}.png",) if k in figs],
            }
        )
    for key, why in m.items():
        if key.endswith("_failed") and key.removesuffix("_failed") in FORMAT_TABLES:
            sections.append(
                {
                    "title": f"Not reported: {key.removesuffix('_failed')}",
                    "text": f"{why}. The other sections are unaffected.",
                    "tables": [],
                    "figures": [],
                }
            )
    sections.extend(extra_sections(results, KNOWN))
    return sections


def clustered_summary(
    t: dict[str, pd.DataFrame], meta: Mapping[str, object], blocks: list[str]
) -> str:
    """The clustering-aware test of every contrast, for the report's first paragraph.

    The GLMM (random intercepts of participant and pair) when it was fitted, else the GEE
    (clustered by participant), with the reason the GLMM is missing; empty when neither is.
    """
    if "format_glmm" in t:
        name, model = (
            "format_glmm",
            ("the logistic GLMM with random intercepts of participant and pair"),
        )
    elif "format_gee" in t:
        why = meta.get("format_glmm_failed")
        name, model = (
            "format_gee",
            "the GEE clustered by participant"
            + (f" (the GLMM was not fitted: {why})" if why else ""),
        )
    else:
        return ""
    sentences = []
    for block in blocks:
        rows = t[name][t[name]["block"] == block].to_dict("records")
        if not rows:
            continue
        where = "" if len(blocks) == 1 else f"Block {block}: "
        parts = [
            f"{format_label(str(r['level']))} vs {format_label(str(r['versus']))} "
            f"OR = {apa.num(r['estimate'])}, {apa.ci(r['ci_low'], r['ci_high'])}, "
            f"Holm-adjusted {apa.p_apa(r['p_adj'])}"
            for r in rows
        ]
        sentences.append(f"{where}{'; '.join(parts)}.")
    if not sentences:
        return ""
    return f" Clustering-aware test, {model}: " + " ".join(sentences)


def format_figure_jobs(results: Results) -> list[tuple]:
    """One figure per block: the shift in target choice per format with its interval."""
    from analysis.plots.formats import plot_format_shifts

    diffs = results.tables.get("format_differences")
    if diffs is None:
        return []
    jobs = []
    for block in dict.fromkeys(diffs["block"]):
        part = diffs[diffs["block"] == block]
        jobs.append(
            (
                f"format_shifts_{block}.png",
                "Shift in the target-choice rate per format in percentage points, 95% Newcombe "
                "CIs over trials (narrower than the clustered models'): dots against the "
                "reference format, squares against the baseline summary",
                lambda ax, part=part: plot_format_shifts(part, ax=ax),
                (6.0, 0.6 * len(part) + 1.6),
            )
        )
    return jobs


def format_lines(results: Results) -> list[str]:
    """The console summary of a k-format analysis: one line per contrast and block."""
    m, t = results.meta, results.tables
    lines = [
        f"{m['n_participants_analysed']} participants, {m['n_rows_analysed']} choices analysed"
    ]
    diffs = t.get("format_differences")
    glmm = t.get("format_glmm")
    for d in [] if diffs is None else diffs.to_dict("records"):
        line = (
            f"[{d['block']}] {d['contrast']}: {100 * d['estimate']:+.1f} points "
            f"[{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]"
        )
        if glmm is not None:
            g = glmm[(glmm["block"] == d["block"]) & (glmm["contrast"] == d["contrast"])]
            if len(g):
                g0 = g.iloc[0]
                line += (
                    f"; GLMM OR = {g0['estimate']:.3f} [{g0['ci_low']:.3f}, {g0['ci_high']:.3f}], "
                    f"p = {g0['p_val']:.4g}, Holm p = {g0['p_adj']:.4g}"
                )
        lines.append(line)
    for key, why in m.items():
        if key.endswith("_failed"):
            lines.append(f"{key.removesuffix('_failed')} not reported: {why}")
    return lines
