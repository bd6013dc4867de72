"""Analysis reports: compute every table of a study (``pipeline``) and write them (``writer``).

``framelab analyze`` is a thin layer over these two modules: the pipeline is pure (DataFrames in,
a :class:`~analysis.report.pipeline.Results` out), the writer is the only code that touches the
output folder (``results.json``, CSV tables, PNG figures, ``report.html``).
"""
