"""FrameLab's participant platform (Flask). The only public name is :func:`create_app`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """Build the Flask application.

    Parameters
    ----------
    config : Mapping, optional
        Settings that override the environment and the defaults (see
        :mod:`webapp.config` for the precedence).

    Returns
    -------
    Flask
        The app with extensions, blueprints, error handlers and CLI commands registered.
    """
    from flask import Flask

    from webapp import errors, health, i18n, security, sessions
    from webapp.cli import register_commands
    from webapp.config import private_sqlite_file, resolve_config
    from webapp.extensions import csrf, db, migrate
    from webapp.participant import bp as participant_bp
    from webapp.request_guard import register as guard_requests
    from webapp.researcher import bp as researcher_bp
    from webapp.services import participant_data
    from webapp.tasks import bp as tasks_bp

    app = Flask(__name__, instance_relative_config=True)
    Path(app.instance_path).mkdir(parents=True, exist_ok=True)
    app.config.from_mapping(resolve_config(Path(app.instance_path), config))
    private_sqlite_file(app.config["SQLALCHEMY_DATABASE_URI"], Path(app.instance_path))
    sessions.register(app)
    hops = int(app.config.get("PROXY_HOPS") or 0)
    if hops:
        from werkzeug.middleware.proxy_fix import ProxyFix

        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)

    # The request guard bounds request bodies and checks characters before anything else
    # reads them, CSRF protection and the blueprints' hooks included: register it first.
    guard_requests(app)
    db.init_app(app)
    migrations = Path(__file__).resolve().parent.parent / "migrations"
    migrate.init_app(app, db, directory=str(migrations), render_as_batch=True)
    csrf.init_app(app)
    i18n.init_app(app)
    with app.app_context():
        _configure_engine(app, db.engine)
        # The one place that decides how the participant path reaches the database.
        participant_data.install(app, participant_data.SqlParticipantData(db.engine.dialect.name))
    _release_session_safely(app, db)

    app.register_blueprint(tasks_bp)
    app.register_blueprint(participant_bp)
    app.register_blueprint(researcher_bp)
    errors.register(app)
    security.register(app)
    health.register(app)
    register_commands(app)
    return app


def _configure_engine(app: Flask, engine: Any) -> None:
    """SQLite: WAL, busy timeout, foreign keys, and ``BEGIN IMMEDIATE`` transactions.

    pysqlite starts transactions lazily and as ``DEFERRED``; a deferred transaction that
    reads and then writes fails at once with "database is locked" when another writer got
    in between, whatever the busy timeout. Immediate transactions take the write lock up front
    and wait for it, which serialises writers correctly (this is SQLAlchemy's documented
    recipe for pysqlite transaction control).
    """
    from sqlalchemy import event

    if engine.dialect.name != "sqlite":
        return

    timeout = int(app.config["SQLITE_BUSY_TIMEOUT_MS"])

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {timeout}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _release_session_safely(app: Flask, db: Any) -> None:
    """End each request's session without letting a dead connection replace its response.

    When PostgreSQL restarts it terminates every connection; a request whose transaction was
    still open (a GET that only read) then fails in Flask-SQLAlchemy's teardown, whose rollback
    raises on the dead connection, and gunicorn answers a bare 500 instead of the page already
    rendered. This teardown runs before Flask-SQLAlchemy's (teardowns run in reverse order):
    it removes the session and, if the connection is gone, discards it (SQLAlchemy has already
    invalidated the connection, so the pool replaces it).
    """
    from sqlalchemy.exc import DBAPIError

    @app.teardown_appcontext
    def _remove_session(exc: BaseException | None) -> None:
        try:
            db.session.remove()
        except DBAPIError:
            app.logger.warning("database connection lost while ending a request")
            db.session.registry.clear()
