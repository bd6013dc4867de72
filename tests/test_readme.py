"""The construct tables (README, docs/constructs.md) name real functions: each name resolves."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CONSTRUCTS = ROOT / "docs" / "constructs.md"


def _names(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    table = text[text.index("# Paper constructs") :]
    end = table.find("\n## ", 3)
    table = table if end < 0 else table[:end]
    names: list[str] = []
    for line in table.splitlines():
        cells = re.split(r"(?<!\\)\|", line)  # "\|" is a pipe inside a cell
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


def test_tables_are_not_empty() -> None:
    assert len(_names(README)) > 20
    assert len(_names(CONSTRUCTS)) > 100


def test_readme_names_only_functions_of_the_full_table() -> None:
    assert set(_names(README)) <= set(_names(CONSTRUCTS))


@pytest.mark.parametrize("dotted", sorted(set(_names(README)) | set(_names(CONSTRUCTS))))
def test_construct_function_exists(dotted: str) -> None:
    assert _resolve(dotted) is not None  # raises ImportError/AttributeError when stale
