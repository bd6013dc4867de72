"""Write analysis results: results.json, CSV tables, PNG figures and report.html."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from analysis.report.pipeline import Results

__all__ = ["to_jsonable", "write_results"]


def to_jsonable(value: object) -> object:
    """Convert DataFrames, numpy scalars and NaN into JSON values (NaN/inf -> null), losslessly.

    Parameters
    ----------
    value : object
        A DataFrame, dict, list or scalar.

    Returns
    -------
    object
        Plain Python data; floats keep full precision (``json`` writes their shortest repr).
    """
    import numpy as np
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        return [to_jsonable(rec) for rec in value.to_dict(orient="records")]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (int, str)):
        return value
    return str(value)


def _fmt(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
        if not math.isfinite(v):
            return ""
        if v == int(v) and abs(v) < 1e15 and isinstance(value, int):
            return str(int(v))
        if v != 0 and abs(v) < 1e-4:
            return f"{v:.3e}"
        return f"{v:.4g}"
    return str(value)


def format_p(p: object) -> str:
    """Return ``"= 0.0123"`` or, for a p that underflowed to 0, ``"< 1e-300"``.

    A double underflows below about 2e-308, so an exact 0 only says the p is smaller than any
    printed number; "p = 0" would claim certainty no test gives.
    """
    v = float(p)  # type: ignore[arg-type]
    if not math.isfinite(v):
        return "= NA"
    if v == 0.0:
        return "< 1e-300"
    return "= " + _fmt(v)


def _is_p_column(name: object) -> bool:
    return isinstance(name, str) and (name.startswith("p_val") or name.startswith("p_adj"))


def _fmt_cell(col: object, value: object) -> str:
    if _is_p_column(col) and isinstance(value, float) and value == 0.0:
        return "< 1e-300"
    return _fmt(value)


def _html_table(df: pd.DataFrame, max_rows: int = 60) -> str:
    import numpy as np

    shown = df.head(max_rows).copy()
    for col in shown.columns:
        shown[col] = [
            _fmt_cell(col, v.item() if isinstance(v, np.generic) else v)
            for v in shown[col].tolist()
        ]
    html = '<div class="tw">' + shown.to_html(index=False, escape=True, border=0) + "</div>"
    if len(df) > max_rows:
        html += f"<p class='note'>First {max_rows} of {len(df)} rows; all rows in the CSV.</p>"
    return html


def _figures(results: Results, out: Path) -> dict[str, str]:
    """Draw the figures of a report; return ``{file name: caption}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from analysis.plots import annotation as pa
    from analysis.plots import choice as pc

    t = results.tables
    jobs = []
    if results.kind in ("ratings", "preferences"):
        from analysis.report.evaluation import figures as evaluation_figures

        jobs.extend(evaluation_figures(results, out))
    elif results.kind == "choice":
        primary_p = float(t["chi2"].iloc[0]["p_val"])
        jobs.append(
            (
                "format_rates.png",
                "Target selection rate by format, 95% Wilson CIs",
                lambda ax: pc.plot_format_rates(t["selection_rates"], p_val=primary_p, ax=ax),
                (4.5, 4.0),
            )
        )
        jobs.append(
            (
                "pair_rates.png",
                "Selection rate per pair, original vs summary, 95% CIs; stars from the "
                f"{results.meta.get('padjust', 'holm')}-adjusted p (* .05, ** .01, *** .001)",
                lambda ax: pc.plot_pair_rates(t["by_pair"], ax=ax),
                (max(6.0, 0.8 * len(t["by_pair"]) + 2), 4.2),
            )
        )
        if "wtp_by_format" in t:
            jobs.append(
                (
                    "wtp.png",
                    "WTP premium by format, 95% CIs, with the mixed-model effect",
                    lambda ax: pc.plot_wtp(t["wtp_by_format"], effect=t.get("wtp_model"), ax=ax),
                    (5.0, 4.2),
                )
            )
    else:
        jobs.append(
            (
                "shift_distribution.png",
                "Share of items with 0..K human shifts",
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
                "Majority-shift rate (humans) and shift rate (models) by base sentiment",
                lambda ax: pa.plot_majority_shift(rates, ax=ax),
                (7.0, 4.2),
            )
        )
        if "human_model" in t:
            jobs.append(
                (
                    "human_model.png",
                    "Pearson r, human shift count vs model shift, 95% CIs",
                    lambda ax: pa.plot_human_model_correlation(t["human_model"], ax=ax),
                    (6.0, 4.2),
                )
            )
            n = len(t["human_model"])
            jobs.append(
                (
                    "model_heatmap.png",
                    "Model x model correlation of shift indicators",
                    lambda ax: pa.plot_model_heatmap(t["model_matrix"], ax=ax),
                    (1.0 * n + 3.5, 0.9 * n + 2.5),
                )
            )
    captions = {}
    for name, caption, draw, size in jobs:
        fig, ax = plt.subplots(figsize=size)
        draw(ax)
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
        captions[name] = caption
    return captions


