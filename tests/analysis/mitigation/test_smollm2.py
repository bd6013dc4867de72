"""Decoding methods on a real small model: SmolLM2-135M-Instruct (``tests/analysis/smollm2.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.llm.backends.base import GenerationSettings
from analysis.llm.tasks import run_task
from analysis.mitigation import decoding as dec
from tests.analysis.smollm2 import GGUF, smollm2_dir

ARTICLE = (
    "The city council met on Tuesday to discuss the new budget. Several members argued that "
    "the proposed cuts to public transport would hurt workers who commute from the suburbs. "
    "Others said the savings were needed to repair roads and bridges before winter. A local "
    "bakery owner told the council that fewer buses had already reduced her morning customers. "
    "In the end the council postponed the vote by two weeks and asked for a new traffic study."
)


@dataclass(frozen=True)
class _Recording(dec.MirostatFactory):
    """The default Mirostat factory, keeping the processors it builds (to read their surprise)."""

    built: list[Any] = field(default_factory=list, compare=False, hash=False)

    def __call__(self, ctx: Any) -> dec.Mirostat:
        proc = super().__call__(ctx)
        self.built.append(proc)
        return proc


@pytest.mark.slow
def test_mirostat_reaches_its_target_surprise_on_smollm2(tmp_path: Path) -> None:
    """The paper's temperature feedback drives the observed surprise to mu* = 2 nats.

    Seen with the v2 truncation (the old default): 1.39 nats, truncation never firing.
    """
    from analysis.llm.backends.hf import TransformersBackend

    factory = _Recording()
    settings = GenerationSettings(
        max_new_tokens=160,
        min_new_tokens=160,  # a long enough text for the feedback to settle
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        batch_size=1,
        logits_processors=(factory,),
    )
    backend = TransformersBackend(smollm2_dir(), settings, gguf_file=GGUF)
    items = [{"item_id": "council", "text": ARTICLE}]
    run = run_task("summarize", items, backend, tmp_path / "s.jsonl", progress=False)
    assert run.n_generated == 1
    [proc] = factory.built
    observed = np.concatenate(proc.observed)
    assert len(observed) >= 150
    assert np.isfinite(observed).all()
    # The feedback is an integral controller: sum(s_t - mu*) = -(mu_N - mu_0) / eta, so with mu
    # settled the mean surprise over the text sits at the target (seen: 2.03 nats over 159
    # steps, final T = 0.63). The v2 truncation gave 1.74 here (1.39 in another run): its mu
    # climbed to 8.1 nats, above every token's surprise, so it never truncated.
    assert observed.mean() == pytest.approx(2.0, abs=0.1)
    assert 0.2 < float(proc.temperatures[-1][0]) < 5.0
    assert proc.variant == "temperature"
