"""``framelab plan power`` and ``plan boundaries``; ``framelab analyze choice --prereg``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.cli.analyze import analyze
from analysis.cli.plan import plan
from analysis.plan.prereg import freeze, render_markdown
from analysis.plan.spec import read_study
from analysis.simulate import simulate_choice_study

ROOT = Path(__file__).resolve().parents[3]
DEMO = str(ROOT / "stimuli" / "studies" / "product-choice-demo.yaml")


def test_boundaries_of_the_demo():
    result = CliRunner().invoke(plan, ["boundaries", DEMO])
    assert result.exit_code == 0, result.output
    assert "look 1 at N = 35: efficacy z 2.9626" in result.output
    assert "look 3 at N = 70: efficacy z 2.0141" in result.output


def test_power_needs_stated_assumptions_then_writes_and_resumes(tmp_path):
    runner = CliRunner()
    out = tmp_path / "power"
    missing = runner.invoke(plan, ["power", DEMO, "--effect", "2", "--out", str(out)])
    assert missing.exit_code == 2
    assert "choice_glmm needs --baseline, --sd-participant, --sd-pair" in missing.output
    given = ["--baseline", "0.5", "--sd-participant", "0.5", "--sd-pair", "0.3"]
    tiny = runner.invoke(plan, ["power", DEMO, "--effect", "2", *given, "--n", "6", "--out", "x"])
    assert tiny.exit_code == 2 and "N = 6 gives looks of [3, 5, 6] participants" in tiny.output
    args = ["power", DEMO, "--effect", "3", "--baseline", "0.5", "--sd-participant", "0.5"]
    args += ["--sd-pair", "0.3", "--n", "12,16", "--jobs", "1", "--quiet"]
    first = runner.invoke(plan, [*args, "--sims", "3", "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert "N = 12: power" in first.output and "expected N" in first.output
    table = pd.read_csv(out / "power.csv")
    assert table["n"].tolist() == [12, 16] and (table["n_sims"] == 3).all()
    summary = json.loads((out / "power.json").read_text())
    assert summary["scenario"]["effect"] == 3.0 and summary["looks"]["at"] == [0.5, 0.75, 1.0]
    lines = (out / "simulations.jsonl").read_text().splitlines()
    assert len(lines) == 1 + 6
    more = runner.invoke(plan, [*args, "--sims", "5", "--out", str(out)])
    assert more.exit_code == 0, more.output
    assert len((out / "simulations.jsonl").read_text().splitlines()) == 1 + 10
    other = runner.invoke(plan, [*args, "--sims", "5", "--seed", "2", "--out", str(out)])
    assert other.exit_code == 1 and "differs in: seed" in other.output


def test_analyze_with_a_prereg_refuses_another_analysis_and_reports_the_primary(tmp_path):
    record = freeze(read_study(DEMO, ["product_pairs/demo.yaml"]))
    doc = tmp_path / "prereg.md"
    doc.write_text(render_markdown(record))
    export = tmp_path / "long.csv"
    data = simulate_choice_study(
        80, 10, seed=4, rate_original=0.4, rate_summary=0.9, study_slug="product-choice-demo"
    )
    data.to_csv(export, index=False)
    runner = CliRunner()
    base = ["choice", str(export), "--prereg", str(doc), "--no-figures"]
    refused = runner.invoke(analyze, [*base, "--keep-failed-quiz", "--out", str(tmp_path / "x")])
    assert refused.exit_code == 1
    assert "exclusions.require_quiz: pre-registered true, this run false" in refused.output
    assert not (tmp_path / "x").exists()
    done = runner.invoke(analyze, [*base, "--out", str(tmp_path / "report")])
    assert done.exit_code == 0, done.output
    assert "The primary analysis is the pre-registered one (prereg.md" in done.output
    assert "stopped the study at look 1 of 3 (35 participants" in done.output
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    primary = results["tables"]["primary"][0]
    assert primary["look"] == 1 and primary["reject"] is True and primary["later_looks"] == 2
    assert results["meta"]["preregistration"]["prereg_sha256"] == record["prereg_sha256"]
    # Run on its own, the research package cannot read the console's record, and says so.
    console = results["meta"]["preregistration"]["console"]
    assert console.startswith("not compared with the console's record: run through the")
    assert f"Console record: {console}." in done.output
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Primary analysis (pre-registered)" in html
    assert html.index("Primary analysis (pre-registered)") < html.index("Excluded rows")
    other = data.assign(study_slug="another-study")
    other.to_csv(export, index=False)
    wrong = runner.invoke(analyze, [*base, "--out", str(tmp_path / "y")])
    assert wrong.exit_code == 1 and "the pre-registration is of product-choice-demo" in wrong.output


def test_power_takes_its_assumptions_from_a_pilot(tmp_path):
    import numpy as np

    from analysis.plan.simulate import Scenario, simulate_arrivals

    study = read_study(DEMO)
    truth = Scenario(effect=1.5, baseline=0.4, sd_participant=0.6, sd_pair=0.3)
    pilot = simulate_arrivals(study.blocks, 60, truth, study.plan, np.random.default_rng(1))
    path = tmp_path / "pilot.csv"
    pilot.to_csv(path, index=False)
    args = ["power", DEMO, "--effect", "3", "--pilot", str(path), "--sd-pair", "0.25"]
    args += ["--n", "12", "--sims", "2", "--jobs", "1", "--quiet", "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(plan, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "o" / "power.json").read_text())
    assert summary["scenario_source"] == "pilot pilot.csv (60 analysed)"
    assert summary["scenario"]["sd_pair"] == 0.25  # a flag overrides the pilot
    assert summary["scenario"]["baseline"] == pytest.approx(0.4, abs=0.1)
    assert summary["scenario"]["exclusion_share"] == 0.0


def _export_and_document(tmp_path) -> tuple[dict, Path, Path]:
    record = freeze(read_study(DEMO, ["product_pairs/demo.yaml"]))
    doc = tmp_path / "prereg.md"
    doc.write_text(render_markdown(record))
    export = tmp_path / "long.csv"
    # A small export: these tests check the document against the console, not the numbers.
    simulate_choice_study(
        24, 4, seed=4, rate_original=0.4, rate_summary=0.9, study_slug="product-choice-demo"
    ).to_csv(export, index=False)
    return record, doc, export


def test_a_primary_block_edited_into_the_document_does_not_pass_as_pre_registered(tmp_path):
    """The red team's edit: a `primary` block with the quiz exclusion off, and a run without it."""
    import re

    record, doc, export = _export_and_document(tmp_path)
    primary = {
        "test": "choice_glmm",
        "dv": "chose_target",
        "levels": ["original", "summary"],
        "direction": "greater",
        "alpha": 0.025,
        "transform": "none",
        "exclusions": {**record["analysis"]["exclusions"], "require_quiz": False},
    }
    match = re.search(r"```json framelab-prereg\n(.*?)\n```", doc.read_text(), re.S)
    edited = {**json.loads(match.group(1)), "primary": primary}
    doc.write_text(doc.read_text().replace(match.group(1), json.dumps(edited, indent=2)))
    args = ["choice", str(export), "--prereg", str(doc), "--keep-failed-quiz", "--no-figures"]
    result = CliRunner().invoke(analyze, [*args, "--out", str(tmp_path / "report")])
    assert result.exit_code == 1
    assert "the frozen record was changed after freezing" in result.output
    assert "Primary analysis (pre-registered)" not in result.output
    assert not (tmp_path / "report").exists()


