"""The negate task through the LLM engine: named hashed template, cleaning, resumability."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pytest
from click.testing import CliRunner

from analysis.llm.backends.base import Completion, GenerationSettings, Request
from analysis.llm.parsing import clean_negation
from analysis.llm.tasks import run_task
from analysis.llm.templates import get_template
from analysis.news.falsify import read_negations


class Scripted:
    """A backend answering with a fixed rewrite per input, recording what it was asked."""

    name = "scripted"
    model_id = "scripted-model"
    settings = GenerationSettings(max_new_tokens=20)

    def __init__(self) -> None:
        self.seen: list[Request] = []

    def generate(self, requests: Iterable[Request]) -> Iterator[tuple[Request, Completion]]:
        for req in requests:
            self.seen.append(req)
            answer = 'Negated: "' + req.text.replace("passed", "rejected") + '"\n\nI swapped it.'
            yield req, Completion(answer, 10, 8)

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model_id}


def test_negate_runs_through_the_engine_and_resumes(tmp_path):
    tpl = get_template("negate", "baseline")
    assert "opposite" in tpl.user and len(tpl.hash()) == 16
    out = tmp_path / "falsified" / "negate.jsonl"
    items = [{"item_id": "a", "text": "The Senate passed the bill.", "published_at": "2026-03-02"}]
    backend = Scripted()
    first = run_task("negate", items, backend, out, progress=False)
    assert first.n_generated == 1
    assert "Description: The Senate passed the bill." in backend.seen[0].messages[-1]["content"]
    items.append({"item_id": "b", "text": "Talks passed quietly.", "published_at": "2026-03-03"})
    second = run_task("negate", items, backend, out, progress=False)
    assert (second.n_done_before, second.n_generated) == (1, 1)
    pairs = read_negations(tmp_path).set_index("article_id")
    assert pairs.loc["a", "falsified"] == "The Senate rejected the bill."
    assert pairs.loc["a", "authentic"] == "The Senate passed the bill."
    assert pairs.loc["b", "published_at"] == "2026-03-03"
    assert pairs["template_hash"].nunique() == 1


@pytest.mark.parametrize(
    ("answer", "clean"),
    [
        ("The bill failed.", "The bill failed."),
        ("**Negated description:** The bill failed.", "The bill failed."),
        ("“The bill failed.”", "The bill failed."),
        ("\n\nAnswer: The bill failed.\n\nNote: I negated 'passed'.", "The bill failed."),
        ("", ""),
    ],
)
def test_clean_negation(answer, clean):
    assert clean_negation(answer) == clean


def test_falsify_and_export_refuse_clearly_before_data_exists(tmp_path):
    from framelab.cli import main

    empty = tmp_path / "empty"
    empty.mkdir()
    runner = CliRunner()
    out = runner.invoke(main, ["news", "falsify", "--dataset", str(empty), "--model", "x"])
    assert out.exit_code != 0 and "no article with a description" in out.output
    out = runner.invoke(main, ["news", "export", "--dataset", str(empty), "--out",
                               str(tmp_path / "p.jsonl")])  # fmt: skip
    assert out.exit_code != 0 and "run `framelab news falsify` first" in out.output
    out = runner.invoke(main, ["news", "export", "--dataset", str(empty), "--after-cutoff",
                               "March 2026", "--out", str(tmp_path / "p.jsonl")])  # fmt: skip
    assert out.exit_code != 0 and "is not a date" in out.output
    assert "Traceback" not in out.output


def _tiny_nli(path, labels):
    """A random-weight Llama sequence classifier saved with the given labels."""
    from transformers import LlamaForSequenceClassification

    from analysis.llm.tiny import llama_config, train_tiny_tokenizer

    tokenizer = train_tiny_tokenizer()
    config = llama_config("tiny", tokenizer, num_labels=len(labels),
                          id2label=dict(enumerate(labels)),
                          label2id={n: i for i, n in enumerate(labels)})  # fmt: skip
    LlamaForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.mark.slow
def test_nli_contradiction_joins_the_check(tmp_path):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    import numpy as np
    import pandas as pd

    from analysis.news.falsify import CheckOptions, meaning_check, nli_scorer

    path = _tiny_nli(tmp_path / "nli", ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"])
    score = nli_scorer(path, device="cpu", batch_size=2)
    pairs = pd.DataFrame({"authentic": ["The senate passed the bill."] * 3,
                          "falsified": ["The senate rejected the bill.",
                                        "The senate did not pass the bill.", ""]})  # fmt: skip
    probs = score(pairs["authentic"][:2].tolist(), pairs["falsified"][:2].tolist())
    assert probs.shape == (2,) and ((probs > 0) & (probs < 1)).all()
    same = np.ones((6, 3))  # every text on topic: only the NLI threshold decides
    for threshold, verdict in [(0.0, "differs"), (1.0, "not_contradiction")]:
        out = meaning_check(pairs, embedder=lambda texts: same[: len(texts)], nli=score,
                            options=CheckOptions(min_contradiction=threshold))  # fmt: skip
        assert out["auto_check"].tolist() == [verdict, verdict, "empty"]
        assert out["nli_contradiction"].iloc[:2].to_numpy() == pytest.approx(probs, abs=1e-6)
        assert np.isnan(out["nli_contradiction"].iloc[2])
    with pytest.raises(ValueError, match="no contradiction label"):
        nli_scorer(_tiny_nli(tmp_path / "sst", ["NEGATIVE", "POSITIVE"]), device="cpu")


def _sheet_dataset(tmp_path, manual):
    """A dataset directory with two falsified pairs and the given manual_valid values."""
    import pandas as pd

    from analysis.news.falsify import VALIDATION_FILE, falsified_dir
    from analysis.news.store import write_shard

    root = tmp_path / "ds"
    rows = pd.DataFrame(
        {
            "article_id": ["a1", "a2"],
            "url": ["https://example.org/1", "https://example.org/2"],
            "domain": ["example.org"] * 2,
            "published_at": ["2026-03-02T10:00:00Z", "2026-03-03T10:00:00Z"],
            "title": ["One", "Two"],
            "description": ["The council approved the plan.", "The bridge opened."],
        }
    )
    write_shard(root, "2026-03-03", rows.to_dict("records"))
    sheet = pd.DataFrame(
        {
            "article_id": ["a1", "a2"],
            "model": ["m", "m"],
            "template_hash": ["h", "h"],
            "authentic": ["The council approved the plan.", "The bridge opened."],
            "falsified": ["The council rejected the plan.", "The bridge stayed closed."],
            "word_change": ["0.3", "0.4"],
            "embed_cosine": ["0.8", "0.7"],
            "auto_check": ["differs", "differs"],
            "manual_valid": manual,
            "manual_note": ["", ""],
        }
    )
    falsified_dir(root).mkdir(parents=True, exist_ok=True)
    sheet.to_csv(falsified_dir(root) / VALIDATION_FILE, index=False)
    return root


def test_export_requires_manual_validation_by_default_and_says_how(tmp_path):
    from analysis.news.export import ExportError, export_pairs
    from framelab.cli import main

    root = _sheet_dataset(tmp_path, ["", ""])
    with pytest.raises(ExportError, match=r"none of the 2 falsified pairs is validated by hand"):
        export_pairs(root)
    out = CliRunner().invoke(main, ["news", "export", "--dataset", str(root), "--out",
                                    str(tmp_path / "p.jsonl")])  # fmt: skip
    assert out.exit_code != 0 and "manual_valid" in out.output and "--require auto" in out.output
    assert not (tmp_path / "p.jsonl").exists()
    items, report = export_pairs(root, require="auto")
    assert report.n_exported == report.n_exported_auto_only == 2
    assert {i["validated"] for i in items} == {"auto"}


def test_export_manifest_says_how_the_pairs_were_validated(tmp_path):
    import json

    from framelab.cli import main

    root = _sheet_dataset(tmp_path, ["yes", ""])
    path = tmp_path / "p.jsonl"
    out = CliRunner().invoke(main, ["news", "export", "--dataset", str(root), "--out", str(path)])
    assert out.exit_code == 0, out.output
    assert "validated by hand: 1" in out.output and "1 not yet validated" in out.output
    counts = json.loads(path.with_suffix(".manifest.json").read_text())["counts"]
    assert counts["n_exported"] == counts["n_exported_manual"] == 1
    assert counts["n_exported_auto_only"] == counts["n_exported_unvalidated"] == 0
    assert counts["n_unvalidated"] == 1
    items = [json.loads(line) for line in path.read_text().splitlines()]
    assert {i["pair_id"] for i in items} == {"a1"} and {i["validated"] for i in items} == {"manual"}
