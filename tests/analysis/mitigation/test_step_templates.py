"""The mitigation methods' own prompts are named, hashed template files a researcher can replace.

Every prompt, the mitigation steps' included (chain-of-thought, cloze, the
self-help rewrite, the explanation step of the Local-Explanation Guard, Self-Debias's prefix …),
is a file; ``--template STEP=PATH`` on ``framelab mitigate`` replaces one without code changes,
and the replacement's text enters the resume key and the manifest.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from analysis.llm.templates import PROMPT_DIR, TemplateError, get_template
from analysis.mitigation import prompts
from analysis.mitigation.plans import plan_of
from analysis.mitigation.prompts import STEPS, load_step_file, step_template
from analysis.mitigation.registry import METHODS
from analysis.mitigation.runner import method_hash, run_method
from tests.analysis.mitigation.test_runner import DOCS, FACTS, EchoBackend


def _own_text(step: str) -> str:
    # A rewrite that asks for {critique} adds the critique pass (tested on its own).
    fields = " ".join("<{" + f + "}>" for f in STEPS[step].fields if f != "critique")
    return f"MY OWN WORDING for {step}: {fields} FINAL_SUMMARY: Answer:"


def _own_file(tmp_path: Path, step: str) -> Path:
    path = tmp_path / f"{step}-own.txt"
    path.write_text(_own_text(step) + "\n", encoding="utf-8")
    return path


def test_every_mitigation_prompt_is_a_default_file_registered_under_its_task():
    assert {p.stem for p in (PROMPT_DIR / "mitigate").iterdir()} == set(STEPS)
    for step in STEPS.values():
        tpl = step_template(step.name)
        assert Path(tpl.source).parent == PROMPT_DIR / "mitigate"
        assert Path(tpl.source).stem == step.name
        assert get_template(step.task, "mitigate-" + step.name) is tpl
        assert load_step_file(tpl.source, step.name).hash() == tpl.hash()
        for method in step.methods:
            assert method in METHODS
    # Every method's plan draws its own prompts from these files (or the baseline's); the
    # self-help critique runs only under a rewrite prompt that uses {critique}.
    used = {t.name for m in METHODS for t in plan_of(m).templates}
    assert used == {"mitigate-" + s for s in STEPS if s != "self-help-critique"} | {"baseline"}


def test_no_prompt_text_is_left_in_the_mitigation_code():
    """The defaults' sentences occur in no module of analysis/mitigation (they live in files)."""
    code = "\n".join(
        p.read_text(encoding="utf-8") for p in (Path(prompts.__file__).parent).glob("*.py")
    )
    for step in STEPS:
        text = step_template(step).user
        # The longest line of each prompt, e.g. "Critique the summary's positional coverage…"
        line = max(text.splitlines(), key=len)
        assert line[:40] not in code, (step, line)


def test_the_files_hold_the_former_wording_so_stored_results_still_resume():
    """Hashes from before the move (commit b1b2c77): the Guard's prompt is unchanged; self-debias
    changed (its prefix, which entered the hash through the processor's repr, is now also one of
    the method's templates), and so did the methods whose prompts were brought to the structure
    of 000 A.8."""
    settings = {"x": 1}
    before = {
        "cloze": "04ea74beab3abadb",
        "self-help-debias": "6622e74d02a4fa57",
        "partial-summaries": "b5c62f26ca77b2bb",
        "explanation-guard": "77e89f0756cb1afa",
        "self-debias": "3af299cea761374e",
    }
    for name, old in before.items():
        now = method_hash(name, plan_of(name), METHODS[name].defaults(), settings)
        assert (now == old) is (name == "explanation-guard"), name


def _prompts_sent(step: str, tmp_path: Path, templates=None):
    """Run the step's first method on a server-like echo backend; return prompts and records."""
    method = STEPS[step].methods[0]
    backend = EchoBackend()
    items = FACTS if METHODS[method].task == "fact-check" else DOCS[:1]
    out = tmp_path / f"{step}.jsonl"
    run_method(
        method, items, backend, out, progress=False, templates=templates,
        params={"cutoff": "2023-04-30"} if method == "knowledge-boundary" else None,
    )  # fmt: skip
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return backend.prompts, records, out


SERVER_STEPS = [
    s for s in STEPS
    if METHODS[STEPS[s].methods[0]].backends != ("transformers",) and s != "self-help-critique"
]  # fmt: skip


