"""``--prompts FILE``: a researcher's own prompts for every method and task, checked, and
recorded in the manifest and the resume key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from analysis.llm.templates import TASK_FIELDS, TemplateError
from analysis.mitigation.plans import plan_of
from analysis.mitigation.prompt_file import load_prompts, method_prompts
from analysis.mitigation.prompts import STEPS
from analysis.mitigation.registry import METHODS
from analysis.mitigation.runner import method_hash, run_method
from tests.analysis.mitigation.test_runner import DOCS, FACTS, EchoBackend

MARK = "OWN-WORDING"


def _text_for(step: str) -> str:
    spec = STEPS[step]
    fields = " ".join("{" + f + "}" for f in spec.fields)
    return f"{MARK} {step}: {fields} FINAL_SUMMARY: Answer:"


def _entry(method: str):
    """The prompts-file value for a method: a text for one prompt, else a mapping."""
    own = method_prompts(method)
    texts = {p: (f"{MARK} summarize {{text}}" if p == "summarize" else _text_for(p)) for p in own}
    return next(iter(texts.values())) if len(texts) == 1 else texts


def _write(tmp_path: Path, data: dict, suffix: str = ".yaml") -> Path:
    path = tmp_path / f"prompts{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_supplied_prompt_replaces_the_methods_default(method, tmp_path):
    path = _write(tmp_path, {method: _entry(method)}, ".json" if len(method) % 2 else ".yaml")
    templates = load_prompts(path)
    plan = plan_of(method, templates=templates)
    default = plan_of(method)
    own = method_prompts(method)
    # Every prompt of the method is the supplied one, under the default's name, with its source
    # (a self-help rewrite that uses {critique} adds the critique pass the default leaves out).
    assert len(plan.templates) == len(default.templates) + (method == "self-help-debias")
    replaced = [t for t in plan.templates if t.user.startswith(MARK)]
    assert len(replaced) == len(own)
    assert {t.name for t in replaced} <= {t.name for t in default.templates} | {
        "mitigate-self-help-critique"
    }
    assert all(t.source.startswith(f"{path}#{method}") for t in replaced)
    # … which changes the resume key.
    values = METHODS[method].defaults()
    assert method_hash(method, plan, values, {}) != method_hash(method, default, values, {})
    if "transformers" in METHODS[method].backends and len(METHODS[method].backends) == 1:
        return  # decoding and attention methods need a model; the plan is what they run
    backend = EchoBackend()
    items = FACTS if METHODS[method].task == "fact-check" else DOCS[:1]
    out = tmp_path / "o.jsonl"
    params = {"cutoff": "2023-04-30"} if method == "knowledge-boundary" else None
    run_method(method, items, backend, out, progress=False, templates=templates, params=params)
    assert backend.prompts and all(p.startswith(MARK) for p in backend.prompts)
    runs = json.loads(Path(str(out) + ".manifest.json").read_text())["runs"]
    assert all(src.startswith(str(path)) for src in runs[0]["template_files"].values())


def test_a_methods_own_summarize_prompt_does_not_reach_other_methods(tmp_path):
    templates = load_prompts(_write(tmp_path, {"mirostat": f"{MARK} {{text}}"}))
    assert plan_of("mirostat", templates=templates).templates[-1].user.startswith(MARK)
    for other in ("balanced-coverage", "baseline"):
        assert not plan_of(other, templates=templates).templates[-1].user.startswith(MARK)


@pytest.mark.parametrize("task", sorted(TASK_FIELDS))
def test_every_generate_task_takes_its_prompt_from_the_file(task, tmp_path):
    from analysis.llm.templates import get_template

    fields = " ".join("{" + f + "}" for f in TASK_FIELDS[task])
    [tpl] = load_prompts(_write(tmp_path, {task: {"user": f"{MARK} {fields}",
                                                   "system": "Be brief."}})).values()  # fmt: skip
    assert (tpl.task, tpl.user, tpl.system) == (task, f"{MARK} {fields}", "Be brief.")
    default = get_template(task, "wildframe" if task == "reframe" else "baseline")
    assert tpl.name == default.name and tpl.hash() != default.hash()


def test_generate_runs_the_files_prompt_and_records_it(tiny_model_dir, tmp_path):
    from analysis.cli.generate import generate

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in DOCS[:1]))
    path = _write(tmp_path, {"summarize": f"{MARK} in one line: {{text}}"})
    args = ["summarize", "--input", docs, "--out", tmp_path / "s.jsonl", "--model",
            tiny_model_dir, "--max-new-tokens", "2", "--device", "cpu",
            "--no-progress"]  # fmt: skip
    runner = CliRunner()
    assert runner.invoke(generate, [str(a) for a in [*args, "--prompts", path]]).exit_code == 0
    assert runner.invoke(generate, [str(a) for a in args]).exit_code == 0  # the default prompt
    records = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert len({r["template_hash"] for r in records}) == 2
    runs = json.loads((tmp_path / "s.jsonl.manifest.json").read_text())["runs"]
    assert runs[0]["template_file"] == f"{path}#summarize"
    both = runner.invoke(generate, [str(a) for a in [*args, "--prompts", path, "--template",
                                                     "words-100"]])  # fmt: skip
    assert both.exit_code != 0 and "keep one of them" in both.output


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"cot-final": "x {text}"}, r"unknown name 'cot-final'; the file may name tasks"),
        ({"cot": "no placeholder"}, r"prompts.yaml#cot: a mitigate-cot template must contain"),
        ({"cot": "{text} {draft}"}, r"placeholder\(s\) \['draft'\] are not filled in"),
        ({"self-debias": "one {text}"}, r"self-debias has several prompts; give a mapping"),
        ({"mirostat": {"cot": "{text}"}}, r"'cot' is not a prompt of mirostat; it has summarize"),
        ({"summarize": {"usr": "{text}"}}, r"expected a prompt text"),
        ({"knowledge-boundary": "{text} only"}, r"must contain \{cutoff\}"),
    ],
)
def test_bad_prompt_files_are_refused_with_the_key_and_the_reason(data, message, tmp_path):
    with pytest.raises(TemplateError, match=message):
        load_prompts(_write(tmp_path, data))


def test_mitigate_command_takes_the_prompts_file(tiny_model_dir, tmp_path):
    from analysis.cli.mitigate import mitigate

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in DOCS[:1]))
    good = _write(tmp_path, {"cloze": _text_for("cloze")})
    bad = tmp_path / "bad.yaml"
    bad.write_text("nonsense-method: '{text}'\n")
    args = ["cloze", "--input", docs, "--out", tmp_path / "o.jsonl", "--model", tiny_model_dir,
            "--max-new-tokens", "2", "--device", "cpu", "--no-progress"]  # fmt: skip
    runner = CliRunner()
    ok = runner.invoke(mitigate, [str(a) for a in [*args, "--prompts", good]])
    assert ok.exit_code == 0, ok.output
    runs = json.loads((tmp_path / "o.jsonl.manifest.json").read_text())["runs"]
    assert runs[0]["template_files"] == {"mitigate-cloze": f"{good}#cloze"}
    refused = runner.invoke(mitigate, [str(a) for a in [*args, "--prompts", bad]])
    assert refused.exit_code != 0 and "unknown name 'nonsense-method'" in refused.output
