"""The pre-registration document: written from the study's ``analysis:`` block, then frozen.

The document answers the questions of AsPredicted and of OSF's pre-registration template
(hypothesis, dependent variable, conditions, analyses, outliers and exclusions, sample size,
other) from the study file, and ends with its frozen record: a JSON block holding the study's
design, the bundle manifest (every file the web app stores with the study, each with its
SHA-256), the normalised ``analysis:`` block, the boundaries of the looks, the command that runs
the primary analysis, the power it cites and, for an amendment, what it amends and why. The
pre-registration hash is the SHA-256 of the canonical JSON of the whole record but the hash
itself: every check reads hashed content only, so no part of the record can be edited without
changing the hash.

A plain hash can be recomputed by whoever edits the record, so the hash that counts is the one
the console recorded when ``framelab prereg SLUG`` froze the study: :func:`check_console`
compares a document with that record (a history of freezes and amendments).

``framelab analyze choice EXPORT --prereg DOC`` reads the record back
(:func:`read_prereg`: a record edited after freezing no longer matches its hash and is
refused; text edited around it is named and the record followed, :func:`check_text`),
compares the run's primary analysis with the frozen one (:func:`differences`) and refuses to
run when they differ, naming each difference.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.exclusions import ChoiceRules
from analysis.plan.spec import (
    TESTS,
    AnalysisPlan,
    PlanError,
    StudyPlan,
    bundle_sha256,
    canonical_json,
    plan_from_dict,
)
from framelab_schema.analysis_block import FORMATS

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "FORMAT",
    "PreregError",
    "analysis_command",
    "check_console",
    "check_run",
    "check_study",
    "check_text",
    "differences",
    "freeze",
    "prereg_hash",
    "read_prereg",
    "render_html",
    "render_markdown",
]

FORMAT = "framelab-prereg/2"
# Its hash covered only part of the record (the primary analysis it was compared with was not).
_OLD_FORMATS = ("framelab-prereg/1",)
_MD_FENCE = "```json framelab-prereg"
_HTML_ID = "framelab-prereg"
# The analyze option that switches each exclusion rule off (the defaults keep them on).
_KEEP_FLAGS = {
    "require_completed": "--keep-incomplete",
    "require_quiz": "--keep-failed-quiz",
    "require_attention": "--keep-failed-attention",
    "drop_duplicates": "--keep-duplicates",
}


class PreregError(ValueError):
    """A pre-registration cannot be read, was edited, or does not match the run."""


def analysis_command(
    plan: AnalysisPlan, document: str = "prereg.md", formats: Sequence[str] = ()
) -> str:
    """The command that runs the pre-registered primary analysis on the final export.

    Every option that sets part of the primary analysis is spelled out, so the command alone
    says what will run; ``--prereg`` makes the run refuse any other. ``--levels`` names the
    pre-registered reference and treatment first, then the study's other ``formats``, so the
    report analyses every format with the primary comparison among its contrasts.

    Examples
    --------
    >>> from analysis.plan.spec import AnalysisPlan
    >>> p = AnalysisPlan("h", "choice_glmm", "greater", 0.025, 70)
    >>> analysis_command(p).split(" --")[1:]
    ['out REPORT', 'prereg prereg.md', 'levels original,summary', 'min-duration-frac 0.3']
    """
    rules = plan.exclusions
    parts = [
        "framelab analyze choice EXPORT.csv --out REPORT",
        f"--prereg {document}",
        f"--levels {','.join([*plan.levels, *(f for f in formats if f not in plan.levels)])}",
        f"--min-duration-frac {rules.min_duration_frac_median or 0:g}",
    ]
    if rules.min_duration_s is not None:
        parts.append(f"--min-duration-s {rules.min_duration_s:g}")
    parts += [flag for rule, flag in _KEEP_FLAGS.items() if not getattr(rules, rule)]
    if rules.authenticity_max_score is not None:
        parts.append(f"--authenticity-max-score {rules.authenticity_max_score:g}")
    if rules.authenticity_canary:
        parts.append("--authenticity-canary")
    if plan.transform == "log":
        parts.append("--wtp-log")
    return " ".join(parts)


def prereg_hash(record: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the whole frozen record but ``prereg_sha256``."""
    frozen = {k: v for k, v in record.items() if k != "prereg_sha256"}
    return hashlib.sha256(canonical_json(frozen).encode()).hexdigest()


