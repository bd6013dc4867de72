"""End to end, as a researcher runs it: bots → export → load → statistics.

Runs the real ``framelab`` commands on a fresh SQLite database: the demo study is loaded, 40 bots
complete it with a built-in framing effect, the long export is written, ``analysis.io`` validates it
and ``framelab analyze choice`` reports. The chi-square in ``results.json`` is checked against
scipy applied directly to the exported CSV, so the two halves are checked against each other
rather than against themselves.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from framelab.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Environment of a fresh SQLite-backed platform, schema built by the migrations."""
    from tests.webapp.conftest import make_app

    url = f"sqlite:///{tmp_path / 'pipeline.sqlite'}"
    app = make_app(url)
    with app.app_context():
        from webapp.extensions import db

        db.engine.dispose()
    return {"FRAMELAB_ENV": "testing", "SECRET_KEY": "pipeline", "DATABASE_URL": url}


def _ok(result) -> str:
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


@pytest.mark.slow
def test_bots_export_analyze(env: dict[str, str], tmp_path: Path) -> None:
    runner = CliRunner()
    _ok(runner.invoke(main, ["study", "load", str(DEMO)], env=env))
    _ok(
        runner.invoke(
            main,
            ["bots", "product-choice-demo", "--n", "40", "--seed", "7"]
            + ["--p-target-original", "0.5", "--p-target-summary", "0.9"],
            env=env,
        )
    )
    export = tmp_path / "x.csv"
    _ok(
        runner.invoke(
            main,
            ["export", "product-choice-demo", "--format", "long", "--out", str(export)],
            env=env,
        )
    )

    # The acceptance criterion, read straight from the CSV.
    with export.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 400
    per_pair_format: dict[tuple[str, str], int] = {}
    for r in rows:
        key = (r["pair_id"], r["format"])
        per_pair_format[key] = per_pair_format.get(key, 0) + 1
    assert len({r["pair_id"] for r in rows}) == 10
    assert set(per_pair_format.values()) == {20}
    assert len({(r["participant_id"], r["pair_id"]) for r in rows}) == 400
    assert all(r["wtp_premium_usd"] != "" and r["wtp_premium_pct"] != "" for r in rows)
    assert not any(k in rows[0] for k in ("PROLIFIC_PID", "prolific_pid", "platform_id"))

    # The analysis side accepts the platform's export as it is.
    from analysis.io import load_export

    data = load_export(export)
    assert len(data) == 400

    out = tmp_path / "report"
    _ok(runner.invoke(main, ["analyze", "choice", str(export), "--out", str(out)]))
    results = json.loads((out / "results.json").read_text())
    assert (out / "report.html").exists()
    assert results["meta"]["n_rows_analysed"] == 400

    # Independent check: scipy on the exported 2x2 table (Yates, as R's chisq.test).
    from scipy.stats import chi2_contingency

    table = [[0, 0], [0, 0]]
    for r in rows:
        table[r["format"] == "summary"][int(r["chose_target"])] += 1
    expected = chi2_contingency(table, correction=True)
    chi2 = {row["test"]: row for row in results["tables"]["chi2"]}
    assert chi2["pearson_yates"]["chi2"] == pytest.approx(expected.statistic, rel=1e-9)
    assert chi2["pearson_yates"]["p_val"] == pytest.approx(expected.pvalue, rel=1e-9)
    assert chi2["pearson_yates"]["dof"] == 1
    uncorrected = chi2_contingency(table, correction=False)
    assert chi2["pearson"]["chi2"] == pytest.approx(uncorrected.statistic, rel=1e-9)

    rates = {r["format"]: r["estimate"] for r in results["tables"]["selection_rates"]}
    assert rates["summary"] == pytest.approx(table[1][1] / 200)
    assert rates["original"] == pytest.approx(table[0][1] / 200)
    # The bots' built-in effect (0.9 vs 0.5) is large enough to show at n = 200 per format.
    assert rates["summary"] > rates["original"]
