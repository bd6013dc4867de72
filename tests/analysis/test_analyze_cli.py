"""``framelab analyze choice|annotations`` end to end on simulated exports, plus the figures."""

from __future__ import annotations

import json

import matplotlib
import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.simulate import simulate_choice_study
from framelab.cli import main
from tests.analysis.annotation_data import simulate_annotation_study
from tests.analysis.stats.helpers import make_gee_never_converge

matplotlib.use("Agg")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="module")
def choice_export(tmp_path_factory):
    data = simulate_choice_study(
        n_participants=60, n_pairs=10, seed=11, share_incomplete=0.05, share_failed_quiz=0.05
    )
    path = tmp_path_factory.mktemp("export") / "choice_long.csv"
    data.to_csv(path, index=False)
    return path, data


@pytest.fixture(scope="module")
def default_report(choice_export, tmp_path_factory):
    """``framelab analyze choice`` with its defaults on the simulated export, run once."""
    out = tmp_path_factory.mktemp("default") / "report"
    result = CliRunner().invoke(
        main, ["analyze", "choice", str(choice_export[0]), "--out", str(out)]
    )
    return out, result


def test_choice_report_from_long_export(choice_export, default_report):
    from analysis.exclusions import exclude_choice
    from analysis.stats.choice import chi2_choice
    from analysis.stats.wtp import wtp_mixed

    _, data = choice_export
    out, result = default_report
    assert result.exit_code == 0, result.output
    assert "chi2(1) (Yates)" in result.output and "WTP (crossed_sparse" in result.output
    # Satterthwaite t and the singular verdict are on the CLI line.
    assert "t(" in result.output and "not singular" in result.output
    for name in (
        "results.json",
        "report.html",
        "chi2.csv",
        "by_pair.csv",
        "wtp_model.csv",
        "exclusions.csv",
        "clustered.csv",
        "pair_rates.png",
        "format_rates.png",
        "wtp_differences.png",
        "wtp_diagnostics.png",
    ):
        assert (out / name).stat().st_size > 0, name

    payload = json.loads((out / "results.json").read_text())
    kept, _ = exclude_choice(data)
    # Same numbers as calling the statistics directly, at full precision.
    direct_chi = chi2_choice(kept).iloc[0]
    assert payload["tables"]["chi2"][0]["chi2"] == float(direct_chi["chi2"])
    assert payload["tables"]["chi2"][0]["test"] == "pearson_yates"
    direct_wtp = wtp_mixed(kept).iloc[0]
    assert payload["tables"]["wtp_model"][0]["estimate"] == pytest.approx(
        direct_wtp["estimate"], rel=1e-9
    )
    exclusions = {row["reason"]: row["n_participants"] for row in payload["tables"]["exclusions"]}
    assert exclusions == {"status not completed": 3, "failed comprehension quiz": 3, "total": 6}
    assert payload["meta"]["n_participants_analysed"] == 54
    assert payload["meta"]["wtp_model_ran"]["model"] == "crossed_sparse"
    assert payload["meta"]["wtp_model_ran"]["singular"] is False
    assert payload["tables"]["wtp_model"][0]["singular"] is False
    assert payload["meta"]["versions"]["statsmodels"]

    html = (out / "report.html").read_text()
    assert "Model that ran: crossed_sparse" in html and "statsmodels" in html
    assert "Satterthwaite df" in html and "Not singular" in html
    assert '<img src="pair_rates.png"' in html and "failed comprehension quiz" in html
    csv = pd.read_csv(out / "by_pair.csv")
    assert len(csv) == 10 and {"p_adj", "rate_summary"} <= set(csv.columns)


def test_choice_report_from_tidy_csv_with_options(runner, choice_export, tmp_path):
    _, data = choice_export
    tidy = tmp_path / "tidy.csv"
    data[["participant_id", "pair_id", "format", "chose_target", "wtp_premium_pct"]].to_csv(
        tidy, index=False
    )
    out = tmp_path / "tidy_report"
    result = runner.invoke(
        main,
        [
            "analyze",
            "choice",
            str(tidy),
            "--out",
            str(out),
            "--wtp-log",
            "--wtp-model",
            "pair_fixed",
            "--no-gee",
            "--no-figures",
            "--padjust",
            "fdr_bh",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "results.json").read_text())
    row = payload["tables"]["wtp_model"][0]
    assert row["model"] == "pair_fixed" and row["transform"] == "log"
    assert "clustered" not in payload["tables"]
    assert payload["meta"]["n_rows_analysed"] == len(data)  # nothing to exclude on
    assert not list(out.glob("*.png"))


