"""The pre-registration: one hash per study content, a document that reads back, and a run that
must be the frozen primary analysis."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis.exclusions import ChoiceRules
from analysis.plan.prereg import (
    PreregError,
    check_run,
    check_study,
    freeze,
    read_prereg,
    render_html,
    render_markdown,
)
from analysis.plan.spec import bundle_sha256, read_study

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"


@pytest.fixture
def bundle(tmp_path) -> Path:
    folder = tmp_path / "bundle"
    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs")
    shutil.copy(DEMO, folder / DEMO.name)
    return folder / DEMO.name


def test_the_hash_is_the_content_not_the_moment(bundle):
    first = freeze(read_study(bundle))
    again = freeze(read_study(DEMO))
    assert first["prereg_sha256"] == again["prereg_sha256"]
    assert [f["name"] for f in first["bundle"]] == [
        "product-choice-demo.yaml",
        "product_pairs/demo.yaml",
    ]
    # The manifest is sha256sum's: "<digest>  <name>" per file, sorted by name.
    manifest = "".join(f"{f['sha256']}  {f['name']}\n" for f in first["bundle"])
    assert first["bundle_sha256"] == hashlib.sha256(manifest.encode()).hexdigest()
    assert (
        bundle_sha256([(f["name"], f["sha256"]) for f in first["bundle"]]) == first["bundle_sha256"]
    )


def test_a_stimulus_file_or_the_block_changes_the_hash(bundle):
    before = freeze(read_study(bundle))["prereg_sha256"]
    pairs = bundle.parent / "product_pairs" / "demo.yaml"
    pairs.write_text(pairs.read_text().replace("Aurelio Sound", "Aurelio Audio"))
    after_pairs = freeze(read_study(bundle))
    assert after_pairs["prereg_sha256"] != before
    text = bundle.read_text().replace("alpha: 0.025", "alpha: 0.02")
    bundle.write_text(text)
    after_block = freeze(read_study(bundle))
    assert len({before, after_pairs["prereg_sha256"], after_block["prereg_sha256"]}) == 3
    assert after_block["analysis"]["alpha"] == 0.02


@pytest.mark.parametrize("suffix,render", [(".md", render_markdown), (".html", render_html)])
def test_the_document_reads_back_and_an_edited_record_is_refused(tmp_path, suffix, render):
    record = freeze(read_study(DEMO))
    path = tmp_path / f"prereg{suffix}"
    path.write_text(render(record))
    assert read_prereg(path) == record
    text = path.read_text()
    for heading in ("Hypothesis", "Dependent variable", "Conditions", "Analyses",
                    "Outliers and exclusions", "Sample size", "Other"):  # fmt: skip
        assert heading in text
    assert record["prereg_sha256"] in text and "2.9626" in text
    edited = text.replace('"alpha": 0.025', '"alpha": 0.05', 1)
    assert edited != text
    path.write_text(edited)
    with pytest.raises(PreregError, match="changed after freezing"):
        read_prereg(path)
    path.write_text("# notes\n")
    with pytest.raises(PreregError, match="no frozen record"):
        read_prereg(path)


def test_a_run_that_differs_from_the_frozen_primary_analysis_is_named_and_refused():
    record = freeze(read_study(DEMO))
    plan = check_run(record, "prereg.md", levels=None, exclusions=ChoiceRules(), log=False)
    assert plan.test == "choice_glmm" and plan.planned_n == 70
    with pytest.raises(PreregError) as info:
        check_run(
            record,
            "prereg.md",
            levels=("summary", "original"),
            exclusions=ChoiceRules(require_attention=False, min_duration_frac_median=0.2),
            log=True,
        )
    message = str(info.value)
    assert "exclusions.require_attention: pre-registered true, this run false" in message
    assert "(--keep-failed-attention)" in message
    assert "exclusions.min_duration_frac_median: pre-registered 0.3, this run 0.2" in message
    assert 'levels: pre-registered ["original", "summary"]' in message
    assert 'transform: pre-registered "none", this run "log"' in message
    assert record["command"] in message


def test_an_export_of_another_study_is_refused():
    record = freeze(read_study(DEMO))
    check_study(pd.DataFrame({"study_slug": ["product-choice-demo"]}), record)
    with pytest.raises(PreregError, match="the export holds study other"):
        check_study(pd.DataFrame({"study_slug": ["other"]}), record)


def test_power_is_cited_with_its_assumptions():
    table = pd.DataFrame(
        {"n": [50, 70], "n_sims": [1000, 1000], "estimate": [0.71, 0.86],
         "ci_low": [0.68, 0.84], "ci_high": [0.74, 0.88], "expected_n": [40.0, 52.1]}
    )  # fmt: skip
    record = freeze(read_study(DEMO), power=table, scenario={"effect": 2.0, "baseline": 0.5})
    text = render_markdown(record)
    assert "N = 70: 0.860 [0.840, 0.880]" in text and "effect = 2" in text
    assert json.loads(json.dumps(record))["power"]["table"][1]["n"] == 70
