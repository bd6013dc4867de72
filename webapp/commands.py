"""The web platform's ``framelab`` commands, resolved lazily by ``framelab.cli``.

Each name maps to ``("module:attribute", short help)``; the help is what ``framelab --help``
lists without importing the module (and Flask with it). Keep this module free of imports;
tests/test_cli_extras.py checks that each help matches its command's own.
"""

COMMANDS: dict[str, tuple[str, str]] = {
    "study": ("webapp.cli:study", "Load, list and open or close studies."),
    "export": ("webapp.cli:export", "Export a study's responses (see docs/export.md)."),
    "bots": (
        "webapp.cli:bots",
        "Run simulated participants through the real pages (in-process or over HTTP).",
    ),
    "clear-test-data": (
        "webapp.cli:clear_test_data",
        "Delete a study's test participants (bots, previews) and all their rows; audited.",
    ),
    "serve": (
        "webapp.cli:serve",
        "Run the development server and print a participant link and the researcher link.",
    ),
    "create-researcher": (
        "webapp.cli:create_researcher",
        "Create a researcher account (or reset its password).",
    ),
    "bonus": (
        "webapp.cli:bonus",
        "Issue bonuses by the study's rule and write Prolific's or MTurk's payment file.",
    ),
    "reconcile": (
        "webapp.cli:reconcile",
        "Import a Prolific submissions or MTurk assignments CSV; update statuses, list mismatches.",
    ),
    "mturk": (
        "webapp.cli:mturk",
        "Run a study on MTurk: an ExternalQuestion HIT, or a native batch of items.",
    ),
    "import-mturk": (
        "webapp.cli:import_mturk",
        'Import MTurk "Batch results" CSVs (each file whole, or refused with reasons per row).',
    ),
    "recruit": (
        "webapp.recruit.cli:recruit",
        "Run the study on its recruiter (the YAML's recruiter: block): plan, create, publish, "
        "status, approve, reject PARTICIPANT..., bonus, settle, pause, close.",
    ),
}
