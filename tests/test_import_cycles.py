"""No import circles in webapp or analysis, at any depth: a function-level import and one for
type annotations only (under TYPE_CHECKING) count too.

A circle means neither module can be understood, tested or moved without the other; the
usual cause was a module reaching for another's private helper. grimp (import-linter's graph)
reads the imports; the strongly connected groups of the graph are the circles.
"""

from __future__ import annotations

import grimp
import pytest


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The groups of two or more modules that all reach each other (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return sorted(found)


@pytest.mark.parametrize("package", ["webapp", "analysis", "framelab"])
def test_no_import_circles(package):
    graph = grimp.build_graph(package, cache_dir=None)
    assert circles(graph) == []


def test_a_circle_is_found_at_any_depth():
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c", "p.d"):
        graph.add_module(module)
    for importer, imported in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=importer, imported=imported)
    assert circles(graph) == [["p.a", "p.b", "p.c"]]
