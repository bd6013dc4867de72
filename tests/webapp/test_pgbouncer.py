"""The participant path through a real PgBouncer (Debian's) in transaction mode.

Transaction pooling hands each transaction whichever server connection is free, so anything a
connection remembers between transactions breaks: session advisory locks, ``SET`` outside a
transaction, and psycopg's server-side prepared statements (made after five runs of a
statement). FrameLab takes only transaction-scoped advisory locks, uses ``FOR UPDATE [SKIP
LOCKED]`` inside transactions, and with ``FRAMELAB_PGBOUNCER=1`` prepares nothing. Here bots
complete the product-choice demo over HTTP, several at once, with every statement run far more
than five times, through PgBouncer to a database of its own.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text

from tests.conftest import require
from webapp.definition_cache import study_definition

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def pgbouncer_url(pg_url: str):
    """A fresh database reached through a PgBouncer (transaction mode) started for the test."""
    from webapp.config import normalise_database_url

    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    require(os.path.exists(binary), "PgBouncer (Debian package `pgbouncer`)")
    name = f"framelab_pgb_{secrets.token_hex(4)}"
    admin = create_engine(normalise_database_url(pg_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    direct = pg_url.rsplit("/", 1)[0] + f"/{name}"
    # Its own folder under /tmp: when PgBouncer drops to the postgres user it must reach it.
    folder = Path(tempfile.mkdtemp(prefix="framelab-pgbouncer-"))
    # PgBouncer listens only on a Unix socket in that folder: no TCP port another process could
    # take between choosing it and binding it, and the port number only names the socket file.
    port = 6432
    (folder / "users.txt").write_text('"postgres" ""\n')
    (folder / "pgbouncer.ini").write_text(
        f"""[databases]
{name} = host=127.0.0.1 port=5432 dbname={name}
[pgbouncer]
listen_addr =
listen_port = {port}
unix_socket_dir = {folder}
auth_type = trust
auth_file = {folder / "users.txt"}
pool_mode = transaction
default_pool_size = 4
max_client_conn = 200
"""
    )
    # PgBouncer refuses to run as root; CI runs as root, so it drops to the postgres user.
    command = [binary, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        for f in folder.iterdir():
            shutil.chown(f, "postgres")
        command[1:1] = ["-u", "postgres"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # Up when its socket accepts a connection; only its exit ends the wait otherwise.
        while True:
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(str(folder / f".s.PGSQL.{port}"))
                    break
                except OSError:
                    pass
            if proc.poll() is not None:
                pytest.fail(f"pgbouncer exited: {proc.stdout.read().decode()}")
            time.sleep(0.1)
        yield direct, f"postgresql://postgres@/{name}?host={folder}&port={port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
        shutil.rmtree(folder, ignore_errors=True)


def test_bots_complete_the_study_through_pgbouncer_in_transaction_mode(
    pgbouncer_url, serve_app, monkeypatch
):
    from flask_migrate import upgrade

    from tests.webapp.conftest import DEMO, disposing
    from webapp import create_app
    from webapp.bots import run_bots
    from webapp.extensions import db
    from webapp.models import ChoiceResponse, Participant
    from webapp.services.studies import load_study

    direct, bounced = pgbouncer_url
    migrations = Path(__file__).resolve().parents[2] / "migrations"
    config = {"TESTING": True, "SECRET_KEY": "p" * 40}
    setup = create_app({**config, "SQLALCHEMY_DATABASE_URI": direct})
    with disposing(setup), setup.app_context():
        upgrade(directory=str(migrations))
        definition = study_definition(load_study(DEMO).study)
        db.session.remove()  # the connection goes back to the pool before the pool is closed

    monkeypatch.setenv("FRAMELAB_PGBOUNCER", "1")
    app = create_app({**config, "SQLALCHEMY_DATABASE_URI": bounced})
    with disposing(app):  # closed even when an assertion fails
        assert app.config["SQLALCHEMY_ENGINE_OPTIONS"]["connect_args"]["prepare_threshold"] is None
        assert app.test_client().get("/healthz").status_code == 200
        summary = run_bots(None, definition, n=12, url=serve_app(app), concurrency=6, seed=4)
        assert summary.errors == [] and summary.counts == {"completed": 12}
        with app.app_context():
            assert db.session.scalar(select(func.count()).select_from(Participant)) == 12
            assert db.session.scalar(select(func.count()).select_from(ChoiceResponse)) == 120
            db.session.remove()
