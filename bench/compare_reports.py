"""Check that two report folders of ``framelab analyze`` carry the same results.

Usage::

    .venv/bin/python bench/compare_reports.py OLD_FOLDER NEW_FOLDER

What must agree: the set of files; every CSV table byte for byte, or else cell for cell with
numbers equal to 1e-12 (relative or absolute); ``results.json`` except ``meta.timings_s``;
``report.html`` except its "Generated <time> by <command>" line; every PNG present and
non-empty in both (pixels may differ: a figure is checked by looking at it, not by its bytes).
Exits 1 and lists every difference otherwise. ``bench/report_cost.py --check`` runs it on the
first baseline and candidate folders of the same run.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

TOLERANCE = 1e-12
_GENERATED = re.compile(r"Generated \S+ by <code>.*?</code>")


def _cells_equal(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if math.isnan(x) and math.isnan(y):
        return True
    return math.isclose(x, y, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def _compare_csv(old: Path, new: Path) -> list[str]:
    import csv

    if old.read_bytes() == new.read_bytes():
        return []
    with old.open(newline="", encoding="utf-8") as f:
        rows_old = list(csv.reader(f))
    with new.open(newline="", encoding="utf-8") as f:
        rows_new = list(csv.reader(f))
    if len(rows_old) != len(rows_new):
        return [f"{old.name}: {len(rows_old)} vs {len(rows_new)} rows"]
    problems = []
    for i, (r_old, r_new) in enumerate(zip(rows_old, rows_new, strict=True)):
        if len(r_old) != len(r_new):
            problems.append(f"{old.name} row {i}: {len(r_old)} vs {len(r_new)} cells")
            continue
        for j, (a, b) in enumerate(zip(r_old, r_new, strict=True)):
            if not _cells_equal(a, b):
                problems.append(f"{old.name} row {i} column {rows_old[0][j]!r}: {a!r} vs {b!r}")
    return problems


def compare(old_dir: Path, new_dir: Path) -> list[str]:
    """Return the differences between two report folders (empty: the same results)."""
    old_files = {p.name for p in old_dir.iterdir()}
    new_files = {p.name for p in new_dir.iterdir()}
    problems = []
    if old_files != new_files:
        problems.append(
            f"files only in old: {sorted(old_files - new_files)}, "
            f"only in new: {sorted(new_files - old_files)}"
        )
    for name in sorted(old_files & new_files):
        old, new = old_dir / name, new_dir / name
        if name.endswith(".csv"):
            problems += _compare_csv(old, new)
        elif name == "results.json":
            a, b = (json.loads(p.read_text(encoding="utf-8")) for p in (old, new))
            for payload in (a, b):
                payload["meta"].pop("timings_s", None)
            if a != b:
                problems.append("results.json differs (beyond meta.timings_s)")
        elif name == "report.html":
            a, b = (_GENERATED.sub("", p.read_text(encoding="utf-8")) for p in (old, new))
            if a != b:
                problems.append("report.html differs (beyond the Generated line)")
        elif name.endswith(".png") and min(old.stat().st_size, new.stat().st_size) == 0:
            problems.append(f"{name}: empty")
    return problems


def main() -> None:
    old_dir, new_dir = (Path(a) for a in sys.argv[1:3])
    problems = compare(old_dir, new_dir)
    for line in problems:
        print(line)
    print("same results" if not problems else f"{len(problems)} difference(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
