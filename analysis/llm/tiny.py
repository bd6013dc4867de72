"""Tiny Llama-architecture models for tests and smoke runs, and random-weight models for benchmarks.

No weights can be downloaded on the machines this runs on, so tests exercise the real
``from_pretrained`` path on a model built here: a byte-level BPE tokenizer trained with
``tokenizers`` on a small built-in corpus, a 2-layer ``LlamaForCausalLM`` with random weights,
both saved with ``save_pretrained``. Its outputs are gibberish; their shape is what is tested.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# A chat template in the Jinja dialect transformers uses, so the chat-template code path is the one
# exercised (real instruct models all carry one).
TINY_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

SPECIAL_TOKENS = [
    "<|pad|>",
    "<|bos|>",
    "<|eos|>",
    "<|end|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
]

_CORPUS = """\
Summarize the following product review. The headphones are comfortable and the sound is clear,
but the battery died after two weeks and support never answered. Is the framing of this text
Positive, Negative, or Neutral? Answer with the label alone. Is the following statement
true or false? True [High Confidence] False [Low Confidence]. Which of the two summaries is better?
summary_1 summary_2. The interview covered the election, the economy, taxes, health care and the
war. From the left perspective, the policy protects workers; from the right perspective, it costs
jobs. Add a positive prefix to the negative statement without changing the statement itself.
Sadly, the hotel was dirty. Luckily, the flight was on time. The price was fair and shipping fast.
0 1 2 3 4 5 6 7 8 9 , . ; : ! ? ' " ( ) [ ] { } - $ % & / @
"""

# Llama-3-8B's shape (hidden 4096, 32 layers, GQA 32/8 heads, 128k vocabulary): throughput
# depends on the shape and dtype, not on the values of the weights.
ARCHS: dict[str, dict[str, Any]] = {
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
    },
    "llama3-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "vocab_size": 128256,
    },
}


def train_tiny_tokenizer(vocab_size: int = 512, extra_text: str = "") -> Any:
    """Train a byte-level BPE tokenizer and wrap it as a transformers fast tokenizer.

    Parameters
    ----------
    vocab_size : int
        Upper bound on the vocabulary (the small corpus may yield fewer merges).
    extra_text : str
        More training text (e.g. the test inputs), so they tokenize into fewer pieces.

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        Left-padding, with bos/eos/pad tokens and :data:`TINY_CHAT_TEMPLATE`.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = (_CORPUS + "\n" + extra_text).splitlines()
    tok.train_from_iterator([line for line in lines if line.strip()], trainer)
    # Token *names*, not secrets (ruff's S106 pattern-matches "token").
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|bos|>",  # noqa: S106
        eos_token="<|eos|>",  # noqa: S106
        pad_token="<|pad|>",  # noqa: S106
        padding_side="left",
    )
    fast.chat_template = TINY_CHAT_TEMPLATE
    return fast


def llama_config(arch: str, tokenizer: Any, **overrides: Any) -> Any:
    """Return a ``LlamaConfig`` of a named shape (:data:`ARCHS`) wired to the tokenizer's IDs."""
    from transformers import LlamaConfig

    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; choose one of {sorted(ARCHS)}")
    params = {**ARCHS[arch], **overrides}
    params.setdefault("vocab_size", len(tokenizer))
    return LlamaConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        **params,
    )


def random_model(
    arch: str, tokenizer: Any, *, dtype: str = "float32", device: str = "cpu", seed: int = 0
) -> Any:
    """Build a ``LlamaForCausalLM`` with random weights directly on ``device`` in ``dtype``."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    config = llama_config(arch, tokenizer)
    torch_dtype = getattr(torch, dtype)
    # Allocating on the target device in the target dtype: an 8B model would need 32 GB of host
    # memory in float32 otherwise.
    with torch.device(device):
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch_dtype)
        try:
            model = LlamaForCausalLM(config)
        finally:
            torch.set_default_dtype(previous)
    return model.eval()


def build_tiny_model(
    out_dir: str | Path, *, vocab_size: int = 512, seed: int = 0, extra_text: str = ""
) -> Path:
    """Train a tokenizer, build a 2-layer Llama with random weights, and save both.

    Parameters
    ----------
    out_dir : str or Path
        Directory to write (``config.json``, ``model.safetensors``, tokenizer files).
    vocab_size : int
        Tokenizer vocabulary bound.
    seed : int
        Seed of the weight initialisation; the same seed gives the same weights.
    extra_text : str
        Extra tokenizer training text.

    Returns
    -------
    Path
        ``out_dir``, loadable with ``AutoModelForCausalLM.from_pretrained``.

    Examples
    --------
    >>> from analysis.llm.tiny import build_tiny_model
    >>> path = build_tiny_model(tmp_path / "tiny")  # doctest: +SKIP
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tiny_tokenizer(vocab_size, extra_text)
    model = random_model("tiny", tokenizer, seed=seed)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
