"""k-format product choice end to end, through the real console scripts.

Generation records → ``framelab generate product-pairs --mitigated …`` → the bundle loaded by
the web app as it is → bots → the long export carries each text's generation record; and the
three-format demo → bots with a stated effect per format → export → ``framelab analyze
choice`` → a report with one contrast paragraph per format. Each test uses its own SQLite
database (``flask db upgrade`` first), as a user would.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.test_pipeline import _run

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MITIGATED = "mitigated:self-debias"


def _database(tmp_path: Path, name: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / f'{name}.sqlite'}",
        "SECRET_KEY": "format-pipeline-test",
        "FRAMELAB_ENV": "development",
        # Seeded assignment and (in `framelab bots`) a simulated clock: the same data every run.
        "FRAMELAB_ASSIGNMENT_SEED": "3",
    }
    _run("flask", "--app", "webapp", "db", "upgrade", env=env)
    return env


# item: (product type, manufacturer, price, framing of the review, of the plain summary, of the
# self-debias summary). Target and control per type follow the seed study's rule.
ITEMS = {
    "k1": ("kettle", "Harbor", 39, "negative", "positive", "negative"),
    "k2": ("kettle", "Still", 36, "neutral", "neutral", "neutral"),
    "l1": ("desk lamp", "Lumen", 45, "neutral", "positive", "neutral"),
    "l2": ("desk lamp", "Plain", 42, "neutral", "neutral", "neutral"),
    "f1": ("fan", "Breeze", 60, "negative", "positive", "neutral"),
    "f2": ("fan", "Gale", 58, "neutral", "neutral", "neutral"),
}


def _generation_records(folder: Path) -> dict[str, Path]:
    """What `framelab generate summarize / mitigate / judge-framing` would have written."""

    def record(item: str, task: str, method: str, output: str, label: str | None = None):
        product_type, maker, price, *_ = ITEMS[item]
        rec = {
            "item_id": item,
            "model": "org/tiny-model",
            "task": task,
            "method": method,
            "template_hash": "0123abcd",
            "variant": "",
            "input": {
                "item_id": item,
                "text": f"Review of the {product_type} by {maker}.",
                "product_type": product_type,
                "manufacturer": maker,
                "price_usd": price,
            },
            "output": output,
        }
        return rec if label is None else {**rec, "label": label}

    def write(name: str, records) -> Path:
        path = folder / name
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        return path

    return {
        "summaries": write(
            "summaries.jsonl",
            [record(i, "summarize", "plain", f"Plain summary of {i}.") for i in ITEMS],
        ),
        "mitigated": write(
            "self-debias.jsonl",
            [record(i, "mitigate", "self-debias", f"Mitigated summary of {i}.") for i in ITEMS],
        ),
        "source_judgments": write(
            "review-framing.jsonl",
            [record(i, "judge-framing", "plain", "", ITEMS[i][3]) for i in ITEMS],
        ),
        "summary_judgments": write(
            "summary-framing.jsonl",
            [record(i, "judge-framing", "plain", "", ITEMS[i][4]) for i in ITEMS],
        ),
        "mitigated_judgments": write(
            "self-debias-framing.jsonl",
            [record(i, "judge-framing", "self-debias", "", ITEMS[i][5]) for i in ITEMS],
        ),
    }


@pytest.mark.slow
def test_a_generated_k_format_bundle_is_loaded_as_it_is(tmp_path):
    """The web app's own loader takes the bundle; its export leads back to the records."""
    from webapp.studydef import load_study_file

    files = _generation_records(tmp_path)
    stimuli = tmp_path / "stimuli"
    out = _run(
        "framelab", "generate", "product-pairs",
        "--summaries", str(files["summaries"]),
        "--source-judgments", str(files["source_judgments"]),
        "--summary-judgments", str(files["summary_judgments"]),
        "--mitigated", f"self-debias={files['mitigated']}",
        "--mitigated-judgments", f"self-debias={files['mitigated_judgments']}",
        "--out-dir", str(stimuli), "--slug", "gen-formats",
        env=dict(os.environ),
    )  # fmt: skip
    assert "3 pairs in 3 formats" in out
    study_path = stimuli / "studies" / "gen-formats.yaml"

    definition = load_study_file(study_path)
    block = next(b.params for b in definition.tasks if b.type == "product_choice")
    assert block["formats"] == ["original", "summary", MITIGATED]
    kettle = next(p for p in block["pairs"] if p["id"] == "kettle")
    assert kettle["target"]["texts"][MITIGATED] == "Mitigated summary of k1."
    assert kettle["target"]["sources"] == {
        "original": "item:k1",
        "summary": "org/tiny-model|summarize|plain|0123abcd|k1|",
        MITIGATED: "org/tiny-model|mitigate|self-debias|0123abcd|k1|",
    }

    env = _database(tmp_path, "generated")
    assert "created: gen-formats" in _run("framelab", "study", "load", str(study_path), env=env)
    out = _run("framelab", "bots", "gen-formats", "--n", "3", "--seed", "2", env=env)
    assert "completed 3" in out
    csv_path = tmp_path / "generated.csv"
    _run(
        "framelab", "export", "gen-formats", "--format", "long", "--out", str(csv_path),
        "--include-test", env=env,
    )  # fmt: skip

    from analysis.io import load_export

    df = load_export(csv_path)
    assert len(df) == 3 * 3 and set(df["sequence"]) == {"A", "B", "C"}
    for row in df.to_dict("records"):
        target, control = row["target_source_record"], row["control_source_record"]
        if row["format"] == "original":
            assert target.startswith("item:") and control.startswith("item:")
            continue
        method = "plain" if row["format"] == "summary" else "self-debias"
        for record in (target, control):
            model, task, used, prompt_hash, item, _ = record.split("|")
            assert (model, used, prompt_hash) == ("org/tiny-model", method, "0123abcd")
            assert ITEMS[item][0].replace(" ", "-") == row["pair_id"]


