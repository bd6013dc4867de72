"""The console's record of a study's pre-registrations, handed to ``framelab analyze``.

``analyze choice --prereg`` compares the document with the hash the console recorded when
``framelab prereg SLUG`` froze the study. The research package never imports the web app, so
the ``framelab`` console script hands it :func:`console_record` through click's context
(``analysis.cli.CONSOLE_RECORD``). Kept free of imports at module level: it is read whenever an
analysis command starts, and only ``--prereg`` calls it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["console_record"]


def console_record(slug: str) -> dict[str, Any]:
    """The pre-registrations the console recorded for ``slug`` (``webapp.services.looks``).

    The database is the web app's (``DATABASE_URL``, else the instance folder's SQLite file);
    a SQLite file that does not exist is not created.

    Raises
    ------
    LookupError
        No database is configured, it cannot be read, or it holds no study ``slug``; the text
        says which (without a password).
    """
    from flask import Flask
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from webapp import create_app
    from webapp.config import ConfigError

    url = os.environ.get("DATABASE_URL")
    if not url:
        instance = Path(Flask("webapp", instance_relative_config=True).instance_path)
        url = f"sqlite:///{instance / 'framelab.sqlite'}"
    try:
        parsed = make_url(url)
    except SQLAlchemyError:  # an unparsable URL: say so without repeating it
        raise LookupError("DATABASE_URL is not a database URL") from None
    where = parsed.render_as_string(hide_password=True)
    # Opening a missing SQLite file would create an empty database: say there is none.
    if parsed.get_backend_name() == "sqlite" and not Path(parsed.database or "").is_file():
        raise LookupError(f"no database at {where}")
    try:
        app = create_app()
    except (ConfigError, SQLAlchemyError, ValueError) as exc:
        raise LookupError(f"the web app's settings cannot be used ({exc})") from None
    from webapp.extensions import db
    from webapp.services.looks import console_record as record
    from webapp.services.studies import get_study

    with app.app_context():
        try:
            study = get_study(slug)
            if study is None:
                raise LookupError(f"the database {where} holds no study {slug}")
            return record(study)
        except SQLAlchemyError as exc:
            reason = str(exc.orig if getattr(exc, "orig", None) else exc).splitlines()[0]
            raise LookupError(f"the database {where} cannot be read ({reason})") from None
        finally:
            db.session.remove()
            db.engine.dispose()  # one lookup per command: no connection is kept
