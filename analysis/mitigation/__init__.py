"""The 18 bias-mitigation methods of the seed study and their comparison.

Families: prompt (``prompts``), fact-checking (``prompts``), chunk (``chunking``), re-rank
(``rerank``) and decoding (``decoding``, ``transformers`` logits processors). ``registry`` lists
them with their hyperparameters and backends; ``runner`` runs them through the generation engine's
backends and resumable store; ``compare`` builds the seed study's tables. Light at import.
"""
