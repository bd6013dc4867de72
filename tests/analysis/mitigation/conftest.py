"""Fixtures: a tiny random Llama model whose tokenizer knows the test documents' words."""

from __future__ import annotations

import pytest

# Three thirds with disjoint vocabularies, so coverage of each third is unambiguous.
BEGIN = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"
MIDDLE = "kilo lima mike november oscar papa quebec romeo sierra tango"
END = "uniform victor whiskey xray yankee zulu apple banana cherry grape"
SOURCE = f"{BEGIN} {MIDDLE} {END}"

REVIEW = (
    "The headphones are wonderful and the sound is great. The battery lasts a long time. "
    "Support answered quickly and the price was fair. I love them and would buy again."
)
WORDS = "good great wonderful love happy bad terrible awful horrible hate sad dirty"

TRAINING_TEXT = "\n".join([SOURCE, REVIEW, WORDS] * 30)


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory):
    """A tiny Llama checkpoint built by the engine's builder (saved, loadable from disk)."""
    from analysis.llm.tiny import build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("tiny") / "model", vocab_size=1000, extra_text=TRAINING_TEXT
    )


@pytest.fixture(scope="session")
def tiny(tiny_model_dir):
    """``(model, tokenizer)`` loaded with ``from_pretrained`` (float32, CPU, eager attention)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="eager")
    return model.eval(), tokenizer
