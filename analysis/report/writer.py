"""Write analysis results: results.json, CSV tables, PNG figures and report.html."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analysis.report.pipeline import Results

from analysis.report.tables import _fmt
from analysis.report.tables import html_table as _html_table

__all__ = ["format_p", "to_jsonable", "write_results"]


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


# Resolution of the report's PNGs. The figures are created at this dpi, not matplotlib's 100: the
# text extents that tight_layout measures are cached per renderer, and savefig at another dpi
# would measure them all again on a second renderer.
FIGURE_DPI = 120
# zlib level of the PNGs: 3 instead of PIL's 6 encodes ~40 % faster for ~10 % larger files.
PNG_COMPRESS_LEVEL = 3


def _figures(results: Results, out: Path) -> dict[str, str]:
    """Draw the figures of a report; return ``{file name: caption}``."""
    # A Figure on an Agg canvas, not pyplot: no pyplot import (0.1-0.2 s), no GUI backend
    # lookup, no figure manager; nothing here ever shows a window.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if results.kind in ("ratings", "preferences"):
        from analysis.report.evaluation import figures as evaluation_figures

        jobs = evaluation_figures(results, out)
    else:
        from analysis.report.study_sections import figure_jobs

        jobs = figure_jobs(results)
    captions = {}
    for name, caption, draw, size, *layout in jobs:
        fig = Figure(figsize=size, dpi=FIGURE_DPI)
        FigureCanvasAgg(fig)
        ax = fig.subplots(*(layout[0] if layout else (1, 1)), squeeze=True)
        draw(ax)
        fig.tight_layout()
        fig.savefig(out / name, dpi=FIGURE_DPI, pil_kwargs={"compress_level": PNG_COMPRESS_LEVEL})
        captions[name] = caption
    return captions


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
        from analysis.report import study_sections

        sections = (
            study_sections.choice_sections(results, figs)
            if results.kind == "choice"
            else study_sections.annotation_sections(results, figs)
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
