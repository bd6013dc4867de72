"""Draw a report's figures in a second process while the first one computes the statistics.

On the 70 x 10 design a report's figures cost about half as much CPU as its statistics:
importing matplotlib, loading its fonts and PNG writer the first time, then drawing (~0.7 s).
One process does all of it after the statistics. A worker forked when the command starts (after
pandas' import, which both need) imports matplotlib and draws a throwaway figure on the second
core while the first computes; ``analyze_choice`` hands it each stage's figures as soon as their
tables are final (``study_sections.stage_figures``), so most drawing overlaps the fitting and the
rest the writing of the tables and the HTML. Same figures, same bytes: the worker calls the
writer's own drawing code on the same ``Results``.

The worker is a convenience, never a dependency: if it cannot start (not Linux, other threads
already running in the process, no idle core, ``FRAMELAB_FIGURE_WORKER=0``) or it fails or
dies, the writer draws in its own process as before (so a drawing error shows with its
traceback there).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import sys
import threading
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from analysis.report.pipeline import Results

__all__ = ["FigureWorker", "start_figure_worker"]

# 0: draw in the command's own process; 1: always fork the worker; unset ("auto"): fork it
# when the machine has a core to spare (_core_to_spare).
ENV_SWITCH = "FRAMELAB_FIGURE_WORKER"


def _core_to_spare() -> bool:
    """Whether a second process would get a core of its own (1-minute load average).

    The worker trades CPU for wall time: on the 70 x 10 design, run as on an idle 2-core
    machine (SCHED_FIFO, docs/benchmarks.md), 2.1 s instead of 2.7 s end to end for ~10 % more
    CPU (the fork, the results pickled, two processes sharing caches). On a saturated machine
    there is no core to run it on and the extra CPU is all that is left (10 % more wall time at
    a load of 14 on 2 cores), so by default it is only forked with half a core idle on average.
    """
    try:
        load = os.getloadavg()[0]
    except OSError:
        return True
    return (os.cpu_count() or 1) - load >= 0.5


def start_figure_worker() -> FigureWorker | None:
    """Fork a figure worker now, or return None where that is not safe or not wanted.

    Call it early, before the statistics import scipy and statsmodels: those imports and the
    worker's own (matplotlib) then run side by side. A process with other Python threads is
    not forked: a lock one of them holds (the import lock, a logging lock) would stay locked in
    the child. (BLAS and jemalloc threads of numpy and pyarrow are C threads with fork handlers.)
    """
    import multiprocessing
    import tempfile

    switch = os.environ.get(ENV_SWITCH, "auto")
    if switch == "0":
        return None
    if switch != "1" and not _core_to_spare():
        return None
    # Linux only: macOS offers fork, but system frameworks initialised before it may crash the
    # child; Windows has no fork.
    if (
        not sys.platform.startswith("linux")
        or "fork" not in multiprocessing.get_all_start_methods()
    ):
        return None
    if threading.active_count() > 1:
        return None
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    folder = Path(tempfile.mkdtemp(prefix="framelab-figures-"))
    process = ctx.Process(target=_serve, args=(child, folder), name="framelab-figures", daemon=True)
    try:
        process.start()
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    child.close()
    return FigureWorker(process, parent, folder)


class FigureWorker:
    """The parent's handle on a forked worker: hand it results, later collect the PNGs.

    ``submit`` may be called several times (``analyze_choice``'s ``on_stage`` hands over the
    figures of each stage as soon as their tables are final); a later call without ``names``
    asks for every figure not handed over yet. ``collect`` waits for all of them.

    Results and PNGs travel through a private temporary folder and only their names through the
    pipe, so neither side ever blocks on a full pipe while the other is busy.
    """

    def __init__(self, process: BaseProcess, conn: Connection, folder: Path) -> None:
        self._process = process
        self._conn = conn
        self._folder = folder
        self._pending = 0
        self._requests = 0
        self._submitted: set[str] = set()
        self._failed = False
        # What went wrong in the worker (the writer then draws itself); kept for tests and
        # debugging, never printed: the parent's own drawing shows any real error.
        self.errors: list[str] = []

    def submit(self, results: Results, names: Collection[str] | None = None) -> bool:
        """Ask for the PNGs of ``results`` (those in ``names``, or all not yet asked for).

        Returns False, and asks for nothing, if the worker has failed or is gone.
        """
        if self._failed:
            return False
        self._requests += 1
        path = self._folder / f"request-{self._requests}.pickle"
        wanted = None if names is None else set(names)
        try:
            with path.open("wb") as f:
                pickle.dump((results, wanted, set(self._submitted)), f, pickle.HIGHEST_PROTOCOL)
            self._conn.send(str(path))
        except (OSError, EOFError, ValueError, pickle.PicklingError, AttributeError, TypeError):
            self._failed = True
            return False
        self._pending += 1
        if wanted is not None:
            self._submitted |= wanted
        return True

    def collect(self) -> dict[str, bytes] | None:
        """Wait for every PNG asked for; return them by file name, or None if the worker failed."""
        pngs: dict[str, bytes] = {}
        while self._pending:
            self._pending -= 1
            try:
                status, names = self._conn.recv()
            except (OSError, EOFError):
                self._failed = True
                return None
            if status != "ok":
                self._failed = True
                self.errors.append(names)
                continue
            for name in names:
                pngs[name] = (self._folder / name).read_bytes()
        self._submitted.clear()
        return None if self._failed else pngs

    def close(self) -> None:
        """Tell the worker to exit, reap it and remove its folder."""
        with contextlib.suppress(OSError, EOFError, ValueError):
            self._conn.send(None)
        self._conn.close()
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        shutil.rmtree(self._folder, ignore_errors=True)


def _warm_up() -> None:
    """Import what drawing needs and draw one throwaway figure (fonts, text layout, PNG writer).

    pandas is needed to unpickle the results; scipy.special gives the QQ plot's normal
    quantiles without scipy.stats' import.
    """
    import io

    import pandas  # noqa: F401
    import scipy.special  # noqa: F401
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    import analysis.plots.annotation
    import analysis.plots.choice
    import analysis.plots.wtp  # noqa: F401
    from analysis.report.writer import FIGURE_DPI, SAVE_KWARGS

    fig = Figure(figsize=(2.0, 2.0), dpi=FIGURE_DPI)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.errorbar([0.0, 1.0], [0.2, 0.6], yerr=[0.1, 0.1], fmt="o")
    ax.barh([0, 1], [0.3, 0.5])
    ax.set_title("warm-up", fontsize=9)
    ax.set_xlabel("x")
    ax.text(0.5, 0.5, "*", ha="center")
    fig.tight_layout()
    fig.savefig(io.BytesIO(), format="png", **SAVE_KWARGS)


def _serve(conn: Connection, folder: Path) -> None:
    """The worker's loop: warm up, then render what it is asked for until told to stop."""
    # A failed warm-up only costs time; drawing shows the error.
    with contextlib.suppress(Exception):
        _warm_up()
    from analysis.report.writer import figure_jobs, render_pngs

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if message is None:
            return
        try:
            with open(message, "rb") as f:
                # Written by the parent into a folder only this user can read (mkdtemp: 0700).
                results, names, already = pickle.load(f)  # noqa: S301
            if names is None:
                names = {job[0] for job in figure_jobs(results)} - already
            pngs = render_pngs(results, names)
            for name, png in pngs.items():
                (folder / name).write_bytes(png)
            reply: tuple[str, object] = ("ok", sorted(pngs))
        except Exception as exc:  # noqa: BLE001 - reported; the parent draws again and raises
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except OSError:
            return
