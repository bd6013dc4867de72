"""Compute the tables of a k-format product-choice report (pure: no files, no printing).

A study with more than the two seed formats (``original``, ``summary`` and ``mitigated:<method>``
summaries), or with several product-choice blocks, is analysed here; a single block with the
two seed formats keeps :func:`analysis.report.pipeline.analyze_choice` and its outputs. Every
table has a ``block`` column first: each block is analysed separately (the default when the
export has more than one), or all blocks together (``blocks="pooled"``, ``block`` = ``pooled``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from analysis.report.pipeline import Results, library_versions

if TYPE_CHECKING:
    import pandas as pd

    from analysis.exclusions import ChoiceRules

__all__ = ["FORMAT_SPECS", "FORMAT_TABLES", "analyze_formats", "needs_formats"]

BLOCK = "block"
POOLED = "pooled"
FORMAT_TABLES = (
    "format_rates",
    "format_chi2",
    "format_differences",
    "format_glmm",
    "format_gee",
    "format_wtp",
)
FORMAT_SPECS = {
    "format_rates": "share of trials choosing the target per format; Wilson score 95% CI",
    "format_chi2": (
        "Pearson chi-square test of the k x 2 table format x chose_target (the seed study's "
        "comparison; Yates' correction only when k = 2, as R chisq.test); trials as independent"
    ),
    "format_differences": (
        "per contrast: target-choice rate of the level minus that of the compared level "
        "(proportion; x 100 = percentage points), Newcombe hybrid score 95% CI, "
        "Miettinen-Nurminen score test; trials as independent"
    ),
    "format_glmm": (
        "logistic GLMM chose_target ~ format + (1 | participant) + (1 | pair), Laplace as "
        "lme4::glmer (nAGQ = 1), format a k-level factor with treatment contrasts against the "
        "reference; contrasts of each other level against the baseline (summary) are linear "
        "combinations of the same fit (SE from lme4's Hessian-based vcov); Wald z; Holm across "
        "all 2k - 3 contrasts of the block; checked against glmer to 1e-4"
    ),
    "format_gee": (
        "GEE logit chose_target ~ format (k levels), clusters = participants, exchangeable "
        "working correlation, robust sandwich SEs: the robustness check, same contrasts, Holm"
    ),
    "format_wtp": (
        "linear mixed model, REML: wtp ~ format + (1 | participant) + (1 | pair), k-level "
        "format, same contrasts; t tests on Satterthwaite df (as lmerTest::contest(joint = "
        "FALSE)); Holm across the contrasts; checked against lmer/lmerTest to 1e-4"
    ),
}


def needs_formats(data: pd.DataFrame, levels: Sequence[str] | None = None) -> bool:
    """Whether ``data`` needs the k-format analysis: more than two formats named or present,
    a format outside the seed's two, or several blocks."""
    if levels is not None and len(levels) > 2:
        return True
    present = set(data["format"].dropna())
    if len(present) > 2 or any(str(v).startswith("mitigated:") for v in present):
        return True
    return BLOCK in data.columns and data[BLOCK].nunique() > 1


