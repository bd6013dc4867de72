"""Study definitions: read a YAML file, validate it, return a typed :class:`StudyDefinition`.

A study is metadata (slug, title, recruitment, payment) plus an ordered list of task blocks.
Each block names a task ``type`` from :mod:`webapp.tasks`; that task type validates its own
keys. Every error names the file, the path inside it, the reason and the line, e.g.
``demo.yaml: tasks[2].questions[0].correct: 'maybe' is not one of the options (line 31)``;
stimulus files (pairs YAML, item CSVs, JSONL sets) are refused the same way, naming their own
file and line.

A study is a bundle (:mod:`webapp.bundle`): the files it names are read through it, so they can
only be files of the bundle, and every read is bounded. All YAML (study files on disk, uploads,
pairs files) goes through one hardened loader that refuses anchors, aliases and merge keys and
bounds the size and nesting.

The validation is written by hand rather than with a schema library because the reasons must
speak the researcher's language and each task type owns its part of the schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from webapp.bundle import MAX_YAML_BYTES, Bundle, BundleError, size_text
from webapp.definition import (
    AuthenticitySettings,
    Bonus,
    CompletionCodes,
    Payment,
    RecruiterSettings,
    Recruitment,
    StudyDefinition,
    TaskBlock,
)
from webapp.i18n import (
    CURRENCIES,
    DEFAULT_CURRENCY,
    DEFAULT_LANGUAGE,
    available_languages,
    definition_language,
    format_cents,
)
from webapp.study_analysis import validate_analysis
from webapp.validation import (
    ID_MAX,
    ID_RE,
    PLATFORMS,
    SLUG_RE,
    Collector,
    HardenedLoader,
    StudyDefinitionError,
    StudyDefinitionErrors,
    Where,
    check_keys,
    check_strings,
    check_text,
    collect_notes,
    column_length,
    get_bool,
    get_id,
    get_int,
    get_line,
    get_list,
    get_mapping,
    get_money,
    get_number,
    get_str,
    line_at,
    parse_yaml,
    written_key,
)


def _completion_code(codes: Mapping[str, Any], key: str, where: Where) -> str:
    # Codes are appended to the recruiter's completion link (``?cc=CODE``): no URL syntax.
    value = get_line(codes, key, where, max_len=ID_MAX)
    if not ID_RE.match(value):
        raise where.at(key).error(
            f"{value!r} is not a valid completion code (letters, digits, _ . -; it is "
            "appended to the recruiter's completion link)"
        )
    return value


def _recruitment(raw: Any, where: Where, currency: str) -> Recruitment:
    from webapp.models import PlatformIdentity

    raw = get_mapping(raw if raw is not None else {}, where)
    check_keys(
        raw,
        {
            "platforms",
            "completion_codes",
            "exclude_ids",
            "description",
            "target_n",
            "time_limit_minutes",
            "verified_entry",
        },
        where,
    )
    # MTurk pays in US dollars only: a study in another currency runs without it.
    paying = [p for p in PLATFORMS if currency == "USD" or p != "mturk"]
    platforms = get_list(raw.get("platforms", paying), where.at("platforms"), min_len=1)
    for i, p in enumerate(platforms):
        if p not in PLATFORMS:
            raise where.at("platforms").at(i).error(f"{p!r} is not one of {list(PLATFORMS)}")
        if p not in paying:
            raise (
                where.at("platforms")
                .at(i)
                .error(
                    f"MTurk pays in US dollars, and this study's payment.currency is {currency}: "
                    "set it to USD or recruit without MTurk"
                )
            )
    codes_where = where.at("completion_codes")
    codes = get_mapping(raw.get("completion_codes"), codes_where)
    check_keys(codes, {"completed", "screened_out", "study_full"}, codes_where)
    excluded = get_list(raw.get("exclude_ids", []), where.at("exclude_ids"))
    return Recruitment(
        platforms=tuple(platforms),
        completion_codes=CompletionCodes(
            completed=_completion_code(codes, "completed", codes_where),
            screened_out=_completion_code(codes, "screened_out", codes_where),
            # Shown when a study with limited slots (sentiment annotation) has none left.
            study_full=(
                _completion_code(codes, "study_full", codes_where)
                if "study_full" in codes
                else None
            ),
        ),
        # Compared with the platform IDs people arrive with, which fit this column.
        exclude_ids=tuple(
            check_text(
                str(x),
                where.at("exclude_ids").at(i),
                max_len=column_length(PlatformIdentity.external_id),
                one_line=True,
            )
            for i, x in enumerate(excluded)
        ),
        # Console only (progress bar, automatic time-outs).
        target_n=get_int(raw, "target_n", where, default=1, minimum=1)
        if "target_n" in raw
        else None,
        time_limit_minutes=(
            get_number(raw, "time_limit_minutes", where, minimum=1)
            if "time_limit_minutes" in raw
            else None
        ),
        # Entry only with the IDs of the listing FrameLab created (webapp.services.entry
        # .check_verified).
        verified_entry=get_bool(raw, "verified_entry", where, default=False),
    )


def _verified_entry(
    recruitment: Recruitment, recruiter: RecruiterSettings | None, where: Where
) -> None:
    """``verified_entry`` needs a study whose every entry comes through FrameLab's own listing."""
    if recruiter is None:
        raise where.error(
            "needs a 'recruiter:' block: FrameLab can check only the IDs of a Prolific study "
            "or MTurk HIT it created itself, and a plain-link study has no such listing"
        )
    platforms = list(recruitment.platforms)
    if platforms != [recruiter.platform]:
        others = [p for p in platforms if p != recruiter.platform]
        raise where.error(
            f"entries through {others} cannot be checked against the {recruiter.platform} "
            f"listing: set recruitment.platforms to [{recruiter.platform}]"
        )