@pytest.mark.slow
def test_three_format_demo_plan_prereg_bots_export_frozen_analysis(tmp_path):
    """The chain the docs describe: plan power → prereg → bots with a stated target-choice rate
    per format → long export → the frozen analyze command → the pre-registered result."""
    pytest.importorskip("statsmodels")
    env = _database(tmp_path, "demo")
    demo = "stimuli/studies/product-choice-formats-demo.yaml"
    power = tmp_path / "power"
    out = _run(
        "framelab", "plan", "power", demo, "--effect", "0.5", "--baseline", "0.7",
        "--sd-participant", "0.5", "--sd-pair", "0.5", "--n", "90", "--sims", "8",
        "--jobs", "1", "--quiet", "--out", str(power), env=env,
    )  # fmt: skip
    table = json.loads((power / "power.json").read_text())["table"][0]
    assert table["n_failed"] == 0 and table["estimate"] > 0, out
    prereg = tmp_path / "prereg"
    _run("framelab", "prereg", demo, "--out", str(prereg), "--power", str(power), env=env)
    document = (prereg / "prereg.md").read_text(encoding="utf-8")
    assert "3 x 3 cyclic Latin square" in document and "N = 90: " in document
    command = re.search(r"Command: `([^`]+)`", document).group(1)
    assert "--levels summary,mitigated:self-debias,original" in command

    assert "created: product-choice-formats-demo" in _run(
        "framelab", "study", "load", demo, env=env
    )
    stated = {"original": 0.3, "summary": 0.85, MITIGATED: 0.55}
    out = _run(
        "framelab", "bots", "product-choice-formats-demo", "--n", "90", "--seed", "11",
        *[arg for f, p in stated.items() for arg in ("--p-target", f"{f}={p}")],
        env=env,
    )  # fmt: skip
    assert "completed 90" in out
    csv_path = tmp_path / "formats.csv"
    out = _run(
        "framelab", "export", "product-choice-formats-demo", "--format", "long",
        "--out", str(csv_path), "--include-test", env=env,
    )  # fmt: skip
    assert "wrote 540 rows" in out

    from analysis.io import load_export

    df = load_export(csv_path)
    assert Counter(df.drop_duplicates("participant_id")["sequence"]) == {"A": 30, "B": 30, "C": 30}
    assert set(Counter(zip(df["pair_id"], df["format"], strict=True)).values()) == {30}
    rates = df.groupby("format")["chose_target"].mean()
    assert rates["original"] < rates[MITIGATED] < rates["summary"]

    # The frozen command, run exactly as the pre-registration states it (its too-fast rule
    # applies: the bots' scripted durations leave nobody below it).
    report = tmp_path / "report"
    args = command.replace("EXPORT.csv", str(csv_path)).replace("REPORT", str(report))
    args = args.replace("prereg.md", str(prereg / "prereg.md")).split()
    out = _run(*args, env=env)
    assert "The primary analysis is the pre-registered one (prereg.md" in out
    results = json.loads((report / "results.json").read_text())
    primary = results["tables"]["primary"][0]
    assert primary["look"] == 1 and primary["n_analysed"] == 90
    meta = results["meta"]
    assert meta["n_rows_analysed"] == 540
    assert meta["test_participants"] == {"recorded": True, "n_input": 90, "n_analysed": 90}
    rates = {r["format"]: r["estimate"] for r in results["tables"]["selection_rates"]}
    effects = [r for r in results["tables"]["effects"] if r["effect"] == "risk_difference"]
    diffs = {(r["level"], r["versus"]): r for r in effects}
    # Every format against the reference (the pre-registered one, summary), and nothing more:
    # the baseline is the reference.
    assert set(diffs) == {(MITIGATED, "summary"), ("original", "summary")}
    for (level, versus), row in diffs.items():
        observed = rates[level] - rates[versus]
        assert row["estimate"] == pytest.approx(observed, abs=1e-12)
        assert row["ci_low"] < observed < row["ci_high"]
        assert row["ci_low"] < stated[level] - stated[versus] < row["ci_high"]
    html = (report / "report.html").read_text(encoding="utf-8")
    assert "<title>Choosing between products (three formats)" in html
    assert "The export held 90 test participant(s)" in html
    assert "times as high with mitigated:self-debias as with summary" in html
