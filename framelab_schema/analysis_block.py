"""The study's ``analysis:`` block: the pre-registered primary test, planned N and interim looks.

The one schema of the block. The web app validates it when a study is loaded
(``webapp.study_analysis``) and the research package when it plans, pre-registers and analyses
(``analysis.plan.spec``); both call :func:`parse_analysis_block` and turn its issues into their
own located errors (file, key path, reason, line), so they accept, normalise and refuse the same
blocks alike. Every mistake of a block is reported at once, each at its key path
(``analysis.looks.at[2]``); a misspelt key or value is answered with the name it was probably
meant to be. :meth:`AnalysisBlock.as_dict` is what the web app stores in the definition and the
pre-registration hashes: a block that validated once keeps its keys and values, so its hash.
``docs/analysis.md`` ("Plan, pre-register, stop") describes the block::

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
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

__all__ = [
    "DIRECTIONS",
    "FORMATS",
    "MIN_LOOK_N",
    "SPENDING",
    "TESTS",
    "AnalysisBlock",
    "AnalysisBlockError",
    "ChoiceRules",
    "Issue",
    "LookPlan",
    "look_sizes",
    "parse_analysis_block",
]

TESTS = ("choice_glmm", "wtp_lmm")
DIRECTIONS = ("greater", "less", "two-sided")
SPENDING = ("obrien-fleming", "pocock")
TRANSFORMS = ("none", "log")
FORMATS = ("original", "summary")  # the default levels: reference, treatment
RULE_FLAGS = ("require_completed", "require_quiz", "require_attention", "drop_duplicates")
MAX_LOOKS = 10
MIN_LOOK_N = 4  # participants at a look: two per sequence, two levels of each random factor
MAX_N = 1_000_000  # planned participants: far beyond any study, and look sizes stay floats
KEYS = (
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
)


@dataclass(frozen=True)
class Issue:
    """One mistake of a block: ``path`` is the key it concerns (``analysis.looks.at[1]``)."""

    path: str
    reason: str


class AnalysisBlockError(ValueError):
    """The block is invalid; ``issues`` holds every mistake, in the order of the block's keys."""

    def __init__(self, issues: Sequence[Issue]) -> None:
        self.issues = tuple(issues)
        super().__init__("\n".join(f"{i.path}: {i.reason}" for i in self.issues))


@dataclass(frozen=True)
class ChoiceRules:
    """Which exclusion rules apply to choice data, in the order they are checked.

    Attributes
    ----------
    require_completed : bool
        Drop participants whose ``status`` is recorded and is not ``completed``.
    require_quiz : bool
        Drop participants with ``quiz_passed == 0`` (an empty cell means "not recorded": kept).
    require_attention : bool
        Drop participants with ``attention_passed == 0`` (empty: the study had no checks; kept).
    drop_duplicates : bool
        Keep only the first row of a repeated (participant, pair).
    min_duration_s : float or None
        Drop participants faster than this many seconds in total.
    min_duration_frac_median : float or None
        Drop participants faster than this fraction of the median completion time (implausibly
        fast relative to the sample; 0.3 by default, a common screening threshold).
    authenticity_max_score : float or None
        Drop participants whose authenticity score (the export's ``auth_score``) is above this.
    authenticity_canary : bool
        Drop participants whose answers carry the study's canary word (``auth_canary > 0``).
    """

    require_completed: bool = True
    require_quiz: bool = True
    require_attention: bool = True
    drop_duplicates: bool = True
    min_duration_s: float | None = None
    min_duration_frac_median: float | None = 0.3
    authenticity_max_score: float | None = None
    authenticity_canary: bool = False

    @property
    def has_authenticity(self) -> bool:
        """Whether an authenticity rule is on."""
        return self.authenticity_max_score is not None or self.authenticity_canary

    def without_authenticity(self) -> ChoiceRules:
        """The same rules with the authenticity rules off (the report's sensitivity line)."""
        return replace(self, authenticity_max_score=None, authenticity_canary=False)

    def as_dict(self) -> dict[str, object]:
        """Return the rules as a plain dict (for ``results.json``, the normalised ``analysis:``
        block and the pre-registration): the authenticity rules as ``authenticity: {max_score,
        canary}``, present only when one is on, so rules frozen before they existed compare
        equal."""
        out = asdict(self)
        max_score = out.pop("authenticity_max_score")
        canary = out.pop("authenticity_canary")
        if self.has_authenticity:
            out["authenticity"] = {"max_score": max_score, "canary": canary}
        return out


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
        """The normalised ``looks`` (what is stored, hashed and shown)."""
        futility: dict[str, Any] | None = None
        if self.futility_z is not None:
            futility = {"z": list(self.futility_z), "binding": self.binding}
        elif self.beta_spending is not None:
            futility = {"spending": self.beta_spending, "beta": self.beta}
        return {"at": list(self.at), "spending": self.spending, "futility": futility}


