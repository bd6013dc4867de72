"""FrameLab command line: one `framelab` entry point over the web platform and the research package.

This package only assembles commands. ``webapp`` and ``analysis`` stay independent of each other;
each lists its commands lazily (``COMMANDS`` maps a name to ``"module:attribute"``), so
``framelab study list`` never imports the scientific stack and ``framelab analyze`` never imports
Flask.
"""