def _payment(raw: Any, where: Where) -> Payment:
    from webapp.models import BonusPayment

    raw = get_mapping(raw if raw is not None else {}, where)
    base = written_key(raw, "base", "base_usd", where)
    check_keys(raw, {"currency", base, "bonus"}, where)
    currency = get_line(raw, "currency", where, default=DEFAULT_CURRENCY)
    if currency not in CURRENCIES:
        raise where.at("currency").error(
            f"{currency!r} is not a currency a study may pay in; choose one of "
            f"{', '.join(CURRENCIES)} (an ISO 4217 code)"
        )
    bonus_where = where.at("bonus")
    bonus = get_mapping(raw.get("bonus") or {"amount": 0}, bonus_where)
    amount_key = written_key(bonus, "amount", "usd", bonus_where)
    max_key = written_key(bonus, "max", "max_usd", bonus_where)
    check_keys(bonus, {amount_key, "rule", max_key}, bonus_where)
    return Payment(
        currency=currency,
        base=get_money(raw, base, where),
        bonus=Bonus(
            amount=get_money(bonus, amount_key, bonus_where, default=0.0),
            rule=get_line(
                bonus, "rule", bonus_where, default="none", max_len=column_length(BonusPayment.rule)
            ),
            max=(
                get_money(bonus, max_key, bonus_where, minimum=Decimal("0.01"))
                if max_key in bonus
                else None
            ),
        ),
    )


def _bonus_bound(payment: Payment, blocks: list[TaskBlock], where: Where) -> None:
    """Refuse a bonus rule that can pay one participant more than ``payment.bonus.max``."""
    from webapp.tasks import get_task_type

    bonus = payment.bonus
    if bonus.rule == "none" or not bonus.amount:
        return
    choices = sum(get_task_type(b.type).bonus_answers(b) for b in blocks)
    cap = bonus.cap
    most = round(bonus.amount * 100) * choices
    if most > round(cap * 100):
        at = where.at("payment").at("bonus")
        currency = payment.currency
        raise at.error(
            f"pays up to {format_cents(most, currency)} per participant ({choices} choices x "
            f"{bonus.amount}), above max {format_cents(round(cap * 100), currency)}; set "
            "max to the most you mean to pay one person"
        )


def _slug(raw: Mapping[str, Any], where: Where) -> str:
    # SLUG_RE bounds the length to Study.slug's (a test holds them together); checking the
    # pattern first keeps the reason about the pattern, with the value quoted.
    slug = get_str(raw, "slug", where, one_line=True)
    if not SLUG_RE.match(slug):
        raise where.at("slug").error(f"{slug!r} must be lower-case letters, digits and dashes")
    return slug


def _language(raw: Mapping[str, Any], where: Where) -> str:
    """The participants' language (``language: de``): one whose catalogue ships."""
    language = get_line(raw, "language", where, default=DEFAULT_LANGUAGE)
    known = available_languages()
    if language not in known:
        raise where.at("language").error(
            f"no participant texts in {language!r}; choose one of {', '.join(known)} "
            "(docs/languages.md says how to add a language)"
        )
    return language


