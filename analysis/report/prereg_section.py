"""The report's first section when the analysis was pre-registered: the primary result.

It says that the primary analysis is the pre-registered one (document and hash, what the
console's record says of it, the amendment history when there is one), at which look
the pre-registered rule stopped the study, and gives the stopping-rule-adjusted p-value,
estimate and confidence interval beside the naive ones; the looks table follows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.report.apa import ci, count, num, p_apa
from analysis.report.tables import report_table

if TYPE_CHECKING:
    from analysis.report.pipeline import Results

__all__ = ["primary_section", "primary_sentence"]


def primary_sentence(results: Results) -> str:
    """The primary result in words (also printed by ``framelab analyze choice --prereg``)."""
    m, t = results.meta, results.tables
    prereg = m["preregistration"]
    head = (
        f"The primary analysis is the pre-registered one ({prereg['document']}, hash "
        f"{prereg['prereg_sha256'][:12]}): {prereg['test']}, {prereg['direction']}, alpha "
        f"{prereg['alpha']:g}."
    )
    if prereg.get("console"):
        head += f" Console record: {prereg['console']}."
    if prereg.get("text_edited"):
        head += f" WARNING: {prereg['text_edited']}."
    change = prereg.get("amendment")
    if change:
        amends = ", ".join(h[:12] for h in change["amends"]) or "none recorded before"
        head += (
            f" This pre-registration is an amendment, written after data collection began "
            f"({change['seen']}): {change['reason']} (amends: {amends})."
        )
    if "primary" not in t:
        return f"{head} No primary result: {m.get('primary_failed', 'no look reached')}."
    r = t["primary"].iloc[0]
    look = int(r["look"])
    n_looks = int(r["n_looks"])
    where = f"look {look} of {n_looks} ({count(r['n_analysed'])} participants, z = {num(r['z'])})"
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
    level = f"{r['confidence']:.0%}"
    adjusted = (
        f"Adjusted for the stopping rule (stage-wise ordering): {scale} {num(r['estimate'])} "
        f"(median unbiased), {ci(r['ci_low'], r['ci_high'], level=level)}, "
        f"{p_apa(r['p_val'])}; without the adjustment {num(r['estimate_naive'])}, "
        f"{p_apa(r['p_naive'])}."
    )
    if r["test"] == "choice_glmm":
        odds = ci(r["or_ci_low"], r["or_ci_high"], level=level)
        adjusted += f" Odds ratio {num(r['odds_ratio'])}, {odds}."
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
                report_table(results.tables["primary"], name="primary"),
            )
        )
    if "looks" in results.tables:
        tables.append(
            (
                "Looks: the pre-registered test at each look against its bounds",
                report_table(results.tables["looks"], name="looks", sideways=True),
            )
        )
    return {
        "title": "Primary analysis (pre-registered)",
        "text": primary_sentence(results),
        "tables": tables,
        "figures": [],
    }
