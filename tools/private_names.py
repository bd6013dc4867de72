"""Fail on private names used across a module boundary: a library's, or another module's of ours.

A name that starts with one underscore belongs to the module (or class) that defines it. Reading
or importing it from anywhere else couples us to internals that change in any release (a
library's) or that their owner may rename freely (ours). The check reads the source (``ast``)
and reports, for every module under the given folders:

- an import of an underscored name or module: ``from x import _y``, ``import x._y``,
  ``from x._y import z`` (a relative import of a sibling module's ``_y`` counts too);
- an underscored attribute of an imported module: ``x._y`` where ``x`` names a module;
- an underscored attribute of any other object that the module itself does not define
  (``scorer._tokenizer``, ``getattr(config, "_commit_hash")``): a module may read the private
  attributes of its own classes on another instance, and a class its own (and its bases') on
  ``self`` / ``cls``, but no one else's.

Dunder names (``__file__``) are public. The few exceptions live in ``ALLOWED`` below, each with
the reason it is allowed. Usage: ``python tools/private_names.py webapp analysis framelab``
(exit status 1 and one line per finding when something is found).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Underscored names that are the documented, public API of their owner.
PUBLIC_UNDERSCORED = {
    # namedtuple's documented methods and fields (underscored so they cannot clash with fields).
    "_replace",
    "_asdict",
    "_fields",
    "_field_defaults",
    "_make",
    # os._exit: documented, the exit of a forked child that must not run the parent's handlers.
    "_exit",
    # Werkzeug's LocalProxy._get_current_object: Flask documents it as the way to hand the real
    # app (not the proxy) to a thread or a signal.
    "_get_current_object",
}

# (module path relative to the root, private name) -> why it is allowed. Every entry names one
# module's use of one name; a new use needs its own entry and reason, and an entry nothing
# needs any more fails the check until it is deleted.
ALLOWED: dict[tuple[str, str], str] = {
    # transformers has no public getter of the attention implementation a model runs with
    # (its docs read model.config._attn_implementation; the setter, set_attn_implementation,
    # is public). Eager attention is switched on for one forward pass and the previous one
    # restored. transformers is held below 6 in the llm extra.
    ("analysis/mitigation/rerank.py", "_attn_implementation"): "no public form",
}

# Names that are public by spelling but internals of the libraries we use (their own code
# reaches them; their documentation does not): ORM state, compiled statements' bookkeeping, and
# Flask's list of request hooks (register through ``app.before_request`` instead).
INTERNAL_ATTRIBUTES = {
    "before_request_funcs",
    "identity_map",
    "class_manager",
    "instance_state",
    "expired_attributes",
    "insert_prefetch",
    "update_prefetch",
    "escaped_bind_names",
    "as_loaded",
}


@dataclass(frozen=True)
class Finding:
    """One use of a private name: where, what, and the key an ``ALLOWED`` entry would take."""

    path: str
    line: int
    what: str
    key: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a (possibly relative) ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    # A package's __init__ is its own level-1 parent; a plain module's parent is its package.
    drop = node.level - 1 if is_package else node.level
    base = base[: len(base) - drop] if drop else base
    return ".".join([*base, *([node.module] if node.module else [])])


def _string_arg(node: ast.Call) -> str | None:
    """The attribute name of ``getattr(obj, "_x", ...)`` and its kin, if spelled out."""
    if (
        isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "hasattr", "setattr", "delattr"}
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value
    return None


def check_source(source: str, path: str, module: str, is_package: bool = False) -> list[Finding]:
    """Every private name ``source`` (module ``module``, shown as ``path``) uses from elsewhere."""
    tree = ast.parse(source, filename=path)
    nodes = list(ast.walk(tree))
    # Underscored names the module defines: functions, classes, assigned attributes
    # (``self._x = ...``), module-level and annotated names; and setattr(obj, "_x", ...),
    # which makes "_x" the module's own for attribute access but not for getattr's sake.
    own: set[str] = set()
    set_by_setattr: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr":
            name = _string_arg(node)
            if name is not None:
                set_by_setattr.add(name)
    own_by_assignment = own - set_by_setattr
    own |= set_by_setattr
    modules: dict[str, str] = {}  # local name -> module it is bound to (import x / import x as y)
    found: list[Finding] = []

    def add(node: ast.AST, what: str, key: str) -> None:
        found.append(Finding(path, getattr(node, "lineno", 0), what, key))

    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if any(_private(p) for p in alias.name.split(".")):
                    add(node, f"import {alias.name}", alias.name)
                modules[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom):
            source_module = _resolve(node, module, is_package)
            if any(_private(p) for p in source_module.split(".")):
                add(node, f"from {source_module} import ...", source_module)
            for alias in node.names:
                if _private(alias.name):
                    add(node, f"from {source_module} import {alias.name}", alias.name)
                else:
                    # ``from x import y`` may bind a module; its attributes are checked too.
                    modules.setdefault(alias.asname or alias.name, f"{source_module}.{alias.name}")
    for node in nodes:
        if isinstance(node, ast.Call):
            name = _string_arg(node)
            if name is not None and _private(name) and name not in own_by_assignment:
                function = node.func.id  # type: ignore[attr-defined]
                add(node, f"{function}({ast.unparse(node.args[0])}, {name!r})", name)
            continue
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if node.attr in INTERNAL_ATTRIBUTES:
            add(node, f"internal attribute .{node.attr}", node.attr)
            continue
        if not _private(node.attr):
            continue
        if isinstance(owner, ast.Name) and owner.id in {"self", "cls"}:
            continue  # a class's own members, however its hierarchy spreads over modules
        if isinstance(owner, ast.Name) and owner.id in modules:
            add(node, f"{owner.id}.{node.attr} (a private name of {modules[owner.id]})", node.attr)
        elif node.attr not in own:
            shown = ast.unparse(owner)
            add(node, f"{shown}.{node.attr} (a private attribute defined elsewhere)", node.attr)
    return sorted(set(found), key=lambda f: (f.line, f.what))


def _files(folders: Iterable[Path]) -> Iterator[Path]:
    for folder in folders:
        yield from sorted(p for p in folder.rglob("*.py") if "migrations" not in p.parts)


def _all_findings(folders: Iterable[Path], root: Path) -> list[Finding]:
    out = []
    for path in _files(folders):
        rel = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        module = _module_name(path, root)
        out += check_source(source, rel, module, is_package=path.name == "__init__.py")
    return out


def report(
    folders: Iterable[Path], root: Path | None = None
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """The findings under ``folders`` (inside ``root``) that no ``ALLOWED`` entry covers, and
    the entries for those folders that no finding needs any more (to be deleted)."""
    root = root or ROOT
    folders = [f.resolve() for f in folders]
    found = _all_findings(folders, root)
    needed = {(f.path, f.key) for f in found}
    prefixes = tuple(f"{p.relative_to(root).as_posix()}/" for p in folders)
    stale = sorted(k for k in set(ALLOWED) - needed if k[0].startswith(prefixes))
    return [f for f in found if (f.path, f.key) not in ALLOWED], stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    findings, stale = report([ROOT / f for f in args.folders])
    for f in findings:
        print(f)
    for rel, key in stale:
        print(f"{rel}: ALLOWED entry for {key!r} is no longer needed; delete it")
    if findings or stale:
        print(f"{len(findings)} private name(s) used across a module boundary", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
