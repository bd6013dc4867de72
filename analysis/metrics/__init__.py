"""Content-alteration and bias metrics: framing change, primacy, hallucination, position bias,
judge overlap bias and perspective extraction coverage.

Every metric is a pure function: a tidy ``DataFrame`` in, a tidy ``DataFrame`` out, no I/O and no
rounding. ``analysis.metrics.records`` reads the generation engine's JSONL (``docs/generation.md``)
or any CSV/JSONL with the same fields; the exact definitions are in ``docs/metrics.md``.
"""
