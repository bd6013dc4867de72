"""Write analysis results: results.json, CSV tables, PNG figures and report.html."""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from analysis.report.pipeline import Results

from analysis.report.tables import report_table
from analysis.report.typeset import latex_file
from analysis.safecsv import write_csv

__all__ = [
    "FigureDrawer",
    "draw_figures",
    "figure_jobs",
    "render_pngs",
    "to_jsonable",
    "write_results",
]


class FigureDrawer(Protocol):
    """What :func:`write_results` asks of a figure worker (the forked
    :class:`analysis.report.figure_worker.FigureWorker`, which imports this module)."""

    def submit(self, results: Results, names: Collection[str] | None = None) -> bool: ...
    def collect(self) -> dict[str, bytes] | None: ...


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


# Resolution of the report's PNGs. The figures are created at this dpi, not matplotlib's 100: the
# text extents that tight_layout measures are cached per renderer, and savefig at another dpi
# would measure them all again on a second renderer.
FIGURE_DPI = 120
# zlib level of the PNGs: 3 instead of PIL's 6 encodes ~40 % faster for ~10 % larger files.
PNG_COMPRESS_LEVEL = 3
SAVE_KWARGS = {"dpi": FIGURE_DPI, "pil_kwargs": {"compress_level": PNG_COMPRESS_LEVEL}}


def figure_jobs(results: Results) -> list[tuple]:
    """What to draw: ``(file, caption, draw(ax), size[, (rows, cols)])`` per figure (no drawing).

    Parameters
    ----------
    results : Results
        What the report shows.

    Returns
    -------
    list of tuple
    """
    if results.kind in ("ratings", "preferences"):
        from analysis.report.evaluation import figures as evaluation_figures

        return evaluation_figures(results)
    from analysis.report import study_sections

    return study_sections.figure_jobs(results)


def _rendered(results: Results, names: Collection[str] | None = None) -> Iterator[tuple]:
    """Yield ``(file name, caption, figure)`` for each figure (or those in ``names``), drawn."""
    # A Figure on an Agg canvas, not pyplot: no pyplot import (0.1-0.2 s), no GUI backend
    # lookup, no figure manager; nothing here ever shows a window.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    for name, caption, draw, size, *layout in figure_jobs(results):
        if names is not None and name not in names:
            continue
        fig = Figure(figsize=size, dpi=FIGURE_DPI)
        FigureCanvasAgg(fig)
        ax = fig.subplots(*(layout[0] if layout else (1, 1)), squeeze=True)
        draw(ax)
        fig.tight_layout()
        yield name, caption, fig


def draw_figures(results: Results, out: Path) -> dict[str, str]:
    """Draw the figures of a report into ``out``; return ``{file name: caption}``.

    Parameters
    ----------
    results : Results
        What the report shows.
    out : Path
        An existing folder.

    Returns
    -------
    dict of str to str
        Caption of every PNG written, in drawing order.
    """
    captions = {}
    for name, caption, fig in _rendered(results):
        fig.savefig(out / name, format="png", **SAVE_KWARGS)
        captions[name] = caption
    return captions


def render_pngs(results: Results, names: Collection[str] | None = None) -> dict[str, bytes]:
    """Return the PNG bytes of a report's figures (or of those in ``names``), by file name.

    The same bytes :func:`draw_figures` writes; the figure worker sends them to the writer.
    """
    import io

    pngs = {}
    for name, _, fig in _rendered(results, names):
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", **SAVE_KWARGS)
        pngs[name] = buffer.getvalue()
    return pngs


def _typeset(
    sections: list[dict[str, object]], versions: dict[str, str]
) -> tuple[list[dict[str, object]], list[str]]:
    """Number every table in reading order; return the sections with HTML tables, and the LaTeX.

    The library versions are the last table (a paper's software statement) and the last
    section returned.
    """
    import pandas as pd

    software = pd.DataFrame({"library": list(versions), "version": list(versions.values())})
    last = {"title": "Library versions", "text": "", "figures": []}
    last["tables"] = [
        ("Software that computed the numbers", report_table(software, name="software"))
    ]
    typeset, latex, number = [], [], 0
    for section in [*sections, last]:
        tables = []
        for caption, table in section["tables"]:  # type: ignore[attr-defined]
            number += 1
            tables.append(table.html(number, caption))
            latex.append(table.latex(number, caption))
        typeset.append({**section, "tables": tables})
    return typeset, latex


def write_results(
    results: Results,
    out_dir: str | Path,
    *,
    title: str,
    command: str = "framelab analyze",
    figures: bool = True,
    worker: FigureDrawer | None = None,
) -> dict[str, Path]:
    """Write ``results.json``, one CSV per table, the PNG figures, ``report.html``, ``tables.tex``.

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
    worker : FigureDrawer, optional
        A forked figure worker (:func:`analysis.report.figure_worker.start_figure_worker`): it
        draws the figures not yet handed to it while this process writes the tables and the
        HTML. The same files as without; if the worker fails, the figures are drawn here.

    Returns
    -------
    dict of str to Path
        Every written file by name. ``tables.tex`` holds every table of ``report.html`` as
        LaTeX, numbered and rounded alike.
    """
    from importlib.resources import files

    import jinja2

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    jobs = figure_jobs(results) if figures else []
    drawing = bool(jobs) and worker is not None and worker.submit(results)
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
        write_csv(df, path, float_format=None)
        written[path.name] = path
    if drawing:
        # The captions are known without drawing: the HTML is built while the worker draws.
        figs = {name: caption for name, caption, *_ in jobs}
    else:
        figs = draw_figures(results, out) if jobs else {}
    if results.kind in ("ratings", "preferences"):
        from analysis.report.evaluation import sections as evaluation_sections

        sections = evaluation_sections(results, figs, report_table)
    else:
        from analysis.report import study_sections

        sections = (
            study_sections.choice_sections(results, figs)
            if results.kind == "choice"
            else study_sections.annotation_sections(results, figs)
        )
    generated = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    typeset, latex = _typeset(sections, results.meta.get("versions", {}))
    template = jinja2.Environment(autoescape=True).from_string(
        files("analysis.report").joinpath("templates/report.html.j2").read_text("utf-8")
    )
    html = template.render(
        title=title,
        generated=generated,
        command=command,
        sections=typeset[:-1],
        specifications=results.meta.get("specifications", {}),
        rules=json.dumps(to_jsonable(results.meta.get("exclusion_rules", {}))),
        versions=typeset[-1]["tables"][0],
    )
    path = out / "tables.tex"
    path.write_text(
        latex_file(latex, title=title, generated=generated, command=command), encoding="utf-8"
    )
    written["tables.tex"] = path
    if drawing:
        pngs = worker.collect()  # type: ignore[union-attr]
        if pngs is not None and set(pngs) == set(figs):
            for name in figs:
                (out / name).write_bytes(pngs[name])
        else:
            figs = draw_figures(results, out)  # the worker failed: draw here (errors show here)
    written.update({name: out / name for name in figs})
    path = out / "report.html"
    path.write_text(html, encoding="utf-8")
    written["report.html"] = path
    return written
