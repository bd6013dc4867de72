"""The study YAML as the research package reads it: the ``analysis:`` block, the design, the hashes.

The web app validates the same block when it loads a study (``webapp/study_analysis.py``); this
reader exists so that planning, pre-registering and analysing need no web stack. Both refuse
the same blocks with the same located reasons (``FILE: analysis.alpha: ... (line N)``), a test
holds them together.

The block (``docs/analysis.md``, "Plan, pre-register, stop")::

    analysis:
      hypothesis: People choose the target more often when it is described by a summary.
      test: choice_glmm            # or wtp_lmm
      levels: [original, summary]  # reference, treatment (default)
      direction: greater           # greater | less | two-sided
      alpha: 0.025                 # one-sided for greater/less, two-sided total otherwise
      planned_n: 80                # completed, non-excluded participants
      exclusions: {require_attention: true, min_duration_frac_median: 0.3}
      looks:
        at: [0.5, 0.75, 1.0]       # fractions of planned_n
        spending: obrien-fleming   # or pocock
        futility: {z: [0, 0.5], binding: false}   # or {spending: obrien-fleming, beta: 0.2}

The bundle of a study is every file the web app stores with it: the YAML, its pairs files, its
images and anything else uploaded with it. Which files those are is the web app's decision, so
``framelab prereg`` asks it and names them to :func:`read_study`. The bundle's hash is the SHA-256
of the manifest ``"<sha256>  <name>\\n"`` per file, sorted by name (``sha256sum``'s format), so
the console computes the same hash from the stored files.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from analysis.exclusions import ChoiceRules
from analysis.plan.sequential import SPENDING_FUNCTIONS, SequentialDesign

__all__ = [
    "DIRECTIONS",
    "TESTS",
    "AnalysisPlan",
    "ChoiceBlock",
    "LookPlan",
    "PlanError",
    "StudyPlan",
    "bundle_sha256",
    "parse_analysis",
    "plan_from_dict",
    "read_study",
]

# The pre-registrable primary tests: FrameLab's models of the product-choice study.
TESTS = {
    "choice_glmm": (
        "chose_target",
        "logistic GLMM chose_target ~ format + (1 | participant_id) + (1 | pair_id) (Laplace, "
        "as lme4::glmer); Wald z of the log odds ratio",
    ),
    "wtp_lmm": (
        "wtp_premium_pct",
        "linear mixed model wtp_premium_pct ~ format + (1 | participant_id) + (1 | pair_id) "
        "(REML, as lme4::lmer); t with Satterthwaite df, as z of the same one-sided p",
    ),
}
DIRECTIONS = ("greater", "less", "two-sided")
FORMATS = ("original", "summary")
RULE_FLAGS = ("require_completed", "require_quiz", "require_attention", "drop_duplicates")
MAX_LOOKS = 10
MIN_LOOK_N = 4  # participants at a look: two per sequence, two levels of each random factor


class PlanError(ValueError):
    """The study file or its ``analysis:`` block is invalid; ``str()`` locates the reason."""


@dataclass(frozen=True)
class _Where:
    file: str
    path: str
    lines: Any = None  # the composed YAML node tree of the file

    def at(self, key: str | int) -> _Where:
        if isinstance(key, int):
            return _Where(self.file, f"{self.path}[{key}]", self.lines)
        return _Where(self.file, f"{self.path}.{key}" if self.path else key, self.lines)

    def error(self, reason: str, *, locate: str | None = None) -> PlanError:
        """An error at this place; ``locate`` is a path whose line to give instead."""
        line = _line(self.lines, self.path if locate is None else locate)
        at = f" (line {line})" if line else ""
        return PlanError(f"{self.file}: {self.path or '(top level)'}: {reason}{at}")


def _line(node: Any, path: str) -> int | None:
    """The line of ``path`` (``a.b[2]``) in a composed YAML tree; its nearest parent's if absent."""
    import re

    import yaml

    if node is None:
        return None
    line = node.start_mark.line + 1
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        if index and isinstance(node, yaml.SequenceNode) and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        elif key and isinstance(node, yaml.MappingNode):
            match = next((kv for kv in node.value if getattr(kv[0], "value", None) == key), None)
            if match is None:  # where the mapping starts (where the key belongs)
                line = node.start_mark.line + 1
                break
            line, node = match[0].start_mark.line + 1, match[1]
        else:
            break
    return line


