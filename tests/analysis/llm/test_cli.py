"""`framelab dev tiny-model` and `framelab generate TASK` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from analysis.cli.dev import dev
from analysis.cli.generate import generate


def test_tiny_model_then_summarize_twice(tmp_path: Path) -> None:
    runner = CliRunner()
    model = tmp_path / "m"
    result = runner.invoke(dev, ["tiny-model", "--out", str(model)])
    assert result.exit_code == 0, result.output
    assert (model / "config.json").exists() and (model / "model.safetensors").exists()

    inputs = tmp_path / "some.jsonl"
    inputs.write_text(
        "\n".join(
            json.dumps({"id": f"r{i}", "text": t})
            for i, t in enumerate(["Clear sound, fair price.", "Battery died.", "Fast shipping."])
        )
        + "\n"
    )
    out = tmp_path / "s.jsonl"
    args = ["summarize", "--backend", "transformers", "--model", str(model)]
    args += ["--input", str(inputs), "--out", str(out), "--max-new-tokens", "4", "--no-progress"]
    args += ["--threads", "1", "--device", "cpu"]  # the manifest check below is the CPU's
    first = runner.invoke(generate, args)
    assert first.exit_code == 0, first.output
    assert "generated 3 of 3 prompts" in first.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["item_id"] for r in records) == ["r0", "r1", "r2"]
    assert all(r["n_output_tokens"] == 4 and r["model"] == str(model) for r in records)

    second = runner.invoke(generate, args)
    assert second.exit_code == 0, second.output
    assert "nothing to generate: all 3 prompts of 3 items are already in the output" in (
        second.output
    )
    assert len(out.read_text().splitlines()) == 3
    manifest = json.loads((tmp_path / "s.jsonl.manifest.json").read_text())
    run = manifest["runs"][0]
    assert run["backend"]["dtype"] == "float32" and run["backend"]["device"] == "cpu"
    assert run["counts"] == {
        "items": 3,
        "prompts": 3,
        "already_done": 0,
        "input_changed": 0,
        "generated": 3,
        "failed": 0,
        "output_tokens": 12,
    }
    assert run["settings"]["max_new_tokens"] == 4 and run["settings"]["do_sample"] is False
    assert run["backend"]["versions"]["torch"]
    assert manifest["runs"][1]["counts"]["generated"] == 0


def test_vader_judge_from_csv_with_mapping(tmp_path: Path) -> None:
    csv_path = tmp_path / "in.csv"
    csv_path.write_text("rid,body\n1,I love this wonderful phone\n2,awful and broken\n")
    out = tmp_path / "v.jsonl"
    result = CliRunner().invoke(
        generate,
        ["judge-framing", "--backend", "vader", "--input", str(csv_path), "--out", str(out)]
        + ["--id-field", "rid", "--map", "text=body", "--no-progress"],
    )
    assert result.exit_code == 0, result.output
    labels = {
        json.loads(x)["item_id"]: json.loads(x)["label"] for x in out.read_text().splitlines()
    }
    assert labels == {"1": "positive", "2": "negative"}


def test_clear_errors(tmp_path: Path) -> None:
    csv_path = tmp_path / "in.csv"
    csv_path.write_text("id,body\n1,x\n")
    runner = CliRunner()
    missing = runner.invoke(
        generate,
        ["judge-framing", "--backend", "vader", "--input", str(csv_path)]
        + ["--out", str(tmp_path / "o.jsonl"), "--no-progress"],
    )
    assert missing.exit_code != 0
    assert "has no field 'text'" in missing.output and "--text-field" in missing.output
    bad_map = runner.invoke(
        generate,
        ["judge-framing", "--backend", "vader", "--input", str(csv_path)]
        + ["--out", str(tmp_path / "o.jsonl"), "--map", "text=nope"],
    )
    assert bad_map.exit_code != 0 and "mapped column 'nope'" in bad_map.output
    unknown = runner.invoke(
        generate,
        ["summarize", "--backend", "vader", "--input", str(csv_path)]
        + ["--out", str(tmp_path / "o.jsonl"), "--map", "text=body"],
    )
    assert unknown.exit_code != 0 and "only answers judge-framing" in unknown.output


def test_templates_listing() -> None:
    result = CliRunner().invoke(generate, ["templates", "--task", "judge-framing", "--show"])
    assert result.exit_code == 0
    assert "judge-framing" in result.output and "Answer with the label alone." in result.output


def test_generate_reruns_an_item_whose_input_changed(tmp_path: Path) -> None:
    """Regression: `framelab generate` into the same --out kept the record of an edited item."""
    inputs = tmp_path / "in.jsonl"
    rows = [{"id": "1", "text": "I love this wonderful phone"}, {"id": "2", "text": "awful"}]
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "v.jsonl"
    args = ["judge-framing", "--backend", "vader", "--input", str(inputs), "--out", str(out)]
    args += ["--no-progress"]
    assert CliRunner().invoke(generate, args).exit_code == 0
    rows[1]["text"] = "a wonderful, lovely phone"
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = CliRunner().invoke(generate, args)
    assert again.exit_code == 0, again.output
    assert "generated 1 of 2 prompts (1 were already done)" in again.output
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert {r["item_id"]: r["label"] for r in records} == {"1": "positive", "2": "positive"}
    stale = [json.loads(x) for x in (tmp_path / "v.stale.jsonl").read_text().splitlines()]
    assert [(r["item_id"], r["label"]) for r in stale] == [("2", "negative")]
