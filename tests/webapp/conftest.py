"""Fixtures in the flaskr manner: ``app`` (fresh SQLite, migrated), ``client``, ``runner``,
``study`` (the demo study loaded) and ``make_bot`` (a scripted participant).

No fixture keeps an application context open while a test runs requests: the test client then
gets its own context (and database session) per request, as in production.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
import jinja2.bccache
import pytest

from webapp import create_app
from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.clock import SimulatedClock
from webapp.definition import StudyDefinition

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo.yaml"


# A SQLite file the migrations built once per session (see `_migrated_sqlite`).
_SCHEMA: dict[str, Path] = {}


class SharedTemplateCode(jinja2.BytecodeCache):
    """Compiled templates shared by every app a test process creates.

    Each app has its own Jinja environment, which compiles a template the first time it
    renders it, so every test's new app compiled the same templates again. Jinja checks each
    template's source against the code kept here: an edited template is compiled afresh.
    """

    def __init__(self) -> None:
        self.code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        code = self.code.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.code[bucket.key] = bucket.bytecode_to_string()


TEMPLATE_CODE = SharedTemplateCode()


def _new_sqlite_file(database_url: str) -> Path | None:
    """The file of a plain ``sqlite:///FILE`` URL when that file does not exist yet."""
    if not database_url.startswith("sqlite:///") or "?" in database_url:
        return None
    path = Path(database_url.removeprefix("sqlite:///"))
    return None if path.exists() else path


def make_app(
    database_url: str, *, migrate: bool = False, template: Path | None = None, **extra: Any
):
    """Create an app on ``database_url`` and build its schema with the Alembic migrations.

    A new SQLite file starts as a copy of one the migrations built earlier in the session: the
    same schema and revision, in a tenth of the time of running them again for every test.
    ``template`` names another such file to copy (one a module's fixture filled once for its
    tests). ``migrate=True`` runs the migrations instead, for tests of how the app creates its
    file.
    """
    from flask_migrate import upgrade

    fresh = _new_sqlite_file(database_url)
    template = template or _SCHEMA.get("sqlite")
    copied = not migrate and fresh is not None and template is not None
    if copied:
        # SQLite's backup API copies a consistent database whatever its journal (WAL) holds.
        src, dst = sqlite3.connect(template), sqlite3.connect(fresh)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
    app = create_app(
        {
            "ENV_NAME": "testing",
            # Strong enough for ENV_NAME="production" (which refuses weak keys).
            "SECRET_KEY": "3f9a7c1e5b2d8f4a6c0e9b3d7f1a5c8e2b6d0f4a9c3e7b1d5f8a2c6e0b4d9f3a",
            "SQLALCHEMY_DATABASE_URI": database_url,
            # Repeatable assignment: each test's participants get the same seeds and sequences
            # on every run (webapp.services.entry.assignment_rng); production refuses a seed.
            **({} if extra.get("ENV_NAME") == "production" else {"ASSIGNMENT_SEED": 20250106}),
            **extra,
        }
    )
    app.jinja_env.bytecode_cache = TEMPLATE_CODE
    if not copied:
        try:
            with app.app_context():
                upgrade()
        except BaseException:
            dispose(app)  # the caller never gets the app to dispose of
            raise
    return app


def dispose(app) -> None:
    """Close the pooled connections of ``app``'s engines.

    An engine nobody disposes of keeps its connections open until the garbage collector
    takes it, in whichever later test that happens; psycopg's ResourceWarning then fails
    that test instead of the one that left the engine behind.
    """
    from webapp.extensions import dispose_engines

    with app.app_context():
        dispose_engines()


@contextmanager
def disposing(app) -> Iterator[Any]:
    """``app`` while the block runs; its engines disposed of afterwards, whatever happens."""
    try:
        yield app
    finally:
        dispose(app)


@pytest.fixture(scope="session", autouse=True)
def _migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Run the migrations once into a SQLite file that :func:`make_app` copies."""
    from webapp.extensions import dispose_engines

    path = tmp_path_factory.mktemp("schema") / "migrated.sqlite"
    app = make_app(f"sqlite:///{path}")
    with app.app_context():
        dispose_engines()
    _SCHEMA["sqlite"] = path
    yield
    _SCHEMA.pop("sqlite", None)


@pytest.fixture
def app(tmp_path: Path):
    """A fresh app on its own SQLite file."""
    app = make_app(f"sqlite:///{tmp_path / 'test.sqlite'}")
    yield app
    with app.app_context():
        from webapp.extensions import dispose_engines

        dispose_engines()


@pytest.fixture
def clock(app) -> SimulatedClock:
    """``app``'s clock, simulated: time moves only when a bot spends its think time (or a test
    sleeps on it), so recorded durations are exact."""
    app.config["CLOCK"] = simulated = SimulatedClock(datetime(2025, 1, 6, 9, tzinfo=UTC))
    return simulated


@pytest.fixture
def client(app):
    """Flask test client."""
    return app.test_client()


@pytest.fixture
def runner(app):
    """Click runner for the app's CLI commands."""
    return app.test_cli_runner()


