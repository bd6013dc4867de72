"""One bound policy for the base dependencies and every extra (pyproject.toml says which)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _requirements() -> list[tuple[str, Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = [("dependencies", Requirement(r)) for r in project["dependencies"]]
    for extra, requirements in project["optional-dependencies"].items():
        found += [(extra, Requirement(r)) for r in requirements]
    return [(where, r) for where, r in found if r.name != "framelab"]


def test_every_requirement_has_a_lower_and_an_upper_bound_and_none_is_pinned():
    problems = []
    for where, req in _requirements():
        ops = {spec.operator for spec in req.specifier}
        if not ops & {">=", ">"} or "<" not in ops or ops & {"==", "==="}:
            problems.append(f"{where}: {req}")
    assert problems == []


def test_the_upper_bounds_admit_the_versions_constraints_txt_pins():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pins[name.strip().lower().replace("_", "-")] = Version(version.strip())
    outside = [
        f"{where}: {req} excludes {pins[key]}"
        for where, req in _requirements()
        if (key := req.name.lower().replace("_", "-")) in pins
        and not req.specifier.contains(pins[key], prereleases=True)
    ]
    assert outside == []