def _choice_sections(results: Results, figs: dict[str, str]) -> list[dict[str, object]]:
    t, m = results.tables, results.meta
    chi = t["chi2"].iloc[0]
    rates = t["selection_rates"].set_index("format")["estimate"]
    summary = (
        f"{m['n_participants_analysed']} participants, {m['n_rows_analysed']} choices, "
        f"{m['n_pairs']} pairs after exclusions. Target chosen in "
        + ", ".join(f"{lvl}: {v:.1%}" for lvl, v in rates.items())
        + f"; chi-square (Yates) = {chi['chi2']:.3f}, df = {chi['dof']}, "
        + f"p {format_p(chi['p_val'])}."
    )
    sections: list[dict[str, object]] = [
        {
            "title": "Exclusions",
            "text": "",
            "figures": [],
            "tables": [("Excluded rows and participants by rule", _html_table(t["exclusions"]))],
        },
        {
            "title": "Choice",
            "text": summary,
            "tables": [
                ("Selection rates", _html_table(t["selection_rates"])),
                ("Chi-square tests (first row: primary)", _html_table(t["chi2"])),
                ("Effect sizes", _html_table(t["effects"])),
            ]
            + (
                [("Clustered robustness model (GEE)", _html_table(t["clustered"]))]
                if "clustered" in t
                else []
            )
            + (
                [("Logistic GLMM, crossed random intercepts", _html_table(t["choice_glmm"]))]
                if "choice_glmm" in t
                else []
            ),
            "figures": [(figs[k], k) for k in ("format_rates.png",) if k in figs],
        },
        {
            "title": "Per pair",
            "text": "",
            "tables": [("Per-pair rates and tests", _html_table(t["by_pair"]))],
            "figures": [(figs[k], k) for k in ("pair_rates.png",) if k in figs],
        },
    ]
    if "wtp_model" in t:
        ran = m["wtp_model_ran"]
        row = t["wtp_model"].iloc[0]
        test = (
            f"t({row['df']:.1f}) = {row['statistic']:.2f}, p {format_p(row['p_val'])} "
            f"(Satterthwaite df; normal p {format_p(row['p_val_z'])})"
            if math.isfinite(float(row["df"]))
            else f"z = {row['statistic']:.2f}, p {format_p(row['p_val'])} (normal)"
        )
        text = (
            f"Model that ran: {ran['model']} ({ran['formula']}); why: {ran['reason']}. "
            f"Optimizer: {ran['optimizer']}. "
            + (
                "Singular fit: a variance component is at the boundary (0), as lme4's "
                "isSingular; the model is over-parameterised for these data. "
                if ran["singular"]
                else "Not singular (no variance at the boundary). "
            )
            + f"Format effect {row['estimate']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}], "
            + f"{test}; baseline ({row['reference']}) {row['intercept']:.3f}; "
            + f"d = {row['d_standardised']:.3f}; ICC participant {row['icc_subject']:.3f}, "
            + f"pair {row['icc_item']:.3f}."
            + (f" Notes: {ran['notes']}" if ran["notes"] else "")
        )
        if "wtp_slopes" in t:
            sl = t["wtp_slopes"].iloc[0]
            text += (
                f" With random slopes ({sl['formula']}): {sl['estimate']:.3f} "
                f"[{sl['ci_low']:.3f}, {sl['ci_high']:.3f}], t({sl['df']:.1f}) = "
                f"{sl['statistic']:.2f}, p {format_p(sl['p_val'])}; slopes vs intercepts "
                f"chi-square(4) = {sl['lrt_chisq']:.2f}, p {format_p(sl['lrt_p'])}"
                + (
                    "; singular (a slope variance or correlation at the boundary: the data do "
                    "not support the maximal structure)."
                    if sl["singular"]
                    else "; not singular."
                )
            )
        elif "wtp_slopes_failed" in m:
            text += f" Random-slope model not reported: {m['wtp_slopes_failed']}."
        sections.append(
            {
                "title": "Willingness to pay",
                "text": text,
                "tables": [
                    ("Mixed-model format effect", _html_table(t["wtp_model"])),
                    ("WTP by format", _html_table(t["wtp_by_format"])),
                ]
                + (
                    [
                        (
                            "Random slopes of format by participant and pair (maximal model) "
                            "and the likelihood-ratio test of the slopes",
                            _html_table(t["wtp_slopes"]),
                        )
                    ]
                    if "wtp_slopes" in t
                    else []
                ),
                "figures": [(figs[k], k) for k in ("wtp.png",) if k in figs],
            }
        )
    elif "wtp_model_failed" in m:
        sections.append(
            {
                "title": "Willingness to pay",
                "text": (
                    "The mixed model was not reported: "
                    f"{m['wtp_model_failed']}. The other sections are unaffected."
                ),
                "tables": (
                    [("WTP by format", _html_table(t["wtp_by_format"]))]
                    if "wtp_by_format" in t
                    else []
                ),
                "figures": [],
            }
        )
    return sections


