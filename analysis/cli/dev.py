"""``framelab dev``: developer helpers (tiny models for smoke runs)."""

from __future__ import annotations

import click


@click.group()
def dev() -> None:
    """Developer helpers: build throwaway models and data for smoke runs."""


@dev.command("tiny-model")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
@click.option("--vocab-size", type=int, default=512, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def tiny_model(out_dir: str, vocab_size: int, seed: int) -> None:
    """Build a 2-layer random-weight Llama with a freshly trained tokenizer in OUT."""
    from analysis.llm.tiny import build_tiny_model

    path = build_tiny_model(out_dir, vocab_size=vocab_size, seed=seed)
    click.echo(f"tiny model written to {path} (random weights: its outputs are gibberish)")
