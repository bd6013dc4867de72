"""Configuration precedence, database URLs and the production secret-key rule."""

from __future__ import annotations

import pytest

from webapp import create_app
from webapp.config import ConfigError, normalise_database_url, resolve_config


def test_postgres_urls_use_psycopg3():
    assert normalise_database_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_database_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_database_url("sqlite:///x.db") == "sqlite:///x.db"


def test_defaults_to_sqlite_in_instance_and_generates_dev_secret(tmp_path):
    settings = resolve_config(tmp_path, None, environ={})
    assert settings["SQLALCHEMY_DATABASE_URI"] == f"sqlite:///{tmp_path / 'framelab.sqlite'}"
    key = (tmp_path / "secret_key").read_text()
    assert settings["SECRET_KEY"] == key and len(key) == 64
    # The same key on the next start: sessions survive restarts.
    assert resolve_config(tmp_path, None, environ={})["SECRET_KEY"] == key


def test_explicit_beats_environment_beats_defaults(tmp_path):
    env = {"DATABASE_URL": "postgres://env/db", "SECRET_KEY": "from-env"}
    settings = resolve_config(tmp_path, None, environ=env)
    assert settings["SQLALCHEMY_DATABASE_URI"] == "postgresql+psycopg://env/db"
    assert settings["SECRET_KEY"] == "from-env"
    explicit = {"SQLALCHEMY_DATABASE_URI": "sqlite:///explicit.db", "SECRET_KEY": "x"}
    settings = resolve_config(tmp_path, explicit, environ=env)
    assert settings["SQLALCHEMY_DATABASE_URI"] == "sqlite:///explicit.db"
    assert settings["SECRET_KEY"] == "x"


def test_production_refuses_to_start_without_secret_key(tmp_path):
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        resolve_config(tmp_path, None, environ={"FRAMELAB_ENV": "production"})
    assert not (tmp_path / "secret_key").exists()
    settings = resolve_config(
        tmp_path,
        None,
        environ={
            "FRAMELAB_ENV": "production",
            "SECRET_KEY": "9c4e1f7a2b8d3e6f0a5c9b2d7e1f4a8c3b6d9e2f5a8c1b4d7e0f3a6c9b2e5d8f",
        },
    )
    assert settings["SESSION_COOKIE_SECURE"] is True


def test_whole_number_settings_from_the_environment(tmp_path):
    env = {"FRAMELAB_ACTIVE_WINDOW_MINUTES": "15", "FRAMELAB_PROXY_HOPS": "1"}
    settings = resolve_config(tmp_path, None, environ=env)
    assert settings["ACTIVE_WINDOW_MINUTES"] == 15 and settings["PROXY_HOPS"] == 1
    assert resolve_config(tmp_path, None, environ={})["ACTIVE_WINDOW_MINUTES"] == 60
    with pytest.raises(ConfigError, match="FRAMELAB_ACTIVE_WINDOW_MINUTES='soon'"):
        resolve_config(tmp_path, None, environ={"FRAMELAB_ACTIVE_WINDOW_MINUTES": "soon"})


def test_the_assignment_seed_is_read_but_production_refuses_it(tmp_path):
    env = {"FRAMELAB_ASSIGNMENT_SEED": "42"}
    assert resolve_config(tmp_path, None, environ=env)["ASSIGNMENT_SEED"] == 42
    assert resolve_config(tmp_path, None, environ={})["ASSIGNMENT_SEED"] is None
    key = "9c4e1f7a2b8d3e6f0a5c9b2d7e1f4a8c3b6d9e2f5a8c1b4d7e0f3a6c9b2e5d8f"
    production = {"FRAMELAB_ENV": "production", "SECRET_KEY": key}
    with pytest.raises(ConfigError, match="FRAMELAB_ASSIGNMENT_SEED is for tests"):
        resolve_config(tmp_path, None, environ={**production, **env})
    with pytest.raises(ConfigError, match="CLOCK is for tests"):
        resolve_config(tmp_path, {"CLOCK": lambda: None}, environ=production)