def test_an_edited_text_is_named_and_the_frozen_plan_still_runs(tmp_path):
    """The prose is not hashed: editing it (here, a looser alpha) is named, and the run keeps
    the frozen record's plan. Line endings a text editor changed are no edit."""
    from analysis.plan.prereg import render_html

    record, doc, export = _export_and_document(tmp_path)
    base = ["choice", str(export), "--no-figures", "--no-gee"]
    doc.write_bytes(doc.read_text().replace("\n", "\r\n").encode())
    clean = CliRunner().invoke(analyze, [*base, "--prereg", str(doc), "--out", str(tmp_path / "a")])
    assert clean.exit_code == 0, clean.output
    assert "WARNING" not in clean.output
    said = "at alpha = 0.025 (one-sided)"
    doc.write_text(doc.read_text().replace(said, "at alpha = 0.05 (one-sided)"))
    page = tmp_path / "prereg.html"
    page.write_text(render_html(record).replace(said, "at alpha = 0.05 (one-sided)"))
    for path, where in ((doc, "## Analyses"), (page, "<h2>Analyses</h2>")):
        out = tmp_path / f"report-{path.suffix[1:]}"
        run = CliRunner().invoke(analyze, [*base, "--prereg", str(path), "--out", str(out)])
        assert run.exit_code == 0, run.output
        warning = (
            f"WARNING: the text of {path.name} differs from the text its frozen record was "
            f"written with (first under {where!r}), so it was edited after freezing: the "
            "frozen record is the pre-registration, and this analysis follows it"
        )
        assert warning in run.output
        meta = json.loads((out / "results.json").read_text())["meta"]["preregistration"]
        assert meta["alpha"] == 0.025 and meta["text_edited"] == warning.removeprefix("WARNING: ")
        assert "edited after freezing" in (out / "report.html").read_text()


