"""Only public names across module boundaries, a library's or each other's (tools/private_names).

A private name of SQLAlchemy, Flask, transformers or bert-score can change or vanish in any
release, and code that reads one through ``getattr(..., None)`` even goes quiet when it does;
a private helper of one of our modules is its owner's to rename. ``make lint`` and ``make test``
run the check over the three packages; this test runs it too and shows what it catches.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools import private_names

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [ROOT / p for p in ("webapp", "analysis", "framelab", "framelab_schema")]


def test_the_packages_use_no_private_name_of_another_module_and_every_allowance_is_needed():
    findings, stale = private_names.report(PACKAGES)
    assert [str(f) for f in findings] == []
    assert stale == []
    assert all(reason.strip() for reason in private_names.ALLOWED.values())


BAD = """\
import flask
import werkzeug._internal
from sqlalchemy.engine import _py_row
from flask.globals import _cv_request
from analysis.io import _coerce
from . import _sibling_helper
from bert_score import BERTScorer

scorer = BERTScorer(model_type="m")
scorer._tokenizer.model_max_length = 512
flask._app_ctx_stack
commit = getattr(model.config, "_commit_hash", None)
session.identity_map
app.before_request_funcs
"""

GOOD = """\
from collections import namedtuple
import os

class Cache:
    def __init__(self):
        self._items = {}

    def merge(self, other: "Cache") -> None:
        self._items.update(other._items)  # its own class's attribute, on another instance
        self._flush()

Point = namedtuple("Point", "x y")
Point(1, 2)._replace(x=3)._asdict()
os._exit
current_app._get_current_object()
"""


def test_the_check_sees_what_it_looks_for():
    found = private_names.check_source(BAD, "bad.py", "analysis.bad")
    what = [f.what for f in found]
    assert what == [
        "import werkzeug._internal",
        "from sqlalchemy.engine import _py_row",
        "from flask.globals import _cv_request",
        "from analysis.io import _coerce",
        "from analysis import _sibling_helper",
        "scorer._tokenizer (a private attribute defined elsewhere)",
        "flask._app_ctx_stack (a private name of flask)",
        "getattr(model.config, '_commit_hash')",
        "internal attribute .identity_map",
        "internal attribute .before_request_funcs",
    ]
    assert private_names.check_source(GOOD, "good.py", "analysis.good") == []


def test_the_command_names_each_finding_and_fails(tmp_path, capsys, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text("from pkg.other import _helper\n")
    monkeypatch.setattr(private_names, "ROOT", tmp_path)
    assert private_names.main(["pkg"]) == 1
    assert "pkg/mod.py:1: from pkg.other import _helper" in capsys.readouterr().out
    (package / "mod.py").write_text("from pkg.other import helper\n")
    assert private_names.main(["pkg"]) == 0


@pytest.mark.parametrize("path", sorted((ROOT / "webapp").rglob("*.py")), ids=lambda p: p.name)
def test_no_webapp_module_opens_a_second_engine_in_autocommit(path):
    # Participant requests would then bypass the transaction every answer holds.
    assert not re.search(r"AUTOCOMMIT", path.read_text(encoding="utf-8"))
