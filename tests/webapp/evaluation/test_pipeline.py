"""End to end: bots run each demo study, the platform exports it, the analysis reads the export
and writes its tables and figures (``framelab analyze ratings|preferences``)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.webapp.evaluation.conftest import ROOT

pytestmark = pytest.mark.slow
# The analysis half (the `analysis` extra); a web-only install (the `dev` extra) has none of it.
pd = pytest.importorskip("pandas")


def export_to(app, slug: str, fmt: str, path) -> int:
    from webapp.services.export import export_table
    from webapp.services.studies import get_study

    with app.app_context():
        return export_table(get_study(slug), fmt, path)


def test_rating_demo_bots_export_analyze(app, rating_demo, bot_for, tmp_path):
    from framelab.cli import main

    results = [bot_for(rating_demo, f"R{i:02d}", rating_mean=2.0 + i / 3).run() for i in range(6)]
    assert {r.outcome for r in results} == {"completed"}
    csv_path = tmp_path / "ratings.csv"
    assert export_to(app, "rating-demo", "long", csv_path) == 240
    metrics = ROOT / "stimuli" / "studies" / "evaluation" / "rating-demo.metrics.csv"
    out = tmp_path / "report"
    result = CliRunner().invoke(
        main,
        ["analyze", "ratings", str(csv_path), "--metrics", str(metrics), "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "240 ratings, 6 raters, 16 summaries" in result.output
    for name in ("rating_means.png", "metric_tau.png"):
        assert (out / name).stat().st_size > 5000
    export = pd.read_csv(csv_path)
    table = pd.read_csv(out / "rating_table.csv").set_index("system")
    assert list(table.columns) == ["stance", "object", "intensity", "consensus", "reasoning"]
    direct = (
        export.groupby(["system", "dimension", "summary_id"])["rating"]
        .mean()
        .groupby(["system", "dimension"])
        .mean()
    )
    for system in table.index:
        for dim in table.columns:
            assert table.loc[system, dim] == pytest.approx(direct[system, dim])
    icc = pd.read_csv(out / "icc.csv")
    # Every source had exactly three raters: the one-way ICCs use k = 3 and all 16 summaries.
    assert set(icc["n_raters"]) == {3} and set(icc["n_targets"]) == {16}
    # Every dimension gets an ordinal alpha from the exported ratings.
    alpha = pd.read_csv(out / "alpha.csv")
    assert len(alpha) == 5 and alpha["estimate"].notna().all()
    tau = pd.read_csv(out / "metric_tau.csv")
    assert set(tau["n"]) == {12} and len(tau) == 5 * 5  # 5 metrics x 5 dimensions
    payload = json.loads((out / "results.json").read_text())
    assert payload["meta"]["ratings_per_summary"] == 3


def test_preference_demo_bots_export_analyze(app, preference_demo, bot_for, tmp_path):
    from framelab.cli import main

    results = [
        bot_for(preference_demo, f"P{i:02d}", p_choose_a=0.8, p_position=0.2 * (i % 2)).run()
        for i in range(8)
    ]
    assert {r.outcome for r in results} == {"completed"}
    long_path, pairs_path = tmp_path / "long.csv", tmp_path / "pairs.csv"
    assert export_to(app, "preference-demo", "long", long_path) == 24
    assert export_to(app, "preference-demo", "pairs", pairs_path) == 6
    # An LLM judge that always prefers the generated summary, in both orders.
    judge = tmp_path / "judge.jsonl"
    pairs = pd.read_csv(pairs_path)
    with judge.open("w") as fh:
        for _, p in pairs.iterrows():
            for order in ("gt_first", "generated_first"):
                rec = {
                    "item_id": p["pair_id"],
                    "model": "demo-judge",
                    "task": "judge-pair",
                    "order": order,
                    "label": "generated",
                    "input": {"human_summary": p["summary_a"], "generated_summary": p["summary_b"]},
                }
                fh.write(json.dumps(rec) + "\n")
    out = tmp_path / "report"
    args = ["analyze", "preferences", str(long_path), "--pairs", str(pairs_path)]
    args += ["--judge-records", str(judge), "--reference", "human", "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    export = pd.read_csv(long_path)
    share = (export["chosen_system"] == "human").mean()
    assert f"{share:.1%} prefer 'human'" in result.output
    assert "demo-judge: Generated 100%" in result.output
    for name in ("preference_by_bin.png", "outcomes_by_bin.png", "order_consistency.png"):
        assert (out / name).stat().st_size > 5000
    payload = json.loads((out / "results.json").read_text())
    assert payload["meta"]["pairs_with_balanced_orders"] == 6
    by_bin = pd.read_csv(out / "preference_by_bin.csv")
    overall = by_bin[by_bin["bin"] == "all"]
    assert overall["n"].sum() == 24
    assert (overall["n_reference"].sum() / 24) == pytest.approx(share)
    shares = pd.read_csv(out / "outcome_shares.csv")
    assert set(shares["judge"]) == {"humans", "demo-judge"}
    assert shares.groupby("judge")["n"].sum().to_dict() == {"demo-judge": 6, "humans": 6}
    consistency = pd.read_csv(out / "order_consistency.csv")
    assert len(consistency) == 8 and (consistency["n"] == 3).all()