def _design(study: StudyPlan) -> dict[str, Any]:
    """The product-choice design the document describes: blocks, formats and sequences."""
    k = len(study.blocks[0].formats)
    return {
        "blocks": [
            {"id": b.id, "formats": list(b.formats), "pairs": len(b.pairs)} for b in study.blocks
        ],
        # One sequence per format, as the web app assigns them (a cyclic k x k Latin square).
        "sequences": [chr(ord("A") + r) for r in range(k)],
    }


def freeze(
    study: StudyPlan,
    *,
    document: str = "prereg.md",
    power: pd.DataFrame | None = None,
    scenario: dict[str, float] | None = None,
    amendment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The frozen record of a study's pre-registration.

    Parameters
    ----------
    study : StudyPlan
        The study file as read by :func:`analysis.plan.spec.read_study`.
    document : str
        File name of the document (it appears in the analysis command).
    power : pandas.DataFrame, optional
        A power table (:func:`analysis.plan.power.power_table`) to cite in the sample size.
    scenario : dict, optional
        The assumptions that power table was simulated under.
    amendment : dict, optional
        For a pre-registration written after data collection began: ``amends`` (the hashes of
        the pre-registrations recorded before, oldest first), ``reason`` (the researcher's
        words) and ``seen`` (what had been observed: the looks taken, the participants who
        completed), as the console states them.

    Returns
    -------
    dict
        ``format, study, design`` (blocks, formats, sequences), ``bundle, bundle_sha256,
        analysis, command, looks`` (planned sizes and boundaries), ``power`` (or ``None``),
        ``amendment`` (or ``None``), ``prereg_sha256``.

    Raises
    ------
    PlanError
        No ``analysis:`` block, or the study was read without its bundle's file names.
    """
    from analysis.plan.sequential import boundaries

    plan = study.require_plan()
    if not study.files:
        raise PlanError(
            f"{study.path.name}: a pre-registration freezes every file of the study's bundle; "
            "read the study with the names of its bundle files (framelab prereg does)"
        )
    if amendment is not None and set(amendment) != {"amends", "reason", "seen"}:
        raise PlanError(f"an amendment states amends, reason and seen, got {sorted(amendment)}")
    bounds = boundaries(plan.design())
    looks = [
        {
            "look": int(row["look"]),
            "n": n,
            "fraction": float(row["fraction"]),
            "efficacy_z": float(row["efficacy_z"]),
            "futility_z": None
            if row["futility_z"] != row["futility_z"]
            else float(row["futility_z"]),
            "nominal_p": float(row["nominal_p"]),
            "alpha_spent": float(row["alpha_spent"]),
        }
        for n, (_, row) in zip(plan.look_sizes(), bounds.iterrows(), strict=True)
    ]
    record: dict[str, Any] = {
        "format": FORMAT,
        "study": {"slug": study.slug, "title": study.title, "file": study.path.name},
        "design": _design(study),
        "bundle": [{"name": n, "sha256": d} for n, d in study.files],
        "bundle_sha256": study.bundle_sha256,
        "analysis": plan.as_dict(),
        "command": analysis_command(plan, document, study.formats),
        "looks": looks,
        "power": None,
        "amendment": dict(amendment) if amendment else None,
    }
    if power is not None:
        keep = ["n", "n_sims", "estimate", "ci_low", "ci_high", "expected_n"]
        record["power"] = {
            "scenario": scenario or {},
            "table": json.loads(power[[c for c in keep if c in power]].to_json(orient="records")),
        }
    record["prereg_sha256"] = prereg_hash(record)
    return record


def _sentences(record: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The document's sections: (question, paragraphs)."""
    a = record["analysis"]
    dv, model = TESTS[a["test"]]
    ref, trt = a["levels"]
    side = {
        "greater": f"{trt} above {ref} (one-sided)",
        "less": f"{trt} below {ref} (one-sided)",
        "two-sided": f"{trt} different from {ref} (two-sided)",
    }[a["direction"]]
    rules = a["exclusions"]
    excl = [
        "Participants who did not complete the study are excluded."
        if rules["require_completed"]
        else "Participants who did not complete are kept with the answers they gave.",
        "Participants who failed the comprehension quiz are excluded."
        if rules["require_quiz"]
        else "Failing the comprehension quiz does not exclude.",
        "Participants who failed an attention check are excluded."
        if rules["require_attention"]
        else "Failing an attention check does not exclude.",
    ]
    if rules["min_duration_s"] is not None:
        excl.append(f"Participants faster than {rules['min_duration_s']:g} s are excluded.")
    if rules["min_duration_frac_median"] is not None:
        excl.append(
            "Participants faster than "
            f"{rules['min_duration_frac_median']:g} times the median completion time are "
            "excluded (implausibly fast)."
        )
    authenticity = rules.get("authenticity")
    if authenticity is not None and authenticity["canary"]:
        excl.append(
            "Participants whose answers carry the study's canary word (an instruction only a "
            "machine reader of the page sees) are excluded."
        )
    if authenticity is not None and authenticity["max_score"] is not None:
        excl.append(
            "Participants whose authenticity score (the platform's auth_score: the sum of the "
            "weights of the signals found, docs/platform.md) is above "
            f"{authenticity['max_score']:g} are excluded."
        )
    if rules["drop_duplicates"]:
        excl.append("A repeated answer to the same pair keeps the first one.")
    excl.append(
        "The rules are applied in this order and each excluded participant is counted once, "
        "under the first rule that excludes them."
    )
    unit = "log odds ratio" if a["test"] == "choice_glmm" else "premium difference"
    analyses = [
        f"Primary test: {model}.",
        f"The hypothesis is supported when the test rejects the null hypothesis of no "
        f"difference in the direction {side} at alpha = {a['alpha']:g}"
        + (" (one-sided)." if a["direction"] != "two-sided" else " (two-sided)."),
        f"Command: `{record['command']}` on the study's final long export.",
    ]
    if a["transform"] == "log":
        analyses.insert(1, "The premium is modelled as log(1 + premium / 100).")
    n = a["planned_n"]
    size = [
        f"{n} completed, non-excluded participants (recruitment continues until that many "
        "remain after the exclusion rules)."
    ]
    looks = a["looks"]
    if looks:
        fut = looks["futility"]
        futility = "no futility bounds"
        if fut and "z" in fut:
            futility = (
                f"fixed futility bounds z = {', '.join(f'{v:g}' for v in fut['z'])} at the "
                f"interim looks ({'binding' if fut['binding'] else 'non-binding'})"
            )
        elif fut:
            futility = (
                f"non-binding futility bounds by {fut['spending']}-type beta spending, "
                f"beta = {fut['beta']:g}"
            )
        size.append(
            f"Group-sequential design: {len(looks['at'])} looks at "
            + ", ".join(f"{f:.0%}" for f in looks["at"])
            + f" of N (Lan-DeMets {looks['spending']} alpha spending; {futility}). At each look "
            "the primary test runs on the completed, non-excluded participants in the order "
            "they completed; the study stops when a bound is crossed. The final p-value, "
            f"estimate ({unit}) and confidence interval are adjusted for the stopping rule "
            "(stage-wise ordering)."
        )
    if record.get("power"):
        rows = record["power"]["table"]
        size.append(
            "Simulated power of this design: "
            + "; ".join(
                f"N = {r['n']}: {r['estimate']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
                for r in rows
            )
            + f" ({rows[0]['n_sims']} simulations each; assumptions: "
            + ", ".join(f"{k} = {v:g}" for k, v in record["power"]["scenario"].items())
            + ")."
        )
    other = [a["notes"]] if a["notes"] else []
    frozen = (
        f"pre-registration hash `{record['prereg_sha256']}` (bundle "
        f"`{record['bundle_sha256']}`, {len(record['bundle'])} files)."
    )
    change = record["amendment"]
    if change is None:
        other.append(f"Frozen before data collection: {frozen}")
    else:
        amends = ", ".join(f"`{h}`" for h in change["amends"])
        replaces = (
            f"It replaces the earlier pre-registration(s): {amends}."
            if amends
            else "No pre-registration was frozen before data collection began."
        )
        other.append(
            f"Amendment, written after data collection began ({change['seen']}): "
            f"{change['reason']} {replaces} Frozen: {frozen}"
        )
    return [
        ("Hypothesis", [a["hypothesis"]]),
        ("Dependent variable", [f"`{dv}` of every product-choice trial."]),
        ("Conditions", _conditions(record["design"], ref, trt)),
        ("Analyses", analyses),
        ("Outliers and exclusions", [" ".join(excl)]),
        ("Sample size", size),
        ("Other", other),
    ]


def _conditions(design: dict[str, Any], ref: str, trt: str) -> list[str]:
    """The design in words: formats, the Latin square, its sequences and the blocks."""
    blocks, sequences = design["blocks"], design["sequences"]
    formats = list(dict.fromkeys(f for b in blocks for f in b["formats"]))
    k = len(sequences)
    named = ", ".join(f"`{f}`" for f in formats)
    if len(formats) == 2:
        text = (
            f"Format of the descriptions, within participants: `{ref}` (reference) and `{trt}` "
            "(treatment)."
        )
    else:
        text = (
            f"Format of the descriptions, within participants: {len(formats)} formats, {named}. "
            f"The primary test compares `{trt}` (treatment) with `{ref}` (reference) on the "
            "trials shown in those two formats; the trials of the other formats are not part "
            "of the primary test."
        )
    where = []
    for b in blocks:
        n = b["pairs"]
        times = f"{n // k}" if n % k == 0 else f"{n // k} or {n // k + 1}"
        where.append(
            f"block `{b['id']}`: {n} product pairs, each participant reading each of its "
            f"{len(b['formats'])} formats {times} times"
        )
    square = (
        f"Which pair is shown in which format is balanced by a {k} x {k} cyclic Latin square: "
        f"{k} sequences ({', '.join(sequences)}) handed out evenly across participants, each "
        "pair shown in a different format in each sequence"
    )
    if len(blocks) > 1:
        square += (
            f"; the study has {len(blocks)} product-choice blocks and a participant's one "
            "sequence sets the row of the square in every block"
        )
    blocks_text = "; ".join(where)
    return [text, f"{square}. B{blocks_text[1:]}."]


def _look_rows(record: dict[str, Any]) -> list[list[str]]:
    return [
        [
            str(look["look"]),
            str(look["n"]),
            f"{look['fraction']:.3g}",
            f"{look['efficacy_z']:.4f}",
            "" if look["futility_z"] is None else f"{look['futility_z']:.4f}",
            f"{look['nominal_p']:.5f}",
            f"{look['alpha_spent']:.5f}",
        ]
        for look in record["looks"]
    ]


_LOOK_HEAD = ["look", "n", "fraction", "efficacy z", "futility z", "nominal p", "alpha spent"]


def render_markdown(record: dict[str, Any]) -> str:
    """The pre-registration as Markdown, its frozen record in a fenced JSON block."""
    title = f"# Pre-registration: {record['study']['title']} (`{record['study']['slug']}`)"
    out = [title, ""]
    for question, paragraphs in _sentences(record):
        out += [f"## {question}", "", *(p + "\n" for p in paragraphs)]
        if question == "Sample size":
            out += [
                "| " + " | ".join(_LOOK_HEAD) + " |",
                "|" + "---|" * len(_LOOK_HEAD),
                *("| " + " | ".join(r) + " |" for r in _look_rows(record)),
                "",
            ]
    out += [
        "## Frozen record",
        "",
        "The whole record below, but its own hash, is what the hash freezes; "
        "`framelab analyze choice ... --prereg` reads this block and nothing else.",
        "",
        _MD_FENCE,
        json.dumps(record, indent=2, sort_keys=True),
        "```",
        "",
    ]
    return "\n".join(out)


def render_html(record: dict[str, Any]) -> str:
    """The pre-registration as a standalone HTML page (the record in a JSON script element)."""
    e = html.escape
    body = [
        f"<h1>Pre-registration: {e(record['study']['title'])} ({e(record['study']['slug'])})</h1>"
    ]
    head = "".join(f"<th>{e(h)}</th>" for h in _LOOK_HEAD)
    rows = "".join(
        "<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in _look_rows(record)
    )
    for question, paragraphs in _sentences(record):
        body.append(f"<h2>{e(question)}</h2>")
        body += [f"<p>{e(p)}</p>" for p in paragraphs]
        if question == "Sample size":
            body.append(f"<table><tr>{head}</tr>{rows}</table>")
    # "</" inside JSON strings cannot end the script element once its slash is escaped.
    payload = json.dumps(record, indent=2, sort_keys=True).replace("</", "<\\/")
    body.append(
        "<h2>Frozen record</h2>"
        f'<script type="application/json" id="{_HTML_ID}">{payload}</script>'
        f"<pre>{e(json.dumps(record, indent=2, sort_keys=True))}</pre>"
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Pre-registration: {e(record['study']['slug'])}</title></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def read_prereg(path: str | Path) -> dict[str, Any]:
    """Read a pre-registration document's frozen record and check it against its hash.

    Parameters
    ----------
    path : str or Path
        ``prereg.md`` or ``prereg.html`` written by ``framelab prereg``.

    Returns
    -------
    dict
        The record (see :func:`freeze`).

    Raises
    ------
    PreregError
        No record in the file, or a record edited after it was frozen.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PreregError(f"cannot read the pre-registration {path.name}: {exc}") from None
    if path.suffix.lower() in (".html", ".htm"):
        match = re.search(
            rf'<script type="application/json" id="{_HTML_ID}">(.*?)</script>', text, re.S
        )
    else:
        match = re.search(rf"^{re.escape(_MD_FENCE)}\n(.*?)\n```", text, re.S | re.M)
    if match is None:
        raise PreregError(
            f"{path.name} has no frozen record: write it with `framelab prereg STUDY`"
        )
    try:
        record = json.loads(match.group(1))
    except json.JSONDecodeError as exc:
        raise PreregError(f"{path.name}: the frozen record is not valid JSON ({exc})") from None
    if isinstance(record, dict) and record.get("format") in _OLD_FORMATS:
        raise PreregError(
            f"{path.name}: written by an earlier FrameLab ({record['format']}), whose hash did "
            "not cover the primary analysis it was compared with; write it again with "
            "`framelab prereg SLUG` (once data collection has begun, as an amendment)"
        )
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise PreregError(f"{path.name}: not a {FORMAT} record")
    actual = prereg_hash(record)
    if actual != record.get("prereg_sha256"):
        raise PreregError(
            f"{path.name}: the frozen record was changed after freezing (its content hashes to "
            f"{actual[:12]}…, the document states {str(record.get('prereg_sha256'))[:12]}…); "
            "the pre-registration is the document as first written"
        )
    try:
        manifest = [(f["name"], f["sha256"]) for f in record["bundle"]]
        missing = {"study", "analysis", "command", "amendment"} - set(record)
    except (KeyError, TypeError):
        raise PreregError(f"{path.name}: the record's bundle manifest is malformed") from None
    if missing:
        raise PreregError(f"{path.name}: the frozen record lacks {sorted(missing)}")
    if bundle_sha256(manifest) != record.get("bundle_sha256"):
        raise PreregError(f"{path.name}: bundle_sha256 is not the hash of the bundle manifest")
    return record


def check_text(path: str | Path, record: dict[str, Any]) -> str | None:
    """Say whether a document's text is still the one its frozen record was written with.

    The hash covers the record only; the words around it (hypothesis, analyses, ...) are
    written from the record, so writing them again shows an edit. The record is the
    pre-registration either way: an edited text is named, never followed. Line endings and
    trailing spaces an editor changed are no edit; a FrameLab that words the document
    differently reads as one.

    Parameters
    ----------
    path : str or Path
        The document (``prereg.md`` or ``prereg.html``), already read by :func:`read_prereg`.
    record : dict
        Its frozen record.

    Returns
    -------
    str or None
        What differs, naming the file and the section of the first difference; ``None`` when
        the text is the one written.
    """
    path = Path(path)
    page = path.suffix.lower() in (".html", ".htm")
    written = (render_html if page else render_markdown)(record)

    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.strip().splitlines()]

    mine, theirs = lines(path.read_text(encoding="utf-8")), lines(written)
    if mine == theirs:
        return None
    first = next(
        (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
        min(len(mine), len(theirs)),
    )
    heading = re.compile(r"<h[12]>.*?</h[12]>" if page else r"^#{1,2} .*")
    where = "the title"
    for line in theirs[: first + 1]:
        found = heading.search(line)
        if found:
            where = found.group(0)
    return (
        f"the text of {path.name} differs from the text its frozen record was written with "
        f"(first under {where!r}), so it was edited after freezing: the frozen record is the "
        "pre-registration, and this analysis follows it"
    )


def differences(frozen: dict[str, Any], run: dict[str, Any]) -> list[str]:
    """What differs between the frozen primary analysis and a run's, one line per difference.

    Parameters
    ----------
    frozen : dict
        The pre-registered primary analysis (:meth:`AnalysisPlan.primary` of the record's
        ``analysis`` block).
    run : dict
        The same keys for the analysis about to run (:meth:`AnalysisPlan.primary`).

    Returns
    -------
    list of str
        E.g. ``"exclusions.require_attention: pre-registered true, this run false
        (--keep-failed-attention)"``; empty when they agree.
    """
    out = []

    def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        items: dict[str, Any] = {}
        for key, value in d.items():
            if isinstance(value, dict):
                items.update(flat(value, f"{prefix}{key}."))
            else:
                items[f"{prefix}{key}"] = value
        return items

    a, b = flat(frozen), flat(run)
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            rule = key.removeprefix("exclusions.")
            hint = f" ({_KEEP_FLAGS[rule]})" if rule in _KEEP_FLAGS and b.get(key) is False else ""
            out.append(
                f"{key}: pre-registered {json.dumps(a.get(key))}, this run "
                f"{json.dumps(b.get(key))}{hint}"
            )
    return out


def check_run(
    record: dict[str, Any],
    document: str,
    *,
    levels: Sequence[str] | None,
    exclusions: ChoiceRules,
    log: bool,
) -> AnalysisPlan:
    """The frozen plan, if a run with these settings is its primary analysis.

    Parameters
    ----------
    record : dict
        :func:`read_prereg` output.
    document : str
        The document's name (for the messages).
    levels : sequence of str or None
        The run's ``--levels``: the first two are its reference and treatment (``None``: the
        default ``original, summary``).
    exclusions : ChoiceRules
        The run's exclusion rules.
    log : bool
        The run's ``--wtp-log``.

    Returns
    -------
    AnalysisPlan
        The pre-registered analysis.

    Raises
    ------
    PreregError
        The run differs: every difference named, and the pre-registered command.
    """
    from dataclasses import replace

    frozen = plan_from_dict(record["analysis"], file=document)
    run = replace(
        frozen,
        levels=tuple(levels[:2]) if levels else FORMATS,
        exclusions=exclusions,
        transform="log" if log else "none",
    )
    diffs = differences(frozen.primary(), run.primary())
    if diffs:
        raise PreregError(
            f"this primary analysis differs from the pre-registered one ({document}, hash "
            f"{record['prereg_sha256'][:12]}):\n  "
            + "\n  ".join(diffs)
            + f"\nRun it as pre-registered:\n  {record['command']}"
        )
    return frozen


def check_study(data: pd.DataFrame, record: dict[str, Any]) -> None:
    """Refuse an export of another study than the pre-registered one (``study_slug``)."""
    slug = record["study"]["slug"]
    if "study_slug" in data.columns:
        found = sorted(set(data["study_slug"].dropna()))
        if found != [slug]:
            raise PreregError(
                f"the export holds study {', '.join(found) or '(none)'}; the pre-registration "
                f"is of {slug}"
            )


def check_console(record: dict[str, Any], console: dict[str, Any]) -> str:
    """Compare a document with the pre-registrations the console recorded for its study.

    Parameters
    ----------
    record : dict
        :func:`read_prereg` output.
    console : dict
        What the console holds for the study: ``preregistrations`` (oldest first, each with
        ``prereg_sha256``, ``recorded_at``, ``recorded_by``, ``amendment``), ``bundle_sha256``
        (of the stored files now) and ``study_version``.

    Returns
    -------
    str
        What the comparison found, for the console output and the report.

    Raises
    ------
    PreregError
        The console recorded other pre-registrations of the study: the document is not one
        of them (edited and hashed again, or of another study), or a later one amends it.
    """
    slug, mine = record["study"]["slug"], record["prereg_sha256"]
    history = console["preregistrations"]
    if not history:
        return (
            f"not confirmed by the console: it has no pre-registration recorded for {slug} "
            f"(`framelab prereg {slug}` records one)"
        )
    hashes = [h["prereg_sha256"] for h in history]
    if mine not in hashes:
        raise PreregError(
            f"the console recorded {len(hashes)} pre-registration(s) of {slug} (latest "
            f"{hashes[-1][:12]}, {history[-1]['recorded_at']}); this document's record hashes "
            f"to {mine[:12]}: it is none of them (edited and hashed again after freezing?)"
        )
    if mine != hashes[-1]:
        later = history[-1]
        why = (later.get("amendment") or {}).get("reason", "")
        raise PreregError(
            f"this pre-registration of {slug} was amended: the console recorded "
            f"{later['prereg_sha256'][:12]} on {later['recorded_at']}"
            + (f" ({why})" if why else "")
            + "; analyse with that document"
        )
    found = (
        f"matches the pre-registration the console recorded for {slug} on "
        f"{history[-1]['recorded_at']} (by {history[-1]['recorded_by']})"
    )
    if len(history) > 1:
        found += f", the last of {len(history)} recorded"
    if console["bundle_sha256"] != record["bundle_sha256"]:
        found += (
            f"; WARNING: the study's stored files changed after the freeze (now version "
            f"{console['study_version']}): some participants may have seen other stimuli"
        )
    return found