def load_demo(app, path: Path = DEMO) -> StudyDefinition:
    """Load the demo study (or ``path``, a copy of it) into ``app``; return its definition."""
    from webapp.definition_cache import study_definition
    from webapp.services.studies import load_study

    with app.app_context():
        return study_definition(load_study(path).study)


def demo_copy(
    folder: Path,
    *,
    pairs: int,
    planned_n: int | None = None,
    bonus_usd: float | None = None,
    name: str = DEMO.name,
) -> Path:
    """A copy of the demo study as ``folder``/``name`` with only its first ``pairs`` product
    pairs (two pages each per participant) and, if given, ``planned_n`` participants planned
    and a bonus of ``bonus_usd`` per matching choice: the same study and slug for tests whose
    check needs fewer pages than ten pairs make."""
    import shutil

    import yaml

    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs", dirs_exist_ok=True)
    pairs_file = folder / "product_pairs" / "demo.yaml"
    data = yaml.safe_load(pairs_file.read_text(encoding="utf-8"))
    pairs_file.write_text(yaml.safe_dump({**data, "pairs": data["pairs"][:pairs]}), "utf-8")
    text = DEMO.read_text(encoding="utf-8")
    for old, new, given in [
        ("  planned_n: 70\n", f"  planned_n: {planned_n}\n", planned_n),
        ("bonus: {amount: 0.10,", f"bonus: {{amount: {bonus_usd},", bonus_usd),
    ]:
        if given is not None:
            assert old in text, old
            text = text.replace(old, new)
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


def load_canary_demo(app, folder: Path) -> StudyDefinition:
    """Load the demo study with a canary (slug ``canary-demo``, copied with its pairs file into
    ``folder``/bundle) into ``app``; return its definition."""
    import shutil

    import yaml

    from webapp.definition_cache import study_definition
    from webapp.services.studies import load_study

    bundle = folder / "bundle"
    shutil.copytree(DEMO.parent, bundle)
    raw = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    raw.update(slug="canary-demo", authenticity={"canary": True, "reading_wpm": 900})
    path = bundle / "canary.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with app.app_context():
        return study_definition(load_study(path).study)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "demo_pairs(n): the `study` fixture loads the demo with only its first n product pairs",
    )


@pytest.fixture
def study(app, request: pytest.FixtureRequest, tmp_path: Path) -> StudyDefinition:
    """The demo study's definition, loaded into ``app``; with ``@pytest.mark.demo_pairs(n)``
    the demo with only its first ``n`` pairs (see :func:`demo_copy`)."""
    marker = request.node.get_closest_marker("demo_pairs")
    if marker is None:
        return load_demo(app)
    return load_demo(app, demo_copy(tmp_path / "demo", pairs=marker.args[0]))


@pytest.fixture
def make_bot(app, study) -> Callable[..., Bot]:
    """Build a bot on the demo study: ``make_bot(platform="mturk", fail_quiz=True, ...)``."""
    counter = iter(range(10**6))

    def factory(*, seed: int | None = None, external_id: str | None = None, **kw: Any) -> Bot:
        i = next(counter)
        return Bot(
            FlaskTransport(app),
            study,
            BotBehaviour(**kw),
            rng=random.Random(i if seed is None else seed),
            external_id=external_id or f"TESTBOT{i:04d}",
            clock=app.config["CLOCK"],
        )

    return factory


def in_app(app, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` inside a short application context (and close it again)."""
    with app.app_context():
        return fn()


@pytest.fixture
def query(app) -> Iterator[Callable[[Callable[[], Any]], Any]]:
    """``query(lambda: ...)`` runs database code in a short app context."""
    yield lambda fn: in_app(app, fn)


@pytest.fixture
def serve_app():
    """``serve_app(app)`` runs ``app`` on a real threaded HTTP server; returns its base URL."""
    import threading

    from werkzeug.serving import make_server

    servers = []

    def start(app) -> str:
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@contextmanager
def pg_schema(pg_url: str) -> Iterator[str]:
    """A fresh schema of the test database while the block runs; the URL that selects it."""
    import secrets

    from sqlalchemy import create_engine, text

    from webapp.config import normalise_database_url

    schema = f"framelab_test_{secrets.token_hex(4)}"
    admin = create_engine(normalise_database_url(pg_url))
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        try:
            sep = "&" if "?" in pg_url else "?"
            yield f"{pg_url}{sep}options=-csearch_path%3D{schema}"
        finally:
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        admin.dispose()


@contextmanager
def admin_engine(pg_url: str) -> Iterator[Any]:
    """An AUTOCOMMIT engine on the test database (to watch or end other sessions' connections),
    disposed of when the block ends."""
    from sqlalchemy import create_engine

    from webapp.config import normalise_database_url

    engine = create_engine(normalise_database_url(pg_url), isolation_level="AUTOCOMMIT")
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def pg_app(pg_url: str):
    """An app on PostgreSQL in a fresh schema of the test database, built by the migrations."""
    with pg_schema(pg_url) as url:
        app = make_app(url)
        yield app
        with app.app_context():
            from webapp.extensions import dispose_engines

            dispose_engines()
