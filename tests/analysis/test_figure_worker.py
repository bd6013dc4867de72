"""The forked figure worker draws the same PNGs as the writer, and never costs a figure.

``framelab analyze`` forks a worker that draws a report's figures while the statistics run
(``analysis.report.figure_worker``, for the < 3 s goal of the 70 x 10 design). What must
hold: every figure handed over at a stage of ``analyze_choice`` is final then (the same bytes as
drawn from the finished results), the worker's PNGs are the writer's bytes, and a worker that
fails or dies only means the writer draws itself.
"""

from __future__ import annotations

import pickle
import threading

import pytest

from analysis.report.pipeline import CHOICE_TABLE_ORDER, analyze_choice
from analysis.report.study_sections import stage_figures
from analysis.report.writer import render_pngs, write_results
from analysis.simulate import simulate_choice_study


@pytest.fixture(scope="module")
def staged():
    """Final results of a small study and pickled snapshots of them at each stage."""
    snapshots: dict[str, bytes] = {}

    def on_stage(results, stage):
        snapshots[stage] = pickle.dumps(results)

    data = simulate_choice_study(n_participants=24, n_pairs=6, seed=3)
    final = analyze_choice(data, on_stage=on_stage)
    return final, {stage: pickle.loads(blob) for stage, blob in snapshots.items()}


@pytest.fixture(scope="module")
def drawn(staged):
    """Every figure of the final results, drawn once for the tests that compare with them."""
    return render_pngs(staged[0])


def test_each_stage_figures_are_final_when_handed_over(staged, drawn):
    final, snapshots = staged
    assert list(snapshots) == ["wtp", "choice"]
    staged_names = set()
    for stage, partial in snapshots.items():
        names = stage_figures(partial, stage)
        early = render_pngs(partial, set(names))
        assert names and set(early) == set(names), stage
        assert early == {n: drawn[n] for n in names}, f"{stage}: figure changed after its stage"
        staged_names |= set(names)
    # Every figure of the finished report belongs to a stage.
    assert set(drawn) == staged_names


def test_stage_order_leaves_the_tables_in_report_order(staged):
    final, _ = staged
    # The pipeline's one list of table order (WTP fitted first must not reorder the report).
    assert list(final.tables) == [t for t in CHOICE_TABLE_ORDER if t in final.tables]
    assert len(final.tables) >= 9
    assert list(final.tables)[:4] == ["exclusions", "exclusion_rules", "speed", "selection_rates"]


@pytest.fixture(autouse=True)
def _always_fork(monkeypatch):
    # By default the worker is only forked on a machine with an idle core; these tests need it.
    monkeypatch.setenv("FRAMELAB_FIGURE_WORKER", "1")


def _worker():
    from analysis.report.figure_worker import start_figure_worker

    if threading.active_count() > 1:
        pytest.skip("another thread runs in this test process: the worker is not forked")
    worker = start_figure_worker()
    assert worker is not None
    return worker


def test_worker_writes_the_writers_bytes(staged, drawn, tmp_path):
    final, snapshots = staged
    write_results(final, tmp_path / "here", title="t")
    worker = _worker()
    try:
        assert worker.submit(snapshots["wtp"], stage_figures(snapshots["wtp"], "wtp"))
        written = write_results(final, tmp_path / "worker", title="t", worker=worker)
        assert worker.errors == []
    finally:
        worker.close()
    pngs = sorted(name for name in written if name.endswith(".png"))
    assert pngs == sorted(drawn)
    for name in written:
        if name == "report.html":
            continue  # its "Generated" time differs
        a, b = ((tmp_path / where / name).read_bytes() for where in ("worker", "here"))
        if name == "tables.tex":
            a, b = a.split(b"\n", 1)[1], b.split(b"\n", 1)[1]  # after the header's time
        assert a == b, name


def test_a_dead_worker_costs_no_figure(staged, drawn, tmp_path):
    final, _ = staged
    worker = _worker()
    worker._process.kill()
    worker._process.join()
    try:
        written = write_results(final, tmp_path, title="t", worker=worker)
    finally:
        worker.close()
    assert sorted(n for n in written if n.endswith(".png")) == sorted(drawn)
    for name, png in drawn.items():
        assert (tmp_path / name).read_bytes() == png


def test_the_switch_and_the_load_decide_whether_to_fork(monkeypatch):
    from analysis.report import figure_worker

    monkeypatch.setenv("FRAMELAB_FIGURE_WORKER", "0")
    assert figure_worker.start_figure_worker() is None
    monkeypatch.delenv("FRAMELAB_FIGURE_WORKER")
    monkeypatch.setattr(figure_worker.os, "getloadavg", lambda: (99.0, 99.0, 99.0))
    assert figure_worker.start_figure_worker() is None  # auto: no idle core, no worker
    monkeypatch.setattr(figure_worker.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    if threading.active_count() == 1:
        worker = figure_worker.start_figure_worker()
        assert worker is not None
        worker.close()


def test_a_failing_worker_is_replaced_by_the_writer(staged, drawn, tmp_path):
    final, _ = staged
    worker = _worker()
    try:
        # Results the worker cannot draw (rates without any test of them): it reports an error ...
        broken = pickle.loads(pickle.dumps(final))
        broken.tables = {"selection_rates": final.tables["selection_rates"]}
        assert worker.submit(broken, ["format_rates.png"])
        written = write_results(final, tmp_path, title="t", worker=worker)
        assert worker.errors and "Error" in worker.errors[0]
    finally:
        worker.close()
    # ... and the writer drew every figure itself.
    assert sorted(n for n in written if n.endswith(".png")) == sorted(drawn)


def test_the_command_with_and_without_the_worker_writes_the_same_files(tmp_path, monkeypatch):
    # The real command with its forked worker and stage hand-over in a fresh process (so this
    # runs even where the test process has other threads), against drawing in this process,
    # byte for byte.
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    from click.testing import CliRunner

    from framelab.cli import main

    export = tmp_path / "choice.csv"
    simulate_choice_study(n_participants=24, n_pairs=6, seed=3).to_csv(export, index=False)
    root = Path(__file__).resolve().parents[2]
    outs = {switch: tmp_path / f"worker{switch}" for switch in ("0", "1")}
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "MPLBACKEND": "Agg",
        "FRAMELAB_FIGURE_WORKER": "1",
    }
    code = "import sys; from framelab.cli import main; sys.exit(main())"
    args = ["analyze", "choice", str(export), "--out"]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args, str(outs["1"])],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    monkeypatch.setenv("FRAMELAB_FIGURE_WORKER", "0")
    here = CliRunner().invoke(main, [*args, str(outs["0"])])
    assert here.exit_code == 0, here.output
    names = sorted(p.name for p in outs["0"].iterdir())
    assert names == sorted(p.name for p in outs["1"].iterdir())
    assert {"format_rates.png", "pair_rates.png", "wtp_differences.png"} <= set(names)
    # The report and its LaTeX tables name their time and command line (with its --out folder).
    generated = re.compile(rb"Generated \S+ by <code>.*?</code>")
    for name in names:
        a, b = ((outs[s] / name).read_bytes() for s in ("0", "1"))
        if name == "report.html":
            a, b = generated.sub(b"", a), generated.sub(b"", b)
        if name == "tables.tex":
            a, b = a.split(b"\n", 1)[1], b.split(b"\n", 1)[1]
        if name == "results.json":
            continue  # its timings differ
        assert a == b, name
