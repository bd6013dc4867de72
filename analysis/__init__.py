"""FrameLab research package: LLM stimulus generation, content-alteration metrics and statistics.

It reads the platform's export format (``docs/export.md``) and never imports the web app.
Heavy dependencies (torch, transformers, statsmodels) are imported inside the functions that
use them.
"""
