"""The ``framelab`` command on an install without the research extra (``make run``'s), and the
command list that ``framelab --help`` prints without importing any command's module."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import pytest
from click.testing import CliRunner

import framelab.cli as cli


@pytest.fixture
def web_only(monkeypatch):
    """Pretend the research package's dependencies are not installed."""
    find_spec = importlib.util.find_spec

    def without_extra(name: str, *args):
        return None if name.split(".")[0] in {"pandas", "numpy"} else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_extra)


def test_help_lists_every_command_without_the_extra(web_only):
    # A first-time user's `framelab --help` after `make run` failed with "`framelab metrics`
    # needs the research package": help must list the commands and say which need what.
    result = CliRunner().invoke(cli.main, ["--help"])
    assert result.exit_code == 0, result.output
    assert "bots" in result.output and "study" in result.output
    assert "metrics" in result.output and "Not installed: needs the research package" in (
        " ".join(result.output.split())
    )


@pytest.mark.parametrize("args", [["metrics"], ["metrics", "--help"], ["metrics", "x", "--k", "1"]])
def test_a_command_without_its_extra_says_what_to_install(web_only, args):
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 1
    assert "`framelab metrics` needs the research package" in result.output
    assert "pip install 'framelab[analysis]'" in result.output
    assert "missing module: pandas" in result.output


def test_a_dependency_missing_beyond_the_checked_ones_is_named_too(monkeypatch):
    def without_scipy(target: str):
        raise ImportError("No module named 'scipy'", name="scipy")

    monkeypatch.setattr(cli, "_resolve", without_scipy)
    result = CliRunner().invoke(cli.main, ["metrics"])
    assert result.exit_code == 1 and "missing module: scipy" in result.output


def test_each_listed_help_is_the_commands_own():
    for name, spec in cli._specs().items():
        module, _, attr = spec.target.partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert command.get_short_help_str(limit=1000) == spec.help, name


def test_help_imports_neither_flask_nor_pandas():
    code = (
        "import sys\n"
        "from framelab.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('flask', 'pandas', 'sqlalchemy') if m in sys.modules),"
        " file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Commands:" in done.stdout and "prereg" in done.stdout
    assert done.stderr.strip() == "[]"
