"""Commands of the research package, resolved lazily by ``framelab.cli``.

Each value is ``("module:attribute", short help)`` of a click command or group; ``framelab
--help`` lists the help without importing the module. Keep this module free of heavy imports:
it is read every time ``framelab`` starts.
"""

COMMANDS: dict[str, tuple[str, str]] = {
    "generate": (
        "analysis.cli.generate:generate",
        "Generate LLM stimuli: one verb per task, resumable JSONL out (docs/generation.md).",
    ),
    "metrics": (
        "analysis.cli.metrics:metrics",
        "Compute content-alteration and bias metrics from generation records.",
    ),
    "analyze": (
        "analysis.cli.analyze:analyze",
        "Analyse human data: choice, sentiment-annotation, summary-rating and preference studies.",
    ),
    "mitigate": (
        "analysis.cli.mitigate:mitigate",
        "Bias-mitigation methods: one subcommand per method, plus list, run and compare.",
    ),
    "dev": (
        "analysis.cli.dev:dev",
        "Developer helpers: build throwaway models and data for smoke runs.",
    ),
    "news": (
        "analysis.cli.news:news",
        "Collect post-cutoff news, falsify its descriptions, export fact-check pairs.",
    ),
    "plan": (
        "analysis.cli.plan:plan",
        "Plan a study from its YAML: power by simulation, boundaries of the interim looks.",
    ),
}

# The key under which the ``framelab`` console script puts, in click's context ``meta``, a
# function ``slug -> dict`` returning the console's record of a study's pre-registrations (the
# web app's ``webapp.services.looks.console_record``), or raising ``LookupError`` with the
# reason it cannot be read. The research package never imports the web app: it is handed this.
CONSOLE_RECORD = "framelab.console_record"
