"""Figures. Plot functions take computed results and an optional ``ax`` and return the ``Axes``;
they never fit models, call ``show()`` or save files (the CLI saves)."""
