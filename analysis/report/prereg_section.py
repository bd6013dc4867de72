"""The report's first section when the analysis was pre-registered: the primary result.

It says that the primary analysis is the pre-registered one (document and hash), at which look
the pre-registered rule stopped the study, and gives the stopping-rule-adjusted p-value,
estimate and confidence interval beside the naive ones; the looks table follows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.report.tables import html_table

if TYPE_CHECKING:
    from analysis.report.pipeline import Results

__all__ = ["primary_section", "primary_sentence"]


def primary_sentence(results: Results) -> str:
    """The primary result in words (also printed by ``framelab analyze choice --prereg``)."""
    from analysis.report.writer import format_p

    m, t = results.meta, results.tables
    prereg = m["preregistration"]
    head = (
        f"The primary analysis is the pre-registered one ({prereg['document']}, hash "
        f"{prereg['prereg_sha256'][:12]}): {prereg['test']}, {prereg['direction']}, alpha "
        f"{prereg['alpha']:g}."
    )
    if "primary" not in t:
        return f"{head} No primary result: {m.get('primary_failed', 'no look reached')}."
    r = t["primary"].iloc[0]
    look = int(r["look"])
    n_looks = int(r["n_looks"])
    where = f"look {look} of {n_looks} ({int(r['n_analysed'])} participants, z = {r['z']:.3f})"
    stopped = {
        "efficacy": f"The pre-registered rule stopped the study at {where}: the efficacy "
        "bound was crossed and the null hypothesis is rejected.",
        "futility": f"The pre-registered rule stopped the study for futility at {where}.",
        "not rejected": f"The study ran to its final look, {where}, below the efficacy bound: "
        "the null hypothesis is not rejected.",
        "continue": f"Interim only: {where} is the latest look and no bound was crossed; the "
        "primary result is not final.",
    }[str(r["stopped"])]
    scale = "log odds ratio" if r["test"] == "choice_glmm" else "difference"
    adjusted = (
        f"Adjusted for the stopping rule (stage-wise ordering): {scale} {r['estimate']:.3f} "
        f"(median unbiased), {r['confidence']:.0%} CI [{r['ci_low']:.3f}, {r['ci_high']:.3f}], "
        f"p {format_p(r['p_val'])}; without the adjustment {r['estimate_naive']:.3f}, "
        f"p {format_p(r['p_naive'])}."
    )
    if r["test"] == "choice_glmm":
        adjusted += (
            f" Odds ratio {r['odds_ratio']:.3f} [{r['or_ci_low']:.3f}, {r['or_ci_high']:.3f}]."
        )
    later = ""
    if int(r["later_looks"]):
        later = (
            f" The data go past the stopping look ({int(r['later_looks'])} later look(s) "
            "reached); they do not change the primary result."
        )
    return f"{head} {stopped} {adjusted}{later}"


def primary_section(results: Results) -> dict[str, object] | None:
    """The "Primary analysis (pre-registered)" section, or ``None`` without a pre-registration."""
    if "preregistration" not in results.meta:
        return None
    tables = []
    if "primary" in results.tables:
        tables.append(
            (
                "Primary result (pre-registered)",
                html_table(results.tables["primary"], name="primary"),
            )
        )
    if "looks" in results.tables:
        tables.append(
            (
                "Looks: the pre-registered test at each look against its bounds",
                html_table(results.tables["looks"], name="looks"),
            )
        )
    return {
        "title": "Primary analysis (pre-registered)",
        "text": primary_sentence(results),
        "tables": tables,
        "figures": [],
    }
