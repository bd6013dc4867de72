"""The engine on the tiny Llama: the resume key carries every output-changing setting, sampled
runs reproduce across a resume, and checkpoints without a chat template get their BOS token."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis.llm.backends.base import Completion, GenerationSettings, Request, item_seed
from analysis.llm.store import read_records
from analysis.llm.tasks import run_task, settings_of

ITEMS = [
    {"item_id": f"r{i}", "text": text}
    for i, text in enumerate(
        [
            "Fair price.",
            "The headphones are comfortable and the sound is clear.",
            "Shipping was fast.",
            "Support never answered; the price was fair and the sound is clear.",
            "Great.",
            "The battery died after two weeks and support never answered.",
        ]
    )
]


def _backend(path: Path | str, *, dtype: str = "auto", gguf_file: str | None = None, **settings):
    from analysis.llm.backends.hf import TransformersBackend

    return TransformersBackend(
        str(path),
        GenerationSettings(**{"max_new_tokens": 6, **settings}),
        dtype=dtype,
        gguf_file=gguf_file,
        device="cpu",  # "auto" is float32 on the CPU, which the dtype test relies on
    )


def _outputs(path: Path) -> dict[str, str]:
    return {r["item_id"]: r["output"] for r in read_records(path)}


# --- 7: every output-changing setting is in the resume key and the manifest


def test_other_dtype_is_another_run_not_nothing_to_generate(tiny_model_dir, tmp_path):
    out = tmp_path / "s.jsonl"
    first = run_task("summarize", ITEMS[:2], _backend(tiny_model_dir), out, progress=False)
    assert first.n_generated == 2
    again = run_task("summarize", ITEMS[:2], _backend(tiny_model_dir), out, progress=False)
    assert again.n_generated == 0  # same settings: resumed, nothing to do
    bf16 = _backend(tiny_model_dir, dtype="bfloat16")
    second = run_task("summarize", ITEMS[:2], bf16, out, progress=False)
    assert second.n_generated == 2, second.describe()
    assert len({r["template_hash"] for r in read_records(out)}) == 2
    runs = json.loads((tmp_path / "s.jsonl.manifest.json").read_text())["runs"]
    assert [r["settings"]["backend"]["dtype"] for r in runs] == ["float32"] * 2 + ["bfloat16"]


class _Scripted:
    """A transformers backend that answers without a model: the key logic is what is tested."""

    def __new__(cls, gguf_file):
        from analysis.llm.backends.hf import TransformersBackend

        class Scripted(TransformersBackend):
            def load(self) -> None:
                pass

            def generate(self, requests):
                for req in requests:
                    yield req, Completion(f"from {self.gguf_file}", 3, 3)

        return Scripted("/models/smollm2", GenerationSettings(), gguf_file=gguf_file)


def test_other_gguf_file_is_another_run(tmp_path):
    out = tmp_path / "s.jsonl"
    q8 = run_task("summarize", ITEMS[:3], _Scripted("q8_0.gguf"), out, progress=False)
    q4 = run_task("summarize", ITEMS[:3], _Scripted("q4_k_m.gguf"), out, progress=False)
    assert (q8.n_generated, q4.n_generated) == (3, 3)
    outputs = sorted({r["output"] for r in read_records(out)})
    assert outputs == ["from q4_k_m.gguf", "from q8_0.gguf"]
    manifest = json.loads((tmp_path / "s.jsonl.manifest.json").read_text())
    assert [r["settings"]["backend"]["gguf_file"] for r in manifest["runs"]] == [
        "q8_0.gguf",
        "q4_k_m.gguf",
    ]


@pytest.mark.parametrize(
    "change",
    [
        {"revision": "v2"},
        {"gguf_file": "m.gguf"},
        {"dtype": "float16"},
        {"attn_implementation": "eager"},
        {"generate_kwargs": {"num_beams": 2}},
    ],
)
def test_each_loading_choice_changes_the_key(change):
    from analysis.llm.backends.hf import TransformersBackend
    from analysis.llm.templates import get_template

    tpl = get_template("summarize", "baseline")
    base = TransformersBackend("/m", GenerationSettings(), dtype="float32")
    other = TransformersBackend("/m", GenerationSettings(), **{"dtype": "float32", **change})
    assert tpl.hash(settings_of(base)) != tpl.hash(settings_of(other))


# --- 8: a sampled run reproduces across a resume


def test_sampled_run_reproduces_across_a_resume(tiny_model_dir, tmp_path):
    sampled = {"do_sample": True, "temperature": 1.0, "top_p": 0.95, "seed": 7}
    whole = tmp_path / "whole.jsonl"
    run_task("summarize", ITEMS, _backend(tiny_model_dir, batch_size=4, **sampled), whole,
             progress=False)  # fmt: skip
    resumed = tmp_path / "resumed.jsonl"
    # Interrupted after three items, then resumed in a new process (a fresh backend).
    run_task("summarize", ITEMS[:3], _backend(tiny_model_dir, batch_size=2, **sampled), resumed,
             progress=False)  # fmt: skip
    run = run_task("summarize", ITEMS, _backend(tiny_model_dir, batch_size=3, **sampled), resumed,
                   progress=False)  # fmt: skip
    assert (run.n_done_before, run.n_generated) == (3, 3)
    expected = _outputs(whole)
    assert _outputs(resumed) == expected
    assert len(set(expected.values())) == len(ITEMS)  # sampled text, not one fixed answer

    reseeded = tmp_path / "seed8.jsonl"
    run_task("summarize", ITEMS, _backend(tiny_model_dir, batch_size=4, **{**sampled, "seed": 8}),
             reseeded, progress=False)  # fmt: skip
    assert sum(_outputs(reseeded)[k] != v for k, v in expected.items()) >= len(ITEMS) - 1


def test_item_seed_depends_on_run_seed_and_key_only():
    assert item_seed(7, "r1\x1f") == item_seed(7, "r1\x1f")
    assert len({item_seed(7, f"r{i}") for i in range(100)}) == 100
    assert item_seed(7, "r1") != item_seed(8, "r1")
    assert 0 <= item_seed(2**40, "x") < 2**63


def test_openai_backend_sends_each_sampled_request_its_item_seed():
    from analysis.llm.backends.openai_compat import OpenAIBackend

    backend = OpenAIBackend("m", GenerationSettings(do_sample=True, seed=3), base_url="http://x")
    sent: list[dict] = []

    class Client:
        class chat:  # noqa: N801 - the openai client's attribute names
            class completions:  # noqa: N801
                @staticmethod
                async def create(**kwargs):
                    sent.append(kwargs)
                    raise RuntimeError("stop here")

        async def close(self) -> None:
            pass

    backend._client = lambda base_url: Client()
    reqs = [Request("a\x1f", ({"role": "user", "content": "x"},))]
    with pytest.raises(RuntimeError):
        list(backend.generate(reqs))
    assert sent[0]["seed"] == item_seed(3, "a\x1f")


# --- 12: a checkpoint without a chat template gets its BOS token


@pytest.fixture(scope="module")
def no_template_dir(tiny_model_dir, tmp_path_factory) -> Path:
    path = shutil.copytree(tiny_model_dir, tmp_path_factory.mktemp("plain") / "model")
    (path / "chat_template.jinja").unlink(missing_ok=True)
    config = path / "tokenizer_config.json"
    data = json.loads(config.read_text())
    data.pop("chat_template", None)
    config.write_text(json.dumps(data))
    return path


def test_plain_prompt_starts_with_bos(no_template_dir):
    seen = []

    def record(ctx):
        seen.append(ctx.input_ids)
        return lambda input_ids, scores: scores

    backend = _backend(no_template_dir, batch_size=2, logits_processors=(record,))
    tok = backend.tokenizer
    assert not getattr(tok, "chat_template", None)
    assert tok.bos_token == "<|bos|>"
    prompt = backend.format_prompt([{"role": "user", "content": "Hello there."}])
    assert prompt.startswith("<|bos|>") and prompt.count("<|bos|>") == 1
    texts = ["Fair price.", "Shipping was fast today."]
    reqs = [Request(f"k{i}", ({"role": "user", "content": t},)) for i, t in enumerate(texts)]
    list(backend.generate(reqs))
    (ids,) = seen
    for row in ids.tolist():
        first = next(t for t in row if t != tok.pad_token_id)
        assert first == tok.bos_token_id