def _annotation_sections(results: Results, figs: dict[str, str]) -> list[dict[str, object]]:
    t, m = results.tables, results.meta
    text = (
        f"{m['n_items']} items, {m['n_annotators']} annotators, {m['n_labels_analysed']} labels "
        f"(labels per item: {m['labels_per_item']})."
    )
    sections: list[dict[str, object]] = [
        {
            "title": "Exclusions",
            "text": "",
            "figures": [],
            "tables": [("Excluded labels by rule", _html_table(t["exclusions"]))],
        },
        {
            "title": "Human shifts",
            "text": text,
            "tables": [
                ("Shift-count distribution", _html_table(t["shift_distribution"])),
                ("Majority-shift rate by base sentiment", _html_table(t["majority_shift"])),
                ("Agreement", _html_table(t["agreement"])),
                ("Annotators", _html_table(t["annotators"])),
            ],
            "figures": [
                (figs[k], k) for k in ("shift_distribution.png", "majority_shift.png") if k in figs
            ],
        },
    ]
    if "human_model" in t:
        sections.append(
            {
                "title": "Models",
                "text": f"Models: {', '.join(m['models'])}; a model shift is: "
                f"{', '.join(m['model_shift_labels'])}.",
                "tables": [
                    ("Human-model correlation", _html_table(t["human_model"])),
                    ("Model shift rates", _html_table(t["model_shift_rates"])),
                    ("Model x model correlations", _html_table(t["model_matrix"])),
                ],
                "figures": [
                    (figs[k], k) for k in ("human_model.png", "model_heatmap.png") if k in figs
                ],
            }
        )
    return sections


def write_results(
    results: Results,
    out_dir: str | Path,
    *,
    title: str,
    command: str = "framelab analyze",
    figures: bool = True,
) -> dict[str, Path]:
    """Write ``results.json``, one CSV per table, the PNG figures and ``report.html``.

    Parameters
    ----------
    results : Results
        Output of ``analyze_choice`` / ``analyze_annotations``.
    out_dir : str or Path
        Output folder (created).
    title : str
        Report title.
    command : str
        The command line that produced the report (shown in it).
    figures : bool
        Draw the PNG figures.

    Returns
    -------
    dict of str to Path
        Every written file by name.
    """
    from importlib.resources import files

    import jinja2

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    payload = {
        "kind": results.kind,
        "meta": to_jsonable(results.meta),
        "tables": {name: to_jsonable(df) for name, df in results.tables.items()},
    }
    path = out / "results.json"
    path.write_text(json.dumps(payload, indent=2, allow_nan=False), encoding="utf-8")
    written["results.json"] = path
    for name, df in results.tables.items():
        path = out / f"{name}.csv"
        # repr-precision floats: the CSVs carry the same numbers as results.json.
        df.to_csv(path, index=False, float_format=None)
        written[path.name] = path
    figs = _figures(results, out) if figures else {}
    written.update({name: out / name for name in figs})
    if results.kind in ("ratings", "preferences"):
        from analysis.report.evaluation import sections as evaluation_sections

        sections = evaluation_sections(results, figs, _html_table)
    else:
        sections = (
            _choice_sections(results, figs)
            if results.kind == "choice"
            else _annotation_sections(results, figs)
        )
    template = jinja2.Environment(autoescape=True).from_string(
        files("analysis.report").joinpath("templates/report.html.j2").read_text("utf-8")
    )
    html = template.render(
        title=title,
        generated=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=command,
        sections=sections,
        specifications=results.meta.get("specifications", {}),
        rules=json.dumps(to_jsonable(results.meta.get("exclusion_rules", {}))),
        versions=results.meta.get("versions", {}),
    )
    path = out / "report.html"
    path.write_text(html, encoding="utf-8")
    written["report.html"] = path
    return written
