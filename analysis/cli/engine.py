"""The engine's settings, shared by ``framelab generate`` and ``framelab mitigate``.

One set of click options and one :class:`EngineOptions` object build the decoding settings and
the backend for both commands, so a loading choice that changes outputs (``--gguf-file``,
``--revision``, ``--dtype``, ``--attn``) or a runtime one (``--threads``) exists in both with the
same meaning, default and help, and enters the resume key and the manifest the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import click

__all__ = ["EngineOptions", "engine_options", "explicit_decoding", "with_options"]

# Command-line options of the decoding settings a template's paper defaults may set.
_DECODING_OPTIONS = {"sample": "do_sample", "temperature": "temperature", "top_p": "top_p"}


def explicit_decoding() -> set[str]:
    """The decoding settings given on the command line of the running click command.

    A template's paper defaults (e.g. temperature 0.7 for the overlap paper's judge) apply to
    the others only: ``--greedy`` or ``--temperature 1.0`` always wins over the template.
    """
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return set()
    return {
        setting
        for option, setting in _DECODING_OPTIONS.items()
        if ctx.get_parameter_source(option) not in (None, ParameterSource.DEFAULT)
    }


@dataclass(frozen=True)
class EngineOptions:
    """What the engine options of a command say: backend, model, decoding and loading choices."""

    backend: str = "transformers"
    model: str | None = None
    max_new_tokens: int = 500
    batch_size: int = 16
    seed: int = 0
    sample: bool = False
    temperature: float | None = None
    top_p: float | None = None
    device: str = "auto"
    dtype: str = "auto"
    attn: str = "sdpa"
    static_cache: bool = False
    batching: str = "auto"
    revision: str | None = None
    gguf_file: str | None = None
    base_url: tuple[str, ...] = ()
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    timeout: float = 120.0
    max_retries: int = 6
    replica_cooldown: float = 30.0
    threads: int | None = None

    @classmethod
    def pop(cls, kw: dict[str, Any]) -> EngineOptions:
        """Take the engine options out of a command's keyword arguments."""
        return cls(**{f.name: kw.pop(f.name) for f in fields(cls) if f.name in kw})

    def settings(self) -> Any:
        """The :class:`~analysis.llm.backends.base.GenerationSettings` these options give."""
        from analysis.llm.backends import GenerationSettings

        return GenerationSettings(
            max_new_tokens=self.max_new_tokens,
            do_sample=self.sample,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            batch_size=self.batch_size,
        )

    def backend_options(self) -> dict[str, Any]:
        """Keyword arguments of the chosen backend's constructor."""
        if self.backend == "transformers":
            return {
                "device": self.device,
                "dtype": self.dtype,
                "attn_implementation": self.attn,
                "static_cache": self.static_cache,
                "batching": self.batching,
                "revision": self.revision,
                "gguf_file": self.gguf_file,
            }
        if self.backend == "openai":
            return {
                "base_url": list(self.base_url) or None,
                "api_key_env": self.api_key_env,
                "concurrency": self.concurrency,
                "timeout": self.timeout,
                "max_retries": self.max_retries,
                "replica_cooldown": self.replica_cooldown,
            }
        return {}

    def make_backend(self, model: str | None = None) -> Any:
        """Build the backend (``model`` overrides ``--model``, e.g. for a separate judge)."""
        from analysis.llm.backends import make_backend

        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        return make_backend(
            self.backend, model or self.model, self.settings(), **self.backend_options()
        )


def engine_options(
    backends: tuple[str, ...] = ("transformers", "openai", "vader"), *, model_required: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a click command with the engine options (read back by :meth:`EngineOptions.pop`)."""
    options = [
        click.option("--backend", type=click.Choice(list(backends)), default="transformers",
                     show_default=True),
        click.option("--model", required=model_required,
                     help="Checkpoint directory (transformers) or served model name (openai)."),
        click.option("--max-new-tokens", type=int, default=500, show_default=True),
        click.option("--batch-size", type=int, default=16, show_default=True),
        click.option("--seed", type=int, default=0, show_default=True, help="Generation seed."),
        click.option("--sample/--greedy", default=False, help="Sampling instead of greedy."),
        click.option("--temperature", type=float),
        click.option("--top-p", type=float),
        click.option("--device", default="auto", show_default=True),
        click.option("--dtype", default="auto", show_default=True),
        click.option("--attn", default="sdpa", show_default=True, help="attn_implementation."),
        click.option("--static-cache", is_flag=True,
                     help="Static KV cache; on CUDA the decode step is compiled (transformers)."),
        click.option("--batching", type=click.Choice(["auto", "static", "continuous"]),
                     default="auto", show_default=True,
                     help="transformers: continuous batching (auto: on CUDA when decoding allows "
                     "it) or static length-sorted batches of --batch-size."),
        click.option("--revision", help="Model revision (transformers)."),
        click.option("--gguf-file", help="GGUF file inside --model (needs the gguf package)."),
        click.option("--base-url", multiple=True,
                     help="OpenAI-compatible server, e.g. http://host:8000/v1; repeat the option "
                     "for replicas of the same model (one URL per option)."),
        click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True),
        click.option("--concurrency", type=int, default=8, show_default=True),
        click.option("--timeout", type=float, default=120.0, show_default=True),
        click.option("--max-retries", type=int, default=6, show_default=True),
        click.option("--replica-cooldown", type=float, default=30.0, show_default=True,
                     help="Seconds an unreachable replica stays out before it is tried again."),
        click.option("--threads", type=int, help="torch CPU threads (transformers on CPU)."),
    ]  # fmt: skip

    return with_options(options)


def with_options(
    options: Sequence[Callable[..., Any]],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a click command with ``options``, listed in the order ``--help`` shows them."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate
