"""The transformers backend on a tiny Llama loaded through the real from_pretrained path."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.llm.backends.base import BatchContext, GenerationSettings, Request


def _requests(texts: list[str]) -> list[Request]:
    return [
        Request(f"k{i}", ({"role": "user", "content": f"Summarize the following text:\n\n{t}"},))
        for i, t in enumerate(texts)
    ]


TEXTS = [
    "Fair price.",
    "The headphones are comfortable and the sound is clear, but the battery died after two weeks.",
    "Shipping was fast.",
    "Support never answered; the price was fair and the sound is clear for the money I paid.",
    "Great.",
]


def _backend(path: Path, **settings):
    from analysis.llm.backends.hf import TransformersBackend

    # On the CPU whatever the machine has: these tests pin CPU semantics (fp32 under "auto");
    # tests/analysis/mitigation/test_gpu.py covers CUDA.
    return TransformersBackend(
        str(path), GenerationSettings(**{"max_new_tokens": 6, **settings}), device="cpu"
    )


def test_tiny_model_loads_with_from_pretrained(tiny_model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "llama"
    assert model.config.num_hidden_layers == 2
    assert 300 <= model.config.vocab_size <= 1000
    assert model.config.vocab_size == len(tok)
    ids = tok("The sound is clear.")["input_ids"]
    assert tok.decode(ids) == "The sound is clear."
    rendered = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered == "<|bos|><|user|>\nhi<|end|>\n<|assistant|>\n"


def test_batched_equals_per_item_greedy(tiny_model_dir: Path) -> None:
    """Left padding must not change greedy outputs: batch of 5 == five batches of 1."""
    batched = _backend(tiny_model_dir, batch_size=5)
    single = _backend(tiny_model_dir, batch_size=1)
    reqs = _requests(TEXTS)
    out_b = {r.key: c for r, c in batched.generate(reqs)}
    out_s = {r.key: c for r, c in single.generate(reqs)}
    assert set(out_b) == {r.key for r in reqs}
    for key in out_b:
        assert out_b[key].text == out_s[key].text
        assert out_b[key].n_output_tokens == out_s[key].n_output_tokens == 6
        assert out_b[key].n_prompt_tokens == out_s[key].n_prompt_tokens
    assert batched.model.config._attn_implementation == "sdpa"
    assert str(batched.model.dtype) == "torch.float32"  # fp32 on CPU


def test_batches_are_length_sorted_longest_first(tiny_model_dir: Path) -> None:
    backend = _backend(tiny_model_dir, batch_size=2)
    seen: list[list[int]] = []

    def spy(ctx: BatchContext):
        from transformers import LogitsProcessor

        seen.append(ctx.attention_mask.sum(dim=1).tolist())
        assert ctx.tokenizer.padding_side == "left"
        # Left padding: every row ends with a real token.
        assert bool(ctx.attention_mask[:, -1].all())

        class Identity(LogitsProcessor):
            def __call__(self, input_ids, scores):
                return scores

        return Identity()

    backend.settings = GenerationSettings(max_new_tokens=2, batch_size=2, logits_processors=(spy,))
    order = [r.key for r, _ in backend.generate(_requests(TEXTS))]
    lengths = [n for batch in seen for n in batch]
    assert lengths == sorted(lengths, reverse=True)
    assert [len(b) for b in seen] == [2, 2, 1]
    assert set(order[:2]) == {"k1", "k3"}  # the two long reviews come first


def test_logits_processor_hook_steers_decoding(tiny_model_dir: Path) -> None:
    """A pluggable processor that forces one token, then EOS, controls the output exactly."""
    from transformers import LogitsProcessor

    backend = _backend(tiny_model_dir, batch_size=3)
    tok = backend.tokenizer
    target = tok.convert_tokens_to_ids("great") if "great" in tok.get_vocab() else 300

    class ForceThenStop(LogitsProcessor):
        def __init__(self, prompt_len: int) -> None:
            self.prompt_len = prompt_len

        def __call__(self, input_ids, scores):
            step = input_ids.shape[1] - self.prompt_len
            forced = target if step < 2 else tok.eos_token_id
            scores[:] = float("-inf")
            scores[:, forced] = 0.0
            return scores

    backend.settings = GenerationSettings(
        max_new_tokens=6,
        batch_size=3,
        logits_processors=(lambda ctx: ForceThenStop(ctx.input_ids.shape[1]),),
    )
    results = dict(backend.generate(_requests(TEXTS[:3])))
    expected = tok.decode([target, target])
    for completion in results.values():
        assert completion.text == expected.strip()
        assert completion.n_output_tokens == 3  # two forced tokens and the EOS


def test_min_new_tokens_and_info(tiny_model_dir: Path) -> None:
    backend = _backend(tiny_model_dir, max_new_tokens=4, min_new_tokens=4)
    info_before = backend.info()
    assert info_before["dtype"] == "auto"  # not loaded yet: nothing to generate loads nothing
    (req, completion), *_ = list(backend.generate(_requests(TEXTS[:1])))
    assert completion.n_output_tokens == 4
    info = backend.info()
    assert info["dtype"] == "float32" and info["device"] == "cpu"
    assert info["model_revision"].startswith("local-")
    assert info["versions"]["transformers"]


def test_from_loaded_wraps_an_in_memory_model(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from analysis.llm.backends.hf import TransformersBackend
    from analysis.llm.tiny import random_model

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = random_model("tiny", tok, seed=1)
    backend = TransformersBackend.from_loaded(model, tok, GenerationSettings(max_new_tokens=3))
    [(_, completion)] = list(backend.generate(_requests(TEXTS[:1])))
    assert completion.n_output_tokens == 3


def test_unknown_arch_is_a_clear_error(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from analysis.llm.tiny import llama_config

    with pytest.raises(ValueError, match="unknown arch"):
        llama_config("gpt-5", AutoTokenizer.from_pretrained(tiny_model_dir))


def test_out_of_memory_splits_the_batch(tiny_model_dir: Path, caplog) -> None:
    import torch

    from analysis.llm.backends.hf import TransformersBackend

    sizes: list[int] = []

    class SmallGpu(TransformersBackend):
        def generate_batch(self, reqs, prompts):
            sizes.append(len(reqs))
            if len(reqs) > 2:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
            return super().generate_batch(reqs, prompts)

    backend = SmallGpu(str(tiny_model_dir), GenerationSettings(max_new_tokens=2, batch_size=4))
    results = dict(backend.generate(_requests(TEXTS + TEXTS)))
    assert len(results) == 10 and all(c.n_output_tokens == 2 for c in results.values())
    # 4 fails and is split into 2 + 2; later batches then hold at most the 2 that fitted.
    assert sizes == [4, 2, 2, 2, 2, 2]
    assert "splitting" in caplog.text


def test_llama3_8b_shape_for_the_gpu_benchmark(tiny_model_dir: Path) -> None:
    """The benchmark's random-weight model has Llama-3-8B's exact size (built on `meta`)."""
    from transformers import AutoTokenizer

    from analysis.llm.tiny import random_model

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = random_model("llama3-8b", tok, dtype="bfloat16", device="meta")
    params = list(model.parameters())
    assert sum(p.numel() for p in params) == 8_030_261_248  # Meta-Llama-3-8B
    assert sum(p.numel() * p.element_size() for p in params) / 1e9 == pytest.approx(16.06, 0.001)
    assert {str(p.dtype) for p in params} == {"torch.bfloat16"}


def test_static_cache_keeps_greedy_outputs_and_is_recorded(tiny_model_dir: Path) -> None:
    """``--static-cache`` pre-allocates the cache (compiled only on CUDA: test_gpu.py)."""
    from analysis.cli.engine import EngineOptions

    options = EngineOptions(model=str(tiny_model_dir), static_cache=True, device="cpu")
    assert options.backend_options()["static_cache"] is True
    static = options.make_backend()
    static.settings = GenerationSettings(max_new_tokens=6, batch_size=2)
    dynamic = _backend(tiny_model_dir, batch_size=2)
    reqs = _requests(TEXTS)
    assert {r.key: c.text for r, c in static.generate(reqs)} == {
        r.key: c.text for r, c in dynamic.generate(reqs)
    }
    assert static._generation_config().cache_implementation == "static"
    assert dynamic._generation_config().cache_implementation is None
    assert static.info()["static_cache"] is True and dynamic.info()["static_cache"] is False
    assert "static_cache" not in static.output_settings()  # rounding only: not a new run


def test_continuous_batching_gives_the_static_outputs_as_they_finish(tiny_model_dir: Path) -> None:
    """transformers' continuous batching on the CPU: the static path's greedy texts and counts."""
    from analysis.llm.backends.hf import TransformersBackend

    settings = GenerationSettings(max_new_tokens=6, batch_size=2)
    static = TransformersBackend(str(tiny_model_dir), settings, device="cpu", batching="static")
    continuous = TransformersBackend(
        str(tiny_model_dir), settings, device="cpu", batching="continuous"
    )
    reqs = _requests(TEXTS)
    want = {r.key: (c.text, c.n_prompt_tokens, c.n_output_tokens) for r, c in static.generate(reqs)}
    got = {
        r.key: (c.text, c.n_prompt_tokens, c.n_output_tokens) for r, c in continuous.generate(reqs)
    }
    assert got == want and len(got) == len(TEXTS)
    assert all(n_out <= 6 for _, _, n_out in got.values())
    assert continuous.info()["batching"] == "continuous"
    assert static.info()["batching"] == "static"
    assert "batching" not in continuous.output_settings()  # rounding only: not a new run


def test_auto_batching_is_continuous_on_cuda_only_where_decoding_allows_it(
    tiny_model_dir: Path,
) -> None:
    """`auto` picks continuous batching on CUDA, and keeps static batches for what it can't do."""
    import dataclasses

    from analysis.llm.backends.hf import TransformersBackend

    def backend(device: str = "cuda", **kwargs):
        settings = kwargs.pop("settings", GenerationSettings())
        return TransformersBackend(str(tiny_model_dir), settings, device=device, **kwargs)

    # Nothing is loaded: the choice depends on the settings and the device asked for.
    assert backend().batching_mode() == "continuous"
    assert backend(device="cpu").batching_mode() == "static"
    assert backend(batching="static").batching_mode() == "static"
    assert backend(device="cpu", batching="continuous").batching_mode() == "continuous"
    steered = dataclasses.replace(GenerationSettings(), logits_processors=(lambda ctx: None,))
    refused = {
        "logits processors": backend(settings=steered),
        "one generator per item": backend(settings=GenerationSettings(do_sample=True)),
        "min_new_tokens": backend(settings=GenerationSettings(min_new_tokens=4)),
        "num_beams": backend(generate_kwargs={"num_beams": 2}),
        "static cache": backend(static_cache=True),
        "no paged variant": backend(attn_implementation="flex_attention"),
    }
    for reason, b in refused.items():
        assert b.batching_mode() == "static", reason
        b.batching = "continuous"
        with pytest.raises(ValueError, match=reason):
            b.batching_mode()

    class Reranking(TransformersBackend):
        def generate_batch(self, reqs, prompts):  # a mitigation generating its own batches
            return super().generate_batch(reqs, prompts)

    assert Reranking(str(tiny_model_dir), device="cuda").batching_mode() == "static"
    with pytest.raises(ValueError, match="batching must be one of"):
        backend(batching="dynamic")
