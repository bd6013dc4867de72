"""Flask extensions, created unbound so ``create_app`` can attach them to any app instance."""

from __future__ import annotations

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect
from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

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


db = SQLAlchemy(model_class=Base)


def dispose_engines() -> None:
    """Close the pooled connections of every engine of the current app (before its database
    is dropped, or after the server restarted)."""
    for engine in db.engines.values():
        engine.dispose()


migrate = Migrate()
csrf = CSRFProtect()
