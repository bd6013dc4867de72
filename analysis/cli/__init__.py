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
