"""webapp uses only the public APIs of the libraries it stands on.

A private name of SQLAlchemy, Flask, Flask-SQLAlchemy, Werkzeug or psycopg can change or vanish
in any release; code that reads one through ``getattr(..., None)`` even goes quiet when it
does. This test reads every module of webapp for the internals that are easiest to reach
for, and for any import of an underscored module or name from those libraries.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

WEBAPP = Path(__file__).resolve().parents[2] / "webapp"
LIBRARIES = ("sqlalchemy", "flask", "flask_sqlalchemy", "flask_wtf", "werkzeug", "psycopg")

# Internals named in the libraries' own code but not in their documented APIs: execution
# (Connection._handle_dbapi_exception, the compiler's prefetch and escaped names), ORM state
# (class managers, identity maps, instance state), Flask-SQLAlchemy's session back-reference
# (Session._db), Flask's list of request hooks (before_request_funcs: register through
# app.before_request or a blueprint); and a second engine in AUTOCOMMIT, which would let
# participant requests bypass the transaction every answer holds.
INTERNALS = re.compile(
    r"_handle_dbapi_exception|before_request_funcs|\._db\b|identity_map|class_manager"
    r"|\binstance_state\b|expired_attributes|insert_prefetch|update_prefetch"
    r"|escaped_bind_names|as_loaded|AUTOCOMMIT|_request_ctx_stack|_app_ctx_stack"
)


def _modules() -> list[Path]:
    return sorted(WEBAPP.rglob("*.py"))


def _private_imports(tree: ast.AST) -> list[str]:
    """Imports from LIBRARIES of an underscored module or name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] not in LIBRARIES:
                continue
            if any(p.startswith("_") for p in parts):
                found.append(f"from {node.module} import ...")
            found += [
                f"from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")
            ]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in LIBRARIES and any(p.startswith("_") for p in parts):
                    found.append(f"import {alias.name}")
    return found


def test_webapp_is_found():
    assert len(_modules()) > 50  # the search below reads the real tree


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(WEBAPP)))
def test_no_module_uses_a_private_name_of_its_libraries(path):
    source = path.read_text(encoding="utf-8")
    hits = [
        f"line {n}: {line.strip()}"
        for n, line in enumerate(source.splitlines(), 1)
        if INTERNALS.search(line)
    ]
    hits += _private_imports(ast.parse(source))
    assert not hits, hits


def test_the_check_sees_what_it_looks_for():
    # The search itself, on code that does what webapp must not.
    bad = (
        "from sqlalchemy.orm.attributes import instance_state\n"
        "from sqlalchemy.engine import _py_row\n"
        "from flask.globals import _cv_request\n"
        "import werkzeug._internal\n"
        "conn._handle_dbapi_exception(exc, sql, values, cursor, None)\n"
    )
    assert len(_private_imports(ast.parse(bad))) == 3
    assert sum(bool(INTERNALS.search(line)) for line in bad.splitlines()) == 2