def _with_console(console):
    """``framelab`` as the console script assembles it: a lookup of the console's record."""
    import click

    from analysis.cli import CONSOLE_RECORD

    @click.group()
    @click.pass_context
    def main(ctx: click.Context) -> None:
        ctx.meta[CONSOLE_RECORD] = console

    main.add_command(analyze)
    return main


def test_analyze_compares_the_document_with_the_console_record(tmp_path):
    from analysis.plan.prereg import prereg_hash

    record, doc, export = _export_and_document(tmp_path)
    held = {
        "preregistrations": [
            {
                "prereg_sha256": record["prereg_sha256"],
                "recorded_at": "2026-11-20 10:00 UTC",
                "recorded_by": "cli",
                "document": "prereg.md",
                "study_version": 1,
                "amendment": None,
            }
        ],
        "bundle_sha256": record["bundle_sha256"],
        "study_version": 1,
    }
    args = ["analyze", "choice", str(export), "--prereg", str(doc), "--no-figures", "--no-gee"]
    console = _with_console(lambda slug: held)
    done = CliRunner().invoke(console, [*args, "--out", str(tmp_path / "a")])
    assert done.exit_code == 0, done.output
    assert (
        "Console record: matches the pre-registration the console recorded for "
        "product-choice-demo on 2026-11-20 10:00 UTC (by cli)." in done.output
    )
    html = (tmp_path / "a" / "report.html").read_text()
    assert "matches the pre-registration the console recorded" in html

    # Edited and hashed again: it reads back, but it is not what the console recorded.
    forged = {**record, "analysis": {**record["analysis"], "alpha": 0.05}}
    forged["prereg_sha256"] = prereg_hash(forged)
    doc.write_text(render_markdown(forged))
    refused = CliRunner().invoke(console, [*args, "--out", str(tmp_path / "b")])
    assert refused.exit_code == 1 and "it is none of them" in refused.output
    assert not (tmp_path / "b").exists()

    def unreachable(slug):
        raise LookupError("the database postgresql://x@db/framelab cannot be read (refused)")

    doc.write_text(render_markdown(record))
    said = CliRunner().invoke(_with_console(unreachable), [*args, "--out", str(tmp_path / "c")])
    assert said.exit_code == 0, said.output
    assert (
        "Console record: not compared with the console's record of product-choice-demo: the "
        "database postgresql://x@db/framelab cannot be read (refused)." in said.output
    )


FORMATS_DEMO = str(ROOT / "stimuli" / "studies" / "product-choice-formats-demo.yaml")


def test_the_three_format_demo_simulates_its_own_design_and_refuses_a_bot_pilot(tmp_path):
    import numpy as np

    from analysis.plan.simulate import Scenario, simulate_arrivals

    study = read_study(FORMATS_DEMO)
    args = ["power", FORMATS_DEMO, "--effect", "0.5", "--baseline", "0.7"]
    args += ["--n", "30", "--sims", "4", "--jobs", "1", "--quiet"]
    given = ["--sd-participant", "0.5", "--sd-pair", "0.5"]
    result = CliRunner().invoke(plan, [*args, *given, "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "3 formats in a 3-sequence Latin square" in result.output
    assert "of mitigated:self-debias vs summary" in result.output
    table = pd.read_csv(tmp_path / "o" / "power.csv")
    assert table["n_failed"].tolist() == [0]
    summary = json.loads((tmp_path / "o" / "power.json").read_text())
    assert summary["design"][0]["formats"] == ["original", "summary", "mitigated:self-debias"]
    # The study's own pilot of three formats is read; a bot pilot's SDs of 0 are refused. These
    # bots take turns: every participant and pair chooses the target half the time.
    bots = Scenario(effect=1.0, baseline=0.5, sd_participant=0.0, sd_pair=0.0)
    pilot = simulate_arrivals(study.blocks, 30, bots, study.plan, np.random.default_rng(5))
    arrival = pilot["participant_id"].str[2:].astype(int)
    pilot["chose_target"] = (pilot["trial_index"] + arrival) % 2
    path = tmp_path / "pilot.csv"
    pilot.to_csv(path, index=False)
    refused = CliRunner().invoke(plan, [*args, "--pilot", str(path), "--out", str(tmp_path / "p")])
    assert refused.exit_code == 2
    assert "estimates sd_participant" in refused.output and "--sd-participant" in refused.output
    stated = CliRunner().invoke(
        plan, [*args, "--pilot", str(path), *given, "--out", str(tmp_path / "q")]
    )
    assert stated.exit_code == 0, stated.output
    assert "pilot pilot.csv (30 analysed)" in stated.output