def analyze_formats(
    data: pd.DataFrame,
    *,
    rules: ChoiceRules | None = None,
    levels: Sequence[str] | None = None,
    baseline: str | None = "summary",
    blocks: str = "separate",
    wtp_transform: str | None = None,
    clustered: bool = True,
    glmm: bool = True,
    padjust: str = "holm",
) -> Results:
    """Run the k-format choice analysis on trial-level data.

    Parameters
    ----------
    data : pandas.DataFrame
        ``analysis.io.load_choice`` output; ``format`` holds ``original``, ``summary`` or
        ``mitigated:<method>``; an optional ``block`` column names the product-choice block.
    rules : ChoiceRules, optional
        Exclusion rules (default ``ChoiceRules()``).
    levels : sequence of str, optional
        The formats, reference first (default ``original``, ``summary``, then the rest
        alphabetically): :func:`analysis.stats.formats.format_levels`. Per block, the levels
        that block has, in this order.
    baseline : str, optional
        The level each mitigated format is compared with (``summary``).
    blocks : {"separate", "pooled"}
        Each block on its own, or all blocks' trials in one analysis.
    wtp_transform : {None, "log"}
        Premium in percent, or ``log(1 + pct/100)``.
    clustered, glmm : bool
        Fit the GEE and the logistic GLMM.
    padjust : str
        Correction across the contrasts of a model (Holm).

    Returns
    -------
    Results
        ``kind == "formats"``; tables ``exclusions``, ``exclusion_rules`` and, each with a
        ``block`` column first, ``format_rates``, ``format_chi2``, ``format_differences``,
        ``format_glmm``, ``format_gee``, ``format_wtp`` (a model that fails is left out and
        ``meta["<table>_failed"]`` says why, per block); ``meta`` with counts, levels, blocks,
        specifications, versions, timings.
    """
    import numpy as np
    import pandas as pd

    from analysis.exclusions import exclude_choice, exclusion_summary
    from analysis.report.rules import rule_status
    from analysis.stats import formats
    from analysis.stats.crossed import ConvergenceError

    if blocks not in ("separate", "pooled"):
        raise ValueError(f"blocks must be 'separate' or 'pooled', not {blocks!r}")
    from analysis.exclusions import ChoiceRules

    rules = rules or ChoiceRules()
    kept, excluded = exclude_choice(data, rules)
    if kept.empty:
        raise ValueError("every row was excluded; nothing to analyse (see the exclusion rules)")
    res = Results(kind="formats")
    res.tables["exclusions"] = exclusion_summary(data, excluded)
    res.tables["exclusion_rules"] = rule_status(data, excluded, rules)
    has_blocks = BLOCK in kept.columns and kept[BLOCK].notna().any()
    if has_blocks and kept[BLOCK].isna().any():
        raise ValueError(f"{int(kept[BLOCK].isna().sum())} row(s) have an empty {BLOCK!r}")
    if blocks == "pooled" or not has_blocks:
        groups = [(POOLED if has_blocks else "all", kept)]
    else:
        groups = [(str(b), g) for b, g in kept.groupby(BLOCK, sort=True)]
    all_levels = formats.format_levels(kept, "format", levels)
    timings: dict[str, float] = {}
    failures: dict[str, list[str]] = {}
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in FORMAT_TABLES}
    model_failures = (ConvergenceError, np.linalg.LinAlgError, ValueError)
    block_levels: dict[str, list[str]] = {}

    for block, rows in groups:
        present = set(rows["format"])
        lv = [v for v in all_levels if v in present]
        block_levels[block] = lv
        kw = {"levels": lv}
        wtp_rows = rows[rows["wtp_premium_pct"].notna()]
        steps = [
            ("format_rates", formats.format_rates, rows, kw),
            ("format_chi2", formats.format_chi2, rows, kw),
            ("format_differences", formats.format_differences, rows, {**kw, "baseline": baseline}),
        ]
        if glmm:
            steps.append(
                (
                    "format_glmm",
                    formats.format_glmm,
                    rows,
                    {**kw, "baseline": baseline, "padjust": padjust},
                )
            )
        if clustered:
            steps.append(
                (
                    "format_gee",
                    formats.format_gee,
                    rows,
                    {**kw, "baseline": baseline, "padjust": padjust},
                )
            )
        if len(wtp_rows):
            wtp_levels = [v for v in lv if v in set(wtp_rows["format"])]
            steps.append(
                (
                    "format_wtp",
                    formats.format_wtp,
                    wtp_rows,
                    {
                        "levels": wtp_levels,
                        "baseline": baseline,
                        "padjust": padjust,
                        "transform": wtp_transform,
                    },
                )
            )
        for name, fn, frame, kwargs in steps:
            start = time.perf_counter()
            try:
                table = fn(frame, **kwargs)
            except model_failures as exc:
                failures.setdefault(name, []).append(f"block {block}: {type(exc).__name__}: {exc}")
                continue
            finally:
                timings[f"{name}:{block}"] = time.perf_counter() - start
            table.insert(0, BLOCK, block)
            parts[name].append(table)
    for name, frames in parts.items():
        if frames:
            res.tables[name] = pd.concat(frames, ignore_index=True)
    res.meta = {
        "n_rows_input": len(data),
        "n_participants_input": int(data["participant_id"].nunique()),
        "n_rows_analysed": len(kept),
        "n_participants_analysed": int(kept["participant_id"].nunique()),
        "n_pairs": int(kept["pair_id"].nunique()),
        "n_rows_with_wtp": int(kept["wtp_premium_pct"].notna().sum()),
        "format_levels": {
            "levels": list(all_levels),
            "reference": all_levels[0],
            "baseline": baseline if baseline in all_levels[1:] else None,
            "source": "given" if levels else "default (original, summary, then alphabetical)",
            "per_block": block_levels,
        },
        "blocks": {
            "mode": blocks if has_blocks else "no block column",
            "analysed": [b for b, _ in groups],
        },
        "padjust_contrasts": padjust,
        "specifications": FORMAT_SPECS,
        "versions": library_versions(),
        "timings_s": timings,
    }
    for name, why in failures.items():
        res.meta[f"{name}_failed"] = "; ".join(why)
    return res
