"""Are the participants people? Per-page signals, server-side checks and one score per participant.

A page's script (``static/rt.js``) sends aggregates of how the answer was given in one hidden
field (:data:`SIGNALS_FIELD`): paste events and pasted characters, keystrokes against the
characters in the text fields, how often and how long the page was hidden, whether any trusted
pointer or keyboard event happened, automation hints, and a short hash of the screen, time zone
and language settings. Nothing else: no keys, no pasted text, no coordinates, no IP. The server
adds what it sees itself (the honeypot field, the study's canary word in any answer, the
User-Agent's automation hint, the words on the page, a grid answered in one column, a hash of
the free-text answers) and stores everything on the page's :class:`~webapp.models.PageVisit`.

:func:`assess` turns a study's pages into one :class:`Authenticity` per participant: a score
(the sum of the weights of the reasons found, :data:`WEIGHTS`) with its reasons. A page
without the script's field counts as "no signals" and adds nothing to the score: the study
works without JavaScript and nobody is flagged for that alone. ``docs/platform.md``
("Authenticity signals") says what each signal can and cannot show.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import select

from webapp.definition import DEFAULT_READING_WPM, AuthenticitySettings, StudyDefinition
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import PageVisit, Participant, Study

SIGNALS_FIELD = "signals"
HONEYPOT_FIELD = "fl_code"
# Fields every page form carries besides the task's own: never an answer.
OWN_FIELDS = frozenset({"page", "rt_ms", SIGNALS_FIELD, HONEYPOT_FIELD, "csrf_token"})
SIGNALS_MAX_CHARS = 200

# The script's key -> (the page_visit column, the largest value kept). Larger values are
# clipped: they cannot come from a person, and the columns are 32-bit integers.
_COUNTS: dict[str, tuple[str, int]] = {
    "pe": ("paste_count", 10_000),
    "pc": ("pasted_chars", 10_000_000),
    "ks": ("keystrokes", 10_000_000),
    "tc": ("text_chars", 10_000_000),
    "hc": ("hidden_count", 10_000),
    "hm": ("hidden_ms", 24 * 3600 * 1000),
    "ia": ("interacted", 1),
    "au": ("automation", 0x3F),
}
_HEX8 = re.compile(r"[0-9a-f]{1,8}", re.ASCII)

# Automation hint bits (``automation``): the script's, and the server's own from the UA.
WEBDRIVER, HEADLESS_UA, NO_LANGUAGES, NO_WINDOW, AUTOMATION_GLOBALS = 1, 2, 4, 8, 16
SERVER_UA = 64
_AUTOMATION_UA = re.compile(
    r"headless|python|httpx|aiohttp|curl/|wget/|go-http-client|okhttp|java/|libwww|scrapy"
    r"|phantomjs|selenium|puppeteer|playwright|\bbot\b|spider|crawler",
    re.IGNORECASE,
)

# A word as the reading floor counts it; the page's text is what lies between its tags.
_TEXT = re.compile(r">([^<]+)<")
_LETTERS = re.compile(r"[^\W\d_]", re.UNICODE)

# Reasons and their weights. 3: what a person practically never does (a webdriver browser,
# the invisible field, the canary word, reading 1,000 words a minute); 2: what people rarely
# do (text that was pasted or never typed, a submit without any pointer or key, the same free
# text as another participant, a signals field that is not the script's); 1: what many people
# do now and then (one column down a grid, several people on one device, leaving the page
# while writing).
WEIGHTS: dict[str, int] = {
    "automation": 3,
    "honeypot": 3,
    "canary": 3,
    "fast": 3,
    "paste": 2,
    "untyped": 2,
    "no_interaction": 2,
    "tampered": 2,
    "duplicate_text": 2,
    "straightlining": 1,
    "shared_device": 1,
    "hidden": 1,
}
FLAG_SCORE = 3  # a participant with at least this score is "flagged" in the console
MIN_READING_WORDS = 40  # pages with fewer words have no reading floor
MIN_GRID_ITEMS = 4  # a straight line needs at least this many rating questions on a page
MIN_SHARED_TEXT_CHARS = 20  # shorter answers ("no", "none") are alike by chance
CANARY_WORDS = (
    "amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor",
    "indigo", "juniper", "kestrel", "lagoon", "meadow", "nimbus", "orchid", "pepper",
)  # fmt: skip


# -- the study's settings ----------------------------------------------------------------------


def validate_settings(raw: Any, where: Any) -> AuthenticitySettings:
    """Validate a study's ``authenticity:`` block: ``canary`` (default false) and ``reading_wpm``
    (the reading floor's words per minute, default 1000).

    Returns
    -------
    webapp.definition.AuthenticitySettings
    """
    from webapp.validation import check_keys, get_mapping, get_number

    raw = get_mapping(raw, where)
    check_keys(raw, {"canary", "reading_wpm"}, where)
    canary = raw.get("canary", False)
    if not isinstance(canary, bool):
        raise where.at("canary").error(f"expected true or false, got {canary!r}")
    wpm = get_number(
        raw, "reading_wpm", where, default=DEFAULT_READING_WPM, minimum=100, maximum=1_000_000
    )
    return AuthenticitySettings(canary=canary, reading_wpm=wpm)


def canary_word(slug: str) -> str:
    """The study's canary word: a word and three digits derived from its slug.

    Examples
    --------
    >>> canary_word("product-choice-demo")
    'dune-610'
    """
    digest = hashlib.sha256(f"framelab-canary:{slug}".encode()).digest()
    return f"{CANARY_WORDS[digest[0] % len(CANARY_WORDS)]}-{int.from_bytes(digest[1:3]) % 1000:03d}"


def page_canary(definition: StudyDefinition) -> str | None:
    """The canary word a study's pages show, or ``None`` when the study has no canary."""
    return canary_word(definition.slug) if definition.authenticity.canary else None


# -- one page ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PageSignals:
    """What one submitted page tells (its :class:`~webapp.models.PageVisit` columns).

    ``signals`` is ``js`` (the script's field, read), ``none`` (no field: no JavaScript, or a
    client that does not run it) or ``invalid`` (a field the script cannot have written); the
    script's counts are empty unless it is ``js``.
    """

    signals: str = "none"
    paste_count: int | None = None
    pasted_chars: int | None = None
    keystrokes: int | None = None
    text_chars: int | None = None
    hidden_count: int | None = None
    hidden_ms: int | None = None
    interacted: bool | None = None
    automation: int = 0
    honeypot: bool = False
    canary: bool = False
    device_hint: str | None = None
    grid_items: int | None = None
    straightlined: bool | None = None
    text_hash: str | None = None

    def columns(self) -> dict[str, Any]:
        """Column name -> value."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


PAGE_COLUMNS = tuple(f.name for f in fields(PageSignals))


def parse_script_field(raw: str | None) -> tuple[str, dict[str, int], str]:
    """Read the script's field: ``(state, counts by column, device hash)``.

    The field is ``key=value`` pairs joined by ``;`` with the keys of :data:`_COUNTS` and
    ``dv`` (up to 8 hex digits). A value above its bound is clipped; anything else the script
    cannot have written (an unknown or repeated key, a non-digit, an overlong field) makes the
    whole field ``invalid`` and nothing of it is kept.

    Examples
    --------
    >>> parse_script_field("pe=1;pc=40;ks=3;tc=44;hc=0;hm=0;ia=1;au=0;dv=9f3a")[0]
    'js'
    >>> parse_script_field("pe=1;pe=2")[0], parse_script_field("")[0]
    ('invalid', 'none')
    """
    if not raw:
        return "none", {}, ""
    if len(raw) > SIGNALS_MAX_CHARS or not raw.isascii():
        return "invalid", {}, ""
    counts: dict[str, int] = {}
    device = ""
    seen: set[str] = set()
    for part in raw.split(";"):
        key, sep, value = part.partition("=")
        if not sep or key in seen:
            return "invalid", {}, ""
        seen.add(key)
        if key == "dv":
            if not _HEX8.fullmatch(value):
                return "invalid", {}, ""
            device = value
        elif key in _COUNTS and value.isdigit() and len(value) <= 12:
            column, bound = _COUNTS[key]
            counts[column] = min(int(value), bound)
        else:
            return "invalid", {}, ""
    if set(_COUNTS) - seen:
        return "invalid", {}, ""
    return "js", counts, device


def _normalised(text: str) -> str:
    return " ".join(text.lower().split())


def _form_answers(form: Any) -> tuple[list[str], list[str]]:
    """The validated form's single-choice answers (radio groups) and free-text answers."""
    choices: list[str] = []
    texts: list[str] = []
    for field in form:
        if field.name in OWN_FIELDS or field.data in (None, ""):
            continue
        if field.type == "RadioField":
            choices.append(str(field.data))
        elif (
            field.type in ("StringField", "TextAreaField")
            and isinstance(field.data, str)
            # Free text is text with letters in it: numbers and amounts are not.
            and _LETTERS.search(field.data)
        ):
            texts.append(field.data)
    return choices, texts


def page_signals(
    raw: str | None,
    *,
    honeypot: str | None,
    answers: Iterable[str],
    form: Any,
    user_agent: str,
    canary: str | None,
    secret: str,
) -> PageSignals:
    """What a submitted page tells, from its fields and the request's User-Agent.

    Parameters
    ----------
    raw : str or None
        The script's field (:data:`SIGNALS_FIELD`) as sent.
    honeypot : str or None
        The invisible field (:data:`HONEYPOT_FIELD`): a person leaves it empty.
    answers : iterable of str
        Every other value the page sent (searched for the canary word).
    form : PageForm
        The validated form: its radio groups (a grid in one column) and free-text answers.
    user_agent : str
        The request's User-Agent (an automation client's name; part of the device hint).
    canary : str or None
        The study's canary word (:func:`page_canary`).
    secret : str
        Keys the device hint, so it cannot be matched across servers.
    """
    state, counts, device = parse_script_field(raw)
    automation = counts.pop("automation", 0)
    if _AUTOMATION_UA.search(user_agent):
        automation |= SERVER_UA
    interacted = counts.pop("interacted", None)
    found_canary = False
    if canary:
        word = canary.replace("-", "")
        found_canary = any(
            word in re.sub(r"[\W_]", "", value.lower()) for value in (*answers, honeypot or "")
        )
    choices, texts = _form_answers(form)
    grid = len(choices) >= MIN_GRID_ITEMS
    joined = "\n".join(_normalised(t) for t in texts if len(t.strip()) >= MIN_SHARED_TEXT_CHARS)
    hint = hmac.new(
        secret.encode(), f"{user_agent[:300]}|{device}".encode(), hashlib.sha256
    ).hexdigest()[:16]
    return PageSignals(
        signals=state,
        **counts,
        interacted=None if interacted is None else bool(interacted),
        automation=automation,
        honeypot=bool(honeypot),
        canary=found_canary,
        device_hint=hint,
        grid_items=len(choices) if grid else None,
        straightlined=(len(set(choices)) == 1) if grid else None,
        text_hash=hashlib.sha256(joined.encode()).hexdigest()[:16] if joined else None,
    )


def page_words(html: str) -> int:
    """Words of text on a rendered page (between its tags): what the reading floor reads."""
    return sum(len(text.split()) for text in _TEXT.findall(html))


# -- one participant ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Authenticity:
    """One participant's authenticity: the score, its reasons and the counts behind them.

    Attributes
    ----------
    score : int
        Sum of :data:`WEIGHTS` of ``reasons``; 0 when nothing was found.
    reasons : tuple of str
        Keys of :data:`WEIGHTS`, in that order.
    pages, signal_pages : int
        Pages answered, and of them the pages whose script sent signals (0: "no signals").
    """

    score: int = 0
    reasons: tuple[str, ...] = ()
    pages: int = 0
    signal_pages: int = 0
    automation: int = 0
    honeypot_pages: int = 0
    canary_pages: int = 0
    fast_pages: int = 0
    reading_pages: int = 0
    paste_pages: int = 0
    pasted_chars: int = 0
    untyped_pages: int = 0
    no_interaction_pages: int = 0
    hidden_count: int = 0
    hidden_ms: int = 0
    invalid_pages: int = 0
    straightlined_pages: int = 0
    duplicate_text_pages: int = 0
    shared_device: int = 0

    @property
    def flagged(self) -> bool:
        """Whether the score reaches :data:`FLAG_SCORE`."""
        return self.score >= FLAG_SCORE

    def cells(self) -> dict[str, Any]:
        """The export's ``auth_*`` columns (:data:`EXPORT_COLUMNS`)."""
        return {
            "auth_score": self.score,
            "auth_flagged": int(self.flagged),
            "auth_reasons": ";".join(self.reasons),
            "auth_pages": self.pages,
            "auth_signal_pages": self.signal_pages,
            "auth_automation": self.automation,
            "auth_honeypot": self.honeypot_pages,
            "auth_canary": self.canary_pages,
            "auth_fast_pages": self.fast_pages,
            "auth_reading_pages": self.reading_pages,
            "auth_paste_pages": self.paste_pages,
            "auth_pasted_chars": self.pasted_chars,
            "auth_untyped_pages": self.untyped_pages,
            "auth_no_interaction_pages": self.no_interaction_pages,
            "auth_hidden_count": self.hidden_count,
            "auth_hidden_ms": self.hidden_ms,
            "auth_invalid_pages": self.invalid_pages,
            "auth_straightlined_pages": self.straightlined_pages,
            "auth_duplicate_text_pages": self.duplicate_text_pages,
            "auth_shared_device": self.shared_device,
        }


NO_PAGES = Authenticity()
EXPORT_COLUMNS: tuple[str, ...] = tuple(NO_PAGES.cells())
# column -> (type, meaning, allowed values): the codebook's entries of the auth_* columns.
CODEBOOK: dict[str, tuple[str, str, str]] = {
    "auth_score": ("int", "authenticity score: sum of the weights of auth_reasons", ">= 0"),
    "auth_flagged": ("int", f"1 if auth_score >= {FLAG_SCORE} (flagged in the console)", "0|1"),
    "auth_reasons": ("str", "authenticity reasons found, ;-separated", "|".join(WEIGHTS)),
    "auth_pages": ("int", "pages answered", ">= 0"),
    "auth_signal_pages": (
        "int",
        "pages whose script sent signals; 0: no signals (no JavaScript), never a reason",
        ">= 0",
    ),
    "auth_automation": (
        "int",
        "automation hints, bits: 1 webdriver, 2 headless browser, 4 no languages, "
        "8 no window, 16 automation globals, 64 automation client's User-Agent",
        ">= 0",
    ),
    "auth_honeypot": ("int", "pages whose invisible field was filled in", ">= 0"),
    "auth_canary": ("int", "pages whose answers carry the study's canary word", ">= 0"),
    "auth_fast_pages": (
        "int",
        "pages answered faster than their words can be read (the study's reading_wpm)",
        ">= 0",
    ),
    "auth_reading_pages": ("int", f"pages with at least {MIN_READING_WORDS} words", ">= 0"),
    "auth_paste_pages": ("int", "pages whose free text was mostly pasted", ">= 0"),
    "auth_pasted_chars": ("int", "characters pasted into text fields (count only)", ">= 0"),
    "auth_untyped_pages": (
        "int",
        "pages whose text fields were filled without keystrokes (nor pasting)",
        ">= 0",
    ),
    "auth_no_interaction_pages": (
        "int",
        "pages submitted with the script running but no pointer or key event",
        ">= 0",
    ),
    "auth_hidden_count": ("int", "times a page was hidden (other tab or window)", ">= 0"),
    "auth_hidden_ms": ("int", "time the pages were hidden, ms", ">= 0"),
    "auth_invalid_pages": (
        "int",
        "pages whose signals field the script cannot have written",
        ">= 0",
    ),
    "auth_straightlined_pages": (
        "int",
        f"pages with at least {MIN_GRID_ITEMS} rating questions all answered alike",
        ">= 0",
    ),
    "auth_duplicate_text_pages": (
        "int",
        "pages whose free text is the same as another participant's in this study",
        ">= 0",
    ),
    "auth_shared_device": (
        "int",
        "other participant IDs of this study seen with the same device hint",
        ">= 0",
    ),
}

# The page-times export's signal columns: every page column but the two hashes (the device
# hint and the free-text hash link participants; they are compared here, never exported).
PAGE_EXPORT_COLUMNS: tuple[str, ...] = (
    "words",
    *(c for c in PAGE_COLUMNS if c not in ("device_hint", "text_hash")),
)
CODEBOOK.update(
    {
        "words": ("int", "words of text on the page (the reading floor's count)", ">= 0"),
        "signals": (
            "str",
            "the page script's signals: js, none (no JavaScript: never a reason) or invalid",
            "js|none|invalid",
        ),
        "paste_count": ("int", "paste events in the page's text fields", ">= 0"),
        "pasted_chars": ("int", "characters pasted into them (count only)", ">= 0"),
        "keystrokes": ("int", "key presses in them (count only)", ">= 0"),
        "text_chars": ("int", "characters in them at the submit", ">= 0"),
        "hidden_count": ("int", "times the page was hidden", ">= 0"),
        "hidden_ms": ("int", "time the page was hidden, ms", ">= 0"),
        "interacted": ("int", "1 if a real pointer or key event came before the submit", "0|1"),
        "automation": ("int", "automation hint bits (as auth_automation)", ">= 0"),
        "honeypot": ("int", "1 if the invisible field was filled in", "0|1"),
        "canary": ("int", "1 if an answer carries the study's canary word", "0|1"),
        "grid_items": (
            "int",
            f"single-choice questions (pages with {MIN_GRID_ITEMS} or more)",
            ">= 0",
        ),
        "straightlined": ("int", "1 if they were all answered alike", "0|1"),
    }
)


def page_cells(visit: PageVisit) -> dict[str, Any]:
    """A page's :data:`PAGE_EXPORT_COLUMNS` (booleans as 0/1)."""
    cells = {}
    for name in PAGE_EXPORT_COLUMNS:
        value = getattr(visit, name)
        cells[name] = int(value) if isinstance(value, bool) else value
    return cells


_VISIT_COLUMNS = (
    PageVisit.participant_id,
    PageVisit.shown_at,
    PageVisit.submitted_at,
    PageVisit.words,
    *(getattr(PageVisit, name) for name in PAGE_COLUMNS),
)


def assess(study: Study, participant_ids: Iterable[int] | None = None) -> dict[int, Authenticity]:
    """One :class:`Authenticity` per participant of ``study`` who answered a page.

    The checks across participants (the same free text, the same device hint) compare with
    every participant of the study, test participants included, whoever is assessed.

    Parameters
    ----------
    study : Study
    participant_ids : iterable of int, optional
        Assess only these (by database id); default: every participant of the study.

    Returns
    -------
    dict
        Participant database id -> :class:`Authenticity`; participants without an answered
        page are left out (:data:`NO_PAGES` describes them).
    """
    wpm = float(study_definition(study).authenticity.reading_wpm)
    rows = db.session.execute(
        select(*_VISIT_COLUMNS)
        .join(Participant, Participant.id == PageVisit.participant_id)
        .where(Participant.study_id == study.id, PageVisit.submitted_at.is_not(None))
        .order_by(PageVisit.participant_id, PageVisit.page_seq)
    ).all()
    texts: dict[str, set[int]] = defaultdict(set)
    devices: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        if r.text_hash:
            texts[r.text_hash].add(r.participant_id)
        if r.device_hint:
            devices[r.device_hint].add(r.participant_id)
    wanted = None if participant_ids is None else set(participant_ids)
    pages: dict[int, list[Any]] = defaultdict(list)
    for r in rows:
        if wanted is None or r.participant_id in wanted:
            pages[r.participant_id].append(r)
    return {pid: _assess_one(visits, texts, devices, wpm) for pid, visits in pages.items()}


def _assess_one(
    visits: list[Any],
    texts: Mapping[str, set[int]],
    devices: Mapping[str, set[int]],
    wpm: float,
) -> Authenticity:
    pid = visits[0].participant_id
    counts: dict[str, int] = defaultdict(int)
    shared: set[int] = set()
    for v in visits:
        counts["pages"] += 1
        counts["automation"] |= v.automation or 0
        counts["honeypot_pages"] += bool(v.honeypot)
        counts["canary_pages"] += bool(v.canary)
        counts["straightlined_pages"] += bool(v.straightlined)
        counts["invalid_pages"] += v.signals == "invalid"
        if v.words is not None and v.words >= MIN_READING_WORDS:
            counts["reading_pages"] += 1
            seconds = (v.submitted_at - v.shown_at).total_seconds()
            counts["fast_pages"] += seconds < v.words * 60.0 / wpm
        if v.text_hash and len(texts[v.text_hash]) > 1:
            counts["duplicate_text_pages"] += 1
        if v.device_hint:
            shared |= devices[v.device_hint]
        if v.signals != "js":
            continue
        counts["signal_pages"] += 1
        counts["hidden_count"] += v.hidden_count
        counts["hidden_ms"] += v.hidden_ms
        counts["pasted_chars"] += v.pasted_chars
        counts["no_interaction_pages"] += not v.interacted
        pasted, chars = v.pasted_chars, v.text_chars
        counts["paste_pages"] += pasted >= MIN_SHARED_TEXT_CHARS and 2 * pasted >= chars
        rest = chars - pasted
        counts["untyped_pages"] += rest >= 5 and 2 * v.keystrokes < rest
        counts["hidden_pages"] += v.hidden_count > 0 and chars > 0
    found = {
        "automation": counts["automation"] > 0,
        "honeypot": counts["honeypot_pages"] > 0,
        "canary": counts["canary_pages"] > 0,
        "fast": counts["reading_pages"] > 0 and 2 * counts["fast_pages"] >= counts["reading_pages"],
        "paste": counts["paste_pages"] > 0,
        "untyped": counts["untyped_pages"] > 0,
        "no_interaction": counts["no_interaction_pages"] > 0,
        "tampered": counts["invalid_pages"] > 0,
        "duplicate_text": counts["duplicate_text_pages"] > 0,
        "straightlining": counts["straightlined_pages"] > 0,
        "shared_device": len(shared - {pid}) > 0,
        "hidden": counts["hidden_pages"] > 0,
    }
    reasons = tuple(reason for reason in WEIGHTS if found[reason])
    counts.pop("hidden_pages", None)
    return Authenticity(
        score=sum(WEIGHTS[r] for r in reasons),
        reasons=reasons,
        shared_device=len(shared - {pid}),
        **counts,
    )


def flag_counts(assessed: Iterable[Authenticity]) -> dict[str, Any]:
    """How many sessions are flagged, and how many of them show each reason.

    Returns
    -------
    dict
        ``flagged`` (count), ``reasons`` (reason -> flagged sessions with it, in
        :data:`WEIGHTS` order, only those found) and ``no_signals`` (sessions whose pages sent
        no signals, flagged or not).
    """
    flagged = 0
    no_signals = 0
    by_reason: dict[str, int] = dict.fromkeys(WEIGHTS, 0)
    for a in assessed:
        no_signals += a.pages > 0 and a.signal_pages == 0
        if a.flagged:
            flagged += 1
            for reason in a.reasons:
                by_reason[reason] += 1
    return {
        "flagged": flagged,
        "reasons": {r: n for r, n in by_reason.items() if n},
        "no_signals": no_signals,
    }
