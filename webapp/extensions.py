"""Flask extensions, created unbound so ``create_app`` can attach them to any app instance."""

from __future__ import annotations

from typing import Any

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_sqlalchemy.session import Session as FlaskSession
from flask_wtf import CSRFProtect
from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

from webapp.config import AUTOCOMMIT_BIND

# Named constraints before the first migration: Alembic can then drop/alter them by name, and
# SQLite batch migrations (which recreate tables) keep the same names as PostgreSQL.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base whose metadata carries the naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# The Session.info key that routes a session's statements to the autocommit engine (the bind
# AUTOCOMMIT_BIND, which webapp.config.resolve_config adds for PostgreSQL);
# webapp.services.flow.read_in_autocommit sets it and end_autocommit clears it.
IN_AUTOCOMMIT = "framelab_autocommit"


class Session(FlaskSession):
    """Flask-SQLAlchemy's session; while ``info[IN_AUTOCOMMIT]`` is set, on the autocommit
    engine.

    A participant request on PostgreSQL reads (and often writes) without a transaction
    (:func:`webapp.services.flow.read_in_autocommit`). Switching a pooled connection into
    autocommit and back on every request was about a tenth of its CPU (issue 21): psycopg
    changes the setting under its lock, and the pool rolls the connection back and restores
    its isolation level when it returns. The autocommit engine's connections are put in
    autocommit once, when they connect, and are not rolled back on return (SQLAlchemy's
    documented ``pool_reset_on_return=None`` for connections that are always in autocommit).
    Sessions outside autocommit use the app's engine as before; a session's transaction keeps
    the connection it began with, so the routing changes only at a transaction's start.
    """

    def get_bind(
        self, mapper: Any = None, clause: Any = None, bind: Any = None, **kwargs: Any
    ) -> Any:
        if bind is None and self.info.get(IN_AUTOCOMMIT):
            engine = self._db.engines.get(AUTOCOMMIT_BIND)
            if engine is not None:
                return engine
        return super().get_bind(mapper, clause, bind, **kwargs)


db = SQLAlchemy(model_class=Base, session_options={"class_": Session})


def dispose_engines() -> None:
    """Close the pooled connections of every engine of the current app (before its database
    is dropped, or after the server restarted)."""
    for engine in db.engines.values():
        engine.dispose()


migrate = Migrate()
csrf = CSRFProtect()