def _keys(raw: Mapping[str, Any], allowed: set[str], where: _Where) -> None:
    unknown = sorted(set(raw) - allowed, key=str)
    if unknown:
        raise where.error(
            f"unknown key(s) {unknown}; allowed: {sorted(allowed)}",
            locate=where.at(str(unknown[0])).path,
        )


def _mapping(raw: Any, where: _Where) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise where.error(f"expected a mapping, got {type(raw).__name__}")
    return dict(raw)


def _number(raw: Any, where: _Where, low: float, high: float, *, open_low: bool = True) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise where.error(f"expected a number, got {raw!r}")
    if raw > high or raw < low or (open_low and raw == low):
        interval = f"{'above' if open_low else 'at least'} {low:g} and at most {high:g}"
        raise where.error(f"must be {interval}, got {raw!r}")
    return float(raw)


def _choice(raw: Any, where: _Where, allowed: tuple[str, ...]) -> str:
    if raw not in allowed:
        raise where.error(f"{raw!r} is not one of {list(allowed)}")
    return str(raw)


@dataclass(frozen=True)
class LookPlan:
    """The interim looks of a group-sequential design.

    Attributes
    ----------
    at : tuple of float
        Fractions of the planned N, increasing, the last 1.
    spending : str
        Alpha-spending function (``obrien-fleming`` or ``pocock``).
    futility_z, binding : tuple of float or None, bool
        Fixed futility bounds at the interim looks and whether they bind.
    beta, beta_spending : float or None, str or None
        Non-binding beta-spending futility.
    """

    at: tuple[float, ...]
    spending: str = "obrien-fleming"
    futility_z: tuple[float, ...] | None = None
    binding: bool = False
    beta: float | None = None
    beta_spending: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The normalised block (what is hashed and shown)."""
        futility: dict[str, Any] | None = None
        if self.futility_z is not None:
            futility = {"z": list(self.futility_z), "binding": self.binding}
        elif self.beta_spending is not None:
            futility = {"spending": self.beta_spending, "beta": self.beta}
        return {"at": list(self.at), "spending": self.spending, "futility": futility}


@dataclass(frozen=True)
class AnalysisPlan:
    """The pre-registered primary analysis of a product-choice study.

    Attributes
    ----------
    hypothesis : str
        The primary hypothesis in words.
    test : {"choice_glmm", "wtp_lmm"}
        FrameLab's model that tests it.
    levels : (str, str)
        Reference and treatment format.
    direction : {"greater", "less", "two-sided"}
        Treatment above the reference, below it, or either.
    alpha : float
        One-sided for ``greater``/``less``, the two-sided total otherwise.
    planned_n : int
        Completed, non-excluded participants at the final analysis.
    exclusions : analysis.exclusions.ChoiceRules
        The exclusion rules, applied before every look and the final analysis.
    transform : {"none", "log"}
        ``wtp_lmm`` only: the premium in percent or ``log(1 + pct / 100)``.
    looks : LookPlan or None
        Interim looks; ``None`` for a fixed design.
    notes : str
        Anything else the researcher pre-registers.
    """

    hypothesis: str
    test: str
    direction: str
    alpha: float
    planned_n: int
    levels: tuple[str, str] = FORMATS
    exclusions: ChoiceRules = field(default_factory=ChoiceRules)
    transform: str = "none"
    looks: LookPlan | None = None
    notes: str = ""

    @property
    def sided(self) -> int:
        """1 for a directional hypothesis, 2 for a two-sided one."""
        return 2 if self.direction == "two-sided" else 1

    @property
    def dv(self) -> str:
        """The outcome column the test models."""
        return TESTS[self.test][0]

    def design(self) -> SequentialDesign:
        """The group-sequential design (one look at N for a fixed design)."""
        looks = self.looks or LookPlan(at=(1.0,))
        return SequentialDesign(
            looks.at,
            alpha=self.alpha,
            sided=self.sided,
            spending=looks.spending,
            futility_z=looks.futility_z,
            binding_futility=looks.binding,
            beta=looks.beta,
            beta_spending=looks.beta_spending,
        )

    def look_sizes(self) -> list[int]:
        """Analysed participants at each look: ``ceil(fraction x planned_n)``."""
        at = self.looks.at if self.looks else (1.0,)
        return [math.ceil(f * self.planned_n - 1e-9) for f in at]

    def as_dict(self) -> dict[str, Any]:
        """The normalised block: the same keys and values whatever the YAML spelled."""
        return {
            "hypothesis": self.hypothesis,
            "test": self.test,
            "levels": list(self.levels),
            "direction": self.direction,
            "alpha": self.alpha,
            "planned_n": self.planned_n,
            "exclusions": self.exclusions.as_dict(),
            "transform": self.transform,
            "looks": self.looks.as_dict() if self.looks else None,
            "notes": self.notes,
        }

    def primary(self) -> dict[str, Any]:
        """What decides the primary result: compared with a run's own (``--prereg``)."""
        return {
            "test": self.test,
            "dv": self.dv,
            "levels": list(self.levels),
            "direction": self.direction,
            "alpha": self.alpha,
            "transform": self.transform,
            "exclusions": self.exclusions.as_dict(),
        }


