"""The study YAML as the research package reads it: the ``analysis:`` block, the design, the hashes.

The ``analysis:`` block's schema is :mod:`framelab_schema.analysis_block`, which the web app
validates it with too when it loads a study; this reader exists so that planning,
pre-registering and analysing need no web stack. Both locate the same mistakes alike
(``FILE: analysis.alpha: ... (line N)``); ``docs/analysis.md`` ("Plan, pre-register, stop")
describes the block.

The bundle of a study is every file the web app stores with it: the YAML, its pairs files, its
images and anything else uploaded with it. Which files those are is the web app's decision, so
``framelab prereg`` asks it and names them to :func:`read_study`. The bundle's hash is the SHA-256
of the manifest ``"<sha256>  <name>\\n"`` per file, sorted by name (``sha256sum``'s format), so
the console computes the same hash from the stored files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from analysis.plan.sequential import SequentialDesign
from framelab_schema.analysis_block import (
    FORMATS,
    AnalysisBlock,
    AnalysisBlockError,
    LookPlan,
    parse_analysis_block,
)

__all__ = [
    "TESTS",
    "AnalysisPlan",
    "ChoiceBlock",
    "PlanError",
    "StudyPlan",
    "bundle_sha256",
    "parse_analysis",
    "plan_from_dict",
    "read_study",
]

# The dependent variable and the model of each pre-registrable primary test
# (framelab_schema.analysis_block.TESTS names them).
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

    def error(self, reason: str) -> PlanError:
        """An error at this place (the line of its key, or of its nearest parent)."""
        line = _line(self.lines, self.path)
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


@dataclass(frozen=True)
class AnalysisPlan(AnalysisBlock):
    """The ``analysis:`` block (:class:`framelab_schema.analysis_block.AnalysisBlock`) with what
    planning and analysing derive from it: the outcome, the sequential design, the primary
    analysis a run is compared with."""

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
        ``summary``; none: the study has no product-choice block).

    Returns
    -------
    AnalysisPlan

    Raises
    ------
    PlanError
        Every mistake, each naming the file, the key, the reason and the line (several: one
        line each after ``N errors:``, as the web app reports them).
    """
    try:
        block = parse_analysis_block(raw, formats=formats)
    except AnalysisBlockError as exc:
        found = [str(_Where(file, i.path, lines).error(i.reason)) for i in exc.issues]
        many = f"{len(found)} errors:\n" + "\n".join(found)
        raise PlanError(found[0] if len(found) == 1 else many) from None
    return AnalysisPlan(**vars(block))


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
    plan = parse_analysis(raw["analysis"], file=path.name, lines=tree, formats=study.formats)
    return replace(study, plan=plan)


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
    named = isinstance(levels, list) and levels and all(isinstance(v, str) for v in levels)
    return parse_analysis(dict(block), file=file, formats=tuple(levels) if named else FORMATS)