def test_the_self_help_critique_runs_when_the_rewrite_asks_for_it(tmp_path):
    """000 A.8's rewrite sees the draft only (two passes); a rewrite that uses {critique} gets
    A.6's self-critique pass before it; a critique no rewrite reads is refused."""
    rewrite = tmp_path / "rewrite.txt"
    rewrite.write_text("Fix <{draft}> by <{critique}>. FINAL_SUMMARY:\n")
    templates = {"self-help-rewrite": load_step_file(rewrite, "self-help-rewrite")}
    backend = EchoBackend()
    run_method("self-help-debias", DOCS[:1], backend, tmp_path / "o.jsonl", progress=False,
               templates=templates)  # fmt: skip
    assert [key for key, _ in backend.seen] == ["draft", "critique", "rewrite"]
    critique_out = "FINAL_SUMMARY: " + str(len(backend.prompts[1])) + " chars"
    assert f"by <{critique_out}>" in backend.prompts[2]
    critique = tmp_path / "critique.txt"
    critique.write_text("Critique <{draft}>.\n")
    lonely = {"self-help-critique": load_step_file(critique, "self-help-critique")}
    with pytest.raises(TemplateError, match="does not use \\{critique\\}"):
        plan_of("self-help-debias", templates=lonely)


@pytest.mark.parametrize("step", SERVER_STEPS)
def test_an_own_file_changes_the_prompt_sent_and_the_resume_key(step, tmp_path):
    default_prompts, default_records, _ = _prompts_sent(step, tmp_path / "d")
    own = _own_file(tmp_path, step)
    templates = {step: load_step_file(own, step)}
    sent, records, out = _prompts_sent(step, tmp_path / "o", templates)
    mine = [p for p in sent if p.startswith(f"MY OWN WORDING for {step}: ")]
    assert mine and not any(p.startswith("MY OWN WORDING") for p in default_prompts)
    # Every placeholder was filled in (no literal braces left) …
    assert not any(re.search(r"<\{\w+\}>", p) for p in mine)
    # … and the prompts of the method's other steps are the defaults.
    assert len(sent) == len(default_prompts)
    assert {r["template_hash"] for r in records}.isdisjoint(
        {r["template_hash"] for r in default_records}
    )
    [run] = json.loads(Path(str(out) + ".manifest.json").read_text())["runs"]
    assert run["template_files"]["mitigate-" + step] == str(own)
    assert run["templates"]["mitigate-" + step] == templates[step].hash()
    assert run["templates"]["mitigate-" + step] != step_template(step).hash()
    # The same file again resumes; an edited file is a new prompt.
    method = STEPS[step].methods[0]
    items = FACTS if METHODS[method].task == "fact-check" else DOCS[:1]
    params = {"cutoff": "2023-04-30"} if method == "knowledge-boundary" else None
    again = run_method(method, items, EchoBackend(), out, progress=False, templates=templates,
                       params=params)  # fmt: skip
    assert again.n_generated == 0
    own.write_text(_own_text(step).replace("OWN", "EDITED") + "\n", encoding="utf-8")
    edited = {step: load_step_file(own, step)}
    rerun = run_method(method, items, EchoBackend(), out, progress=False, templates=edited,
                       params=params)  # fmt: skip
    assert rerun.n_generated == len(items)


def test_own_explanation_prompt_reaches_the_guards_explanation_step(
    tiny_model_dir, tmp_path, monkeypatch
):
    from analysis.llm.backends import GenerationSettings, hf, make_backend

    rendered: list[str] = []
    real = hf.format_messages

    def spy(tokenizer, messages):
        rendered.append(messages[-1]["content"])
        return real(tokenizer, messages)

    monkeypatch.setattr(hf, "format_messages", spy)
    backend = make_backend(
        "transformers", str(tiny_model_dir), GenerationSettings(max_new_tokens=4), device="cpu"
    )
    own = _own_file(tmp_path, "explain-choice")
    templates = {"explain-choice": load_step_file(own, "explain-choice")}
    params = {"check_every": 1, "explain_tokens": 2}
    out = tmp_path / "g.jsonl"
    run_method("explanation-guard", DOCS[:1], backend, out, progress=False, params=params,
               templates=templates)  # fmt: skip
    explanations = [r for r in rendered if r.startswith("MY OWN WORDING for explain-choice")]
    assert explanations, rendered[:3]
    assert DOCS[0]["text"] in explanations[0]  # {text} filled in with the source
    run_method("explanation-guard", DOCS[:1], backend, out, progress=False, params=params)
    assert len({json.loads(line)["template_hash"] for line in out.read_text().splitlines()}) == 2