def _authenticity(raw: Any, where: _Where) -> dict[str, Any]:
    """``exclusions.authenticity``: ``max_score`` (exclude scores above it) and/or ``canary``."""
    raw = _mapping(raw, where)
    _keys(raw, {"max_score", "canary"}, where)
    max_score = raw.get("max_score")
    if max_score is not None:
        max_score = _number(max_score, where.at("max_score"), 0, 1000, open_low=False)
    canary = raw.get("canary", False)
    if not isinstance(canary, bool):
        raise where.at("canary").error(f"expected true or false, got {canary!r}")
    if max_score is None and not canary:
        raise where.error("give max_score, canary: true, or both (or leave the rule out)")
    return {"authenticity_max_score": max_score, "authenticity_canary": canary}


def _exclusions(raw: Any, where: _Where) -> ChoiceRules:
    raw = _mapping(raw if raw is not None else {}, where)
    _keys(raw, {*RULE_FLAGS, "min_duration_s", "min_duration_frac_median", "authenticity"}, where)
    values: dict[str, Any] = {}
    for key in RULE_FLAGS:
        if key in raw:
            if not isinstance(raw[key], bool):
                raise where.at(key).error(f"expected true or false, got {raw[key]!r}")
            values[key] = raw[key]
    if raw.get("min_duration_s") is not None:
        values["min_duration_s"] = _number(
            raw["min_duration_s"], where.at("min_duration_s"), 0, 86400, open_low=False
        )
    if "min_duration_frac_median" in raw:
        frac = raw["min_duration_frac_median"]
        values["min_duration_frac_median"] = (
            None
            if frac is None
            else _number(frac, where.at("min_duration_frac_median"), 0, 1, open_low=False)
        )
    if raw.get("authenticity") is not None:
        values.update(_authenticity(raw["authenticity"], where.at("authenticity")))
    return ChoiceRules(**values)


