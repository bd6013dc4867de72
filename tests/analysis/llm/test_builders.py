"""Builders: product pairs the platform loads, annotation items in the item-CSV format."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from analysis.cli.generate import generate
from analysis.llm.builders import (
    BuildError,
    annotation_items,
    build_product_pairs,
    join_generations,
    select_pairs,
)
from analysis.llm.store import read_records
from analysis.llm.tasks import TaskOptions, run_task
from webapp.definition_cache import study_definition


def _row(item_id, ptype, maker, price, review_f, summary_f):
    return {
        "item_id": item_id,
        "product_type": ptype,
        "manufacturer": maker,
        "price_usd": price,
        "review": f"Review {item_id} of the {ptype}.",
        "summary": f"Summary {item_id}.",
        "review_framing": review_f,
        "summary_framing": summary_f,
        "model": "m",
    }


ROWS = [
    _row("h1", "wireless headphones", "Aurelio", 89.0, "negative", "positive"),
    _row("h2", "wireless headphones", "Brightwave", 84.0, "neutral", "neutral"),
    _row("h3", "wireless headphones", "Corda", 150.0, "neutral", "positive"),
    _row("h4", "wireless headphones", "Aurelio", 88.0, "neutral", "neutral"),  # same maker
    _row("b1", "blender", "Vortexa", 99.0, "negative", "positive"),  # no control: skipped
    _row("k1", "kettle", "Boil", "$30.00", "Neutral", "POSITIVE"),
    _row("k2", "kettle", "Steam", "35", "neutral", "neutral"),
    _row("k3", "kettle", "Other", None, "neutral", "neutral"),  # no price
]


def test_select_pairs_picks_shift_and_neutral_control_with_closest_price() -> None:
    result = select_pairs(ROWS)
    by_id = {p["id"]: p for p in result.pairs}
    assert sorted(by_id) == ["kettle", "wireless-headphones"]
    head = by_id["wireless-headphones"]
    # h1 (89) vs h2 (84): closest price among target/control of different manufacturers.
    assert head["target"]["manufacturer"] == "Aurelio" and head["target"]["price"] == 89.0
    assert head["control"]["manufacturer"] == "Brightwave"
    assert by_id["kettle"]["target"]["price"] == 30.0
    assert by_id["kettle"]["control"]["manufacturer"] == "Steam"
    assert "blender" in result.skipped and "0 stay neutral" in result.skipped["blender"]
    prov = {p["pair_id"]: p for p in result.provenance}
    assert prov["wireless-headphones"]["target_item_id"] == "h1"
    assert prov["wireless-headphones"]["target_review_framing"] == "negative"
    assert len(select_pairs(ROWS, n_pairs=1).pairs) == 1


def test_built_study_is_accepted_by_the_platform(tmp_path: Path) -> None:
    result = build_product_pairs(ROWS, tmp_path, slug="built-demo", title="Built demo")
    assert result.pairs_path == tmp_path / "studies" / "product_pairs" / "built-demo.yaml"
    doc = yaml.safe_load(result.pairs_path.read_text())
    assert set(doc) == {"pairs"} and len(doc["pairs"]) == 2
    assert set(doc["pairs"][0]["target"]) == {"manufacturer", "price", "review", "summary"}

    # The platform's own validator (what `framelab study load` runs first): the current keys,
    # so no note that a key is spelled the deprecated way.
    from webapp.studydef import folder_bundle, load_bundle

    notes: list[str] = []
    definition = load_bundle(folder_bundle(result.study_path), notes)
    assert notes == []
    assert definition.payment.to_json() == {
        "currency": "USD",
        "base": 2.0,
        "bonus": {"amount": 0.0, "rule": "none", "max": None},
    }
    assert definition.slug == "built-demo"
    block = next(b.params for b in definition.tasks if b.type == "product_choice")
    assert [p["id"] for p in block["pairs"]] == ["kettle", "wireless-headphones"]
    quiz = next(b.params for b in definition.tasks if b.type == "quiz")
    assert quiz["questions"][0]["correct"] == "2"


def test_a_bundle_study_load_would_refuse_is_not_written(tmp_path: Path) -> None:
    """One pair is fewer than a product-choice block accepts: the builder refuses with the
    reason and writes nothing, instead of a bundle `framelab study load` then rejects."""
    with pytest.raises(BuildError, match="at least 2 pairs"):
        build_product_pairs(ROWS, tmp_path, slug="one-pair", n_pairs=1)
    only_kettle = [r for r in ROWS if r["product_type"] == "kettle"]
    with pytest.raises(BuildError, match=r"only 1 product type .* nothing was written"):
        build_product_pairs(only_kettle, tmp_path, slug="one-type")
    assert not (tmp_path / "studies").exists()


def test_no_pairs_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="blender"):
        build_product_pairs([ROWS[4]], tmp_path, slug="none-here")
    with pytest.raises(BuildError, match="slug"):
        build_product_pairs(ROWS, tmp_path, slug="Bad Slug")


def test_from_generation_outputs_through_the_cli(tmp_path: Path, fake_backend) -> None:
    """summarize -> judge reviews -> judge summaries -> product pairs, as a researcher runs it."""
    reviews = [
        {
            "item_id": r["item_id"],
            "text": r["review"] + (" It broke." if r["review_framing"] == "negative" else ""),
            "product_type": r["product_type"],
            "store": r["manufacturer"],
            "price": r["price_usd"],
        }
        for r in ROWS
    ]
    framing = {r["item_id"]: r for r in ROWS}
    summarizer = fake_backend(lambda req: f"Summary of {req.text.split()[1]}")
    run_task("summarize", reviews, summarizer, tmp_path / "s.jsonl", progress=False)

    def judge_review(req):
        return framing[req.text.split()[1].rstrip(".")]["review_framing"].title()

    def judge_summary(req):
        return f'{{"label": "{framing[req.text.split()[-1]]["summary_framing"]}"}}'

    run_task(
        "judge-framing", reviews, fake_backend(judge_review), tmp_path / "jr.jsonl", progress=False
    )
    summaries = list(read_records(tmp_path / "s.jsonl"))
    run_task(
        "judge-framing",
        summaries,
        fake_backend(judge_summary),
        tmp_path / "js.jsonl",
        options=TaskOptions(text_field="output"),
        progress=False,
    )
    rows = join_generations(
        summaries, read_records(tmp_path / "jr.jsonl"), read_records(tmp_path / "js.jsonl")
    )
    assert {r["item_id"]: r["summary_framing"] for r in rows}["h1"] == "positive"

    result = CliRunner().invoke(
        generate,
        ["product-pairs", "--summaries", str(tmp_path / "s.jsonl")]
        + ["--source-judgments", str(tmp_path / "jr.jsonl")]
        + ["--summary-judgments", str(tmp_path / "js.jsonl")]
        + ["--out-dir", str(tmp_path / "stimuli"), "--slug", "from-llm"],
    )
    assert result.exit_code == 0, result.output
    assert "2 pairs" in result.output and "skipped blender" in result.output
    pairs = yaml.safe_load((tmp_path / "stimuli/studies/product_pairs/from-llm.yaml").read_text())[
        "pairs"
    ]
    head = next(p for p in pairs if p["id"] == "wireless-headphones")
    assert head["target"]["summary"] == "Summary of h1"
    assert head["target"]["review"].endswith("It broke.")
    prov = json.loads(
        (tmp_path / "stimuli/studies/product_pairs/from-llm.provenance.json").read_text()
    )
    assert prov["pairs"][0]["target_model"] == "fake-model"


def _reframe_record(item_id, position, output, kept=True, model="m"):
    return {
        "item_id": item_id,
        "model": model,
        "task": "reframe",
        "frame_position": position,
        "input": {"item_id": item_id, "text": "The food was great.", "base_sentiment": "positive"},
        "output": output,
        "statement_kept": kept,
    }


def test_annotation_items_csv(tmp_path: Path) -> None:
    records = [
        _reframe_record("s1", "prefix", "Sadly, the food was great."),
        _reframe_record("s1", "suffix", "The food was great, but the service was slow."),
        _reframe_record("s2", "prefix", "Something else entirely.", kept=False),
        _reframe_record("s3", "suffix", ""),
    ]
    items, dropped = annotation_items(records)
    assert dropped == 2
    assert [i["item_id"] for i in items] == ["s1.prefix", "s1.suffix"]
    assert items[0]["base_sentiment"] == "positive"
    assert items[0]["base_text"] == "The food was great."
    out = tmp_path / "reframe.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = CliRunner().invoke(
        generate, ["annotation-items", "--input", str(out), "--out", str(tmp_path / "items.csv")]
    )
    assert result.exit_code == 0, result.output
    with (tmp_path / "items.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0])[:3] == ["item_id", "text", "base_sentiment"]
    assert {"base_text", "frame_position", "model"} <= set(rows[0])
    assert rows[1]["frame_position"] == "suffix"
    assert "2 items" in result.output and "2 reframings dropped" in result.output


def test_annotation_items_with_several_models_get_distinct_ids() -> None:
    records = [
        _reframe_record("s1", "prefix", "A, the food was great.", model="org/Llama-3"),
        _reframe_record("s1", "prefix", "B, the food was great.", model="mistral"),
    ]
    items, _ = annotation_items(records)
    assert [i["item_id"] for i in items] == ["s1.prefix.org-llama-3", "s1.prefix.mistral"]


# The webapp's forms still pass SelectField choices as tuples (wtforms 3.3 deprecation): not ours.
@pytest.mark.filterwarnings("ignore:Passing SelectField choices as tuples:DeprecationWarning")
def test_bots_complete_a_built_study(tmp_path: Path) -> None:
    """`framelab study load` accepts the built set and simulated participants finish it."""
    from webapp import create_app
    from webapp.bots import run_bots
    from webapp.extensions import db
    from webapp.services.studies import get_study, load_study

    built = build_product_pairs(ROWS, tmp_path / "stimuli", slug="built-bots")
    app = create_app(
        {
            "TESTING": True,
            "SECRET_KEY": "test-" + "x" * 32,
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'db.sqlite'}",
        }
    )
    with app.app_context():
        db.create_all()
        assert load_study(built.study_path).action == "created"
        definition = study_definition(get_study("built-bots"))
        db.session.remove()  # release SQLite before the bots' own requests write
    summary = run_bots(app, definition, n=4, seed=1)
    assert summary.errors == []
    assert summary.counts == {"completed": 4}