def test_own_debias_prefix_reaches_the_biased_pass(tiny_model_dir, tmp_path, monkeypatch):
    from analysis.llm.backends import GenerationSettings, make_backend
    from analysis.mitigation import self_debias

    prefixes: list[str | None] = []
    real_init = self_debias.SelfDebiasDecoding.__init__

    def spy(self, *args, prefix=None, **kw):
        prefixes.append(prefix)
        real_init(self, *args, prefix=prefix, **kw)

    monkeypatch.setattr(self_debias.SelfDebiasDecoding, "__init__", spy)
    backend = make_backend(
        "transformers", str(tiny_model_dir), GenerationSettings(max_new_tokens=3), device="cpu"
    )
    own = tmp_path / "prefix.txt"
    own.write_text("A biased summary that only repeats the start:\n")
    templates = {"debias-prefix": load_step_file(own, "debias-prefix")}
    out = tmp_path / "d.jsonl"
    run_method("self-debias", DOCS[:1], backend, out, progress=False, templates=templates)
    run_method("self-debias", DOCS[:1], backend, out, progress=False)
    assert prefixes == [
        "A biased summary that only repeats the start:",
        step_template("debias-prefix").user,
    ]
    assert len({json.loads(line)["template_hash"] for line in out.read_text().splitlines()}) == 2


@pytest.mark.parametrize(
    ("step", "text", "message"),
    [
        ("ccs-rewrite", "Fix {draft} of {text}.", r"must contain \{counterfactuals\}"),
        ("self-help-rewrite", "Fix {text}.", r"must contain \{draft\}"),
        ("attention-sort", "Summarize the context.", r"must contain one of \{segments\}, \{text\}"),
        ("chunk-merge", "Merge {partials} of {text}", r"\['text'\] are not filled in"),
        ("knowledge-boundary", "True? {text}", r"must contain \{cutoff\}"),
        ("debias-prefix", "Biased {text}:", "it provides none"),
    ],
)
def test_step_files_are_checked_against_what_the_step_fills_in(tmp_path, step, text, message):
    path = tmp_path / "t.txt"
    path.write_text(text)
    with pytest.raises(TemplateError, match=message):
        load_step_file(path, step)
    with pytest.raises(KeyError, match="the steps are"):
        load_step_file(path, "no-such-step")


def test_template_option_on_framelab_mitigate(tiny_model_dir, tmp_path):
    from analysis.cli.mitigate import mitigate

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in DOCS[:1]))
    own = tmp_path / "cot.txt"
    own.write_text("Analyse BEGIN, MIDDLE, END, then write FINAL_SUMMARY: of {text}\n")
    out = tmp_path / "o.jsonl"
    args = ["chain-of-thought", "--input", docs, "--out", out, "--model", tiny_model_dir,
            "--max-new-tokens", "2", "--device", "cpu", "--no-progress"]  # fmt: skip
    runner = CliRunner()

    def invoke(*extra):
        return runner.invoke(mitigate, [str(a) for a in [*args, *extra]])

    assert invoke("--template", f"cot={own}").exit_code == 0
    assert invoke().exit_code == 0  # the default prompt: another key, generated again
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len({r["template_hash"] for r in records}) == 2
    runs = json.loads((tmp_path / "o.jsonl.manifest.json").read_text())["runs"]
    assert runs[0]["template_files"]["mitigate-cot"] == str(own)
    assert "nothing to do" in invoke("--template", f"mitigate-cot={own}").output
    wrong = invoke("--template", f"explain-choice={own}")
    assert wrong.exit_code != 0 and "a prompt of explanation-guard, not of chain-of-thought" in (
        wrong.output
    )
    unknown = invoke("--template", f"cot-final={own}")
    assert unknown.exit_code != 0 and "cot, " in unknown.output
    listing = runner.invoke(mitigate, ["templates"])
    assert listing.exit_code == 0
    for step in STEPS:
        assert step in listing.output
    assert "mitigate/debias-prefix.json" in listing.output


def _real_hash(name: str, templates=None) -> str:
    """The method hash with the settings the runner hashes (the processors' reprs included)."""
    from analysis.llm.backends.base import GenerationSettings

    plan = plan_of(name, templates=templates)
    params = METHODS[name].defaults()
    settings = GenerationSettings(**plan.settings(params)).hash_fields()
    return method_hash(name, plan, params, settings)


@pytest.mark.parametrize(("name", "step"), [("explanation-guard", "explain-choice"),
                                            ("self-debias", "debias-prefix")])  # fmt: skip
def test_the_hash_depends_on_a_files_text_not_on_where_it_lies(tmp_path, name, step):
    """Two checkouts (two paths) of the same prompt resume each other's results."""
    text = step_template(step).user
    paths = [tmp_path / "a" / "own.json", tmp_path / "b" / "own.json"]
    for path in paths:
        path.parent.mkdir()
        path.write_text(json.dumps({"user": text}))
    first, second = ({step: load_step_file(p, step)} for p in paths)
    assert _real_hash(name, first) == _real_hash(name, second) == _real_hash(name)
    paths[1].write_text(json.dumps({"user": text + " Really."}))
    assert _real_hash(name, {step: load_step_file(paths[1], step)}) != _real_hash(name)