def _looks(raw: Any, where: _Where, direction: str, planned_n: int) -> LookPlan:
    raw = _mapping(raw, where)
    _keys(raw, {"at", "spending", "futility"}, where)
    at_where = where.at("at")
    at = raw.get("at")
    if not isinstance(at, list) or not 1 <= len(at) <= MAX_LOOKS:
        raise at_where.error(
            f"expected a list of 1 to {MAX_LOOKS} fractions of planned_n, got {at!r}"
        )
    fractions = tuple(_number(v, at_where.at(i), 0, 1) for i, v in enumerate(at))
    for i in range(1, len(fractions)):
        if fractions[i] <= fractions[i - 1]:
            raise at_where.at(i).error(
                f"looks must increase: {fractions[i]:g} after {fractions[i - 1]:g}"
            )
    if fractions[-1] != 1.0:
        raise at_where.at(len(fractions) - 1).error(
            f"the last look must be at 1 (the planned N), got {fractions[-1]:g}"
        )
    sizes = [math.ceil(f * planned_n - 1e-9) for f in fractions]
    for i, n in enumerate(sizes):
        if n < MIN_LOOK_N or (i and n <= sizes[i - 1]):
            raise at_where.at(i).error(
                f"look {i + 1} would analyse {n} participants of planned_n {planned_n}; each "
                f"look needs at least {MIN_LOOK_N} and more than the look before"
            )
    spending = _choice(
        raw.get("spending", "obrien-fleming"), where.at("spending"), SPENDING_FUNCTIONS
    )
    plan = LookPlan(at=fractions, spending=spending)
    if raw.get("futility") is None:
        return plan
    fw = where.at("futility")
    if direction == "two-sided":
        raise fw.error("futility bounds need a one-sided hypothesis (direction greater or less)")
    fut = _mapping(raw["futility"], fw)
    _keys(fut, {"z", "binding", "spending", "beta"}, fw)
    if "z" in fut:
        if "spending" in fut or "beta" in fut:
            raise fw.error(
                "give fixed bounds (z, binding) or beta spending (spending, beta), not both"
            )
        z = fut["z"]
        if not isinstance(z, list) or len(z) != len(fractions) - 1:
            raise fw.at("z").error(
                f"expected one z bound per interim look ({len(fractions) - 1}), got {z!r}"
            )
        bounds = tuple(_number(v, fw.at("z").at(i), -10, 10) for i, v in enumerate(z))
        binding = fut.get("binding", False)
        if not isinstance(binding, bool):
            raise fw.at("binding").error(f"expected true or false, got {binding!r}")
        return LookPlan(at=fractions, spending=spending, futility_z=bounds, binding=binding)
    if "spending" not in fut or "beta" not in fut:
        raise fw.error("give fixed bounds (z: [...]) or beta spending (spending and beta)")
    if "binding" in fut:
        raise fw.at("binding").error("beta-spending futility bounds are non-binding")
    return LookPlan(
        at=fractions,
        spending=spending,
        beta_spending=_choice(fut["spending"], fw.at("spending"), SPENDING_FUNCTIONS),
        beta=_number(fut["beta"], fw.at("beta"), 0, 0.5),
    )


def _text(raw: Mapping[str, Any], key: str, where: _Where, *, required: bool) -> str:
    value = raw.get(key)
    if value in (None, "") and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise where.at(key).error("is required" if value is None else "expected a non-empty text")
    return value.strip()


def parse_analysis(
    raw: Any,
    *,
    file: str = "study.yaml",
    lines: Any = None,
    formats: Sequence[str] = FORMATS,
) -> AnalysisPlan:
    """Validate an ``analysis:`` block and return it as an :class:`AnalysisPlan`.

    Parameters
    ----------
    raw : Any
        The parsed block.
    file : str
        The study file's name (for the messages).
    lines : yaml.Node, optional
        The file's composed YAML tree; messages then give the line.
    formats : sequence of str
        The study's product-choice formats, which ``levels`` must name (default ``original``,
        ``summary``).

    Returns
    -------
    AnalysisPlan

    Raises
    ------
    PlanError
        Naming the file, the key, the reason and the line.
    """
    return _analysis(raw, _Where(file, "analysis", lines), tuple(formats))


def _analysis(raw: Any, where: _Where, formats: tuple[str, ...] = FORMATS) -> AnalysisPlan:
    raw = _mapping(raw, where)
    _keys(
        raw,
        {
            "hypothesis",
            "test",
            "levels",
            "direction",
            "alpha",
            "planned_n",
            "exclusions",
            "transform",
            "looks",
            "notes",
        },
        where,
    )
    hypothesis = _text(raw, "hypothesis", where, required=True)
    test = _choice(raw.get("test"), where.at("test"), tuple(TESTS))
    lw = where.at("levels")
    if "levels" not in raw and not set(FORMATS) <= set(formats):
        raise lw.error(
            f"is required: name two of the study's formats {list(formats)} as [reference, "
            "treatment]"
        )
    levels = raw.get("levels", list(FORMATS))
    if not isinstance(levels, list) or len(levels) != 2 or levels[0] == levels[1]:
        raise lw.error(f"expected two different formats [reference, treatment], got {levels!r}")
    for i, level in enumerate(levels):
        _choice(level, lw.at(i), formats)
    direction = _choice(raw.get("direction"), where.at("direction"), DIRECTIONS)
    if "alpha" not in raw:
        raise where.at("alpha").error("is required")
    alpha = _number(raw["alpha"], where.at("alpha"), 0, 0.5)
    n = raw.get("planned_n")
    if isinstance(n, bool) or not isinstance(n, int) or n < MIN_LOOK_N:
        raise where.at("planned_n").error(
            f"expected a whole number of participants, at least {MIN_LOOK_N}, got {n!r}"
        )
    exclusions = _exclusions(raw.get("exclusions"), where.at("exclusions"))
    transform = _choice(raw.get("transform", "none"), where.at("transform"), ("none", "log"))
    if transform != "none" and test != "wtp_lmm":
        raise where.at("transform").error(
            "a transform applies to the WTP model (test: wtp_lmm) only"
        )
    looks = None
    if raw.get("looks") is not None:
        looks = _looks(raw["looks"], where.at("looks"), direction, n)
        if not exclusions.require_completed:
            raise (
                where.at("exclusions")
                .at("require_completed")
                .error("interim looks count completed participants: keep require_completed true")
            )
    return AnalysisPlan(
        hypothesis=hypothesis,
        test=test,
        levels=(str(levels[0]), str(levels[1])),
        direction=direction,
        alpha=alpha,
        planned_n=n,
        exclusions=exclusions,
        transform=transform,
        looks=looks,
        notes=_text(raw, "notes", where, required=False),
    )


