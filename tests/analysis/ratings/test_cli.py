"""``framelab analyze ratings|preferences`` on simulated exports in the documented format."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.io import ExportFormatError, load_pairs, load_preferences, load_ratings
from framelab.cli import main

SYSTEMS = ("reference", "mistral", "mixtral", "gpt-4o")
DIMS = ("stance", "object", "intensity", "consensus", "reasoning")


def rating_export(n_sources: int = 8, raters_per_item: int = 3, seed: int = 0) -> pd.DataFrame:
    """Ratings in the export's columns; system quality differs so the means are ordered."""
    rng = np.random.default_rng(seed)
    quality = {"reference": 3.4, "mistral": 2.2, "mixtral": 2.6, "gpt-4o": 3.0}
    rows = []
    for s in range(n_sources):
        perspective = "left" if s % 2 else "right"
        for r in range(raters_per_item):
            rater = f"p_{s % 4}{r:015d}"
            order = rng.permutation(len(SYSTEMS))
            for pos, k in enumerate(order):
                system = SYSTEMS[k]
                true = quality[system] + rng.normal(0, 0.4)
                for dim in DIMS:
                    value = int(np.clip(round(true + rng.normal(0, 0.5)), 1, 4))
                    rows.append(
                        {
                            "study_slug": "rating-demo",
                            "participant_id": rater,
                            "platform": "link",
                            "status": "completed",
                            "item_id": f"src{s}",
                            "summary_id": f"src{s}.{system}",
                            "system": system,
                            "perspective": perspective,
                            "dimension": dim,
                            "rating": value,
                            "scale_min": 1,
                            "scale_max": 4,
                            "position": pos,
                            "trial_index": s,
                            "surplus": 0,
                            "rt_ms": 1000,
                            "answered_at": "2026-01-01T00:00:00Z",
                        }
                    )
    return pd.DataFrame(rows)


HUMAN = "The council approved the new park after a long debate about its cost and location."
GENERATED = [
    "The council approved the new park after a long debate about its cost.",
    "After much discussion about money and place, the park was approved by the council.",
    "Officials argued for hours; in the end a green space was given the go-ahead.",
    "A budget dispute dominated the meeting of local officials last night.",
]


