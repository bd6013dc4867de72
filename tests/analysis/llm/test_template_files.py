"""Prompt templates as named, hashed files a researcher can replace without code changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from analysis.llm.store import read_records
from analysis.llm.tasks import TASKS, run_task
from analysis.llm.templates import (
    PROMPT_DIR,
    TemplateError,
    list_templates,
    load_template_file,
    resolve_template,
)

PAPER_WORDING = "Please write a short summary of this news article.\n\nArticle: {text}"


def test_every_tasks_default_prompt_is_a_file_whose_text_is_hashed():
    defaults = [t for t in list_templates() if not t.name.startswith("mitigate-")]
    assert {t.task for t in defaults} == set(TASKS)
    for tpl in defaults:
        path = Path(tpl.source)
        assert path.parent == PROMPT_DIR / tpl.task and path.stem == tpl.name
        again = load_template_file(path, tpl.task)
        assert again.hash() == tpl.hash()
        raw = path.read_text(encoding="utf-8")
        assert again.user == (json.loads(raw)["user"] if path.suffix == ".json" else raw[:-1])
    # The files hold exactly the old built-in wording: results stored before still resume.
    assert resolve_template("summarize", None, "baseline").hash() == "907b6fa6ea9667e7"


def test_a_researchers_own_file_replaces_a_tasks_prompt(tmp_path, fake_backend):
    own = tmp_path / "paper.txt"
    own.write_text(PAPER_WORDING + "\n", encoding="utf-8")
    backend = fake_backend(lambda req: "A summary.")
    items = [{"item_id": "a", "text": "The council met."}]
    out = tmp_path / "s.jsonl"
    run = run_task("summarize", items, backend, out, template=f"summarize={own}", progress=False)
    assert run.n_generated == 1
    assert backend.seen[0].messages[-1]["content"] == PAPER_WORDING.format(text="The council met.")
    [record] = list(read_records(out))
    assert record["template"] == "paper"
    baseline = run_task("summarize", items, backend, out, progress=False)
    assert baseline.n_generated == 1  # another prompt, another key
    assert len({r["template_hash"] for r in read_records(out)}) == 2
    again = run_task("summarize", items, backend, out, template=str(own), progress=False)
    assert again.n_generated == 0  # same file, same hash: resumes
    own.write_text(PAPER_WORDING.replace("short", "brief") + "\n", encoding="utf-8")
    edited = run_task("summarize", items, backend, out, template=str(own), progress=False)
    assert edited.n_generated == 1  # an edited file is a new prompt
    runs = json.loads(Path(str(out) + ".manifest.json").read_text())["runs"]
    assert runs[0]["template_file"] == str(own)
    assert runs[0]["template_text_hash"] != runs[-1]["template_text_hash"]
    assert runs[1]["template_file"].endswith("summarize/baseline.txt")


@pytest.mark.parametrize(
    ("task", "text", "message"),
    [
        ("summarize", "Summarize {article}", r"\['article'\] are not filled in by summarize"),
        ("summarize", "Summarize the text.", "must contain {text}"),
        ("judge-pair", "Which is better? {text}", "must contain {summary_1}"),
        ("summarize", "Summarize {text", "literal braces"),
        ("summarize", "  \n", "empty"),
    ],
)
def test_bad_template_files_get_clear_messages(tmp_path, task, text, message):
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TemplateError, match=message):
        load_template_file(path, task)


def test_template_option_on_the_command_line(tmp_path, tiny_model_dir):
    from analysis.cli.generate import generate

    own = tmp_path / "fc.json"
    own.write_text(json.dumps({"system": "You check facts.", "user": "True or false? {text}"}))
    items = tmp_path / "i.jsonl"
    items.write_text(json.dumps({"item_id": "x", "text": "Paris is in France."}) + "\n")
    args = ["fact-check", "--input", items, "--out", tmp_path / "o.jsonl", "--model",
            tiny_model_dir, "--max-new-tokens", "2", "--device", "cpu",
            "--no-progress"]  # fmt: skip
    runner = CliRunner()
    ok = runner.invoke(generate, [str(a) for a in [*args, "--template", f"fact-check={own}"]])
    assert ok.exit_code == 0, ok.output
    [record] = list(read_records(tmp_path / "o.jsonl"))
    assert record["template"] == "fc"
    wrong = runner.invoke(generate, [str(a) for a in [*args, "--template", f"summarize={own}"]])
    assert wrong.exit_code != 0 and "runs fact-check, not summarize" in wrong.output
    missing = runner.invoke(generate, [str(a) for a in [*args, "--template", "nope.txt"]])
    assert missing.exit_code != 0 and "cannot read template file nope.txt" in missing.output
    listing = runner.invoke(generate, ["templates", "--task", "summarize"])
    assert "summarize/words-100.json" in listing.output


def test_the_perspective_prompt_forces_the_papers_opening():
    """001 Table 7: the instruction-tuned models answer with the summary alone, beginning with
    "The left" or "The right"."""
    import analysis.llm.tasks  # noqa: F401  (registers the task templates)
    from analysis.llm.templates import get_template

    tpl = get_template("perspective-summary", "baseline")
    for side in ("left", "right"):
        content = tpl.messages(text="PASSAGES", perspective=side)[-1]["content"]
        assert f'start it with "The {side}"' in content and "summary alone" in content
        assert content.rstrip().endswith("PASSAGES")
