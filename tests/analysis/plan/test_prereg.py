"""The pre-registration: one hash per study content, a document that reads back whole or not at
all, a run that must be the frozen primary analysis, and a document the console must have
recorded."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis.exclusions import ChoiceRules
from analysis.plan.prereg import (
    PreregError,
    check_console,
    check_run,
    check_study,
    check_text,
    freeze,
    prereg_hash,
    read_prereg,
    render_html,
    render_markdown,
)
from analysis.plan.spec import PlanError, bundle_sha256, read_study

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"
FORMATS_DEMO = DEMO.parent / "product-choice-formats-demo.yaml"
PAIRS = ["product_pairs/demo.yaml"]
# The smallest PNG header image_type accepts; the bytes stand for a stimulus image.
PNG = b"\x89PNG\r\n\x1a\n" + bytes(8)


@pytest.fixture
def bundle(tmp_path) -> Path:
    folder = tmp_path / "bundle"
    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs")
    shutil.copy(DEMO, folder / DEMO.name)
    return folder / DEMO.name


def _demo() -> dict:
    return freeze(read_study(DEMO, PAIRS))


def _with_record(text: str, record: dict) -> str:
    """The Markdown document with its frozen record replaced (what an editor would do)."""
    body = json.dumps(record, indent=2, sort_keys=True)
    return re.sub(r"(```json framelab-prereg\n).*?(\n```)", rf"\g<1>{body}\g<2>", text, flags=re.S)


def test_the_hash_is_the_content_not_the_moment(bundle):
    first = freeze(read_study(bundle, PAIRS))
    again = _demo()
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
    # The hash is of the whole record but itself.
    rest = {k: v for k, v in first.items() if k != "prereg_sha256"}
    digest = hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode())
    assert first["prereg_sha256"] == digest.hexdigest()


def test_every_bundle_file_images_included_is_frozen_and_a_swapped_one_changes_the_hash(bundle):
    folder = bundle.parent
    (folder / "images").mkdir()
    (folder / "images" / "kettle.png").write_bytes(PNG + b"first")
    names = [*PAIRS, "images/kettle.png"]
    before = freeze(read_study(bundle, names))
    assert "images/kettle.png" in [f["name"] for f in before["bundle"]]
    (folder / "images" / "kettle.png").write_bytes(PNG + b"swapped")
    assert freeze(read_study(bundle, names))["bundle_sha256"] != before["bundle_sha256"]
    pairs = folder / "product_pairs" / "demo.yaml"
    pairs.write_text(pairs.read_text().replace("Aurelio Sound", "Aurelio Audio"))
    after_pairs = freeze(read_study(bundle, names))
    bundle.write_text(bundle.read_text().replace("alpha: 0.025", "alpha: 0.02"))
    after_block = freeze(read_study(bundle, names))
    hashes = {before["prereg_sha256"], after_pairs["prereg_sha256"], after_block["prereg_sha256"]}
    assert len(hashes) == 3 and after_block["analysis"]["alpha"] == 0.02


def test_a_study_read_without_its_bundle_or_with_files_outside_it_is_not_frozen(bundle, tmp_path):
    with pytest.raises(PlanError, match="freezes every file of the study's bundle"):
        freeze(read_study(bundle))
    (tmp_path / "secret.txt").write_text("x")
    for name in ("../secret.txt", "/etc/hostname"):
        with pytest.raises(PlanError, match="is not a file of the study's bundle"):
            read_study(bundle, [name])
    with pytest.raises(PlanError, match="cannot read the bundle file"):
        read_study(bundle, ["images/none.png"])


@pytest.mark.parametrize("suffix,render", [(".md", render_markdown), (".html", render_html)])
def test_the_document_reads_back_and_an_edited_record_is_refused(tmp_path, suffix, render):
    record = _demo()
    path = tmp_path / f"prereg{suffix}"
    path.write_text(render(record))
    assert read_prereg(path) == record
    text = path.read_text()
    for heading in ("Hypothesis", "Dependent variable", "Conditions", "Analyses",
                    "Outliers and exclusions", "Sample size", "Other"):  # fmt: skip
        assert heading in text
    assert record["prereg_sha256"] in text and "2.9626" in text
    assert check_text(path, record) is None
    path.write_text(text.replace("Primary test:", "Primary test (any will do):", 1))
    assert "first under" in str(check_text(path, record)) and read_prereg(path) == record
    edited = text.replace('"alpha": 0.025', '"alpha": 0.05', 1)
    assert edited != text
    path.write_text(edited)
    with pytest.raises(PreregError, match="changed after freezing"):
        read_prereg(path)
    path.write_text("# notes\n")
    with pytest.raises(PreregError, match="no frozen record"):
        read_prereg(path)


def _edits(record: dict) -> dict[str, dict]:
    """One edit per part of the record a check or a reader uses."""
    quiz_off = {**record["analysis"]["exclusions"], "require_quiz": False}
    return {
        # The red team's edit: a "primary" block with the quiz exclusion off.
        "primary": {
            "primary": {
                "test": "choice_glmm",
                "dv": "chose_target",
                "levels": ["original", "summary"],
                "direction": "greater",
                "alpha": 0.025,
                "transform": "none",
                "exclusions": quiz_off,
            }
        },
        "study": {"study": {**record["study"], "slug": "another-study"}},
        "command": {"command": record["command"] + " --keep-failed-quiz"},
        "looks": {"looks": [{**record["looks"][0], "efficacy_z": 1.0}, *record["looks"][1:]]},
        "design": {"design": {**record["design"], "sequences": ["A"]}},
        "bundle": {"bundle": record["bundle"][:1]},
        "power": {"power": {"scenario": {"effect": 9.0}, "table": []}},
        "amendment": {"amendment": {"amends": [], "reason": "none", "seen": "nothing"}},
    }


@pytest.mark.parametrize("part", list(_edits(freeze(read_study(DEMO, PAIRS)))))
def test_an_edit_of_any_part_of_the_record_is_refused(tmp_path, part):
    """Every part of the record is hashed: the check reads nothing that can change unnoticed."""
    record = _demo()
    path = tmp_path / "prereg.md"
    path.write_text(_with_record(render_markdown(record), {**record, **_edits(record)[part]}))
    with pytest.raises(PreregError, match="changed after freezing"):
        read_prereg(path)


def test_a_document_of_the_first_record_format_is_refused_with_what_to_do(tmp_path):
    record = {**_demo(), "format": "framelab-prereg/1"}
    path = tmp_path / "prereg.md"
    path.write_text(_with_record(render_markdown(record), record))
    with pytest.raises(PreregError, match="did not cover the primary analysis") as info:
        read_prereg(path)
    assert "framelab prereg SLUG" in str(info.value)


def test_a_run_that_differs_from_the_frozen_primary_analysis_is_named_and_refused():
    record = _demo()
    assert "primary" not in record  # compared with the hashed analysis block, nothing else
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


def test_the_authenticity_rule_is_frozen_and_a_run_without_it_refused(bundle):
    text = bundle.read_text()
    rules = "    min_duration_frac_median: 0.3\n"
    assert rules in text
    bundle.write_text(
        text.replace(rules, rules + "    authenticity: {max_score: 2, canary: true}\n", 1)
    )
    record = freeze(read_study(bundle, PAIRS))
    assert "--authenticity-max-score 2 --authenticity-canary" in record["command"]
    document = render_markdown(record)
    assert "canary word" in document and "authenticity score" in document
    frozen = ChoiceRules(authenticity_max_score=2.0, authenticity_canary=True)
    plan = check_run(record, "prereg.md", levels=None, exclusions=frozen, log=False)
    assert plan.exclusions == frozen
    with pytest.raises(PreregError) as info:
        check_run(record, "prereg.md", levels=None, exclusions=ChoiceRules(), log=False)
    message = str(info.value)
    assert "exclusions.authenticity.max_score: pre-registered 2.0, this run null" in message
    assert "exclusions.authenticity.canary: pre-registered true, this run null" in message
    # A study frozen without the rule refuses a run that adds it.
    plain = _demo()
    with pytest.raises(PreregError, match="exclusions.authenticity.canary: pre-registered null"):
        check_run(plain, "prereg.md", levels=None, exclusions=frozen, log=False)


def test_an_export_of_another_study_is_refused():
    record = _demo()
    check_study(pd.DataFrame({"study_slug": ["product-choice-demo"]}), record)
    with pytest.raises(PreregError, match="the export holds study other"):
        check_study(pd.DataFrame({"study_slug": ["other"]}), record)


def _console(*records: dict, bundle: str | None = None, version: int = 1) -> dict:
    return {
        "preregistrations": [
            {
                "prereg_sha256": r["prereg_sha256"],
                "recorded_at": f"2026-11-2{i} 10:00 UTC",
                "recorded_by": "cli",
                "document": "prereg.md",
                "study_version": 1,
                "amendment": r["amendment"],
            }
            for i, r in enumerate(records)
        ],
        "bundle_sha256": bundle or records[0]["bundle_sha256"],
        "study_version": version,
    }


def test_the_console_record_decides_which_document_is_the_pre_registration():
    record = _demo()
    found = check_console(record, _console(record))
    assert found.startswith("matches the pre-registration the console recorded")
    # Edited, then hashed again: it reads back, but the console never recorded it.
    forged = {**record, "analysis": {**record["analysis"], "alpha": 0.05}}
    forged["prereg_sha256"] = prereg_hash(forged)
    with pytest.raises(PreregError, match="it is none of them"):
        check_console(forged, _console(record))
    # Amended later: the earlier document is no longer the pre-registration.
    change = {"amends": [record["prereg_sha256"]], "reason": "A typo.", "seen": "look 1"}
    amended = freeze(read_study(DEMO, PAIRS), amendment=change)
    with pytest.raises(PreregError, match=r"was amended: .*\(A typo\.\)"):
        check_console(record, _console(record, amended))
    assert "the last of 2 recorded" in check_console(amended, _console(record, amended))
    # Stored files changed after the freeze (an image swapped): said, with the version.
    changed = check_console(record, _console(record, bundle="00" * 32, version=2))
    assert "stored files changed after the freeze (now version 2)" in changed
    none = check_console(record, {**_console(record), "preregistrations": []})
    assert none.startswith("not confirmed by the console: it has no pre-registration recorded")


def test_an_amendment_says_what_it_amends_why_and_after_what():
    record = _demo()
    change = {"amends": [record["prereg_sha256"]], "reason": "Quiz off.", "seen": "look 1 (35)"}
    amended = freeze(read_study(DEMO, PAIRS), amendment=change)
    assert amended["amendment"] == change and amended["prereg_sha256"] != record["prereg_sha256"]
    text = render_markdown(amended)
    assert "Amendment, written after data collection began (look 1 (35)): Quiz off." in text
    assert f"`{record['prereg_sha256']}`" in text and "Frozen before data collection" not in text
    first = freeze(read_study(DEMO, PAIRS), amendment={**change, "amends": []})
    assert "No pre-registration was frozen before data collection began." in render_markdown(first)
    with pytest.raises(PlanError, match="states amends, reason and seen"):
        freeze(read_study(DEMO, PAIRS), amendment={"reason": "x"})


def test_the_text_describes_the_design_three_formats_three_sequences():
    record = freeze(read_study(FORMATS_DEMO, ["product_pairs/formats-demo.yaml"]))
    assert record["design"] == {
        "blocks": [
            {
                "id": "choices",
                "formats": ["original", "summary", "mitigated:self-debias"],
                "pairs": 6,
            }
        ],
        "sequences": ["A", "B", "C"],
    }
    text = render_markdown(record)
    assert "two sequences" not in text
    assert "3 formats, `original`, `summary`, `mitigated:self-debias`" in text
    assert "3 x 3 cyclic Latin square: 3 sequences (A, B, C)" in text
    assert "Block `choices`: 6 product pairs" in text and "3 formats 2 times" in text
    two = render_markdown(_demo())
    assert "2 x 2 cyclic Latin square: 2 sequences (A, B)" in two
    assert "Block `choices`: 10 product pairs" in two and "2 formats 5 times" in two


def test_several_blocks_share_one_sequence(tmp_path):
    folder = tmp_path / "two"
    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs")
    text = DEMO.read_text()
    block = text[text.index("  - type: product_choice") :].split("\n  - type:")[0]
    pairs = (folder / "product_pairs" / "demo.yaml").read_text()
    (folder / "product_pairs" / "more.yaml").write_text(pairs.replace("id: ", "id: more-"))
    second = block.replace("product_pairs/demo.yaml", "product_pairs/more.yaml")
    second = re.sub(r"id: \S+", "id: more", second, count=1)
    (folder / DEMO.name).write_text(text.replace(block, block + "\n" + second))
    record = freeze(read_study(folder / DEMO.name, [*PAIRS, "product_pairs/more.yaml"]))
    assert [b["id"] for b in record["design"]["blocks"]] == ["choices", "more"]
    assert "2 product-choice blocks and a participant's one sequence" in render_markdown(record)


def test_power_is_cited_with_its_assumptions():
    table = pd.DataFrame(
        {"n": [50, 70], "n_sims": [1000, 1000], "estimate": [0.71, 0.86],
         "ci_low": [0.68, 0.84], "ci_high": [0.74, 0.88], "expected_n": [40.0, 52.1]}
    )  # fmt: skip
    record = freeze(read_study(DEMO, PAIRS), power=table, scenario={"effect": 2.0, "baseline": 0.5})
    text = render_markdown(record)
    assert "N = 70: 0.860 [0.840, 0.880]" in text and "effect = 2" in text
    assert json.loads(json.dumps(record))["power"]["table"][1]["n"] == 70
    assert record["prereg_sha256"] != _demo()["prereg_sha256"]  # the power cited is frozen too
