"""Commands that use both halves (``framelab.studyplan``), resolved lazily by ``framelab.cli``.

Kept free of imports: it is read when ``framelab`` looks a command up.
"""

COMMANDS: dict[str, tuple[str, str]] = {
    "prereg": (
        "framelab.studyplan:prereg",
        "Write and freeze the pre-registration of STUDY (a study YAML, or a loaded study's slug).",
    ),
    "looks": (
        "framelab.studyplan:looks",
        "Run the pre-registered test at each look SLUG has reached; record new looks.",
    ),
    "demo": (
        "framelab.demo:demo",
        "Worked examples that run the whole tool chain on this machine.",
    ),
}
