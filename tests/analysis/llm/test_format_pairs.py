"""k-format product pairs: one summary file per format, the seed's rule on every format's
framing, the platform's pairs YAML with a text and a generation record per format.

``tests/e2e/test_format_pipeline.py`` loads such a bundle with the web app's own loader."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from analysis.cli.generate import generate

# item: (product type, maker, price, review framing, summary, self-debias, rerank framings)
ITEMS = {
    "h1": ("headphones", "Acme", 50, "negative", "positive", "negative", "positive"),
    "h2": ("headphones", "Bolt", 52, "neutral", "neutral", "neutral", "neutral"),
    "h3": ("headphones", "Cato", 51, "neutral", "neutral", "positive", "neutral"),
    "k1": ("kettle", "Acme", 30, "neutral", "positive", "neutral", "neutral"),
    "k2": ("kettle", "Bolt", 31, "neutral", "neutral", "neutral", "neutral"),
    "k3": ("kettle", "Cato", 29, "negative", "positive", "neutral", "neutral"),
    "b1": ("blender", "Acme", 80, "negative", "positive", "neutral", "neutral"),
}
FORMATS = {"summary": 4, "mitigated:self-debias": 5, "mitigated:rerank": 6}


def _record(item_id, method, output, label=None):
    t, maker, price, *_ = ITEMS[item_id]
    rec = {
        "item_id": item_id,
        "model": "fake-model",
        "task": "summarize" if label is None else "judge-framing",
        "method": method,
        "template_hash": "abc123",
        "variant": "",
        "input": {
            "item_id": item_id,
            "text": f"Review of {item_id}.",
            "product_type": t,
            "manufacturer": maker,
            "price_usd": price,
        },
        "output": output,
    }
    if label is not None:
        rec["label"] = label
    return rec


def _write(path: Path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_k_format_pairs_bundle(tmp_path):
    files = {}
    for fmt, col in FORMATS.items():
        method = fmt.removeprefix("mitigated:") if fmt != "summary" else "plain"
        # The rerank output lacks b1: that item is dropped for every format.
        ids = [i for i in ITEMS if not (fmt == "mitigated:rerank" and i == "b1")]
        files[fmt] = _write(
            tmp_path / f"{method}.jsonl", [_record(i, method, f"{fmt} text of {i}") for i in ids]
        )
        files[f"j:{fmt}"] = _write(
            tmp_path / f"{method}.judged.jsonl",
            [_record(i, method, "", label=ITEMS[i][col]) for i in ids],
        )
    src = _write(tmp_path / "jr.jsonl", [_record(i, "plain", "", ITEMS[i][3]) for i in ITEMS])
    out = tmp_path / "stimuli"
    args = [
        "product-pairs",
        "--summaries",
        files["summary"],
        "--source-judgments",
        src,
        "--summary-judgments",
        files["j:summary"],
        "--out-dir",
        str(out),
        "--slug",
        "kfmt",
    ]
    for fmt in ("mitigated:self-debias", "mitigated:rerank"):
        m = fmt.removeprefix("mitigated:")
        args += [
            "--mitigated",
            f"{m}={files[fmt]}",
            "--mitigated-judgments",
            f"{m}={files['j:' + fmt]}",
        ]
    res = CliRunner().invoke(generate, args)
    assert res.exit_code == 0, res.output
    assert "dropped 1 item(s): no mitigated:rerank summary" in res.output
    assert "kept out as a control: a mitigated summary is not neutral" in res.output
    assert "2 pairs in 4 formats" in res.output  # blender's only item was dropped

    doc = yaml.safe_load((out / "studies/product_pairs/kfmt.yaml").read_text(encoding="utf-8"))
    formats = ["original", "summary", "mitigated:rerank", "mitigated:self-debias"]
    by = {p["id"]: p for p in doc["pairs"]}
    assert set(by) == {"headphones", "kettle"}
    assert list(by["headphones"]) == ["id", "product_type", "target", "control"]
    target = by["headphones"]["target"]
    assert list(target) == ["manufacturer", "price", "texts", "sources"]
    assert target["manufacturer"] == "Acme" and target["price"] == 50
    assert list(target["texts"]) == formats and list(target["sources"]) == formats
    assert target["texts"]["mitigated:self-debias"] == "mitigated:self-debias text of h1"
    assert target["texts"]["original"] == "Review of h1."
    # Each text leads back to its generation record; the review to its item.
    assert target["sources"]["mitigated:rerank"] == "fake-model|summarize|rerank|abc123|h1|"
    assert target["sources"]["summary"] == "fake-model|summarize|plain|abc123|h1|"
    assert target["sources"]["original"] == "item:h1"
    # headphones: h3 would be the closer-priced control, but its self-debias summary is positive.
    assert by["headphones"]["control"]["manufacturer"] == "Bolt"
    prov = json.loads(
        (out / "studies/product_pairs/kfmt.provenance.json").read_text(encoding="utf-8")
    )
    assert prov["formats"] == formats
    record = {p["pair_id"]: p for p in prov["pairs"]}
    assert record["headphones"]["target"]["item_id"] == "h1"
    assert record["headphones"]["control"]["item_id"] == "h2"
    assert record["headphones"]["target"]["framings"]["mitigated:self-debias"] == "negative"
    # kettle: k3 (negative review) and k1 (neutral) both qualify; the closest price wins.
    assert record["kettle"]["target"]["item_id"] in {"k1", "k3"}
    assert prov["dropped"]["no mitigated:rerank summary"] == 1
    study = yaml.safe_load((out / "studies/kfmt.yaml").read_text(encoding="utf-8"))
    task = next(t for t in study["tasks"] if t["type"] == "product_choice")
    assert task["pairs"] == "product_pairs/kfmt.yaml"
    assert task["formats"] == formats


def test_mitigated_without_baseline_is_refused(tmp_path):
    path = _write(tmp_path / "m.jsonl", [_record("h1", "rerank", "x")])
    res = CliRunner().invoke(
        generate,
        [
            "product-pairs",
            "--mitigated",
            f"rerank={path}",
            "--out-dir",
            str(tmp_path),
            "--slug",
            "x",
        ],
    )
    assert res.exit_code != 0
    assert "needs the baseline" in res.output
