"""Schemas of the study file that the web app and the research package both read.

A leaf: its modules import the standard library only, so ``webapp`` and ``analysis`` both import
them and still never each other (import-linter holds both).
"""
