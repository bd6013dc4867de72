"""Commands of the research package, resolved lazily by ``framelab.cli``.

Each value is ``"module:attribute"`` of a click command or group. Keep this module free of
heavy imports: it is read every time ``framelab`` starts.
"""

COMMANDS: dict[str, str] = {
    "generate": "analysis.cli.generate:generate",
    "metrics": "analysis.cli.metrics:metrics",
    "analyze": "analysis.cli.analyze:analyze",
    "mitigate": "analysis.cli.mitigate:mitigate",
    "dev": "analysis.cli.dev:dev",
    "news": "analysis.cli.news:news",
    "plan": "analysis.cli.plan:plan",
}

# The key under which the ``framelab`` console script puts, in click's context ``meta``, a
# function ``slug -> dict`` returning the console's record of a study's pre-registrations (the
# web app's ``webapp.services.looks.console_record``), or raising ``LookupError`` with the
# reason it cannot be read. The research package never imports the web app: it is handed this.
CONSOLE_RECORD = "framelab.console_record"
