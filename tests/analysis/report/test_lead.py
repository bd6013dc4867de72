"""The choice report's first paragraph reports the clustered test; speed rules say what passed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.exclusions import ChoiceRules
from analysis.report.pipeline import analyze_choice
from analysis.report.rules import speed_sentence
from analysis.report.study_sections import choice_sections
from analysis.simulate import simulate_choice_study
from framelab.cli import main


@pytest.fixture(scope="module")
def study() -> pd.DataFrame:
    return simulate_choice_study(n_participants=30, n_pairs=8, seed=8)


def _first(results) -> dict:
    return choice_sections(results, {})[0]


def test_the_first_paragraph_leads_with_the_glmm_and_compares_with_the_chi_square(study):
    results = analyze_choice(study)
    first = _first(results)
    assert first["title"] == "Main result"
    design, text = first["text"]
    assert "participants made" in design and "2 formats: original, summary" in design
    glmm = text.index("In a logistic mixed model with crossed random intercepts")
    chi2 = text.index("For comparison with the seed study")
    assert text.index("The target was chosen in") < glmm < chi2 < text.index("χ²(1, N = ")
    assert "GEE" not in text  # the GEE is the robustness check in the Choice section
    choice = next(s for s in choice_sections(results, {}) if s["title"] == "Choice")
    assert "GEE logistic regression" in choice["text"]


def test_without_the_glmm_the_gee_leads_and_without_both_the_report_says_so(study):
    text = _first(analyze_choice(study, glmm=False))["text"][1]
    assert text.index("Logistic GLMM not requested. Accounting for the repeated choices") < (
        text.index("For comparison with the seed study")
    )
    text = _first(analyze_choice(study, glmm=False, clustered=False))["text"][1]
    assert "No clustering-aware model of the choices is reported" in text
    assert text.index("No clustering-aware") < text.index("For comparison with the seed study")


def test_the_wtp_paragraph_names_no_test_file_and_ends_its_sentences(study):
    results = analyze_choice(study.assign(wtp_premium_pct=study["wtp_premium_pct"].round()))
    section = next(s for s in choice_sections(results, {}) if s["title"] == "Willingness to pay")
    assert "tests/" not in section["text"] and ".py" not in section["text"]
    assert "checked against both to 1e-6" in section["text"]
    row = results.tables["wtp_model"].iloc[0]
    if row["notes"]:
        assert f"Notes: {row['notes'].rstrip('.')}." in section["text"]
    assert section["text"].endswith(".")


def _with_bots(study: pd.DataFrame, share: float) -> pd.DataFrame:
    """Make ``share`` of the participants bots that finish in 20 s, a second per choice page."""
    ids = study["participant_id"].unique()
    bots = ids[: int(share * len(ids))]
    data = study.copy()
    is_bot = data["participant_id"].isin(bots)
    data.loc[is_bot, "duration_s"] = 20.0
    data.loc[is_bot, "rt_ms"] = 1000
    return data


def test_a_relative_floor_lets_many_bots_through_and_the_report_says_so(study):
    data = _with_bots(study, 0.6)
    results = analyze_choice(data, glmm=False, clustered=False, estimated_minutes=12)
    speed = results.tables["speed"].iloc[0]
    # 60 % bots pull the median to 20 s: the relative floor (0.3 x 20 s = 6 s) keeps them all.
    assert speed["median_duration_s"] == 20.0 and speed["floor_s"] == pytest.approx(6.0)
    assert speed["fastest_analysed_s"] == 20.0 and speed["fastest_page_s"] == 1.0
    assert speed["suggested_min_duration_s"] == 216  # 0.3 x 12 minutes
    assert speed["n_below_suggestion"] == 18
    text = speed_sentence(results.tables["speed"])
    assert "only the relative rule screened for speed" in text
    assert "The fastest analysed participant took 20 s" in text
    assert "median time on a choice page was 1.0 s" in text
    assert "Suggested min_duration_s: 216 (0.3 × the study's estimated 12 minutes)" in text
    assert "it would exclude 18 more of the analysed participants" in text
    # Set as suggested, the absolute floor removes the bots whatever the median.
    fixed = analyze_choice(data, rules=ChoiceRules(min_duration_s=216), glmm=False, clustered=False)
    assert fixed.meta["n_participants_analysed"] == 12
    assert "excluded: the larger of min_duration_s (216 s)" in speed_sentence(fixed.tables["speed"])
    assert "Suggested" not in speed_sentence(fixed.tables["speed"])


def test_the_relative_rule_switched_off_is_reported_not_a_crash(study, tmp_path):
    # --min-duration-frac 0 switches the relative rule off; the report once formatted its
    # missing fraction and stopped with a stack trace instead of writing.
    none = analyze_choice(
        study, rules=ChoiceRules(min_duration_frac_median=None), glmm=False, clustered=False
    )
    assert "No speed rule is set: nobody was screened for speed." in speed_sentence(
        none.tables["speed"]
    )
    absolute = analyze_choice(
        study,
        rules=ChoiceRules(min_duration_s=5, min_duration_frac_median=None),
        glmm=False,
        clustered=False,
    )
    assert "Participants faster than 5 s were excluded (min_duration_s)." in speed_sentence(
        absolute.tables["speed"]
    )
    export = tmp_path / "choice.csv"
    study.to_csv(export, index=False)
    args = ["analyze", "choice", str(export), "--no-figures", "--no-glmm", "--no-gee"]
    out = tmp_path / "o"
    result = CliRunner().invoke(main, [*args, "--min-duration-frac", "0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "No speed rule is set" in (out / "report.html").read_text(encoding="utf-8")


def test_without_an_estimate_the_suggestion_comes_from_the_observed_median(study):
    speed = analyze_choice(study, glmm=False, clustered=False).tables["speed"].iloc[0]
    median = study.groupby("participant_id")["duration_s"].first().median()
    assert speed["suggested_min_duration_s"] == int(np.floor(0.3 * median))
    assert "observed median completion time" in speed["suggestion_basis"]
    assert "speed" not in analyze_choice(study.drop(columns="duration_s"), glmm=False).tables


def test_the_cli_reads_the_estimate_from_the_study_file(study, tmp_path):
    export = tmp_path / "choice.csv"
    _with_bots(study, 0.6).to_csv(export, index=False)
    good = tmp_path / "study.yaml"
    good.write_text("slug: s\nestimated_minutes: 12\n", encoding="utf-8")
    args = ["analyze", "choice", str(export), "--no-figures", "--no-glmm", "--no-gee"]
    result = CliRunner().invoke(main, [*args, "--study", str(good), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "min_duration_s not set: suggested 216 s" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("slug: s\nestimated_minutes: soon\n", encoding="utf-8")
    result = CliRunner().invoke(main, [*args, "--study", str(bad), "--out", str(tmp_path / "b")])
    assert result.exit_code == 2
    assert "bad.yaml gives no estimated_minutes (a positive number of minutes)" in result.output
    assert not (tmp_path / "b").exists()
