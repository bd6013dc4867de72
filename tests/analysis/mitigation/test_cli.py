"""`framelab mitigate list|METHOD|run|compare` through click's test runner."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.cli.mitigate import mitigate
from tests.analysis.mitigation.test_compare import FACTS
from tests.analysis.mitigation.test_runner import DOCS


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def docs_file(tmp_path):
    return _write_jsonl(tmp_path / "docs.jsonl", DOCS)


def _invoke(args):
    result = CliRunner().invoke(mitigate, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_list_prints_the_18_methods():
    out = _invoke(["list", "--format", "json"])
    rows = json.loads(out)
    assert len(rows) == 18
    mirostat = next(r for r in rows if r["method"] == "mirostat")
    assert mirostat["hyperparameters"] == "target=2.0, eta=0.1, variant=temperature"
    assert mirostat["backends"] == "transformers"
    assert mirostat["family"] == "decoding"
    table = _invoke(["list"])
    assert "balanced-coverage" in table and "gamma=1.5, tolerance=0.05" in table


def test_each_method_is_a_command_with_its_hyperparameters_as_options():
    command = mitigate.commands["weighted-tokens"]
    options = {p.name: p for p in command.params}
    assert options["negative"].opts == ["--negative"] and options["negative"].default == 0.3
    assert options["middle"].default == 2.0 and options["n_keywords"].opts == ["--n-keywords"]
    assert len(mitigate.commands) == 18 + 4  # the methods, list, run, compare, templates
    assert "[default: 0.3]" in " ".join(_invoke(["weighted-tokens", "--help"]).split())


def test_method_command_runs_and_resumes(tiny_model_dir, docs_file, tmp_path):
    out = tmp_path / "s.jsonl"
    args = [
        "position-shuffle",
        "--input",
        docs_file,
        "--out",
        out,
        "--model",
        tiny_model_dir,
        "--max-new-tokens",
        "4",
        "--device",
        "cpu",
        "--shuffle-seed",
        "3",
        "--no-progress",
    ]
    first = _invoke(args)
    assert "2 of 2 items done" in first
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["method"] for r in records} == {"position-shuffle"}
    assert records[0]["hyperparameters"] == {
        "shuffle_seed": 3,
        "seed_scope": "text",
        "sentence_split": "sentences",
    }
    assert "nothing to do" in _invoke(args)


def test_mitigate_has_generates_engine_options_and_writes_a_manifest(
    tiny_model_dir, docs_file, tmp_path
):
    """One settings object: --gguf-file, --revision, --attn, --threads exist and count."""
    from analysis.cli.generate import generate

    def engine_names(command):
        return {p.name for p in command.params} - {"input_path", "out_path", "no_progress"}

    wanted = {"gguf_file", "revision", "attn", "threads", "dtype", "seed", "sample"}
    for name in ("cloze", "run", "compare"):
        assert wanted <= engine_names(mitigate.commands[name])
    gen = {p.name: p for p in generate.commands["summarize"].params}
    mit = {p.name: p for p in mitigate.commands["cloze"].params}
    for name in wanted | {"max_new_tokens", "batch_size", "timeout", "max_retries"}:
        assert (gen[name].default, gen[name].help) == (mit[name].default, mit[name].help)
    out = tmp_path / "s.jsonl"
    _invoke(["cloze", "--input", docs_file, "--out", out, "--model", tiny_model_dir,
             "--max-new-tokens", "3", "--device", "cpu", "--attn", "eager", "--threads", "1",
             "--no-progress"])  # fmt: skip
    [run] = json.loads((tmp_path / "s.jsonl.manifest.json").read_text())["runs"]
    assert run["method"] == "cloze" and run["counts"]["generated"] == 2
    assert run["backend"]["attn_implementation"] == "eager"
    assert run["settings"]["backend"]["attn_implementation"] == "eager"  # in the resume key
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["template_hash"] for r in records} == {run["template_hash"]}


def test_run_command_takes_hyperparameters_by_name(tiny_model_dir, docs_file, tmp_path):
    out = tmp_path / "s.jsonl"
    _invoke(["run", "self-debias", "--set", "refresh-every=2", "--input", docs_file, "--out", out,
             "--model", tiny_model_dir, "--max-new-tokens", "4", "--device", "cpu",
             "--no-progress"])  # fmt: skip
    record = json.loads(out.read_text().splitlines()[0])
    assert record["hyperparameters"] == {"decay": 10.0, "refresh_every": 2}
    bad = CliRunner().invoke(
        mitigate,
        ["run", "self-debias", "--set", "lam=1", "--input", str(docs_file), "--out",
         str(tmp_path / "x.jsonl"), "--model", str(tiny_model_dir), "--no-progress"],
    )  # fmt: skip
    assert bad.exit_code != 0 and "has no hyperparameter 'lam'" in bad.output


def test_compare_writes_both_tables_and_the_plot(tiny_model_dir, docs_file, tmp_path):
    facts = _write_jsonl(tmp_path / "facts.jsonl", FACTS)
    out = tmp_path / "cmp"
    text = _invoke(["compare", "--dataset", docs_file, "--facts", facts, "--methods", "all",
                    "--model", tiny_model_dir, "--out", out, "--judge", "vader",
                    "--embedder", "hashing", "--cutoff", "2023-06-30", "--max-new-tokens", "4",
                    "--device", "cpu", "--no-progress"])  # fmt: skip
    summary = pd.read_csv(out / "summarization_table.csv")
    assert len(summary) == 16 and summary["method"].iloc[0] == "baseline"
    assert (summary["dataset"] == "reviews").all()  # the items name their dataset
    facts_table = pd.read_csv(out / "fact_check_table.csv")
    assert facts_table.groupby("period").size().to_dict() == {"all": 4, "post": 4, "pre": 4}
    assert (out / "summarization_table.png").stat().st_size > 1000
    assert "strict_acc" in text and "psi_pri" in text


def test_compare_keeps_datasets_apart_when_they_reuse_item_ids(tiny_model_dir, tmp_path):
    plain = [{k: v for k, v in d.items() if k != "dataset"} for d in DOCS]
    first = _write_jsonl(tmp_path / "one.jsonl", plain)
    second = _write_jsonl(tmp_path / "two.jsonl", plain)
    out = tmp_path / "cmp"
    _invoke(["compare", "--dataset", first, "--dataset", second, "--methods", "cloze",
             "--model", tiny_model_dir, "--out", out, "--judge", "vader", "--embedder", "hashing",
             "--max-new-tokens", "3", "--device", "cpu", "--no-progress"])  # fmt: skip
    table = pd.read_csv(out / "summarization_table.csv")
    assert sorted(zip(table["dataset"], table["method"], table["n"], strict=True)) == [
        ("one", "baseline", 2), ("one", "cloze", 2), ("two", "baseline", 2), ("two", "cloze", 2),
    ]  # fmt: skip


def test_compare_tables_are_spreadsheet_safe(tiny_model_dir, tmp_path):
    from tests.analysis.test_safecsv import MODEL, SCRAPED, assert_inert

    named = [{**d, "dataset": name} for d, name in zip(DOCS, (MODEL, SCRAPED), strict=True)]
    docs = _write_jsonl(tmp_path / "docs.jsonl", named)
    facts = _write_jsonl(tmp_path / "facts.jsonl", FACTS)
    out = tmp_path / "cmp"
    _invoke(["compare", "--dataset", docs, "--facts", facts, "--methods", "cloze",
             "--model", tiny_model_dir, "--out", out, "--judge", "vader", "--embedder", "hashing",
             "--max-new-tokens", "3", "--device", "cpu", "--no-progress"])  # fmt: skip
    assert_inert(out, MODEL, SCRAPED)
    assert pd.read_csv(out / "fact_check_table.csv")["n_pairs"].dtype.kind == "i"


def test_compare_takes_fact_checks_from_a_dataset_file(tiny_model_dir, tmp_path):
    mixed = _write_jsonl(tmp_path / "mixed.jsonl", DOCS[:1] + FACTS)
    out = tmp_path / "cmp"
    _invoke(["compare", "--dataset", mixed, "--methods", "cloze,epistemic-tagging",
             "--model", tiny_model_dir, "--out", out, "--judge", "vader", "--embedder", "hashing",
             "--max-new-tokens", "3", "--device", "cpu", "--no-progress"])  # fmt: skip
    summary = pd.read_csv(out / "summarization_table.csv")
    assert list(summary["method"]) == ["baseline", "cloze"] and (summary["n"] == 1).all()
    facts = pd.read_csv(out / "fact_check_table.csv")
    assert list(facts["method"]) == ["baseline", "epistemic-tagging"]  # no cutoff: split "all"
    assert (facts["period"] == "all").all() and (facts["n_pairs"] == 2).all()


def test_compare_refuses_facts_without_pairs_before_generating_then_resumes(
    tiny_model_dir, tmp_path
):
    """Regression (walkthrough): facts lacking pair_id/truth were found only after generating
    every method, and the re-run with the fields added resumed the old records and failed."""
    plain = [{"id": f["item_id"], "text": f["text"], "date": f["date"]} for f in FACTS]
    facts = _write_jsonl(tmp_path / "facts.jsonl", plain)
    out = tmp_path / "cmp"
    args = ["compare", "--facts", facts, "--methods", "epistemic-tagging", "--model",
            tiny_model_dir, "--out", out, "--judge", "vader", "--max-new-tokens", "3",
            "--device", "cpu", "--no-progress"]  # fmt: skip
    bad = CliRunner().invoke(mitigate, [str(a) for a in args])
    assert bad.exit_code != 0
    assert f"{facts}: 4 of 4 item(s) have no field 'pair_id' (first: record 1" in bad.output
    assert "Nothing was generated" in bad.output
    assert not (out / "fact_checks.jsonl").exists()
    _write_jsonl(facts, [{**p, "pair_id": f["pair_id"], "truth": f["truth"]}
                         for p, f in zip(plain, FACTS, strict=True)])  # fmt: skip
    _invoke(args)
    table = pd.read_csv(out / "fact_check_table.csv")
    assert list(table["method"]) == ["baseline", "epistemic-tagging"]
    assert (table["n_pairs"] == 2).all()


def test_compare_needs_one_fixed_judge_and_refuses_the_model_under_test(
    tiny_model_dir, docs_file, tmp_path
):
    base = ["compare", "--dataset", docs_file, "--methods", "cloze", "--model", tiny_model_dir,
            "--out", tmp_path / "cmp", "--embedder", "hashing", "--max-new-tokens", "2",
            "--device", "cpu", "--no-progress"]  # fmt: skip
    runner = CliRunner()

    def run(*extra):
        return runner.invoke(mitigate, [str(a) for a in [*base, *extra]])

    missing = run()
    assert missing.exit_code != 0 and "give --judge" in missing.output
    for own in ("model", tiny_model_dir):
        refused = run("--judge", own)
        assert refused.exit_code != 0 and "is the model under test" in refused.output
    assert not (tmp_path / "cmp").exists()  # refused before anything was generated
    allowed = run("--judge", "model", "--allow-self-judge")
    assert allowed.exit_code == 0, allowed.output
    assert "judges its own framing" in allowed.output
    judged = pd.read_json(tmp_path / "cmp" / "judgments.jsonl", lines=True)
    assert set(judged["model"]) == {str(tiny_model_dir)}


def test_compare_warns_that_minilm_is_not_the_papers_embedder(tiny_model_dir, docs_file, tmp_path):
    from analysis.metrics.embed import PRIMACY_SCALE_WARNING

    assert "E5" in PRIMACY_SCALE_WARNING and "all-MiniLM-L6-v2" in PRIMACY_SCALE_WARNING
    quiet = CliRunner().invoke(mitigate, [str(a) for a in [
        "compare", "--dataset", docs_file, "--methods", "cloze", "--model", tiny_model_dir,
        "--out", tmp_path / "cmp", "--judge", "vader", "--embedder", "hashing",
        "--max-new-tokens", "2", "--device", "cpu", "--no-progress"]])  # fmt: skip
    assert quiet.exit_code == 0 and PRIMACY_SCALE_WARNING not in quiet.output


def test_compare_prints_both_error_rates_by_name(tiny_model_dir, tmp_path):
    facts = _write_jsonl(tmp_path / "facts.jsonl", FACTS)
    out = tmp_path / "cmp"
    text = _invoke(["compare", "--facts", facts, "--methods", "epistemic-tagging", "--model",
                    tiny_model_dir, "--out", out, "--cutoff", "2023-06-30",
                    "--max-new-tokens", "2", "--device", "cpu", "--no-progress"])  # fmt: skip
    table = pd.read_csv(out / "fact_check_table.csv")
    assert (table["strict_error_rate"] == 1 - table["strict_acc"]).all()
    assert (table["actual_news_error_rate"] == 1 - table["actual_acc"]).all()
    assert "actual_news_error_rate" in text and "strict_error_rate" in text
    assert "'post' row" in text