# What one upload may ask of the server and of one participant. Validation costs time in
# proportion to the bundle (bounded by webapp.bundle's size limits); these bound the design: a
# study of 150 product-choice blocks with 9,600 trials per participant is no study a person can
# take, yet every page, the console and the exports would carry its weight.
MAX_BLOCKS = 50
MAX_PAGES = 1000  # pages one participant is shown, over all blocks
# The definition as stored (JSON, stimulus files read in): every web process keeps the
# definitions of the studies people open (webapp.services.studies.DefinitionCache).
MAX_DEFINITION_BYTES = 16 * 1024 * 1024


def _too_many_blocks(n: int, tasks_where: Where) -> StudyDefinitionError:
    return tasks_where.error(
        f"{n} task blocks; a study has at most {MAX_BLOCKS}: put the pairs or items of one "
        "kind into one block (a block takes any number), or split the study"
    )


def _page_count(blocks: list[TaskBlock], tasks_where: Where) -> None:
    from webapp.tasks import get_task_type

    pages = {b.id: get_task_type(b.type).n_steps(b) for b in blocks}
    total = sum(pages.values())
    if total > MAX_PAGES:
        largest = sorted(pages.items(), key=lambda kv: -kv[1])[:3]
        named = ", ".join(f"{block_id!r} {n:,}" for block_id, n in largest)
        raise tasks_where.error(
            f"each participant would see {total:,} pages (largest blocks: {named}); at most "
            f"{MAX_PAGES:,} per participant: give each block fewer pairs or items per "
            "participant, or split the study"
        )


def _block(
    block: Any, i: int, tasks_where: Where, blocks: list[TaskBlock], seen: set[str]
) -> TaskBlock:
    """Validate block ``i`` (``blocks`` and ``seen``: the valid blocks before it, their ids)."""
    from webapp.tasks import get_task_type, task_type_names

    bw = tasks_where.at(i)
    block = get_mapping(block, bw)
    type_name = get_line(block, "type", bw)
    task_type = get_task_type(type_name)
    if task_type is None:
        raise bw.at("type").error(f"unknown task type {type_name!r}; known: {task_type_names()}")
    block_id = get_id(block, "id", bw) if "id" in block else f"{type_name}{i}"
    if block_id in seen:
        raise bw.at("id").error(f"duplicate block id {block_id!r}")
    seen.add(block_id)
    body = {k: v for k, v in block.items() if k not in {"type", "id"}}
    out = TaskBlock.of(block_id, type_name, task_type.validate(body, bw))
    task_type.check_with_blocks(out, blocks, bw)
    return out


def _design_part(
    design: list[TaskBlock], checked: TaskBlock | None, raw: Any
) -> list[TaskBlock] | None:
    """``design`` with block ``raw`` (``checked``: its validated form, ``None`` if refused).

    A refused block stands in with its type and the formats it meant (its own errors say what
    is wrong); ``None`` when they cannot be told, so nothing is checked against them.
    """
    from webapp.tasks import get_task_type

    if checked is not None:
        return [*design, checked]
    kind = raw.get("type") if isinstance(raw, Mapping) else None
    task_type = get_task_type(kind) if isinstance(kind, str) else None
    if task_type is None:
        return design
    formats = task_type.meant_formats(raw)
    if formats is None:
        return None
    return [*design, TaskBlock.of("", kind, {"formats": list(formats)} if formats else {})]


def _block_order(blocks: list[TaskBlock], tasks_where: Where) -> None:
    from webapp.tasks import get_task_type, task_types

    for at, i in (("first", 0), ("last", len(blocks) - 1)):
        if get_task_type(blocks[i].type).position != at:
            names = [t.name for t in task_types() if t.position == at]
            raise tasks_where.at(i).error(
                f"the {at} block must be of type {' or '.join(map(repr, names))}"
            )


def _study_full_code(blocks: list[TaskBlock], recruitment: Recruitment, where: Where) -> None:
    from webapp.tasks import get_task_type

    if any(get_task_type(b.type).limits_slots for b in blocks) and (
        recruitment.completion_codes.study_full is None
    ):
        codes_where = where.at("recruitment").at("completion_codes")
        raise codes_where.error(
            "a study with limited slots (sentiment_annotation) needs a 'study_full' code for "
            "the participants it turns away"
        )


