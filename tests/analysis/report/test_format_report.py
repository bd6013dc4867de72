"""The k-format choice report: per-block tables and a paragraph per contrast, through the CLI."""

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
    b = pd.read_csv(R_DATA / "kformat_3x60x9_missing.csv").assign(block="b2")
    b["pair_id"] = "r" + b["pair_id"]
    path = tmp_path / "choices.csv"
    pd.concat([a, b]).to_csv(path, index=False)
    return path


def test_each_block_is_analysed_separately_by_default(two_blocks, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main, ["analyze", "choice", str(two_blocks), "--out", str(out), "--no-figures"]
    )
    assert res.exit_code == 0, res.output
    glmm = pd.read_csv(out / "format_glmm.csv")
    assert glmm.groupby("block").size().to_dict() == {"b1": 5, "b2": 3}
    # The block's numbers are those of the block alone.
    alone = pd.read_csv(R_DATA / "kformat_3x60x9_missing.csv")
    from analysis.stats.formats import format_glmm

    ref = format_glmm(alone).set_index("contrast")
    got = glmm[glmm["block"] == "b2"].set_index("contrast")
    assert got["log_odds"].to_dict() == pytest.approx(ref["log_odds"].to_dict(), rel=1e-9)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Summaries mitigated by self-debias were chosen" in html
    assert "than plain summaries" in html
    assert "[b1] mitigated:rerank vs summary" in res.output
    meta = json.loads((out / "results.json").read_text(encoding="utf-8"))["meta"]
    assert meta["blocks"] == {"mode": "separate", "analysed": ["b1", "b2"]}


def test_pooled_blocks_and_level_order(two_blocks, tmp_path):
    out = tmp_path / "out"
    levels = "original,summary,mitigated:self-debias,mitigated:rerank"
    res = CliRunner().invoke(
        main,
        [
            "analyze",
            "choice",
            str(two_blocks),
            "--out",
            str(out),
            "--no-figures",
            "--blocks",
            "pooled",
            "--levels",
            levels,
            "--no-gee",
        ],
    )
    assert res.exit_code == 0, res.output
    rates = pd.read_csv(out / "format_rates.csv")
    assert rates["block"].unique().tolist() == ["pooled"]
    assert rates["format"].tolist() == levels.split(",")
    assert not (out / "format_gee.csv").exists()


def test_k_format_refuses_options_it_does_not_offer(two_blocks, tmp_path):
    res = CliRunner().invoke(
        main,
        ["analyze", "choice", str(two_blocks), "--out", str(tmp_path / "o"), "--wtp-slopes"],
    )
    assert res.exit_code != 0
    assert "--wtp-slopes: not available" in res.output


def test_a_format_name_outside_the_schema_is_refused(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(
        "participant_id,pair_id,format,chose_target,wtp_premium_pct\n"
        "1,a,original,1,\n1,b,mitigated:,0,\n",
        encoding="utf-8",
    )
    res = CliRunner().invoke(main, ["analyze", "choice", str(path), "--out", str(tmp_path / "o")])
    assert res.exit_code != 0
    assert "mitigated:<method>" in res.output


def test_the_first_paragraph_reports_the_clustered_test_of_every_contrast(tmp_path):
    from analysis.report.format_pipeline import analyze_formats
    from analysis.report.format_sections import format_sections

    data = pd.read_csv(R_DATA / "kformat_4x80x12.csv")
    results = analyze_formats(data)
    first = format_sections(results, {})[0]
    assert first["title"] == "Main result"
    text = first["text"]
    assert text.index("participants made") < text.index("Clustering-aware test, the logistic GLMM")
    glmm = results.tables["format_glmm"]
    assert text.count("Holm-adjusted p") == len(glmm) == 5
    assert "summaries mitigated by self-debias vs plain summaries OR = " in text

    no_glmm = analyze_formats(data, glmm=False)
    text = format_sections(no_glmm, {})[0]["text"]
    assert "Clustering-aware test, the GEE clustered by participant" in text