def test_choice_rejects_bad_input_naming_columns(runner, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("participant_id,pair_id,format,choice\n1,a,original,1\n", encoding="utf-8")
    result = runner.invoke(main, ["analyze", "choice", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code != 0
    assert "chose_target" in result.output and "wtp_premium_pct" in result.output


def test_choice_refuses_a_long_export_without_study_slug(runner, choice_export, tmp_path):
    _, data = choice_export
    path = tmp_path / "no_slug.csv"
    data.drop(columns=["study_slug"]).to_csv(path, index=False)
    result = runner.invoke(main, ["analyze", "choice", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and result.exc_info[0] is SystemExit, result.exc_info
    assert "no_slug.csv" in result.output and "['study_slug']" in result.output
    assert not (tmp_path / "o").exists()


def test_annotation_report_from_export_and_predictions(runner, tmp_path):
    labels, preds = simulate_annotation_study(n_items=80, seed=4)
    labels.loc[0, "surplus"] = 1
    export, predictions = tmp_path / "labels.csv", tmp_path / "preds.csv"
    labels.to_csv(export, index=False)
    preds.to_csv(predictions, index=False)
    out = tmp_path / "ann"
    result = runner.invoke(
        main,
        [
            "analyze",
            "annotations",
            "--export",
            str(export),
            "--predictions",
            str(predictions),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Fleiss' kappa" in result.output and "model-a: r =" in result.output
    payload = json.loads((out / "results.json").read_text())
    tables = payload["tables"]
    assert {
        "items",
        "shift_distribution",
        "majority_shift",
        "agreement",
        "annotators",
        "human_model",
        "model_matrix",
        "model_shift_rates",
    } <= set(tables)
    assert tables["exclusions"][0] == {
        "reason": "surplus label",
        "n_rows": 1,
        "n_participants": 1,
        "share_rows": 1 / 400,
    }
    assert sum(r["n_items"] for r in tables["shift_distribution"]) == 79  # one item has 4 labels
    for name in (
        "shift_distribution.png",
        "majority_shift.png",
        "human_model.png",
        "model_heatmap.png",
        "report.html",
    ):
        assert (out / name).exists(), name


def test_annotation_report_from_mturk_batches(runner, tmp_path):
    labels, preds = simulate_annotation_study(n_items=30, seed=5)
    batch = pd.DataFrame(
        {
            "HITId": labels["item_id"],
            "WorkerId": labels["participant_id"].str.upper(),
            "AssignmentStatus": "Approved",
            "Input.item": labels["item_id"],
            "Input.base": labels["base_sentiment"].str.title(),
            "Answer.label": labels["label"].str.upper(),
        }
    )
    first, second = tmp_path / "b1.csv", tmp_path / "b2.csv"
    batch.iloc[:75].to_csv(first, index=False)
    batch.iloc[75:].to_csv(second, index=False)
    preds_path = tmp_path / "preds.csv"
    preds.to_csv(preds_path, index=False)
    out = tmp_path / "mturk"
    result = runner.invoke(
        main,
        [
            "analyze",
            "annotations",
            "--mturk",
            str(first),
            "--mturk",
            str(second),
            "--item-col",
            "Input.item",
            "--label-col",
            "Answer.label",
            "--base-col",
            "Input.base",
            "--predictions",
            str(preds_path),
            "--model-shift",
            "opposite",
            "--model-shift",
            "neutral",
            "--human-shift",
            "opposite",
            "--human-shift",
            "neutral",
            "--out",
            str(out),
            "--no-figures",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "results.json").read_text())
    assert payload["meta"]["n_items"] == 30 and payload["meta"]["n_labels_analysed"] == 150
    assert payload["meta"]["model_shift_labels"] == ["opposite", "neutral"]
    assert payload["meta"]["human_shift_labels"] == ["opposite", "neutral"]
    items = pd.read_csv(out / "items.csv")
    # With --human-shift neutral every departure from the base sentiment counts …
    expected = (labels["label"] != labels["base_sentiment"]).groupby(labels["item_id"]).sum()
    assert items.set_index("item_id")["shift_count"].to_dict() == expected.to_dict()
    # … by default only votes for the opposite sentiment (002 §2.3).
    default = tmp_path / "default"
    args = ["analyze", "annotations", "--mturk", str(first), "--mturk", str(second),
            "--item-col", "Input.item", "--label-col", "Answer.label", "--base-col",
            "Input.base", "--out", str(default), "--no-figures"]  # fmt: skip
    assert runner.invoke(main, args).exit_code == 0
    opposite = {"positive": "negative", "negative": "positive"}
    paper = (labels["label"] == labels["base_sentiment"].map(opposite)).groupby(labels["item_id"])
    counted = pd.read_csv(default / "items.csv").set_index("item_id")["shift_count"]
    assert counted.to_dict() == paper.sum().to_dict()


def test_annotations_needs_exactly_one_source(runner, tmp_path):
    result = runner.invoke(main, ["analyze", "annotations", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "either --export" in result.output


def test_plots_draw_bars_intervals_and_stars():
    import matplotlib.pyplot as plt

    from analysis.plots.annotation import plot_human_model_correlation, plot_model_heatmap
    from analysis.plots.choice import plot_pair_rates, significance_stars
    from analysis.stats.choice import choice_by_pair

    assert [significance_stars(p) for p in (0.2, 0.04, 0.009, 0.0001, float("nan"))] == [
        "",
        "*",
        "**",
        "***",
        "",
    ]
    by_pair = choice_by_pair(simulate_choice_study(n_participants=200, n_pairs=4, seed=0))
    fig, ax = plt.subplots()
    assert plot_pair_rates(by_pair, ax=ax) is ax
    assert len(ax.patches) == 8  # 4 pairs x 2 formats
    texts = [t.get_text() for t in ax.texts]
    assert texts == [significance_stars(p) for p in by_pair["p_adj"] if significance_stars(p)]
    plt.close(fig)

    corr = pd.DataFrame(
        {
            "model": ["a", "b"],
            "estimate": [0.6, 0.1],
            "ci_low": [0.4, -0.1],
            "ci_high": [0.75, 0.3],
            "p_val": [1e-5, 0.4],
        }
    )
    fig, ax = plt.subplots()
    plot_human_model_correlation(corr, ax=ax)
    assert [t.get_text() for t in ax.texts] == ["***"]
    plt.close(fig)
    matrix = pd.DataFrame(
        {
            "model_a": ["a", "a", "b", "b"],
            "model_b": ["a", "b", "a", "b"],
            "estimate": [1.0, 0.3, 0.3, 1.0],
        }
    )
    fig, ax = plt.subplots()
    plot_model_heatmap(matrix, ax=ax)
    assert sorted(t.get_text() for t in ax.texts) == ["0.30", "0.30", "1.00", "1.00"]
    plt.close(fig)


def test_failed_robustness_model_is_reported_not_fatal(monkeypatch):
    from analysis.report.pipeline import analyze_choice

    make_gee_never_converge(monkeypatch)
    results = analyze_choice(simulate_choice_study(n_participants=30, seed=2))
    assert "clustered" not in results.tables
    assert results.meta["clustered_model"].startswith(
        "not reported: ConvergenceError: GEE did not converge"
    )
    assert "chi2" in results.tables and "wtp_model" in results.tables


def test_failed_wtp_model_is_reported_and_the_rest_written(
    runner, choice_export, tmp_path, monkeypatch
):
    # A WTP convergence failure must not abort everything (no folder, the valid choice results
    # lost): its section says why and the rest is written.
    from analysis.stats import wtp

    def never_converges(*args, **kwargs):
        raise wtp.ConvergenceError("sparse crossed REML: Nelder-Mead did not converge (test)")

    monkeypatch.setattr(wtp, "wtp_mixed", never_converges)
    path, _ = choice_export
    out = tmp_path / "report"
    result = runner.invoke(
        main, ["analyze", "choice", str(path), "--out", str(out), "--no-figures"]
    )
    assert result.exit_code == 0, result.output
    assert "WTP model: not reported (ConvergenceError" in result.output
    payload = json.loads((out / "results.json").read_text())
    assert "wtp_model" not in payload["tables"] and "chi2" in payload["tables"]
    assert payload["meta"]["wtp_model_failed"].startswith("ConvergenceError: sparse crossed")
    html = (out / "report.html").read_text()
    assert "The mixed model was not reported" in html and "did not converge (test)" in html
    assert (out / "chi2.csv").stat().st_size > 0 and (out / "wtp_by_format.csv").exists()


def test_singular_wtp_fit_is_said_on_the_cli_line_and_in_the_report(runner, tmp_path):
    from pathlib import Path

    data = pd.read_csv(Path(__file__).parent / "r" / "data" / "singular_pair.csv")
    data["chose_target"] = (data["wtp_premium_pct"] > data["wtp_premium_pct"].median()).astype(int)
    tidy = tmp_path / "singular.csv"
    data.to_csv(tidy, index=False)
    out = tmp_path / "report"
    result = runner.invoke(
        main, ["analyze", "choice", str(tidy), "--out", str(out), "--no-figures", "--no-gee"]
    )
    assert result.exit_code == 0, result.output
    assert "SINGULAR fit" in result.output
    html = (out / "report.html").read_text()
    assert "Singular fit: a variance component is at the boundary" in html


def test_underflowed_p_is_printed_as_a_bound_not_zero():
    from analysis.report.console import format_p
    from analysis.report.tables import report_table

    assert format_p(0.0) == "< 1e-300"
    assert format_p(0.0123) == "= 0.0123"
    table = report_table(pd.DataFrame({"p_val": [0.0, 0.5], "estimate": [0.0, 1.0]}))
    # The report prints p by APA's rule: an underflowed p is "< .001"; the estimate 0 stays 0.
    assert table.cells["p_val"].tolist() == ["< .001", ".500"]
    assert table.cells["estimate"].tolist() == ["0.00", "1.00"]


def test_levels_option_sets_the_reference_explicitly(
    runner, choice_export, default_report, tmp_path
):
    path, _ = choice_export
    out = tmp_path / "flipped"
    args = ["analyze", "choice", str(path), "--no-figures", "--no-gee", "--out"]
    result = runner.invoke(main, [*args, str(out), "--levels", "summary,original"])
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "results.json").read_text())
    levels = payload["meta"]["format_levels"]
    assert (levels["levels"], levels["reference"], levels["source"]) == (
        ["summary", "original"],
        "summary",
        "given",
    )
    assert payload["tables"]["wtp_model"][0]["contrast"] == "original vs summary"
    plain = json.loads((default_report[0] / "results.json").read_text())
    assert plain["meta"]["format_levels"]["source"].startswith("default (original, summary")
    flipped_rd = payload["tables"]["effects"][0]["estimate"]
    assert flipped_rd == pytest.approx(-plain["tables"]["effects"][0]["estimate"])
    bad = runner.invoke(main, [*args, str(tmp_path / "bad"), "--levels", "summary"])
    assert bad.exit_code != 0 and "REFERENCE,TREATMENT" in bad.output


def test_wtp_slopes_option_reports_the_final_model_and_its_lr_test(runner, tmp_path):
    from pathlib import Path

    data = pd.read_csv(Path(__file__).parent / "r" / "data" / "slopes_70x10.csv")
    data["chose_target"] = (data["wtp_premium_pct"] > data["wtp_premium_pct"].median()).astype(int)
    tidy = tmp_path / "slopes.csv"
    data.to_csv(tidy, index=False)
    out = tmp_path / "report"
    args = ["analyze", "choice", str(tidy), "--out", str(out), "--no-figures", "--no-gee"]
    result = runner.invoke(main, [*args, "--wtp-slopes"])
    assert result.exit_code == 0, result.output
    assert "WTP with random slopes summary vs original: final model" in result.output
    assert "chi2(2)" in result.output
    payload = json.loads((out / "results.json").read_text())
    row = payload["tables"]["wtp_slopes"][0]
    # lme4 (tests/analysis/r/lme4_reference.csv): maximal SE 1.04666; the maximal model is
    # singular, so the reported one is the zero-correlation model (SE 0.985584), and so is the
    # test of its two slope variances (anova() in tests/analysis/r/lme4_printed_formula.csv).
    assert row["maximal_se"] == pytest.approx(1.0466600808476425, rel=1e-4)
    assert row["se"] == pytest.approx(0.98558425522028725, rel=1e-4)
    assert "(1 + format_summary || participant_id)" in row["formula"]
    assert "simplified" in result.output and "format_summary = 1 for summary" in result.output
    assert row["lrt_chisq"] == pytest.approx(27.680724926577568, rel=1e-4)
    assert row["lrt_df"] == 2
    assert "Random slopes of format" in (out / "report.html").read_text()


def test_analysis_commands_do_not_import_flask():
    """`framelab analyze` resolves without webapp.cli and Flask (0.3 s of every report)."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from framelab.cli import main\n"
        "try:\n"
        "    main(['analyze', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('flask', 'webapp.cli') if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": ""},
    )
    assert "Analyse human data" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"