def test_only_tests_hash_passwords_at_a_lower_cost(tmp_path):
    assert resolve_config(tmp_path, {"ENV_NAME": "testing"})["ACCOUNT_HASH_METHOD"].startswith(
        "pbkdf2:"
    )
    assert resolve_config(tmp_path, None, environ={})["ACCOUNT_HASH_METHOD"] == "scrypt"
    key = "9c4e1f7a2b8d3e6f0a5c9b2d7e1f4a8c3b6d9e2f5a8c1b4d7e0f3a6c9b2e5d8f"
    production = {"FRAMELAB_ENV": "production", "SECRET_KEY": key}
    assert resolve_config(tmp_path, None, environ=production)["ACCOUNT_HASH_METHOD"] == "scrypt"
    with pytest.raises(ConfigError, match="werkzeug's default"):
        resolve_config(tmp_path, {"ACCOUNT_HASH_METHOD": "pbkdf2:sha256:1"}, environ=production)


def test_unknown_environment_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="FRAMELAB_ENV"):
        resolve_config(tmp_path, None, environ={"FRAMELAB_ENV": "staging"})


def test_sqlite_uses_wal_and_busy_timeout(app):
    from webapp.extensions import db

    with app.app_context(), db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_create_app_registers_the_cli_commands(tmp_path):
    app = create_app({"SECRET_KEY": "x", "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/a"})
    assert {"study", "export", "bots", "serve", "create-researcher"} <= set(app.cli.commands)


@pytest.fixture
def open_umask():
    """The umask most systems start processes with (022: new files readable by everyone)."""
    import os

    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path) -> int:
    return path.stat().st_mode & 0o777


def test_the_sqlite_database_and_its_wal_are_readable_by_their_owner_only(tmp_path, open_umask):
    from tests.webapp.conftest import make_app
    from webapp.extensions import db, dispose_engines

    path = tmp_path / "framelab.sqlite"
    # The migrations build the schema: SQLite writes the file and its WAL as the app opens them.
    app = make_app(f"sqlite:///{path}", migrate=True)
    with app.app_context():
        db.session.execute(db.text("SELECT count(*) FROM study")).scalar()
        wal = [p for p in (tmp_path.glob("framelab.sqlite-*")) if p.exists()]
        assert wal, "WAL mode keeps -wal and -shm files while a connection is open"
        assert {p.name: _mode(p) for p in [path, *wal]} == {p.name: 0o600 for p in [path, *wal]}
        dispose_engines()


def test_an_existing_readable_database_in_the_instance_folder_is_made_private(tmp_path, open_umask):
    from webapp.config import private_sqlite_file

    instance, elsewhere = tmp_path / "instance", tmp_path / "data"
    instance.mkdir()
    elsewhere.mkdir()
    ours, wal, theirs = (
        instance / "framelab.sqlite",
        instance / "framelab.sqlite-wal",
        elsewhere / "x.db",
    )
    for p in (ours, wal, theirs):
        p.write_bytes(b"")
        p.chmod(0o644)
    private_sqlite_file(f"sqlite:///{ours}", instance)
    private_sqlite_file(f"sqlite:///{theirs}", instance)
    assert (_mode(ours), _mode(wal)) == (0o600, 0o600)
    assert _mode(theirs) == 0o644  # named by DATABASE_URL elsewhere: its owner's choice
    private_sqlite_file("sqlite://", instance)  # in memory: nothing to do
    private_sqlite_file("postgresql+psycopg://u@h/db", instance)


def test_the_dev_secret_key_is_never_readable_by_others(tmp_path, open_umask, monkeypatch):
    from pathlib import Path

    # Were the key written first and made private afterwards, a process stopped in between
    # (here: the chmod failing) would leave it readable by everyone.
    def no_chmod(self, mode):
        raise PermissionError("chmod refused")

    monkeypatch.setattr(Path, "chmod", no_chmod)
    settings = resolve_config(tmp_path, None, environ={})
    key = tmp_path / "secret_key"
    assert _mode(key) == 0o600 and key.read_text() == settings["SECRET_KEY"]


def test_processes_starting_at_once_all_read_the_one_whole_dev_key(tmp_path):
    # Sixteen starts at once, thirty times: each gets the key the file holds, never the empty
    # file a winner has created but not yet written.
    import threading

    for round_ in range(30):
        instance = tmp_path / str(round_)
        instance.mkdir()
        barrier = threading.Barrier(16)
        keys: list[str] = []

        def start(instance=instance, barrier=barrier, keys=keys):
            barrier.wait()
            keys.append(resolve_config(instance, None, environ={})["SECRET_KEY"])

        threads = [threading.Thread(target=start) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(keys) == {(instance / "secret_key").read_text()}
        assert len(keys) == 16 and len(keys[0]) == 64
        assert [p.name for p in instance.iterdir()] == ["secret_key"]
