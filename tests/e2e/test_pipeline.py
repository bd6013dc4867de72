"""The whole path through the real console scripts: migrate → load → bots → export → analysis.

This is the issue's Done-when check run as a user would (``framelab bots … --n 40`` then
``framelab export … --format long``), followed by the analysis package reading the export and
recovering the simulated effect.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_bots_export_analysis_from_the_command_line(tmp_path):
    pytest.importorskip("pandas")
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite'}",
        "SECRET_KEY": "pipeline-test",
        "FRAMELAB_ENV": "development",
    }
    _run("flask", "--app", "webapp", "db", "upgrade", env=env)
    out = _run("framelab", "study", "load", "stimuli/studies/product-choice-demo.yaml", env=env)
    assert "created: product-choice-demo" in out
    out = _run(
        "framelab",
        "bots",
        "product-choice-demo",
        "--n",
        "40",
        "--seed",
        "1",
        "--p-target-summary",
        "0.837",
        "--p-target-original",
        "0.523",
        "--wtp-target-shift-pct",
        "4.5",
        env=env,
    )
    assert "completed 40" in out
    csv_path = tmp_path / "x.csv"
    out = _run(
        "framelab",
        "export",
        "product-choice-demo",
        "--format",
        "long",
        "--out",
        str(csv_path),
        env=env,
    )
    assert "wrote 400 rows" in out
    assert "completed 40" in _run("flask", "--app", "webapp", "study", "list", env=env)

    from analysis.io import load_export
    from analysis.stats.choice import chi2_choice

    df = load_export(csv_path)
    assert len(df) == 400
    assert set(Counter(zip(df["pair_id"], df["format"], strict=True)).values()) == {20}
    assert not df.duplicated(["participant_id", "pair_id"]).any()
    assert df["wtp_premium_usd"].notna().all()
    res = chi2_choice(df, levels=["original", "summary"]).iloc[0]
    # Simulated 83.7% vs 52.3%: a difference of 0.314 that the test must recover.
    assert res["ci_low"] < 0.314 < res["ci_high"]
    assert res["p_val"] < 1e-6

    # The report command on the same file; its chi-square is checked against scipy applied to
    # the exported 2x2 table directly, so the two halves are checked against each other.
    import json

    from scipy.stats import chi2_contingency

    report = tmp_path / "report"
    _run("framelab", "analyze", "choice", str(csv_path), "--out", str(report), env=env)
    results = json.loads((report / "results.json").read_text())
    assert (report / "report.html").exists()
    assert results["meta"]["n_rows_analysed"] == 400
    table = [[0, 0], [0, 0]]
    for fmt, chose in zip(df["format"], df["chose_target"], strict=True):
        table[fmt == "summary"][int(chose)] += 1
    chi2 = {row["test"]: row for row in results["tables"]["chi2"]}
    for test, correction in (("pearson_yates", True), ("pearson", False)):
        expected = chi2_contingency(table, correction=correction)
        assert chi2[test]["chi2"] == pytest.approx(expected.statistic, rel=1e-9)
        assert chi2[test]["p_val"] == pytest.approx(expected.pvalue, rel=1e-9)
    rates = {r["format"]: r["estimate"] for r in results["tables"]["selection_rates"]}
    assert rates["summary"] == pytest.approx(table[1][1] / 200)
    assert rates["original"] == pytest.approx(table[0][1] / 200)
