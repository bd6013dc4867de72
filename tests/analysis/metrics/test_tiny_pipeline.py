"""The generation engine's tiny-model outputs go straight into `framelab metrics report`."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner


@pytest.mark.slow
def test_report_on_tiny_model_outputs(examples, tmp_path):
    pytest.importorskip("torch").set_num_threads(1)
    from framelab.cli import main

    def framelab(*args: str) -> None:
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output

    articles = tmp_path / "articles.jsonl"
    pairs = tmp_path / "pairs.jsonl"
    with articles.open("w") as a, pairs.open("w") as p:
        for line in (examples / "position.jsonl").read_text().splitlines():
            row = json.loads(line)
            a.write(json.dumps({"id": row["id"], "text": row["article"], "gold": row["gold"]}))
            a.write("\n")
            pair = {"id": row["id"], "text": row["article"], "human_summary": row["gold"]}
            pair["generated_summary"] = row["summaries"]["m-lead"]
            p.write(json.dumps(pair))
            p.write("\n")
    model = tmp_path / "tiny"
    framelab("dev", "tiny-model", "--out", str(model))
    gen = ["--model", str(model), "--max-new-tokens", "12", "--no-progress", "--device", "cpu"]
    summ, src_j, sum_j, pair_j = (tmp_path / f"{n}.jsonl" for n in ("summ", "src", "sumj", "pair"))
    framelab("generate", "summarize", "--input", str(articles), "--out", str(summ), *gen)
    framelab("generate", "judge-framing", "--input", str(articles), "--out", str(src_j), *gen)
    framelab("generate", "judge-framing", "--input", str(summ), "--text-field", "output",
             "--out", str(sum_j), *gen)  # fmt: skip
    framelab("generate", "judge-pair", "--input", str(pairs), "--out", str(pair_j), *gen)

    out = tmp_path / "report"
    framelab("metrics", "report", *(f"--input={f}" for f in (summ, src_j, sum_j, pair_j)),
             "--out", str(out), "--no-primacy")  # fmt: skip
    page = (out / "index.html").read_text()
    for title in ("Framing change", "Position bias", "Judge overlap bias"):
        assert title in page
    # Gibberish answers are label "other": all three pairs are counted as such, none dropped.
    framing = pd.read_csv(out / "framing_change.csv")
    assert int(framing["n"].sum() + framing["n_other"].sum()) == 3
    outcomes = pd.read_csv(out / "judge_outcomes.csv")
    assert len(outcomes) == 3 and outcomes["similarity"].between(0, 1).all()
    assert (out / "position_bias.csv").exists()