def validate_definition(raw: Any, where: Where) -> StudyDefinition:
    """Validate a parsed study definition and return it typed.

    Parameters
    ----------
    raw : Any
        The parsed YAML document.
    where : Where
        The file (and folder, for referenced files) the document came from.

    Returns
    -------
    webapp.definition.StudyDefinition
        Every key set (defaults where the file leaves one out); its ``to_json()`` is what is
        stored.

    Raises
    ------
    StudyDefinitionError
        With file, path and reason; :class:`~webapp.validation.StudyDefinitionErrors` when
        several blocks or sections are wrong (each is reported, up to a bound).
    """
    from webapp.models import Study

    if raw is None:
        raise where.error("the file is empty; a study needs at least slug, title and tasks")
    raw = get_mapping(raw, where)
    # Blocks and the top-level keys and sections are independent: their errors are gathered
    # and reported together (the checks across blocks run once every block is valid).
    found = Collector()
    found.run(
        check_keys,
        raw,
        {
            "slug",
            "title",
            "description",
            "estimated_minutes",
            "recruitment",
            "payment",
            "tasks",
            "recruiter",
            "analysis",
            "language",
            "authenticity",
        },
        where,
    )
    slug = found.run(_slug, raw, where)
    language = found.run(_language, raw, where) or DEFAULT_LANGUAGE
    tasks_where = where.at("tasks")
    blocks: list[TaskBlock] = []
    seen: set[str] = set()
    # What the analysis block is checked against: the valid blocks, and the formats of a
    # product-choice block refused for other reasons (None: a design that cannot be told).
    design: list[TaskBlock] | None = []
    # The defaults a block does not override are written in the study's language.
    raw_blocks = found.run(get_list, raw.get("tasks"), tasks_where, min_len=1) or []
    if len(raw_blocks) > MAX_BLOCKS:  # too many to validate: the count is the error
        found.add(_too_many_blocks(len(raw_blocks), tasks_where))
        raw_blocks, design = [], None
    with definition_language(language):
        for i, block in enumerate(raw_blocks):
            checked = found.run(_block, block, i, tasks_where, blocks, seen)
            if checked is not None:
                blocks.append(checked)
            if design is not None:
                design = _design_part(design, checked, block)
    if blocks and not found.errors:
        found.run(_block_order, blocks, tasks_where)
        found.run(_page_count, blocks, tasks_where)
    # The recruiters a study may name depend on its currency (its errors are payment's).
    payment_raw = raw.get("payment")
    currency = (payment_raw.get("currency") if isinstance(payment_raw, Mapping) else None) or (
        DEFAULT_CURRENCY
    )
    recruitment = found.run(_recruitment, raw.get("recruitment"), where.at("recruitment"), currency)
    if recruitment is not None and not found.errors:
        found.run(_study_full_code, blocks, recruitment, where)
    title = found.run(get_line, raw, "title", where, max_len=column_length(Study.title))
    description = found.run(get_str, raw, "description", where, default="")
    minutes = found.run(get_number, raw, "estimated_minutes", where, default=10.0, minimum=0)
    payment = found.run(_payment, payment_raw, where.at("payment"))
    if payment is not None:
        found.run(_bonus_bound, payment, blocks, where)
    # The recruiter and analysis blocks are checked against the sections they depend on, in the
    # same round as the rest when those are valid.
    recruiter = None
    if raw.get("recruiter") is not None and None not in (recruitment, payment, minutes):
        from webapp.recruit.settings import validate_recruiter

        recruiter = found.run(
            validate_recruiter,
            raw["recruiter"],
            where.at("recruiter"),
            recruitment=recruitment,
            payment=payment,
            estimated_minutes=minutes,
        )
    # Needs the recruitment and recruiter as validated (a refused recruiter says its own why).
    if (
        recruitment is not None
        and recruitment.verified_entry
        and (raw.get("recruiter") is None or recruiter is not None)
    ):
        found.run(
            _verified_entry, recruitment, recruiter, where.at("recruitment").at("verified_entry")
        )
    authenticity = AuthenticitySettings()
    if raw.get("authenticity") is not None:
        from webapp.services.authenticity import validate_settings

        authenticity = found.run(validate_settings, raw["authenticity"], where.at("authenticity"))
    analysis = None
    if raw.get("analysis") is not None and design is not None:
        # A product-choice block refused for its pairs still names its formats.
        analysis = found.run(validate_analysis, raw["analysis"], where.at("analysis"), design)
    found.check()
    definition = StudyDefinition(
        slug=slug,
        title=title,
        description=description,
        estimated_minutes=minutes,
        language=language,
        recruitment=recruitment,
        payment=payment,
        tasks=tuple(blocks),
        authenticity=authenticity,
        recruiter=recruiter,
        analysis=analysis,
    )
    check_strings(definition.to_json(), where)
    return definition


