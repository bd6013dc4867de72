"""Fixtures for the LLM engine: a tiny Llama built once per session, a scripted fake backend."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from analysis.llm.backends.base import Completion, GenerationSettings, Request


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> None:
    """Pin torch to one thread: the CI machine has two shared cores."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama checkpoint saved with save_pretrained (built once per session)."""
    from analysis.llm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


class FakeBackend:
    """A backend that answers with ``answer(request)``, recording every request it saw."""

    name = "fake"

    def __init__(self, answer: Callable[[Request], str], model_id: str = "fake-model") -> None:
        self.answer = answer
        self.model_id = model_id
        self.settings = GenerationSettings(max_new_tokens=5)
        self.seen: list[Request] = []

    def generate(self, requests: Iterable[Request]) -> Iterator[tuple[Request, Completion]]:
        for req in requests:
            self.seen.append(req)
            text = self.answer(req)
            yield req, Completion(text, len(req.messages[-1]["content"].split()), len(text.split()))

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model_id}


@pytest.fixture
def fake_backend() -> Callable[..., FakeBackend]:
    """Factory for :class:`FakeBackend`."""
    return FakeBackend
