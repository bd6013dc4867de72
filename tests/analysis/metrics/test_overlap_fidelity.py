"""Judge overlap as Fang et al. ("Blind to the Human Touch", 2026) report it.

Outcomes per summarizer model, and rephrased generated summaries (lower overlap with the human
summary) kept apart from the originals so the similarity range they add is visible.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from analysis.cli.metrics import metrics
from analysis.metrics.overlap import pair_judgments, similarity_range
from analysis.metrics.records import read_records

HUMAN = "The council raised school spending by ten percent in the new budget."
# Summarizer A nearly copies the human summary; B writes its own; B's rephrasing shares little.
GEN_A = "The council raised school spending by ten percent in its new budget."
GEN_B = "Schools get ten percent more money under the budget the council passed."
GEN_B_REPHRASED = "Education funding climbs a tenth after the local vote."


def _record(summarizer: str, text: str, order: str, label: str, **extra) -> dict:
    return {
        "item_id": "j1",
        "model": "judge-x",
        "task": "judge-pair",
        "order": order,
        "variant": f"order={order}",  # the engine's own field: not the rephrase flag
        "input": {
            "item_id": "j1",
            "human_summary": HUMAN,
            "generated_summary": text,
            "summarizer": summarizer,
            **extra,
        },
        "label": label,
    }


def _write(tmp_path: Path) -> Path:
    rows = [
        # A: the human summary both times -> GT.
        _record("m-a", GEN_A, "gt_first", "gt"),
        _record("m-a", GEN_A, "generated_first", "gt"),
        # B: its own summary both times -> Generated.
        _record("m-b", GEN_B, "gt_first", "generated"),
        _record("m-b", GEN_B, "generated_first", "generated"),
        # B rephrased: whichever came first -> tied-chose-first.
        _record("m-b", GEN_B_REPHRASED, "gt_first", "gt", rephrased=True),
        _record("m-b", GEN_B_REPHRASED, "generated_first", "generated", rephrased=True),
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_pairs_of_one_item_by_several_summarizers_stay_apart(tmp_path):
    """Before, the pairs of one item were keyed by the item alone: three summaries of j1 became
    one pair (the last verdicts won) with the first summary's similarity."""
    out = tmp_path / "out"
    result = CliRunner().invoke(
        metrics, ["judge-overlap", "-i", str(_write(tmp_path)), "-o", str(out)],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    outcomes = pd.read_csv(out / "judge_outcomes.csv")
    got = {
        (r.system, r.summary_version): (r.outcome, r.similarity)
        for r in outcomes.itertuples(index=False)
    }
    assert {k: v[0] for k, v in got.items()} == {
        ("m-a", "original"): "GT",
        ("m-b", "original"): "Generated",
        ("m-b", "rephrased"): "tied-chose-first",
    }
    # Each pair has its own similarity: the near-copy highest, the rephrasing lowest.
    sims = {k: v[1] for k, v in got.items()}
    assert sims[("m-a", "original")] > sims[("m-b", "original")] > sims[("m-b", "rephrased")]

    by_summarizer = pd.read_csv(out / "judge_outcome_shares_by_summarizer.csv")
    totals = by_summarizer.groupby(["system", "outcome"])["n"].sum()
    assert totals["m-a", "GT"] == 1 and totals["m-b", "Generated"] == 1
    assert totals["m-b", "tied-chose-first"] == 1 and totals.sum() == 3

    rng = pd.read_csv(out / "judge_similarity_range.csv").set_index("summary_version")
    assert rng.loc["rephrased", "max"] < rng.loc["original", "min"]
    assert rng.loc["original", "n"] == 2 and rng.loc["rephrased", "n"] == 1
    assert (out / "judge_outcome_shares_by_version.csv").exists()


def test_pair_judgments_names_the_summarizer_and_version(tmp_path):
    verdicts = pair_judgments(read_records(_write(tmp_path)))
    assert verdicts["summary_version"].tolist() == ["original"] * 4 + ["rephrased"] * 2
    # A verdict for the generated summary names its summarizer.
    assert verdicts["label"].tolist() == ["gt", "gt", "m-b", "m-b", "gt", "m-b"]
    assert verdicts.loc[0, ["first", "second"]].tolist() == ["gt", "m-a"]
    assert verdicts.loc[1, ["first", "second"]].tolist() == ["m-a", "gt"]


def test_similarity_range_counts_bins_covered():
    table = pd.DataFrame(
        {"summary_version": ["original"] * 3 + ["rephrased"] * 2,
         "similarity": [0.81, 0.85, 0.93, 0.12, 0.35]}
    )  # fmt: skip
    out = similarity_range(table).set_index("summary_version")
    assert out.loc["original", "n_bins_covered"] == 2  # [0.8, 0.9) and [0.9, 1.0]
    assert out.loc["rephrased", "n_bins_covered"] == 2
    assert out.loc["rephrased", "min"] == 0.12 and out.loc["original", "max"] == 0.93