def load_study_file(path: str | Path) -> StudyDefinition:
    """Read and validate a study definition file (referenced files are inlined).

    Parameters
    ----------
    path : str or Path
        A YAML file such as ``stimuli/studies/product-choice-demo.yaml``.

    Returns
    -------
    webapp.definition.StudyDefinition
        See :func:`validate_definition`.

    Examples
    --------
    >>> d = load_study_file("stimuli/studies/product-choice-demo.yaml")  # doctest: +SKIP
    >>> d.slug  # doctest: +SKIP
    'product-choice-demo'
    """
    return load_bundle(folder_bundle(path))


def folder_bundle(path: str | Path) -> Bundle:
    """The bundle of a study file on disk: the file and its own folder (see
    :meth:`webapp.bundle.Bundle.from_folder`); a name that is no file name is refused."""
    path = Path(path)
    try:
        return Bundle.from_folder(path)
    except BundleError as exc:
        raise StudyDefinitionError(path.name[:100], "", str(exc), line=1) from None


def load_bundle(bundle: Bundle, notes: list[str] | None = None) -> StudyDefinition:
    """Read and validate the study file of a bundle (the files it names are inlined).

    Parameters
    ----------
    bundle : webapp.bundle.Bundle
        From an upload or a folder; the study file is ``bundle.study_name``.
    notes : list of str, optional
        Receives a note for each thing that loads but should change (a key spelled the older
        way), one per file and key, located like the errors.

    Returns
    -------
    webapp.definition.StudyDefinition
        See :func:`validate_definition`.

    Raises
    ------
    StudyDefinitionError
        Naming a file of the bundle, the place in it, the reason and the line.
    """
    name = bundle.study_name
    where = Where(name, "", bundle)
    try:
        try:
            data = bundle.read(name, limit=MAX_YAML_BYTES)
        except BundleError as exc:
            raise Where(name, "", bundle, 1).error(str(exc)) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = line_at(data, exc.start)
            raise Where(name, "", bundle, line).error(
                f"not UTF-8 text at line {line}: save the file as UTF-8"
            ) from None
        with collect_notes() as found:
            definition = validate_definition(parse_yaml(text, where), where)
        if notes is not None:
            notes.extend(
                str(_with_line(first)) + (f" (and {more} more in this file)" if more else "")
                for first, more in found
            )
        try:  # what the database's JSON column will accept (PostgreSQL refuses NaN)
            stored = json.dumps(definition.to_json(), allow_nan=False)
        except ValueError:
            raise where.error("a number is not finite (NaN or infinity)") from None
        if len(stored) > MAX_DEFINITION_BYTES:  # ASCII: json.dumps escapes the rest
            raise where.error(
                f"the study is {len(stored) / 2**20:.1f} MiB once its files are read in; at most "
                f"{size_text(MAX_DEFINITION_BYTES)}: use fewer or shorter texts or items"
            )
        return definition
    except StudyDefinitionErrors as exc:
        raise StudyDefinitionErrors([_with_line(e) for e in exc.errors], exc.more) from None
    except StudyDefinitionError as exc:
        raise _with_line(exc) from None


_PATH_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _with_line(exc: StudyDefinitionError) -> StudyDefinitionError:
    """Add the line of the error's place in its YAML file.

    A missing key gets the line where its mapping starts (where it should be added); a place
    that does not exist, the line of its nearest existing parent; an empty file, line 1.
    """
    if exc.line is not None or exc.source is None:
        return exc
    try:
        node = yaml.compose(exc.source, Loader=HardenedLoader)
    except (yaml.YAMLError, RecursionError):
        return exc
    line = node.start_mark.line + 1 if node is not None else 1
    for key, index in _PATH_TOKEN.findall(exc.locate):
        if index and isinstance(node, yaml.SequenceNode) and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        elif key and isinstance(node, yaml.MappingNode):
            match = next((kv for kv in node.value if getattr(kv[0], "value", None) == key), None)
            if match is None:
                line = node.start_mark.line + 1
                break
            line, node = match[0].start_mark.line + 1, match[1]
        else:
            break
    return StudyDefinitionError(
        exc.file, exc.path, exc.reason, line=line, source=exc.source, locate=exc.locate
    )
