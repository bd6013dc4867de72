"""A block's body is its task type's: no module outside ``webapp/tasks/`` reads ``.params``."""

from __future__ import annotations

import ast
from pathlib import Path

import webapp

ROOT = Path(webapp.__file__).parent
# The owner of the attribute: TaskBlock itself stores and serialises the body.
OWNER = ROOT / "definition.py"


def body_reads(path: Path) -> list[int]:
    """Lines of ``path`` that read an attribute ``params`` (a call ``x.params()`` is another
    object's method, not a block's body)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr == "params" and id(n) not in called
    ]


def test_only_task_types_read_a_block_body() -> None:
    outside = [
        p for p in sorted(ROOT.rglob("*.py")) if ROOT / "tasks" not in p.parents and p != OWNER
    ]
    assert len(outside) > 20  # the walk found the package
    found = [f"{p.relative_to(ROOT.parent)}:{n}" for p in outside for n in body_reads(p)]
    assert not found, f"ask the block's task type (webapp.tasks.get_task_type) instead: {found}"


def test_the_check_sees_a_read(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("k = block.params['k']\nq = entry.params()\n", encoding="utf-8")
    assert body_reads(module) == [1]
