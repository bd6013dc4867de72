"""The README's construct table names real functions: each dotted name there resolves."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _names() -> list[str]:
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Paper constructs") :]
    table = table[: table.index("\n## ", 3)]
    names: list[str] = []
    for line in table.splitlines():
        cells = line.split("|")
        if len(cells) < 5 or set(cells[3].strip()) <= {"-"}:
            continue
        module = None
        for raw in re.findall(r"`([^`]+)`", cells[3]):
            name = raw.split("(")[0]
            if name.startswith(("analysis.", "webapp.")):
                module = name.rsplit(".", 1)[0]
                names.append(name)
            elif module is not None:
                # A bare name continues the module of the previous dotted name in the cell.
                names.append(f"{module}.{name}")
    return names


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_table_is_not_empty() -> None:
    assert len(_names()) > 40


@pytest.mark.parametrize("dotted", _names())
def test_construct_function_exists(dotted: str) -> None:
    assert _resolve(dotted) is not None  # raises ImportError/AttributeError when stale
