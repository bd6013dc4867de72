"""The choice report of k formats and several blocks: per-block tables, every option applied or
refused with its reason, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from click.testing import CliRunner

from framelab.cli import main

matplotlib.use("Agg")
R_DATA = Path(__file__).resolve().parents[1] / "r" / "data"


@pytest.fixture
def two_blocks(tmp_path) -> Path:
    a = pd.read_csv(R_DATA / "kformat_4x80x12.csv").assign(block="b1")
    # Half of its 80 participants (120 trials of each of its 4 formats): enough for every check
    # of a block, at half the fitting.
    a = a[a["participant_id"].isin(a["participant_id"].unique()[:40])]
    b = pd.read_csv(R_DATA / "kformat_3x60x9_missing.csv").assign(block="b2")
    b["pair_id"] = "r" + b["pair_id"]
    path = tmp_path / "choices.csv"
    pd.concat([a, b]).to_csv(path, index=False)
    return path


def _run(*args: str) -> object:
    return CliRunner().invoke(main, ["analyze", "choice", *args])


def test_each_block_is_analysed_separately_by_default(two_blocks, tmp_path):
    out = tmp_path / "out"
    res = _run(str(two_blocks), "--out", str(out), "--no-figures", "--padjust", "bonferroni")
    assert res.exit_code == 0, res.output
    glmm = pd.read_csv(out / "choice_glmm.csv")
    assert glmm.groupby("block").size().to_dict() == {"b1": 5, "b2": 3}
    # The block's numbers are those of the block alone; --padjust applies across its contrasts.
    from analysis.stats.choice import choice_glmm

    alone = pd.read_csv(R_DATA / "kformat_3x60x9_missing.csv")
    ref = choice_glmm(alone, padjust="bonferroni").set_index("contrast")
    got = glmm[glmm["block"] == "b2"].set_index("contrast")
    assert got["log_odds"].to_dict() == pytest.approx(ref["log_odds"].to_dict(), rel=1e-9)
    assert got["p_adj"].to_dict() == pytest.approx(ref["p_adj"].to_dict(), rel=1e-9)
    assert set(got["padjust"]) == {"bonferroni"}
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Block b2: The target was chosen in" in html
    assert "times as high with mitigated:self-debias as with summary" in html
    assert "Bonferroni-adjusted p" in html
    assert "[b1] mitigated:rerank vs summary" in res.output
    meta = json.loads((out / "results.json").read_text(encoding="utf-8"))["meta"]
    assert meta["blocks"] == {"mode": "separate", "analysed": ["b1", "b2"]}


def test_pooled_blocks_level_order_and_a_subset_of_formats(two_blocks, tmp_path):
    out = tmp_path / "out"
    levels = "original,summary,mitigated:self-debias,mitigated:rerank"
    args = ["--no-figures", "--blocks", "pooled", "--no-gee"]
    res = _run(str(two_blocks), "--out", str(out), *args, "--levels", levels)
    assert res.exit_code == 0, res.output
    rates = pd.read_csv(out / "selection_rates.csv")
    assert rates["block"].unique().tolist() == ["pooled"]
    assert rates["format"].tolist() == levels.split(",")
    assert not (out / "clustered.csv").exists()
    # Two named formats: the others' trials are left out and counted, never silently.
    sub = tmp_path / "sub"
    res = _run(str(two_blocks), "--out", str(sub), *args, "--levels", "summary,mitigated:rerank")
    assert res.exit_code == 0, res.output
    meta = json.loads((sub / "results.json").read_text(encoding="utf-8"))["meta"]
    # 120 trials of each format in b1 and 153 in b2
    assert meta["formats_left_out"] == {"original": 273, "mitigated:self-debias": 273}
    assert "formats not named by --levels, left out: original (273 trials)" in res.output
    glmm = pd.read_csv(sub / "choice_glmm.csv")
    assert glmm["contrast"].tolist() == ["mitigated:rerank vs summary"]


def test_slopes_wtp_model_and_covariates_apply_to_k_formats(tmp_path):
    data = pd.read_csv(R_DATA / "kformat_3x60x9_missing.csv")
    # Half of its 60 participants: every option still applies to all three formats.
    data = data[data["participant_id"].isin(data["participant_id"].unique()[:30])].copy()
    people = data["participant_id"].unique()
    data["age"] = data["participant_id"].map({p: 20 + i % 30 for i, p in enumerate(people)})
    path = tmp_path / "k.csv"
    data.to_csv(path, index=False)
    out = tmp_path / "out"
    args = ["--no-figures", "--no-gee", "--no-glmm", "--wtp-slopes", "--covariates", "age"]
    res = _run(str(path), "--out", str(out), *args, "--wtp-model", "pair_fixed")
    assert res.exit_code == 0, res.output
    slopes = pd.read_csv(out / "wtp_slopes.csv")
    assert len(slopes) == 3 and slopes["lrt_null"].notna().all()
    wtp = pd.read_csv(out / "wtp_model.csv")
    assert set(wtp["model"]) == {"pair_fixed"} and len(wtp) == 3
    adjusted = pd.read_csv(out / "covariate_adjusted.csv")
    assert set(adjusted.loc[adjusted["family"] != "covariate", "term"]) == set(wtp["contrast"])
    assert "WTP LMM adjusted for age: mitigated:self-debias vs summary" in res.output


def test_options_that_do_not_apply_are_refused_with_the_reason(two_blocks, tmp_path):
    out = str(tmp_path / "o")
    bad = tmp_path / "demographics.csv"
    bad.write_text("not,a,prolific,export\n1,2,3,4\n", encoding="utf-8")
    cases = {
        ("--demographics", str(bad)): "demographics.csv",
        ("--optimizer", "bfgs"): "--optimizer sets the statsmodels optimizers",
        ("--baseline", "original"): "no format is compared with it",
        ("--covariates", "age"): "age: not a column of the export",
    }
    for args, message in cases.items():
        res = _run(str(two_blocks), "--out", out, "--no-figures", *args)
        assert res.exit_code != 0 and message in res.output, (args, res.output)
    one = tmp_path / "one.csv"
    pd.read_csv(R_DATA / "kformat_3x60x9_missing.csv").to_csv(one, index=False)
    res = _run(str(one), "--out", out, "--blocks", "pooled")
    assert res.exit_code != 0 and "the export has no block column" in res.output
    assert not Path(out).exists()


def test_a_format_name_outside_the_schema_is_refused(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(
        "participant_id,pair_id,format,chose_target,wtp_premium_pct\n"
        "1,a,original,1,\n1,b,mitigated:,0,\n",
        encoding="utf-8",
    )
    res = _run(str(path), "--out", str(tmp_path / "o"))
    assert res.exit_code != 0
    assert "mitigated:<method>" in res.output


def test_the_first_paragraph_reports_the_clustered_test_of_every_contrast():
    from analysis.report.pipeline import analyze_choice
    from analysis.report.study_sections import choice_sections

    data = pd.read_csv(R_DATA / "kformat_4x80x12.csv")
    results = analyze_choice(data)
    first = choice_sections(results, {})[0]
    assert first["title"] == "Main result"
    design, lead = first["text"]
    assert design.startswith("80 participants made 960 choices") and "4 formats" in design
    glmm = results.tables["choice_glmm"]
    assert lead.index("In a logistic mixed model") < lead.index("For comparison with the seed")
    assert lead.count("Holm-adjusted p") == len(glmm) == 5
    assert "OR = 0.79 times as high with mitigated:self-debias as with summary" in lead

    lead = choice_sections(analyze_choice(data, glmm=False), {})[0]["text"][1]
    assert "Logistic GLMM not requested. Accounting for the repeated choices" in lead
