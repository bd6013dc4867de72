"""LLM stimulus engine: backends, tasks, prompt templates, a resumable store, loaders and builders.

Light at import: torch, transformers and openai are imported inside the functions that need them.
The output record format is documented in ``docs/generation.md``.
"""
