"""The report a reviewer reads: labelled tables, APA paragraphs, honest figures."""

from __future__ import annotations

import html as htmllib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from analysis.report import apa
from analysis.report.tables import column_label, report_table, split_columns
from analysis.simulate import simulate_choice_study


@pytest.fixture(scope="module")
def choice_results():
    from analysis.report.pipeline import analyze_choice

    return analyze_choice(simulate_choice_study(n_participants=40, n_pairs=10, seed=8))


def _headers(table) -> list[str]:
    return [table.labels[c] for c in table.cells.columns]


def test_contrast_tables_name_the_contrast_the_scale_and_both_ps(choice_results):
    glmm = choice_results.tables["choice_glmm"]
    main = ("contrast", "estimate", "ci_low", "ci_high", "z", "p_val", "p_adj")
    shown = report_table(glmm, name="choice_glmm", columns=list(main), padjust="holm")
    # One contrast: a row of more columns than fit across, so one line per quantity.
    assert shown.cells["quantity"].tolist() == [
        "Contrast",
        "Odds ratio (conditional)",
        "OR 95% CI lower",
        "OR 95% CI upper",
        "z",
        "p",
        "p (Holm-adjusted)",
    ]
    assert glmm["contrast"].tolist() == ["summary vs original"]
    assert column_label(None, "p_val") == "p" and column_label("x", "novel_col") == "novel_col"


def test_wide_wtp_table_is_split_into_main_and_details(choice_results):
    table = choice_results.tables["wtp_model"]
    assert table.shape[1] > 30
    main, details = split_columns(table)
    assert len(main) <= 14 and main[:3] == ["contrast", "estimate", "se"]
    assert set(main) | set(details) == set(table.columns)
    assert details[0] == "contrast"  # the row key is repeated in the details table
    shown = report_table(table, name="wtp_model", columns=main, unit="percentage points")
    # One row of more columns than fit across: one line per quantity, labelled.
    assert list(shown.cells.columns) == ["quantity", "value"]
    quantities = shown.cells["quantity"].tolist()
    assert "Difference b (percentage points)" in quantities and "df (Satterthwaite)" in quantities


def test_apa_numbers_match_the_tables(choice_results):
    t = choice_results.tables
    chi = t["chi2"].iloc[0]
    rd = t["effects"].set_index("effect").loc["risk_difference"]
    text = apa.chi2_sentence(chi, [rd])
    assert f"χ²(1, N = {int(chi['n'])}) = {chi['chi2']:.2f}" in text
    assert f"summary − original RD = {apa.bounded(rd['estimate'])}, 95% CI [" in text
    assert "For comparison with the seed study" in text and "Yates" in text
    rates = t["selection_rates"].to_dict("records")
    text = apa.rates_sentence(rates)
    summary = next(r for r in rates if r["format"] == "summary")
    n_chose, n = int(summary["n_chose"]), int(summary["n"])
    assert f"{summary['estimate']:.1%} of the summary trials ({n_chose}/{n})" in text
    row = t["wtp_model"].iloc[0]
    text = apa.wtp_sentence([row], "percentage points")
    assert f"b = {row['estimate']:.2f} percentage points, SE = {row['se']:.2f}" in text
    assert f"t({row['df']:.1f}) = {row['statistic']:.2f}" in text
    assert f"d = {row['d_standardised']:.2f}" in text and "adjusted" not in text
    gee = apa.gee_sentence(t["clustered"].to_dict("records"))
    assert f"OR = {t['clustered']['estimate'].iloc[0]:.2f}" in gee


def test_apa_p_and_bounded_numbers():
    assert [apa.p_apa(p) for p in (0.0321, 0.0004, 0.0, 1.0, float("nan"))] == [
        "p = .032",
        "p < .001",
        "p < .001",
        "p > .999",
        "p = NA",
    ]
    assert (apa.bounded(0.171), apa.bounded(-0.05), apa.bounded(1.0)) == (".17", "−.05", "1.00")


def test_a_new_model_table_slots_in_with_a_sentence(choice_results, tmp_path):
    from analysis.report.writer import write_results

    results = choice_results
    extra = pd.DataFrame(
        {
            "effect": ["format[summary]"],
            "estimate": [0.81],
            "se": [0.2],
            "statistic": [4.05],
            "p_val": [5e-5],
            "ci_low": [0.42],
            "ci_high": [1.2],
            **{f"detail_{i}": [i] for i in range(15)},
        }
    )
    tables = {**results.tables, "choice_bayes": extra}
    meta = {**results.meta, "other_model_failed": "ConvergenceError: did not converge"}
    copy = type(results)(kind="choice", tables=tables, meta=meta, plot_data=results.plot_data)
    write_results(copy, tmp_path, title="t", figures=False)
    page = htmllib.unescape((tmp_path / "report.html").read_text())
    assert "Choice bayes: format[summary] b = 0.81, SE = 0.20, z = 4.05, p < .001" in page
    assert "Choice bayes: details" in page  # 22 columns: split
    assert "Not reported: ConvergenceError: did not converge" in page