def look_sizes(fractions: Sequence[float], planned_n: int) -> list[int]:
    """Analysed participants at each look: ``ceil(fraction x planned_n)``.

    Examples
    --------
    >>> look_sizes([0.5, 0.75, 1.0], 70)
    [35, 53, 70]
    """
    return [math.ceil(f * planned_n - 1e-9) for f in fractions]


@dataclass(frozen=True)
class AnalysisBlock:
    """The pre-registered primary analysis of a product-choice study.

    Attributes
    ----------
    hypothesis : str
        The primary hypothesis in words.
    test : {"choice_glmm", "wtp_lmm"}
        FrameLab's model that tests it.
    direction : {"greater", "less", "two-sided"}
        Treatment above the reference, below it, or either.
    alpha : float
        One-sided for ``greater``/``less``, the two-sided total otherwise.
    planned_n : int
        Completed, non-excluded participants at the final analysis.
    levels : (str, str)
        Reference and treatment format.
    exclusions : ChoiceRules
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

    def look_sizes(self) -> list[int]:
        """Analysed participants at each look (one at N for a fixed design)."""
        return look_sizes(self.looks.at if self.looks else (1.0,), self.planned_n)

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


def parse_analysis_block(
    raw: Any, *, formats: Sequence[str] = FORMATS, path: str = "analysis"
) -> AnalysisBlock:
    """Validate an ``analysis:`` block and return it typed.

    Parameters
    ----------
    raw : Any
        The parsed block.
    formats : sequence of str
        The formats of the study's product-choice blocks, which ``levels`` must name; empty
        when the study has none (then no test can be pre-registered).
    path : str
        The block's key path, which every issue's path starts with.

    Returns
    -------
    AnalysisBlock

    Raises
    ------
    AnalysisBlockError
        Every mistake of the block, each at its key path.

    Examples
    --------
    >>> block = {"hypothesis": "h", "test": "choice_glmm", "direction": "greater",
    ...          "alpha": 0.025, "planned_n": 80, "alhpa": 0.05}
    >>> try:
    ...     parse_analysis_block(block)
    ... except AnalysisBlockError as exc:
    ...     print(exc)
    analysis.alhpa: unknown key; did you mean 'alpha'?
    """
    reader = _Reader()
    block = reader.block(raw, path, tuple(formats))
    if reader.issues or block is None:
        raise AnalysisBlockError(reader.issues)
    return block


def _at(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"


def _meant(value: Any, allowed: Collection[str]) -> str:
    """``"; did you mean 'x'?"`` when a text is close to one allowed name, else nothing."""
    close = difflib.get_close_matches(value, allowed, n=1) if isinstance(value, str) else []
    return f"; did you mean {close[0]!r}?" if close else ""


class _Reader:
    """Reads a block, recording each mistake and going on where the rest does not depend on it;
    a reader returns ``None`` for a value it refused (or one with a refused part)."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []

    def fail(self, path: str, reason: str) -> None:
        self.issues.append(Issue(path, reason))

    def mapping(self, raw: Any, path: str, allowed: Collection[str]) -> dict[str, Any] | None:
        if not isinstance(raw, Mapping):
            self.fail(path, f"expected a mapping, got {type(raw).__name__}")
            return None
        # YAML keys may be numbers, dates or None: sorted by their text.
        for key in sorted(set(raw) - set(allowed), key=str):
            hint = _meant(str(key), allowed) or f"; allowed: {sorted(allowed)}"
            self.fail(_at(path, str(key)), f"unknown key{hint}")
        return dict(raw)

    def number(
        self, raw: Any, path: str, low: float, high: float, *, open_low: bool = True
    ) -> float | None:
        # An integer of any size is finite (math.isfinite would overflow converting it).
        finite = isinstance(raw, int) or (isinstance(raw, float) and math.isfinite(raw))
        if isinstance(raw, bool) or not finite:
            self.fail(path, f"expected a number, got {raw!r}")
            return None
        if raw > high or raw < low or (open_low and raw == low):
            interval = f"{'above' if open_low else 'at least'} {low:g} and at most {high:g}"
            self.fail(path, f"must be {interval}, got {raw!r}")
            return None
        return float(raw)

    def choice(self, raw: Any, path: str, allowed: Sequence[str]) -> str | None:
        if raw not in allowed:
            self.fail(path, f"{raw!r} is not one of {list(allowed)}{_meant(raw, allowed)}")
            return None
        return str(raw)

    def flag(self, raw: Mapping[str, Any], key: str, path: str, default: bool) -> bool | None:
        value = raw.get(key, default)
        if not isinstance(value, bool):
            self.fail(_at(path, key), f"expected true or false, got {value!r}")
            return None
        return value

    def text(self, raw: Mapping[str, Any], key: str, path: str, *, required: bool) -> str:
        value = raw.get(key)
        if value in (None, "") and not required:
            return ""
        if not isinstance(value, str) or not value.strip():
            self.fail(
                _at(path, key), "is required" if value is None else "expected a non-empty text"
            )
            return ""
        return value.strip()

    def block(self, raw: Any, path: str, formats: tuple[str, ...]) -> AnalysisBlock | None:
        if not formats:
            self.fail(
                path, "the pre-registered tests analyse a product_choice block; the study has none"
            )
            return None
        block = self.mapping(raw, path, KEYS)
        if block is None:
            return None
        values: dict[str, Any] = {"hypothesis": self.text(block, "hypothesis", path, required=True)}
        test = values["test"] = self.choice(block.get("test"), _at(path, "test"), TESTS)
        values["levels"] = self.levels(block, _at(path, "levels"), formats)
        direction = self.choice(block.get("direction"), _at(path, "direction"), DIRECTIONS)
        values["direction"] = direction
        if "alpha" not in block:
            self.fail(_at(path, "alpha"), "is required")
        else:
            values["alpha"] = self.number(block["alpha"], _at(path, "alpha"), 0, 0.5)
        n = values["planned_n"] = block.get("planned_n")
        if isinstance(n, bool) or not isinstance(n, int) or not MIN_LOOK_N <= n <= MAX_N:
            self.fail(
                _at(path, "planned_n"),
                f"expected a whole number of participants, at least {MIN_LOOK_N} and at most "
                f"{MAX_N:,}, got {n!r}",
            )
            n = None
        exclusions = self.exclusions(block.get("exclusions"), _at(path, "exclusions"))
        values["exclusions"] = exclusions
        transform = self.choice(block.get("transform", "none"), _at(path, "transform"), TRANSFORMS)
        values["transform"] = transform
        if transform == "log" and test == "choice_glmm":
            self.fail(
                _at(path, "transform"), "a transform applies to the WTP model (test: wtp_lmm) only"
            )
        if block.get("looks") is not None:
            values["looks"] = self.looks(block["looks"], _at(path, "looks"), direction, n)
            if exclusions is not None and not exclusions.require_completed:
                self.fail(
                    _at(_at(path, "exclusions"), "require_completed"),
                    "interim looks count completed participants: keep require_completed true",
                )
        values["notes"] = self.text(block, "notes", path, required=False)
        return None if self.issues else AnalysisBlock(**values)

    def levels(
        self, raw: Mapping[str, Any], path: str, formats: tuple[str, ...]
    ) -> tuple[str, ...] | None:
        """The primary test's ``[reference, treatment]``: two of the study's formats."""
        if "levels" not in raw and not set(FORMATS) <= set(formats):
            self.fail(
                path,
                f"is required: name two of the study's formats {list(formats)} as [reference, "
                "treatment]",
            )
            return None
        levels = raw.get("levels", list(FORMATS))
        if not isinstance(levels, list) or len(levels) != 2 or levels[0] == levels[1]:
            self.fail(
                path, f"expected two different formats [reference, treatment], got {levels!r}"
            )
            return None
        named = [self.choice(level, _at(path, i), formats) for i, level in enumerate(levels)]
        return None if None in named else tuple(str(level) for level in named)

    def exclusions(self, raw: Any, path: str) -> ChoiceRules | None:
        mark = len(self.issues)
        allowed = (*RULE_FLAGS, "min_duration_s", "min_duration_frac_median", "authenticity")
        rules = self.mapping(raw if raw is not None else {}, path, allowed)
        if rules is None:
            return None
        values: dict[str, Any] = {key: self.flag(rules, key, path, True) for key in RULE_FLAGS}
        if rules.get("min_duration_s") is not None:
            values["min_duration_s"] = self.number(
                rules["min_duration_s"], _at(path, "min_duration_s"), 0, 86400, open_low=False
            )
        frac = rules.get("min_duration_frac_median", 0.3)
        if frac is not None:
            frac = self.number(frac, _at(path, "min_duration_frac_median"), 0, 1, open_low=False)
        values["min_duration_frac_median"] = frac
        if rules.get("authenticity") is not None:
            values.update(self.authenticity(rules["authenticity"], _at(path, "authenticity")))
        return ChoiceRules(**values) if len(self.issues) == mark else None

    def authenticity(self, raw: Any, path: str) -> dict[str, Any]:
        """``exclusions.authenticity``: ``max_score`` (exclude scores above) and/or ``canary``."""
        rule = self.mapping(raw, path, ("max_score", "canary"))
        if rule is None:
            return {}
        max_score = rule.get("max_score")
        if max_score is not None:
            max_score = self.number(max_score, _at(path, "max_score"), 0, 1000, open_low=False)
        canary = self.flag(rule, "canary", path, False)
        if rule.get("max_score") is None and canary is False:
            self.fail(path, "give max_score, canary: true, or both (or leave the rule out)")
        return {"authenticity_max_score": max_score, "authenticity_canary": canary}

    def looks(
        self, raw: Any, path: str, direction: str | None, planned_n: int | None
    ) -> LookPlan | None:
        mark = len(self.issues)
        looks = self.mapping(raw, path, ("at", "spending", "futility"))
        if looks is None:
            return None
        at, at_path = looks.get("at"), _at(path, "at")
        fractions: tuple[float, ...] | None = None
        if not isinstance(at, list) or not 1 <= len(at) <= MAX_LOOKS:
            self.fail(
                at_path, f"expected a list of 1 to {MAX_LOOKS} fractions of planned_n, got {at!r}"
            )
        else:
            read = [self.number(v, _at(at_path, i), 0, 1) for i, v in enumerate(at)]
            if None not in read:
                fractions = tuple(float(f or 0) for f in read)
                self.look_order(fractions, at_path, planned_n)
        values: dict[str, Any] = {"at": fractions}
        values["spending"] = self.choice(
            looks.get("spending", "obrien-fleming"), _at(path, "spending"), SPENDING
        )
        if looks.get("futility") is not None:
            if direction == "two-sided":
                self.fail(
                    _at(path, "futility"),
                    "futility bounds need a one-sided hypothesis (direction greater or less)",
                )
            else:
                values.update(self.futility(looks["futility"], _at(path, "futility"), fractions))
        return LookPlan(**values) if len(self.issues) == mark else None

    def look_order(self, fractions: tuple[float, ...], path: str, planned_n: int | None) -> None:
        """Looks increase and end at 1, and each analyses more participants than the one before."""
        mark = len(self.issues)
        for i in range(1, len(fractions)):
            if fractions[i] <= fractions[i - 1]:
                self.fail(
                    _at(path, i),
                    f"looks must increase: {fractions[i]:g} after {fractions[i - 1]:g}",
                )
        if fractions[-1] != 1.0:
            self.fail(
                _at(path, len(fractions) - 1),
                f"the last look must be at 1 (the planned N), got {fractions[-1]:g}",
            )
        if planned_n is None or len(self.issues) > mark:
            return
        sizes = look_sizes(fractions, planned_n)
        for i, n in enumerate(sizes):
            if n < MIN_LOOK_N or (i and n <= sizes[i - 1]):
                self.fail(
                    _at(path, i),
                    f"look {i + 1} would analyse {n} participants of planned_n {planned_n}; each "
                    f"look needs at least {MIN_LOOK_N} and more than the look before",
                )

    def futility(self, raw: Any, path: str, fractions: tuple[float, ...] | None) -> dict[str, Any]:
        """The :class:`LookPlan` fields of fixed (``z``, ``binding``) or beta-spending futility."""
        fut = self.mapping(raw, path, ("z", "binding", "spending", "beta"))
        if fut is None:
            return {}
        if "z" in fut:
            if "spending" in fut or "beta" in fut:
                self.fail(
                    path,
                    "give fixed bounds (z, binding) or beta spending (spending, beta), not both",
                )
                return {}
            z, z_path = fut["z"], _at(path, "z")
            binding = self.flag(fut, "binding", path, False)
            if fractions is not None and (not isinstance(z, list) or len(z) != len(fractions) - 1):
                self.fail(
                    z_path,
                    f"expected one z bound per interim look ({len(fractions) - 1}), got {z!r}",
                )
                return {}
            if not isinstance(z, list):
                return {}
            bounds = [self.number(v, _at(z_path, i), -10, 10) for i, v in enumerate(z)]
            return {"futility_z": tuple(bounds), "binding": binding}
        if "spending" not in fut or "beta" not in fut:
            self.fail(path, "give fixed bounds (z: [...]) or beta spending (spending and beta)")
            return {}
        if "binding" in fut:
            self.fail(_at(path, "binding"), "beta-spending futility bounds are non-binding")
        return {
            "beta_spending": self.choice(fut["spending"], _at(path, "spending"), SPENDING),
            "beta": self.number(fut["beta"], _at(path, "beta"), 0, 0.5),
        }