@dataclass(frozen=True)
class ChoiceBlock:
    """A product-choice block of the study.

    Attributes
    ----------
    id : str
        The block's ``id``.
    formats : tuple of str
        Its formats; sequence r shows pair j in ``formats[(j + r) % k]`` (a cyclic Latin square
        with one sequence per format, as the web app assigns them).
    pairs : tuple of str
        Pair ids in file order (their position sets each pair's format per sequence).
    """

    id: str
    formats: tuple[str, ...]
    pairs: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """Plain values (for the power results file)."""
        return {"id": self.id, "formats": list(self.formats), "pairs": list(self.pairs)}


@dataclass(frozen=True)
class StudyPlan:
    """What planning and pre-registering need of a study file.

    Attributes
    ----------
    path : Path
        The study YAML.
    slug, title : str
        From the file.
    blocks : tuple of ChoiceBlock
        The product-choice blocks, in study order.
    plan : AnalysisPlan or None
        The ``analysis:`` block, if the study has one.
    files : tuple of (str, str)
        The bundle, ``(name, sha256)`` per file, when :func:`read_study` was given its file
        names; empty otherwise.
    """

    path: Path
    slug: str
    title: str
    blocks: tuple[ChoiceBlock, ...]
    plan: AnalysisPlan | None
    files: tuple[tuple[str, str], ...] = ()

    @property
    def pairs(self) -> tuple[str, ...]:
        """Pair ids of the first product-choice block (empty without one)."""
        return self.blocks[0].pairs if self.blocks else ()

    @property
    def formats(self) -> tuple[str, ...]:
        """Every format of the product-choice blocks, in block order (as the web app lists
        them)."""
        return tuple(dict.fromkeys(f for b in self.blocks for f in b.formats))

    @property
    def bundle_sha256(self) -> str:
        """SHA-256 of the bundle manifest (:func:`bundle_sha256`)."""
        return bundle_sha256(self.files)

    def require_plan(self) -> AnalysisPlan:
        """The ``analysis:`` block, or a clear refusal."""
        if self.plan is None:
            raise PlanError(
                f"{self.path.name}: (top level): the study has no analysis: block; add one "
                "(docs/analysis.md, 'Plan, pre-register, stop') to plan or pre-register it"
            )
        return self.plan


def bundle_sha256(files) -> str:
    """SHA-256 of a bundle's manifest: ``"<sha256>  <name>\\n"`` per file, sorted by name.

    Parameters
    ----------
    files : iterable of (str, str)
        ``(name, sha256)`` per file (bundle-relative POSIX names).

    Returns
    -------
    str
        Hex digest. The web app computes the same from the files it stored.

    Examples
    --------
    >>> import hashlib
    >>> manifest = f"{'11' * 32}  a.csv\\n{'00' * 32}  b.yaml\\n"
    >>> files = [("b.yaml", "00" * 32), ("a.csv", "11" * 32)]
    >>> bundle_sha256(files) == hashlib.sha256(manifest.encode()).hexdigest()
    True
    """
    manifest = "".join(f"{digest}  {name}\n" for name, digest in sorted(files))
    return hashlib.sha256(manifest.encode()).hexdigest()


