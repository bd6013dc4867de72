"""The overlap paper's rephrase step, through the engine: judge-pair items -> summarize with the
``rephrase`` template over the human reference -> ``rephrased-pairs`` -> judge-pair -> the
metrics keep the rephrased pairs apart and show the higher-overlap end of the similarity range."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from analysis.cli.generate import generate
from analysis.llm.builders import BuildError
from analysis.llm.builders_eval import rephrased_pairs
from analysis.llm.store import read_records
from analysis.llm.tasks import run_task
from analysis.llm.templates import get_template
from analysis.metrics.records import read_records as read_metric_records
from analysis.metrics.report import ReportOptions, overlap_section

ITEMS = [
    {
        "item_id": "j1",
        "text": "The council approved a budget that raises school spending by ten percent.",
        "human_summary": "The council raised school spending by ten percent in the new budget.",
        "generated_summary": "Education funding climbs a tenth after the local vote.",
        "summarizer": "m-a",
    },
    {
        "item_id": "j2",
        "text": "A storm cut power to thousands of homes; crews expect to finish by Friday.",
        "human_summary": "A storm cut power to thousands of homes; service returns by Friday.",
        "generated_summary": "Crews race to reconnect households left dark by the weather.",
        "summarizer": "m-a",
    },
]
# The rephrase step rewords the human reference and keeps its long phrases: high overlap.
REWORDED = {
    "j1": "The council raised school spending by ten percent in its new budget.",
    "j2": "A storm cut power to thousands of homes; service is back by Friday.",
}


def test_rephrase_template_rewords_the_human_summary_keeping_its_long_phrases():
    [message] = get_template("summarize", "rephrase").messages(text=ITEMS[0]["human_summary"])
    content = message["content"]
    # 003 Fig. 6: rephrase and reorganize in the model's own style, keep as many long phrases
    # as possible, the same length, the text only.
    for needle in ("rephrase", "reorganize", "own style", "long phrases", "length", "only"):
        assert needle in content, needle
    assert "do not reuse" not in content  # the old, reversed direction
    assert content.endswith(ITEMS[0]["human_summary"])


def test_rephrase_chain_to_the_overlap_metrics(tmp_path: Path, fake_backend) -> None:
    from analysis.llm.tasks import TaskOptions

    # 1. Rephrase the human summaries (the paper samples at temperature 0.7).
    def reword(req):
        return next(REWORDED[i["item_id"]] for i in ITEMS if i["human_summary"] in req.text)

    run_task(
        "summarize",
        ITEMS,
        fake_backend(reword, model_id="rephraser"),
        tmp_path / "rephrased.jsonl",
        template="rephrase",
        options=TaskOptions(text_field="human_summary"),
        progress=False,
    )
    # 2. Back to judge-pair items.
    result = CliRunner().invoke(
        generate,
        ["rephrased-pairs", "--input", str(tmp_path / "rephrased.jsonl"),
         "--out", str(tmp_path / "rephrased_items.jsonl")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    items = list(read_records(tmp_path / "rephrased_items.jsonl"))
    assert [i["generated_summary"] for i in items] == [REWORDED["j1"], REWORDED["j2"]]
    assert all(i["rephrased"] is True and i["rephrased_by"] == "rephraser" for i in items)
    assert items[0]["original_summary"] == ITEMS[0]["generated_summary"]
    assert items[0]["summarizer"] == "m-a"

    # 3. The judge sees originals and rephrasings; it prefers the human summary only when the
    #    other one nearly copies it.
    def judge(req):
        content = req.messages[-1]["content"]
        first = content.split("summary_1:\n", 1)[1].split("\n", 1)[0]
        second = content.split("summary_2:\n", 1)[1].split("\n", 1)[0]
        rephrased = any(r in (first, second) for r in REWORDED.values())
        human = next(i["human_summary"] for i in ITEMS if i["human_summary"] in (first, second))
        pick_human = rephrased
        return "summary_1" if (first == human) == pick_human else "summary_2"

    for name, batch in (("orig", ITEMS), ("reph", items)):
        run_task("judge-pair", batch, fake_backend(judge, model_id="judge-x"),
                 tmp_path / f"judged_{name}.jsonl", progress=False)  # fmt: skip

    # 4. The metrics read both files: four pairs, two versions, the rephrased ones higher.
    records = read_metric_records([tmp_path / "judged_orig.jsonl", tmp_path / "judged_reph.jsonl"])
    sec = overlap_section(records, ReportOptions())
    outcomes = sec.tables["judge_outcomes"].set_index(["item_id", "summary_version"])
    assert len(outcomes) == 4
    assert set(outcomes["system"]) == {"m-a"}
    assert outcomes.loc[("j1", "original"), "outcome"] == "Generated"
    assert outcomes.loc[("j1", "rephrased"), "outcome"] == "GT"
    rng = sec.tables["judge_similarity_range"].set_index("summary_version")
    assert rng.loc["original", "max"] < rng.loc["rephrased", "min"]


def test_rephrased_pairs_refuses_unusable_records():
    with pytest.raises(BuildError, match="no summarize records"):
        rephrased_pairs([])
    with pytest.raises(BuildError, match="output is empty"):
        rephrased_pairs([{"item_id": "j1", "task": "summarize", "input": ITEMS[0], "output": " "}])
    bare = {k: v for k, v in ITEMS[0].items() if k != "human_summary"}
    with pytest.raises(BuildError, match="no 'human_summary'"):
        rephrased_pairs([{"item_id": "j1", "task": "summarize", "input": bare, "output": "x"}])


class SettingsSpy:
    """Records the decoding settings in force when each request is generated."""

    def __init__(self, fake_backend, answer="summary_1"):
        self.backend = fake_backend(lambda req: answer)
        self.during: list[tuple[bool, float | None]] = []
        real = self.backend.generate

        def generate(requests):
            for pair in real(requests):
                s = self.backend.settings
                self.during.append((s.do_sample, s.temperature))
                yield pair

        self.backend.generate = generate


@pytest.mark.parametrize(
    ("task", "template", "items"),
    [
        ("summarize", "rephrase", ITEMS[:1]),
        ("summarize", "words-100", ITEMS[:1]),  # the study's summarizers
        ("judge-pair", None, ITEMS[:1]),
    ],
)
def test_overlap_paper_tasks_sample_at_temperature_0_7_by_default(
    tmp_path: Path, fake_backend, task, template, items
) -> None:
    """The overlap paper's summarizers, rephrase step and judge sample at T = 0.7 unless told
    otherwise."""
    import dataclasses
    import json

    from analysis.llm.tasks import TaskOptions

    opts = TaskOptions(text_field="human_summary") if task == "summarize" else None
    spy = SettingsSpy(fake_backend)
    out = tmp_path / "o.jsonl"
    run = run_task(task, items, spy.backend, out, template=template, options=opts,
                   progress=False)  # fmt: skip
    assert run.n_generated >= 1
    assert set(spy.during) == {(True, 0.7)}
    assert (spy.backend.settings.do_sample, spy.backend.settings.temperature) == (False, None)
    [entry] = json.loads(Path(str(out) + ".manifest.json").read_text())["runs"]
    assert entry["settings"]["do_sample"] is True and entry["settings"]["temperature"] == 0.7
    assert entry["decoding_defaults"]["applied"] == {"do_sample": True, "temperature": 0.7}
    # The caller's own choice wins and is another resume key: greedy …
    greedy = SettingsSpy(fake_backend)
    run_task(task, items, greedy.backend, out, template=template, options=opts,
             progress=False, explicit_decoding={"do_sample"})  # fmt: skip
    assert set(greedy.during) == {(False, None)}
    # … or another temperature (still sampled, as the paper's default says).
    hot = SettingsSpy(fake_backend)
    hot.backend.settings = dataclasses.replace(hot.backend.settings, temperature=1.0)
    run_task(task, items, hot.backend, out, template=template, options=opts,
             progress=False, explicit_decoding={"temperature"})  # fmt: skip
    assert set(hot.during) == {(True, 1.0)}
    runs = json.loads(Path(str(out) + ".manifest.json").read_text())["runs"]
    assert runs[2]["decoding_defaults"]["kept"] == ["temperature"]
    assert len({r["template_hash"] for r in read_records(out)}) == 3


def test_temperature_default_on_the_command_line(tmp_path: Path, tiny_model_dir) -> None:
    import json

    items = tmp_path / "pairs.jsonl"
    items.write_text(json.dumps(ITEMS[0]) + "\n")
    base = ["judge-pair", "--input", items, "--model", tiny_model_dir, "--max-new-tokens", "2",
            "--device", "cpu", "--no-progress"]  # fmt: skip

    def run(out, *extra):
        result = CliRunner().invoke(generate, [str(a) for a in [*base, "--out", out, *extra]])
        assert result.exit_code == 0, result.output
        [entry] = json.loads(Path(str(out) + ".manifest.json").read_text())["runs"]
        return entry["settings"]["do_sample"], entry["settings"]["temperature"]

    assert run(tmp_path / "a.jsonl") == (True, 0.7)
    assert run(tmp_path / "b.jsonl", "--greedy") == (False, None)
    assert run(tmp_path / "c.jsonl", "--temperature", "0.2") == (True, 0.2)
    assert run(tmp_path / "d.jsonl", "--sample") == (True, 0.7)
    own = tmp_path / "judge.txt"
    own.write_text("Better of {name_1} and {name_2}? {summary_1} {summary_2}\n")
    # A researcher's own prompt file carries no paper defaults: the engine's greedy default.
    assert run(tmp_path / "e.jsonl", "--template", own) == (False, None)


def test_template_decoding_is_checked(tmp_path: Path) -> None:
    import json

    from analysis.llm.templates import TemplateError, load_template_file

    path = tmp_path / "t.json"
    for decoding, message in (
        ({"temperature": "hot"}, "temperature must be a number"),
        ({"top_k": 5}, "may set do_sample, temperature, top_p, not 'top_k'"),
        ({"do_sample": 1}, "do_sample must be true or false"),
        ([0.7], "must be an object"),
    ):
        path.write_text(json.dumps({"user": "{text}", "decoding": decoding}))
        with pytest.raises(TemplateError, match=message):
            load_template_file(path, "summarize")
    path.write_text(json.dumps({"user": "{text}", "decoding": {"temperature": 0.7}}))
    assert load_template_file(path, "summarize").decoding == {"temperature": 0.7}


def test_judge_pair_names_are_an_option_and_part_of_the_resume_key(
    tmp_path: Path, tiny_model_dir, monkeypatch
) -> None:
    import json

    import analysis.llm.tasks as tasks

    seen: list[str] = []
    real = tasks.run_task

    def spy(*args, **kw):
        seen.append(kw["options"].pair_names)
        return real(*args, **kw)

    monkeypatch.setattr(tasks, "run_task", spy)
    items = tmp_path / "pairs.jsonl"
    items.write_text(json.dumps(ITEMS[0]) + "\n")
    out = tmp_path / "judged.jsonl"
    args = ["judge-pair", "--input", str(items), "--out", str(out), "--model", tiny_model_dir,
            "--max-new-tokens", "2", "--device", "cpu", "--no-progress"]  # fmt: skip
    runner = CliRunner()
    assert runner.invoke(generate, args).exit_code == 0
    done = runner.invoke(generate, [*args, "--pair-names", "Summary 1,Summary 2"])
    assert done.exit_code == 0, done.output
    # The default names are those of the overlap paper's judge prompt (003 Fig. 2).
    assert seen == [("summary_1", "summary_2"), ("Summary 1", "Summary 2")]
    assert len({r["template_hash"] for r in read_records(out)}) == 2  # judged again
    bad = runner.invoke(generate, [*args, "--pair-names", "Same,Same"])
    assert bad.exit_code != 0 and "two different names" in bad.output
