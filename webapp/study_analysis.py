"""The study's ``analysis:`` block: the pre-registered primary test, planned N and interim looks.

Validated when a study is loaded, with located reasons like every other key
(``demo.yaml: analysis.looks.at[2]: the last look must be at 1 (the planned N), got 0.9
(line 40)``). The research package reads the same block with its own reader
(``analysis.plan.spec``; the web app never imports it) and refuses the same blocks with the same
reasons: ``tests/test_study_analysis_block.py`` holds the two together. The normalised block is
stored in the definition (only when given, so older definitions keep their hash) and shown on
the console's study page. ``docs/analysis.md`` ("Plan, pre-register, stop") describes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from webapp.services.design import FORMATS, study_formats
from webapp.validation import Where, check_keys, get_mapping

TESTS = ("choice_glmm", "wtp_lmm")
DIRECTIONS = ("greater", "less", "two-sided")
SPENDING = ("obrien-fleming", "pocock")
RULE_FLAGS = ("require_completed", "require_quiz", "require_attention", "drop_duplicates")
MAX_LOOKS = 10
MIN_LOOK_N = 4  # participants at a look: two per sequence, two levels of each random factor
KEYS = {
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
}


def _number(raw: Any, where: Where, low: float, high: float, *, open_low: bool = True) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise where.error(f"expected a number, got {raw!r}")
    if raw > high or raw < low or (open_low and raw == low):
        interval = f"{'above' if open_low else 'at least'} {low:g} and at most {high:g}"
        raise where.error(f"must be {interval}, got {raw!r}")
    return float(raw)


def _choice(raw: Any, where: Where, allowed: tuple[str, ...]) -> str:
    if raw not in allowed:
        raise where.error(f"{raw!r} is not one of {list(allowed)}")
    return str(raw)


def _flag(raw: Mapping[str, Any], key: str, where: Where, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise where.at(key).error(f"expected true or false, got {value!r}")
    return value


def _text(raw: Mapping[str, Any], key: str, where: Where, *, required: bool) -> str:
    value = raw.get(key)
    if value in (None, "") and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise where.at(key).error("is required" if value is None else "expected a non-empty text")
    return value.strip()


def _authenticity(raw: Any, where: Where) -> dict[str, Any]:
    """``exclusions.authenticity``: ``max_score`` (exclude scores above it) and/or ``canary``."""
    raw = get_mapping(raw, where)
    check_keys(raw, {"max_score", "canary"}, where)
    max_score = raw.get("max_score")
    if max_score is not None:
        max_score = _number(max_score, where.at("max_score"), 0, 1000, open_low=False)
    canary = _flag(raw, "canary", where, False)
    if max_score is None and not canary:
        raise where.error("give max_score, canary: true, or both (or leave the rule out)")
    return {"max_score": max_score, "canary": canary}


def _exclusions(raw: Any, where: Where) -> dict[str, Any]:
    raw = get_mapping(raw if raw is not None else {}, where)
    check_keys(
        raw, {*RULE_FLAGS, "min_duration_s", "min_duration_frac_median", "authenticity"}, where
    )
    rules: dict[str, Any] = {key: _flag(raw, key, where, True) for key in RULE_FLAGS}
    rules["min_duration_s"] = None
    if raw.get("min_duration_s") is not None:
        rules["min_duration_s"] = _number(
            raw["min_duration_s"], where.at("min_duration_s"), 0, 86400, open_low=False
        )
    frac = raw.get("min_duration_frac_median", 0.3)
    rules["min_duration_frac_median"] = (
        None
        if frac is None
        else _number(frac, where.at("min_duration_frac_median"), 0, 1, open_low=False)
    )
    if raw.get("authenticity") is not None:  # only when given: older blocks keep their hash
        rules["authenticity"] = _authenticity(raw["authenticity"], where.at("authenticity"))
    return rules


def _futility(raw: Any, where: Where, n_looks: int) -> dict[str, Any]:
    fut = get_mapping(raw, where)
    check_keys(fut, {"z", "binding", "spending", "beta"}, where)
    if "z" in fut:
        if "spending" in fut or "beta" in fut:
            raise where.error(
                "give fixed bounds (z, binding) or beta spending (spending, beta), not both"
            )
        z = fut["z"]
        if not isinstance(z, list) or len(z) != n_looks - 1:
            raise where.at("z").error(
                f"expected one z bound per interim look ({n_looks - 1}), got {z!r}"
            )
        return {
            "z": [_number(v, where.at("z").at(i), -10, 10) for i, v in enumerate(z)],
            "binding": _flag(fut, "binding", where, False),
        }
    if "spending" not in fut or "beta" not in fut:
        raise where.error("give fixed bounds (z: [...]) or beta spending (spending and beta)")
    if "binding" in fut:
        raise where.at("binding").error("beta-spending futility bounds are non-binding")
    return {
        "spending": _choice(fut["spending"], where.at("spending"), SPENDING),
        "beta": _number(fut["beta"], where.at("beta"), 0, 0.5),
    }


def _looks(raw: Any, where: Where, direction: str, planned_n: int) -> dict[str, Any]:
    raw = get_mapping(raw, where)
    check_keys(raw, {"at", "spending", "futility"}, where)
    at_where = where.at("at")
    at = raw.get("at")
    if not isinstance(at, list) or not 1 <= len(at) <= MAX_LOOKS:
        raise at_where.error(
            f"expected a list of 1 to {MAX_LOOKS} fractions of planned_n, got {at!r}"
        )
    fractions = [_number(v, at_where.at(i), 0, 1) for i, v in enumerate(at)]
    for i in range(1, len(fractions)):
        if fractions[i] <= fractions[i - 1]:
            raise at_where.at(i).error(
                f"looks must increase: {fractions[i]:g} after {fractions[i - 1]:g}"
            )
    if fractions[-1] != 1.0:
        raise at_where.at(len(fractions) - 1).error(
            f"the last look must be at 1 (the planned N), got {fractions[-1]:g}"
        )
    sizes = look_sizes(fractions, planned_n)
    for i, n in enumerate(sizes):
        if n < MIN_LOOK_N or (i and n <= sizes[i - 1]):
            raise at_where.at(i).error(
                f"look {i + 1} would analyse {n} participants of planned_n {planned_n}; each "
                f"look needs at least {MIN_LOOK_N} and more than the look before"
            )
    spending = _choice(raw.get("spending", "obrien-fleming"), where.at("spending"), SPENDING)
    futility = None
    if raw.get("futility") is not None:
        if direction == "two-sided":
            raise where.at("futility").error(
                "futility bounds need a one-sided hypothesis (direction greater or less)"
            )
        futility = _futility(raw["futility"], where.at("futility"), len(fractions))
    return {"at": fractions, "spending": spending, "futility": futility}


def _levels(raw: Mapping[str, Any], where: Where, formats: tuple[str, ...]) -> list[str]:
    """The primary test's ``[reference, treatment]``: two of the study's formats."""
    if "levels" not in raw and not set(FORMATS) <= set(formats):
        raise where.at("levels").error(
            f"is required: name two of the study's formats {list(formats)} as [reference, "
            "treatment]"
        )
    levels = raw.get("levels", list(FORMATS))
    if not isinstance(levels, list) or len(levels) != 2 or levels[0] == levels[1]:
        raise where.at("levels").error(
            f"expected two different formats [reference, treatment], got {levels!r}"
        )
    for i, level in enumerate(levels):
        _choice(level, where.at("levels").at(i), formats)
    return [str(v) for v in levels]


def look_sizes(fractions: list[float], planned_n: int) -> list[int]:
    """Analysed participants at each look: ``ceil(fraction x planned_n)``.

    Examples
    --------
    >>> look_sizes([0.5, 0.75, 1.0], 70)
    [35, 53, 70]
    """
    return [math.ceil(f * planned_n - 1e-9) for f in fractions]


def validate_analysis(raw: Any, where: Where, definition: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a study's ``analysis:`` block; return it normalised.

    Parameters
    ----------
    raw : Any
        The parsed block.
    where : Where
        Its place (``analysis``).
    definition : Mapping
        The study's definition validated so far (its task blocks).

    Returns
    -------
    dict
        ``hypothesis, test, levels`` (two of the study's product-choice formats, reference
        first), ``direction, alpha, planned_n, exclusions`` (every rule),
        ``transform, looks`` (``at, spending, futility``; ``None`` for a fixed design), ``notes``.

    Raises
    ------
    StudyDefinitionError
        Located, with the reason.
    """
    if not study_formats(definition):
        raise where.error(
            "the pre-registered tests analyse a product_choice block; the study has none"
        )
    raw = get_mapping(raw, where)
    check_keys(raw, KEYS, where)
    hypothesis = _text(raw, "hypothesis", where, required=True)
    test = _choice(raw.get("test"), where.at("test"), TESTS)
    levels = _levels(raw, where, study_formats(definition))
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
        if not exclusions["require_completed"]:
            raise (
                where.at("exclusions")
                .at("require_completed")
                .error("interim looks count completed participants: keep require_completed true")
            )
    return {
        "hypothesis": hypothesis,
        "test": test,
        "levels": levels,
        "direction": direction,
        "alpha": alpha,
        "planned_n": n,
        "exclusions": exclusions,
        "transform": transform,
        "looks": looks,
        "notes": _text(raw, "notes", where, required=False),
    }
