"""Commands that use both halves (``framelab.studyplan``), resolved lazily by ``framelab.cli``.

Kept free of imports: it is read when ``framelab`` looks a command up.
"""

COMMANDS: dict[str, str] = {
    "prereg": "framelab.studyplan:prereg",
    "looks": "framelab.studyplan:looks",
    "demo": "framelab.demo:demo",
}