def test_figure_captions_say_which_test_gives_the_stars(choice_results):
    from analysis.report.study_sections import figure_jobs

    def without(*names):
        return type(choice_results)(
            kind="choice",
            tables={k: v for k, v in choice_results.tables.items() if k not in names},
            meta=choice_results.meta,
            plot_data=choice_results.plot_data,
        )

    captions = {name: caption for name, caption, *_ in figure_jobs(choice_results)}
    # The GLMM respects both clusterings, so its p gives the stars when it was fitted ...
    assert "logistic GLMM" in captions["format_rates.png"]
    assert "Fisher" in captions["pair_rates.png"] and "Holm" in captions["pair_rates.png"]
    assert "wtp.png" not in captions and "wtp_differences.png" in captions
    assert "QQ plot" in captions["wtp_diagnostics.png"]
    # ... then the GEE (clustered by participant), and only then the chi-square, labelled so.
    caption = dict((n, c) for n, c, *_ in figure_jobs(without("choice_glmm")))["format_rates.png"]
    assert "GEE" in caption
    no_models = without("choice_glmm", "clustered")
    caption = dict((n, c) for n, c, *_ in figure_jobs(no_models))["format_rates.png"]
    assert "treats trials as independent" in caption


def test_wtp_difference_figure_draws_every_participant(choice_results):
    from analysis.plots.wtp import plot_wtp_differences

    per = choice_results.plot_data["wtp_differences"]
    assert set(per["contrast"]) == {"summary vs original"}
    fig, ax = plt.subplots()
    plot_wtp_differences(
        per,
        choice_results.tables["wtp_differences"],
        effect=choice_results.tables["wtp_model"],
        ax=ax,
    )
    points = ax.collections[0].get_offsets()
    assert len(points) == len(per)
    np.testing.assert_allclose(np.sort(points[:, 1]), np.sort(per["difference"]))
    plt.close(fig)


def test_long_model_names_are_horizontal_bars_and_heatmap_labels_contrast():
    from analysis.plots.annotation import (
        contrast_text_color,
        plot_human_model_correlation,
        plot_model_heatmap,
    )

    names = ["meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3"]
    corr = pd.DataFrame(
        {
            "model": names,
            "estimate": [0.6, 0.1],
            "ci_low": [0.4, -0.1],
            "ci_high": [0.75, 0.3],
            "p_val": [1e-5, 0.4],
        }
    )
    fig, ax = plt.subplots()
    plot_human_model_correlation(corr, ax=ax)
    by_position = {
        float(y): t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels(), strict=True)
    }
    assert by_position[max(by_position)] == names[0]  # first model on top
    assert set(by_position.values()) == set(names)
    widths = sorted(p.get_width() for p in ax.patches)
    assert widths == pytest.approx([0.1, 0.6])  # bars run along x
    plt.close(fig)
    matrix = pd.DataFrame(
        {
            "model_a": ["a", "a", "b", "b"],
            "model_b": ["a", "b", "a", "b"],
            "estimate": [1.0, 0.0, 0.0, 1.0],
        }
    )
    fig, ax = plt.subplots()
    plot_model_heatmap(matrix, ax=ax)
    colors = {t.get_text(): t.get_color() for t in ax.texts}
    assert colors["1.00"] == "white"  # r = 1 is the darkest red of RdBu_r
    assert colors["0.00"] == "black"  # r = 0 is near white
    plt.close(fig)
    assert contrast_text_color((0.0, 0.0, 0.0)) == "white"
    assert contrast_text_color((1.0, 1.0, 0.0)) == "black"


def test_a_choice_glmm_table_gets_its_sentence_and_sets_the_stars(choice_results):
    # The report gets the logistic GLMM's table as analysis.stats.choice.choice_glmm shapes it;
    # here that table is built by hand so the report's handling is tested on its own.
    from analysis.report.study_sections import choice_sections, figure_jobs

    glmm = pd.DataFrame(
        {
            "block": ["all"],
            "contrast": ["summary vs original"],
            "level": ["summary"],
            "versus": ["original"],
            "estimate": [3.1],
            "ci_low": [2.0],
            "ci_high": [4.8],
            "p_val": [0.2],
            "log_odds": [1.13],
            "se": [0.22],
            "z": [5.1],
            "sd_subject": [0.9],
            "sd_item": [0.0],
            "singular": [True],
            "n_obs": [400],
        }
    )
    results = type(choice_results)(
        kind="choice",
        tables={**choice_results.tables, "choice_glmm": glmm},
        meta=choice_results.meta,
        plot_data=choice_results.plot_data,
    )
    text = next(s["text"] for s in choice_sections(results, {}) if s["title"] == "Main result")[1]
    assert "OR = 3.10 times as high with summary as with original, 95% CI [2.00, 4.80]" in text
    assert "z = 5.10, p = .200" in text and "Singular fit" in text
    caption = {n: c for n, c, *_ in figure_jobs(results)}["format_rates.png"]
    assert "logistic GLMM" in caption
