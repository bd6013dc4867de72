"""The report's words describe exactly the model fitted and the exclusion rules applied."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.report import apa
from analysis.report.pipeline import analyze_choice
from analysis.report.study_sections import choice_sections
from analysis.simulate import simulate_choice_study
from analysis.stats.wtp import wtp_slopes

R_DATA = Path(__file__).resolve().parents[1] / "r" / "data"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "analysis.md"


@pytest.fixture(scope="module")
def study() -> pd.DataFrame:
    return simulate_choice_study(n_participants=24, seed=4)


def _exclusions(results) -> dict[str, object]:
    return next(s for s in choice_sections(results, {}) if s["title"] == "Exclusions")


def test_rules_the_data_cannot_feed_are_reported_as_not_checked(study):
    bare = study.drop(columns=["status", "quiz_passed", "attention_passed"])
    results = analyze_choice(bare, glmm=False, clustered=False)
    status = results.tables["exclusion_rules"].set_index("rule")
    for rule, column in [
        ("require_completed", "status"),
        ("require_quiz", "quiz_passed"),
        ("require_attention", "attention_passed"),
    ]:
        assert status.loc[rule, "status"] == "not checked"
        assert status.loc[rule, "why"] == f"the data have no {column} column"
        assert results.meta["exclusion_rules"][rule]["status"] == "not checked"
    assert status.loc["drop_duplicates", "status"] == "applied"
    assert status.loc["min_duration_s", "status"] == "off"
    text = _exclusions(results)["text"]
    assert "Not checked, so no participant was screened by them: require_completed" in text
    assert "require_quiz (the data have no quiz_passed column)" in text
    assert "Exclusion rules applied: min_duration_frac_median" in text


def test_a_recorded_column_is_applied_and_an_empty_one_is_not(study):
    data = study.copy()
    failed = data["participant_id"].isin(data["participant_id"].unique()[:2])
    data["quiz_passed"] = np.where(failed, 0, 1)
    data["attention_passed"] = np.nan  # the study had no attention checks
    results = analyze_choice(data, glmm=False, clustered=False)
    status = results.tables["exclusion_rules"].set_index("rule")
    assert status.loc["require_quiz", "status"] == "applied"
    assert status.loc["require_quiz", "n_participants"] == 2
    assert status.loc["require_quiz", "n_rows"] == int(failed.sum())
    assert status.loc["require_attention", "status"] == "not checked"
    assert "empty in every row" in status.loc["require_attention", "why"]
    text = _exclusions(results)["text"]
    assert f"require_quiz ({int(failed.sum())} rows of 2 participants excluded)" in text


def test_the_slopes_paragraph_names_the_reduction_and_the_final_models_test():
    row = wtp_slopes(pd.read_csv(R_DATA / "singular_pair.csv")).iloc[0]
    text = apa.slopes_sentence(row, "%")
    maximal = text.index(f"The maximal model ({row['maximal_formula']}) was singular")
    dropped = text.index("dropped the correlations (zero-correlation model); then dropped the")
    final = text.index(f"The final model is {row['formula']}")
    assert maximal < dropped < final
    # The estimate, its test and the slopes' chi-square are all the final model's.
    assert f"SE = {row['se']:.2f}" in text and f"t({row['df']:.1f})" in text
    assert f"χ²({int(row['lrt_df'])}) = {row['lrt_chisq']:.2f}" in text
    assert int(row["lrt_df"]) == 2 and row["lrt_null"] in text
    maximal_numbers = f"b = {row['maximal_estimate']:.2f} %, SE = {row['maximal_se']:.2f}"
    assert f"maximal model: {maximal_numbers}" in text
    assert "format_summary = 1 for summary, 0 for original" in text


def test_an_unsimplified_slopes_model_is_called_the_final_model_with_its_four_df_test():
    row = wtp_slopes(pd.read_csv(R_DATA / "slopes_flat_70x10.csv")).iloc[0]
    text = apa.slopes_sentence(row, "%")
    assert "was not singular and is the final model" in text
    # The note on lmer's stop (whether the orders of the rows split there turns on the last
    # bits of a flat criterion) is carried into the paragraph.
    assert "χ²(4)" in text
    assert re.search(r"not singular, as (in most orders|lme4 reports it)", text)


def test_the_slopes_table_title_names_the_model_its_numbers_belong_to(study):
    results = analyze_choice(study, wtp_slopes=True, glmm=False, clustered=False)
    section = next(s for s in choice_sections(results, {}) if s["title"] == "Willingness to pay")
    row = results.tables["wtp_slopes"].iloc[0]
    titles = [title for title, _ in section["tables"] if title.startswith("Random slopes")]
    assert titles and all(row["formula"] in title for title in titles)
    assert all("maximal model)" not in title for title in titles)


def test_the_glmm_sentence_labels_its_deviance_and_states_convergence():
    data = pd.read_csv(R_DATA / "choice_70x10.csv")
    from analysis.stats.choice import choice_glmm

    row = choice_glmm(data).iloc[0]
    text = apa.glmm_sentence([row])
    assert "OR = " in text and "times as high with summary as with original" in text
    assert "adjusted" not in text  # one contrast: nothing to adjust
    label = "what summary(glmer) prints as deviance"
    assert f"−2 log-likelihood {row['deviance']:.2f}, {label}" in text
    assert re.search(r"largest scaled gradient \d\.\de−\d\d, below glmer's 0\.002 check", text)


def test_the_selection_rate_figure_names_its_intervals():
    import matplotlib

    matplotlib.use("Agg")
    from analysis.plots.choice import plot_format_rates

    rates = pd.DataFrame(
        {"format": ["original", "summary"], "estimate": [0.4, 0.6], "ci_low": [0.3, 0.5]}
    ).assign(ci_high=[0.5, 0.7])
    ax = plot_format_rates(rates, p_val=0.01)
    assert "Wilson CIs over trials, clustering ignored" in ax.get_title()


CHECKLIST = {
    "formula": "Formula",
    "estimation": "Estimation",
    "df method": "Degrees of freedom",
    "variances": "Variances",
    "singularity": "Singularity",
    "N per level": "N per level",
    "exclusions applied": "Exclusions applied",
    "exclusions not applied": "Exclusions not applied",
}


def test_docs_carry_a_reviewers_checklist_with_every_item():
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("## A reviewer's checklist")
    section = text[start : text.index("\n## ", start + 1)]
    items = re.findall(r"^\| \*\*(.+?)\*\* \|", section, flags=re.M)
    assert items == list(CHECKLIST.values())
    for line in section.splitlines():
        if line.startswith("| **"):
            # Each item says where the report states it and what it says.
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert len(cells) == 3 and all(len(c) > 10 for c in cells[1:]), line
