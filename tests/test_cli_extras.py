"""The ``framelab`` command on an install without the research extra (``make run``'s)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import framelab.cli as cli


@pytest.fixture
def web_only(monkeypatch):
    """Pretend the research package's dependencies are missing: its commands cannot load."""
    resolve = cli._resolve

    def without_extra(target: str):
        if target.startswith("analysis."):
            raise ImportError("No module named 'numpy'", name="numpy")
        return resolve(target)

    monkeypatch.setattr(cli, "_resolve", without_extra)


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
    assert "missing module: numpy" in result.output