def _blocks(tasks: Any, folder: Path, where: _Where) -> tuple[ChoiceBlock, ...]:
    """The product-choice blocks: their formats and pair ids (a pairs file is read)."""
    import yaml

    out = []
    for i, block in enumerate(tasks or []):
        if not isinstance(block, Mapping) or block.get("type") != "product_choice":
            continue
        bw = where.at(i)
        pairs = block.get("pairs")
        if isinstance(pairs, str):
            path = folder / pairs.strip()
            try:
                doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as exc:
                raise bw.error(f"cannot read the pairs file {pairs!r}: {exc}") from None
            pairs = (doc or {}).get("pairs") if isinstance(doc, Mapping) else None
        if not isinstance(pairs, list) or not all(
            isinstance(p, Mapping) and "id" in p for p in pairs
        ):
            raise bw.error("the product_choice block's pairs have no ids")
        named = block.get("formats")
        formats = named if isinstance(named, list) and named else FORMATS
        out.append(
            ChoiceBlock(
                id=str(block.get("id", f"block {i + 1}")),
                formats=tuple(str(f) for f in formats),
                pairs=tuple(str(p["id"]) for p in pairs),
            )
        )
    return tuple(out)


def read_study(path: str | Path, bundle: Iterable[str] | None = None) -> StudyPlan:
    """Read a study YAML: slug, title, its product-choice design, the ``analysis:`` block.

    Parameters
    ----------
    path : str or Path
        The study file (e.g. ``stimuli/studies/product-choice-demo.yaml``).
    bundle : iterable of str, optional
        The names, relative to the study file's folder, of every file of its bundle as the web
        app stores it (pairs files, images, anything uploaded with it); the study file is
        always part of it. Each is hashed for :attr:`StudyPlan.files`. Which files a bundle
        holds is the web app's decision (``framelab prereg`` asks it); without them
        :attr:`StudyPlan.files` is empty and the study cannot be pre-registered.

    Returns
    -------
    StudyPlan

    Raises
    ------
    PlanError
        An unreadable file or an invalid ``analysis:`` block, located.

    Examples
    --------
    >>> s = read_study("stimuli/studies/product-choice-demo.yaml")
    >>> s.plan.look_sizes()
    [35, 53, 70]
    """
    import yaml

    path = Path(path)
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
        tree = yaml.compose(text, Loader=yaml.SafeLoader)
        raw = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PlanError(f"{path.name}: cannot read the study file: {exc}") from None
    where = _Where(path.name, "", tree)
    if not isinstance(raw, Mapping) or not isinstance(raw.get("slug"), str):
        raise where.error("expected a study definition with a slug")
    study = StudyPlan(
        path=path,
        slug=raw["slug"],
        title=str(raw.get("title", "")),
        blocks=_blocks(raw.get("tasks"), path.parent, where.at("tasks")),
        plan=None,
        files=() if bundle is None else _hashed(path, bundle),
    )
    if raw.get("analysis") is None:
        return study
    if not study.blocks:
        raise where.at("analysis").error(
            "the pre-registered tests analyse a product_choice block; the study has none"
        )
    return replace(study, plan=_analysis(raw["analysis"], where.at("analysis"), study.formats))


def _hashed(path: Path, names: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``(name, sha256)`` of the study file and each named bundle file beside it."""
    folder = path.parent.resolve()
    files = {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    for name in names:
        file = folder / name
        if PurePosixPath(name).is_absolute() or ".." in PurePosixPath(name).parts:
            raise PlanError(f"{name!r} is not a file of the study's bundle")
        try:
            if not file.resolve().is_relative_to(folder):
                raise PlanError(f"{name!r} is not a file of the study's bundle")
            files[name] = hashlib.sha256(file.read_bytes()).hexdigest()
        except OSError as exc:
            raise PlanError(f"{name}: cannot read the bundle file: {exc.strerror}") from None
    return tuple(sorted(files.items()))


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the text every FrameLab hash is taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def plan_from_dict(block: Mapping[str, Any], *, file: str = "pre-registration") -> AnalysisPlan:
    """An :class:`AnalysisPlan` from a normalised block (a pre-registration's ``analysis``).

    The block is validated again, so a record edited by hand is refused like a study file;
    its levels were checked against the study's formats when it was frozen.
    """
    levels = block.get("levels")
    named = isinstance(levels, list) and all(isinstance(v, str) for v in levels)
    return parse_analysis(dict(block), file=file, formats=tuple(levels) if named else FORMATS)