def preference_exports(n_raters: int = 8, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    pairs = pd.DataFrame(
        {
            "study_slug": "preference-demo",
            "pair_id": [f"pair{i}" for i in range(len(GENERATED))],
            "source_id": [f"src{i}" for i in range(len(GENERATED))],
            "system_a": "human",
            "system_b": "llm",
            "summary_a": HUMAN,
            "summary_b": GENERATED,
            "n_judgments": n_raters,
            "n_a_first": n_raters // 2,
            "n_b_first": n_raters // 2,
        }
    )
    rows = []
    for r in range(n_raters):
        for i, pid in enumerate(pairs["pair_id"]):
            a_first = (r + i) % 2 == 0
            first, second = ("human", "llm") if a_first else ("llm", "human")
            chosen = "human" if rng.random() < 0.3 + 0.1 * i else "llm"
            rows.append(
                {
                    "study_slug": "preference-demo",
                    "participant_id": f"p_{r:016d}",
                    "platform": "prolific",
                    "status": "completed",
                    "pair_id": pid,
                    "source_id": f"src{i}",
                    "system_first": first,
                    "system_second": second,
                    "chosen_system": chosen,
                    "chose_first": int(chosen == first),
                    "order": "a_first" if a_first else "b_first",
                    "reason": "" if r % 3 else "clearer",
                    "trial_index": i,
                    "surplus": 0,
                    "rt_ms": 2000,
                    "answered_at": "2026-01-01T00:00:00Z",
                }
            )
    return pd.DataFrame(rows), pairs


def judge_records(path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(len(GENERATED)):
            for order in ("gt_first", "generated_first"):
                label = "generated" if i < 3 else "gt"
                rec = {
                    "item_id": f"pair{i}",
                    "model": "judge-llm",
                    "task": "judge-pair",
                    "order": order,
                    "label": label,
                    "input": {"human_summary": HUMAN, "generated_summary": GENERATED[i]},
                }
                fh.write(json.dumps(rec) + "\n")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_analyze_ratings_writes_tables_and_figures(runner, tmp_path):
    data = rating_export()
    path = tmp_path / "ratings.csv"
    data.to_csv(path, index=False)
    metrics = data[["summary_id", "system"]].drop_duplicates().reset_index(drop=True)
    means = data.groupby("summary_id")["rating"].mean()
    metrics["rouge1"] = metrics["summary_id"].map(means) / 4
    metrics["noise"] = np.random.default_rng(3).random(len(metrics))
    metrics.to_csv(tmp_path / "metrics.csv", index=False)
    out = tmp_path / "report"
    result = runner.invoke(
        main,
        [
            "analyze",
            "ratings",
            str(path),
            "--metrics",
            str(tmp_path / "metrics.csv"),
            "--dimensions",
            ",".join(DIMS),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Krippendorff's alpha (ordinal)" in result.output
    for name in ("rating_table.csv", "icc.csv", "alpha.csv", "metric_tau.csv", "report.html"):
        assert (out / name).stat().st_size > 0, name
    for name in ("rating_means.png", "metric_tau.png"):
        assert (out / name).stat().st_size > 5000, name
    table = pd.read_csv(out / "rating_table.csv").set_index("system")
    assert list(table.columns) == list(DIMS)
    # Means per summary first, then over summaries: recompute directly from the export.
    direct = data.groupby(["system", "dimension", "summary_id"])["rating"].mean()
    direct = direct.groupby(["system", "dimension"]).mean()
    assert table.loc["gpt-4o", "stance"] == pytest.approx(direct["gpt-4o", "stance"])
    assert table.loc["reference"].mean() > table.loc["mistral"].mean()
    payload = json.loads((out / "results.json").read_text())
    assert payload["kind"] == "ratings" and payload["meta"]["n_summaries"] == 32
    by_persp = pd.read_csv(out / "rating_means_by_perspective.csv")
    assert set(by_persp["perspective"]) == {"left", "right"} and len(by_persp) == 40
    icc = pd.read_csv(out / "icc.csv")
    assert set(icc["type"]) == {"ICC(1,1)", "ICC(1,k)"} and len(icc) == 10
    tau = pd.read_csv(out / "metric_tau.csv").set_index(["metric", "dimension"])
    # rouge1 was built from the summaries' overall mean rating: clearly positive on each dimension.
    assert (tau.loc["rouge1", "estimate"] > 0.3).all()
    assert "Rater agreement" in (out / "report.html").read_text()


def test_analyze_preferences_with_judges(runner, tmp_path):
    verdicts, pairs = preference_exports()
    verdicts.to_csv(tmp_path / "long.csv", index=False)
    pairs.to_csv(tmp_path / "pairs.csv", index=False)
    judge_records(tmp_path / "judge.jsonl")
    out = tmp_path / "report"
    result = runner.invoke(
        main,
        [
            "analyze",
            "preferences",
            str(tmp_path / "long.csv"),
            "--pairs",
            str(tmp_path / "pairs.csv"),
            "--judge-records",
            str(tmp_path / "judge.jsonl"),
            "--bins",
            "4",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    share = (verdicts["chosen_system"] == "human").mean()
    assert f"{share:.1%} prefer 'human'" in result.output
    assert "judge-llm: GT 25%, Generated 75%" in result.output
    for name in ("preference_by_bin.png", "outcomes_by_bin.png", "order_consistency.png"):
        assert (out / name).stat().st_size > 5000, name
    sim = pd.read_csv(out / "similarity.csv").set_index("pair_id")["similarity"]
    # The generated summaries were written to overlap less and less with the human one.
    assert sim.is_monotonic_decreasing and sim.iloc[0] > 0.6
    by_bin = pd.read_csv(out / "preference_by_bin.csv")
    overall = by_bin[by_bin["bin"] == "all"].iloc[0]
    assert overall["n"] == len(verdicts) and overall["estimate"] == pytest.approx(share)
    assert by_bin.loc[by_bin["bin"] != "all", "n"].sum() == len(verdicts)
    consistency = pd.read_csv(out / "order_consistency.csv")
    assert len(consistency) == 8 and (consistency["n"] == 4).all()
    payload = json.loads((out / "results.json").read_text())
    assert payload["meta"]["pairs_with_balanced_orders"] == 4
    assert payload["meta"]["judges"] == ["judge-llm"]


def test_loaders_reject_bad_exports(tmp_path):
    data = rating_export(n_sources=1)
    data.loc[0, "rating"] = 5
    data.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ExportFormatError, match="outside 1..4"):
        load_ratings(tmp_path / "bad.csv")
    verdicts, pairs = preference_exports(n_raters=2)
    verdicts.loc[0, "chosen_system"] = "someone"
    verdicts.to_csv(tmp_path / "v.csv", index=False)
    with pytest.raises(ExportFormatError, match="was not shown"):
        load_preferences(tmp_path / "v.csv")
    pairs.drop(columns=["summary_b"]).to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(ExportFormatError, match="summary_b"):
        load_pairs(tmp_path / "p.csv")


def test_cli_error_is_clean(runner, tmp_path):
    verdicts, pairs = preference_exports(n_raters=2)
    verdicts.to_csv(tmp_path / "long.csv", index=False)
    pairs.iloc[:1].to_csv(tmp_path / "pairs.csv", index=False)
    result = runner.invoke(
        main,
        [
            "analyze",
            "preferences",
            str(tmp_path / "long.csv"),
            "--pairs",
            str(tmp_path / "pairs.csv"),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code != 0 and "without texts in the pairs table" in result.output
