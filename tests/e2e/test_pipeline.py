"""The whole path through the real console scripts: migrate → load → bots → export → analysis.

This is the acceptance check of the whole pipeline, run as a user would (``framelab bots … --n 40``
then ``framelab export … --format long --include-test``, as bots are test participants), followed
by the analysis package reading the export and recovering the simulated effect.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


# Bots standing in for real participants (no test key): `framelab bots` makes test
# participants, who hold no annotation slots, so the platform's own counts would not include them.
_REAL_BOTS = """
import sys
from webapp import create_app
from webapp.bots import run_bots
from webapp.definition_cache import study_definition
from webapp.services.studies import get_study

app = create_app()
with app.app_context():
    definition = study_definition(get_study(sys.argv[1]))
print(run_bots(app, definition, n=int(sys.argv[2]), seed=int(sys.argv[3])).counts)
"""


def _run(*args: str, env: dict[str, str]) -> str:
    # The console scripts import this checkout's packages, also when the virtualenv's
    # editable install points at another one (a second worktree).
    path = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=ROOT,
        env={**env, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_bots_export_analysis_from_the_command_line(tmp_path):
    pytest.importorskip("pandas")
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite'}",
        "SECRET_KEY": "pipeline-test",
        "FRAMELAB_ENV": "development",
        # The server's assignment is seeded and in-process bots run on a simulated clock
        # (`framelab bots`): the data, and so every figure below, is the same on every run.
        "FRAMELAB_ASSIGNMENT_SEED": "1",
    }
    _run("flask", "--app", "webapp", "db", "upgrade", env=env)
    out = _run("framelab", "study", "load", "stimuli/studies/product-choice-demo.yaml", env=env)
    assert "created: product-choice-demo" in out
    out = _run(
        "framelab",
        "bots",
        "product-choice-demo",
        "--n",
        "40",
        "--seed",
        "1",
        "--p-target-summary",
        "0.837",
        "--p-target-original",
        "0.523",
        "--wtp-target-shift-pct",
        "4.5",
        env=env,
    )
    assert "completed 40" in out
    csv_path = tmp_path / "x.csv"
    out = _run(
        "framelab",
        "export",
        "product-choice-demo",
        "--format",
        "long",
        "--out",
        str(csv_path),
        "--include-test",
        env=env,
    )
    assert "wrote 400 rows" in out
    # Bots are test participants: never counted as real ones.
    assert "no participants" in _run("flask", "--app", "webapp", "study", "list", env=env)

    from analysis.io import load_export
    from analysis.stats.choice import chi2_choice, choice_effects

    df = load_export(csv_path)
    assert len(df) == 400 and set(df["is_test"]) == {"1"}  # kept as read, not in the way
    assert set(Counter(zip(df["pair_id"], df["format"], strict=True)).values()) == {20}
    assert not df.duplicated(["participant_id", "pair_id"]).any()
    assert df["wtp_premium"].notna().all()
    res = chi2_choice(df, levels=["original", "summary"]).iloc[0]
    rd = choice_effects(df, levels=["original", "summary"]).iloc[0]  # the risk difference
    # Simulated 83.7% vs 52.3%: the test recovers the difference of 0.314.
    assert rd["effect"] == "risk_difference" and rd["ci_low"] < 0.314 < rd["ci_high"]
    assert res["p_val"] < 1e-6

    # The report command on the same file; its chi-square is checked against scipy applied to
    # the exported 2x2 table directly, so the two halves are checked against each other.
    import json

    from scipy.stats import chi2_contingency

    report = tmp_path / "report"
    # The default too-fast rule applies: the bots' scripted durations leave nobody below it.
    _run("framelab", "analyze", "choice", str(csv_path), "--out", str(report), env=env)
    results = json.loads((report / "results.json").read_text())
    assert (report / "report.html").exists()
    assert results["meta"]["n_rows_analysed"] == 400
    table = [[0, 0], [0, 0]]
    for fmt, chose in zip(df["format"], df["chose_target"], strict=True):
        table[fmt == "summary"][int(chose)] += 1
    chi2 = {row["test"]: row for row in results["tables"]["chi2"]}
    for test, correction in (("pearson_yates", True), ("pearson", False)):
        expected = chi2_contingency(table, correction=correction)
        assert chi2[test]["chi2"] == pytest.approx(expected.statistic, rel=1e-9)
        assert chi2[test]["p_val"] == pytest.approx(expected.pvalue, rel=1e-9)
    rates = {r["format"]: r["estimate"] for r in results["tables"]["selection_rates"]}
    assert rates["summary"] == pytest.approx(table[1][1] / 200)
    assert rates["original"] == pytest.approx(table[0][1] / 200)


@pytest.mark.slow
def test_annotation_bots_export_analysis_from_the_command_line(tmp_path):
    """Sentiment bots → long and items exports → ``framelab analyze annotations`` with a model.

    The platform counts shifts per item when it exports items; the analysis package counts them
    again from the label rows. The two counts must agree item by item.
    """
    import csv
    import json

    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'sent.sqlite'}",
        "SECRET_KEY": "pipeline-test",
        "FRAMELAB_ENV": "development",
    }
    _run("flask", "--app", "webapp", "db", "upgrade", env=env)
    _run("framelab", "study", "load", "stimuli/studies/sentiment-demo.yaml", env=env)
    out = _run("python", "-c", _REAL_BOTS, "sentiment-demo", "36", "3", env=env)
    assert "error" not in out.lower() and "completed" in out
    labels_csv, items_csv = tmp_path / "labels.csv", tmp_path / "items.csv"
    _run(
        "framelab",
        "export",
        "sentiment-demo",
        "--format",
        "long",
        "--out",
        str(labels_csv),
        env=env,
    )
    _run(
        "framelab",
        "export",
        "sentiment-demo",
        "--format",
        "items",
        "--out",
        str(items_csv),
        env=env,
    )
    with items_csv.open(newline="") as fh:
        items = list(csv.DictReader(fh))
    assert items and all(int(i["n_labels"]) == 5 for i in items)

    # A model that shifts exactly on the items whose ID ends in an even digit.
    predictions = tmp_path / "model.csv"
    flip = {"positive": "negative", "negative": "positive"}
    with predictions.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "model", "label"])
        for i in items:
            even = i["item_id"][-1] in "02468"
            w.writerow(
                [i["item_id"], "toy", flip[i["base_sentiment"]] if even else i["base_sentiment"]]
            )

    report = tmp_path / "report"
    _run(
        "framelab", "analyze", "annotations", "--export", str(labels_csv),
        "--predictions", str(predictions), "--out", str(report), env=env,
    )  # fmt: skip
    results = json.loads((report / "results.json").read_text())
    assert (report / "report.html").exists()
    analysed = {r["item_id"]: r["shift_count"] for r in results["tables"]["items"]}
    platform = {i["item_id"]: int(i["shift_count"]) for i in items}
    assert analysed == platform
    (toy,) = results["tables"]["human_model"]
    assert toy["model"] == "toy" and toy["n"] == len(items)

    # Pearson r between the human shift count and the toy model's shift, by scipy directly.
    from scipy.stats import pearsonr

    ids = sorted(platform)
    expected = pearsonr([platform[i] for i in ids], [int(i[-1] in "02468") for i in ids])
    assert toy["estimate"] == pytest.approx(expected.statistic, rel=1e-9)
    assert toy["p_val"] == pytest.approx(expected.pvalue, rel=1e-9)


@pytest.mark.slow
def test_evaluation_sets_from_generation_records_load_and_run(tmp_path):
    """perspective-summary / judge-pair records → `framelab generate rating-set|preference-set`
    → a study using them loads on the platform and bots complete it."""
    import json

    import yaml

    def rec(item, perspective, model, output):
        return {
            "item_id": item, "task": "perspective-summary", "model": model,
            "perspective": perspective, "order": "left_first",
            "variant": f"order=left_first,perspective={perspective}",
            "input": {"item_id": item, "left": f"Left passage of {item}.",
                      "right": f"Right passage of {item}."},
            "output": f"{model} on the {perspective} of {item}.",
        }  # fmt: skip

    gen = tmp_path / "perspective.jsonl"
    with gen.open("w") as fh:
        for item in ("d1", "d2"):
            for side in ("left", "right"):
                for model in ("org/model-a", "org/model-b"):
                    fh.write(json.dumps(rec(item, side, model, "")) + "\n")
    refs = tmp_path / "refs.csv"
    lines = [f"{i},{s},People on the {s} of {i}." for i in ("d1", "d2") for s in ("left", "right")]
    refs.write_text("item_id,perspective,text\n" + "\n".join(lines) + "\n")
    judge = tmp_path / "judge.jsonl"
    with judge.open("w") as fh:
        for n in range(3):
            item = {"item_id": f"n{n}", "text": f"Source {n}.", "human_summary": f"Human {n}.",
                    "generated_summary": f"Generated {n}.", "model": "org/model-a"}  # fmt: skip
            for order in ("gt_first", "generated_first"):
                fh.write(json.dumps({"item_id": f"n{n}", "task": "judge-pair", "order": order,
                                     "input": item, "label": "gt"}) + "\n")  # fmt: skip

    rating_set, pairs = tmp_path / "rating.jsonl", tmp_path / "pairs.jsonl"
    out = _run(
        "framelab", "generate", "rating-set", "--input", str(gen), "--references", str(refs),
        "--out", str(rating_set), "--metrics-out", str(tmp_path / "metrics.csv"), env=os.environ,
    )  # fmt: skip
    assert "4 sources" in out
    out = _run(
        "framelab", "generate", "preference-set", "--input", str(judge), "--out", str(pairs),
        env=os.environ,
    )  # fmt: skip
    assert "3 pairs" in out

    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'eval.sqlite'}",
        "SECRET_KEY": "pipeline-test",
        "FRAMELAB_ENV": "development",
    }
    _run("flask", "--app", "webapp", "db", "upgrade", env=env)
    for demo, block, items_path in (
        ("rating-demo", "summary_rating", rating_set),
        ("preference-demo", "pairwise_preference", pairs),
    ):
        study = yaml.safe_load((ROOT / "stimuli" / "studies" / f"{demo}.yaml").read_text())
        study["slug"] = f"my-{demo}"
        for task in study["tasks"]:
            if task["type"] == block:
                task["items"] = items_path.name  # next to the study file: its bundle
        path = tmp_path / f"my-{demo}.yaml"
        path.write_text(yaml.safe_dump(study, sort_keys=False))
        assert "created" in _run("framelab", "study", "load", str(path), env=env)
        out = _run("framelab", "bots", f"my-{demo}", "--n", "2", "--platform", "link", env=env)
        assert "completed 2" in out
