"""Participants in their own language: the catalogues are complete, every participant page of a
German study is German, amounts follow the study's locale, and the console and exports say which
language a study ran in (docs/languages.md)."""

from __future__ import annotations

import random
import re
import shutil
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

from tests.webapp.conftest import ROOT
from tests.webapp.researcher.conftest import login
from webapp.definition_cache import study_definition
from webapp.i18n import TRANSLATIONS, available_languages, parse_amount
from webapp.validation import StudyDefinitionError

KEYWORDS = {"gettext": None, "ngettext": (1, 2), "_": None, "lazy_gettext": None, "N_": None}
KEYWORDS["default_text"] = None
LANGUAGES = [lang for lang in available_languages() if lang != "en"]
GERMAN_DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo-de.yaml"
OTHER_DEMOS = ("sentiment-demo.yaml", "rating-demo.yaml", "preference-demo.yaml")


def _catalogue(language: str):
    path = TRANSLATIONS / language / "LC_MESSAGES" / "messages.po"
    with path.open("rb") as fh:
        return read_po(fh, locale=language)


def _ids(message) -> tuple[str, ...]:
    return tuple(message.id) if isinstance(message.id, list | tuple) else (message.id,)


# -- the catalogues --------------------------------------------------------------------------
def test_german_and_spanish_ship():
    assert {"de", "es"} <= set(LANGUAGES)


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_message_has_a_finished_translation(language):
    catalogue = _catalogue(language)
    missing = []
    for message in catalogue:
        if not message.id:
            continue
        strings = message.string if isinstance(message.string, list | tuple) else [message.string]
        if message.fuzzy or not all(s and s.strip() for s in strings):
            missing.append(_ids(message)[0])
    assert not missing, f"{language}: untranslated or fuzzy: {missing}"
    # Placeholders (%(name)s) match their message's: babel's own checkers.
    problems = [(m.id, errs) for m, errs in catalogue.check()]
    assert not problems, problems


@pytest.mark.parametrize("language", LANGUAGES)
def test_researcher_placeholders_and_markup_survive_translation(language):
    for message in _catalogue(language):
        if not message.id:
            continue
        strings = message.string if isinstance(message.string, list | tuple) else [message.string]
        for source, text in zip(_ids(message) * len(strings), strings, strict=False):
            for pattern in (r"\{\w+\}", r"</?strong>"):
                assert sorted(re.findall(pattern, source)) == sorted(re.findall(pattern, text)), (
                    language,
                    source,
                )


def test_the_catalogues_hold_exactly_the_messages_of_the_code():
    """`make messages` was run: no message of the code is missing from the catalogues, and no
    catalogue keeps one the code no longer has."""
    with (ROOT / "babel.cfg").open() as fh:
        method_map, options_map = parse_mapping_cfg(fh)
    in_code = {
        (msg if isinstance(msg, str) else msg[0])
        for _, _, msg, _, _ in extract_from_dir(
            str(ROOT), method_map, options_map, keywords=KEYWORDS
        )
    }
    with (TRANSLATIONS / "messages.pot").open("rb") as fh:
        template = {_ids(m)[0] for m in read_po(fh) if m.id}
    assert in_code == template, (sorted(in_code - template), sorted(template - in_code))
    for language in LANGUAGES:
        assert {_ids(m)[0] for m in _catalogue(language) if m.id} == template, language


# -- the study's language ----------------------------------------------------------------------
def _load(app, path: Path) -> dict[str, Any]:
    from webapp.services.studies import load_study

    with app.app_context():
        return study_definition(load_study(path).study)


def _with_language(tmp_path: Path, name: str, language: str) -> Path:
    """A copy of the demo study ``name`` (and its files) that names ``language``."""
    folder = tmp_path / "bundle"
    shutil.copytree(ROOT / "stimuli" / "studies", folder, dirs_exist_ok=True)
    path = folder / name
    text = path.read_text()
    path.write_text(
        re.sub(r"^slug: .*$", r"\g<0>\nlanguage: " + language, text, count=1, flags=re.M)
    )
    return path


def test_a_study_names_a_language_with_a_catalogue(tmp_path):
    from webapp.studydef import load_study_file

    assert load_study_file(GERMAN_DEMO).language == "de"
    # Not naming one: English.
    assert load_study_file(ROOT / "stimuli/studies/product-choice-demo.yaml").language == "en"
    with pytest.raises(StudyDefinitionError, match=r"language: no participant texts in 'fr'"):
        load_study_file(_with_language(tmp_path, "product-choice-demo.yaml", "fr"))


def test_defaults_a_study_does_not_override_are_in_its_language(tmp_path):
    from webapp.studydef import load_study_file

    spanish = load_study_file(_with_language(tmp_path, "rating-demo.yaml", "es"))
    block = next(b for b in spanish.tasks if b.type == "summary_rating")
    assert [d["name"] for d in block.params["dimensions"]][:2] == ["Postura", "Objeto"]
    assert block.params["scale"]["labels"] == ["Nada", "Un poco", "En gran parte", "Por completo"]
    german = load_study_file(GERMAN_DEMO)
    choice = next(b for b in german.tasks if b.type == "product_choice")
    assert choice.params["labels"]["summary"] == "Zusammenfassung der Kundenbewertungen"
    question = choice.params["wtp"]["question"]
    assert "{price}" in question and question.startswith("Das andere Produkt")


# -- amounts in the study's locale -------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "language", "value"),
    [
        ("12,50", "de", 12.5),
        ("12,5 $", "de", 12.5),
        ("1000,50", "de", 1000.5),
        ("12.50", "de", 12.5),  # a point before two digits can only be a decimal point
        ("0", "es", 0.0),
        ("12,50", "es", 12.5),
        ("$12.50", "en", 12.5),
        ("12,50", "en", 12.5),
    ],
)
def test_amounts_are_read_in_the_study_locale(text, language, value):
    assert parse_amount(text, language) == value


@pytest.mark.parametrize(
    ("text", "language"),
    [("1.000", "de"), ("1.000,50", "de"), ("1,000", "en"), ("-3", "de"), ("zwölf", "de")],
)
def test_ambiguous_or_wrong_amounts_are_refused(text, language):
    with pytest.raises(ValueError):
        parse_amount(text, language)


# -- every participant page in German ----------------------------------------------------------
class _Text(HTMLParser):
    """What a participant reads: text outside scripts and styles, and the labels of controls."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"script", "style"}:
            self._skip += 1
        for name, value in attrs:
            if name in {"aria-label", "title", "placeholder", "alt"} and value:
                self.parts.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag in {"script", "style"}:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def visible_text(html: str) -> str:
    """The text of a page as one line (tags removed, whitespace collapsed)."""
    parser = _Text()
    parser.feed(html)
    return re.sub(r"\s+", " ", unescape(" ".join(parser.parts)))


def english_fragments(language: str) -> dict[str, str]:
    """Fragment -> its English message: the fixed parts of every English catalogue message
    (between placeholders and tags) that the translation does not itself contain."""
    out = {}
    for message in _catalogue(language):
        if not message.id:
            continue
        translated = " ".join(
            message.string if isinstance(message.string, list | tuple) else [message.string]
        )
        for english in _ids(message):
            for part in re.split(r"%\(\w+\)[sd]|\{\w+\}|</?\w+>", english):
                part = re.sub(r"\s+", " ", part).strip(" .,:;?!()")
                if len(part) >= 4 and part not in translated:
                    out[part] = english
    return out


def english_found(text: str, fragments: dict[str, str]) -> list[str]:
    """The English messages whose fragments occur in ``text`` as whole words."""
    return sorted(
        {
            english
            for part, english in fragments.items()
            if re.search(rf"(?<!\w){re.escape(part)}(?!\w)", text)
        }
    )


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*map(_strings, value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*map(_strings, value)) if value else set()
    return set()


def _bot(app, definition, external_id: str, **behaviour: Any):
    from webapp.bots import Bot, BotBehaviour, FlaskTransport

    return Bot(
        FlaskTransport(app),
        definition,
        BotBehaviour(platform="link", **behaviour),
        rng=random.Random(external_id),
        external_id=external_id,
    )


def _pages_of(app, definition: dict[str, Any]) -> dict[str, str]:
    """Walk a bot through the study: page kind -> the text of its first page of that kind."""
    bot = _bot(app, definition, f"scan-{definition.slug[:20]}")
    pages = {}
    page = bot.open()
    for _ in range(200):
        pages.setdefault(page.kind, page.text)
        if page.kind in {"completed", "screened_out", "study_full", "external"}:
            break
        page = bot.step()
    pages.pop("external", None)
    return pages


def _german_in_dollars(tmp_path: Path) -> Path:
    """A copy of the German demo paid in US dollars and open to MTurk (slug produktwahl-usd)."""
    folder = tmp_path / "usd"
    shutil.copytree(ROOT / "stimuli" / "studies", folder, dirs_exist_ok=True)
    path = folder / GERMAN_DEMO.name
    text = path.read_text().replace("slug: produktwahl-demo", "slug: produktwahl-usd")
    text = text.replace("currency: EUR", "currency: USD")
    path.write_text(re.sub(r"platforms: \[.*\]", "platforms: [prolific, mturk, link]", text))
    return path


def test_no_english_platform_text_on_any_page_of_a_german_study(app, client, tmp_path):
    """Every participant page type, the refusals and the end and error pages of German
    studies show none of the English catalogue's texts (the researcher's own texts are left
    out of the scan only where they are English demo texts)."""
    fragments = english_fragments("de")
    texts: dict[str, str] = {}
    german = _load(app, GERMAN_DEMO)
    texts.update(_pages_of(app, german))
    for name in OTHER_DEMOS:  # English demo texts, German platform
        definition = _load(app, _with_language(tmp_path / name, name, "de"))
        for kind, html in _pages_of(app, definition).items():
            texts.setdefault(f"{kind} ({definition.slug})", html)
    # Refusals on the German demo: an empty choice and amounts that cannot be read.
    bot = _bot(app, german, "scan-refusals")
    page = bot.open()
    while page.kind != "choice":
        page = bot.step()
    bot.transport.request("POST", page.url, page.forms[0].hidden())
    texts["choice (error)"] = bot.reload().text
    page = bot.step()
    for typed in ("zwölf", "1.000", "-5", "99999"):
        bot.transport.request("POST", page.url, {**bot.answer(), "premium": typed})
        texts[f"wtp (error {typed})"] = bot.reload().text
        assert bot.page.invalid, typed
    screened = _bot(app, german, "scan-screened", fail_quiz=True)
    assert screened.run().outcome == "screened_out"
    texts["screened_out"] = screened.page.text
    entry = _bot(app, german, "scan-declines")
    consent = entry.open()
    form = consent.forms[0]
    texts["declined"] = entry.transport.request(
        "POST", form.action, {**form.hidden(), "decline": "y"}
    )[2]
    # MTurk pays in dollars: its preview is of a copy of the German demo that pays in them.
    dollars = _german_in_dollars(tmp_path)
    _load(app, dollars)
    preview = client.get("/s/produktwahl-usd?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    texts["mturk preview"] = preview.get_data(as_text=True)
    texts["error (session)"] = client.get("/s/produktwahl-demo/p/no-such-token").get_data(True)
    texts["error (link)"] = client.get("/s/produktwahl-demo?participant=").get_data(True)

    expected = {"consent", "instructions", "quiz", "choice", "wtp", "attention_check"}
    expected |= {"demographics", "debrief", "screened_out", "declined", "mturk preview"}
    assert expected <= set(texts), expected - set(texts)
    kinds = {k.split(" (")[0] for k in texts}
    assert {"sentiment_qualification", "sentiment", "summary_rating"} <= kinds, kinds
    assert "pairwise_preference" in kinds, kinds
    # The English demos' own texts (statements, summaries, questions) are not the platform's.
    from webapp.studydef import load_study_file

    researcher = set()
    for name in OTHER_DEMOS:
        researcher |= _strings(load_study_file(ROOT / "stimuli" / "studies" / name).to_json())
    messages = {english for english in fragments.values()}
    researcher = sorted((s for s in researcher if s not in messages), key=len, reverse=True)
    found = {}
    for name, html in texts.items():
        assert '<html lang="de">' in html, name
        text = visible_text(html)
        if "(" in name and "error" not in name:
            for own in researcher:
                text = text.replace(re.sub(r"\s+", " ", own).strip(), " ")
        english = english_found(text, fragments)
        if english:
            found[name] = english
    assert not found, found


def test_a_german_participant_types_a_decimal_comma_and_the_export_says_de(app):
    from webapp.extensions import db
    from webapp.models import ChoiceResponse, Study
    from webapp.services.export import build_table

    german = _load(app, GERMAN_DEMO)
    bot = _bot(app, german, "komma-1")
    page = bot.open()
    while page.kind != "wtp":
        page = bot.step()
    # The German demo pays in euros: amounts, the field's label and its mark say so.
    text = visible_text(page.text)
    assert "Geben Sie 0 oder mehr ein, höchstens 500,00 €." in text and "Aufpreis in Euro" in text
    assert "$" not in text and "Dollar" not in text
    bot.transport.request("POST", page.url, {**bot.answer(), "premium": "1.000"})
    assert "ohne Tausenderpunkte" in visible_text(bot.reload().text)
    page = bot.reload()
    status, _, _ = bot.transport.request("POST", page.url, {**bot.answer(), "premium": "12,50"})
    assert status in {302, 303} and bot.reload().kind == "choice"
    with app.app_context():
        study = db.session.scalar(db.select(Study).where(Study.slug == "produktwahl-demo"))
        choice = db.session.scalar(db.select(ChoiceResponse))
        assert choice.wtp_premium_usd == 12.5
        long_rows, _ = build_table(study, "long", include_test=True)
        assert {(r["currency"], r["wtp_premium"]) for r in long_rows} == {("EUR", 12.5)}
        rows, columns = build_table(study, "wide", include_test=True)
        assert "study_language" in columns and rows[0]["study_language"] == "de"
        codebook, _ = build_table(study, "codebook")
        assert any(r["column"] == "study_language" for r in codebook)
    english = _load(app, ROOT / "stimuli" / "studies" / "product-choice-demo.yaml")
    with app.app_context():
        study = db.session.scalar(db.select(Study).where(Study.slug == english.slug))
        assert build_table(study, "wide")[1][1] == "study_language"


def test_the_console_stays_english_for_a_german_study(app):
    from webapp.services.researchers import set_researcher

    _load(app, GERMAN_DEMO)
    with app.app_context():
        set_researcher("ana", "correct horse battery", is_admin=True)
    client = app.test_client()
    assert login(client, "ana").status_code == 302
    html = client.get("/researcher/studies/produktwahl-demo").get_data(as_text=True)
    assert '<html lang="en">' in html
    assert "Weiter" not in html and "Seite " not in html


def test_the_pages_no_walk_reaches_are_german_too(app):
    """The waiting page, the full study, MTurk's completion form and the returning participant's
    code, rendered for a German study as the views render them."""
    from flask import render_template

    from webapp.definition import TaskBlock
    from webapp.i18n import use_language
    from webapp.services.flow import Finish
    from webapp.tasks.base import waiting_context

    _load(app, GERMAN_DEMO)
    fragments = english_fragments("de")
    block = TaskBlock.of(
        "label",
        "sentiment_annotation",
        {"reservation_minutes": 30.0, "first_label_minutes": 5.0},
    )
    mturk = Finish("mturk", "DE7F3D2A", "https://www.mturk.com/mturk/externalSubmit", {"a": "1"})
    participant = {"end_reason": "quiz_failed", "platform": {"value": "mturk"}}
    pages = {
        "waiting": ("participant/waiting.html", {**waiting_context(block), "action": "/x"}),
        "study_full": (
            "participant/study_full.html",
            {"platform": "prolific", "code": "FULL1", "url": "https://x"},
        ),
        "completed (mturk)": ("participant/completed.html", {"end": mturk}),
        "completed (returning)": (
            "participant/completed.html",
            {"end": Finish("code", "DE7F3D2A"), "returning": True},
        ),
        "screened_out (returning)": (
            "participant/screened_out.html",
            {"end": Finish("code", "DESCRN01"), "returning": True, "participant": participant},
        ),
    }
    for name, (template, context) in pages.items():
        with app.test_request_context("/s/produktwahl-demo"):
            use_language("de")
            html = render_template(template, study=None, **context)
        assert '<html lang="de">' in html, name
        assert not english_found(visible_text(html), fragments), name


def test_german_number_questions_read_grouped_thousands_and_say_their_bounds_in_german(app):
    from webapp.extensions import db
    from webapp.models import TaskResponse

    german = _load(app, GERMAN_DEMO)
    bot = _bot(app, german, "zahlen-1")
    page = bot.open()
    while page.kind != "demographics":
        page = bot.step()
    refusals = {
        "1.000": "Bitte geben Sie eine ganze Zahl von 18 bis 100 ein.",  # read as 1000
        "25,5": "Bitte geben Sie eine ganze Zahl ohne Komma ein, zum Beispiel 25.",
        "fünf": "Bitte geben Sie die Zahl mit den Ziffern 0 bis 9 ein.",
    }
    for typed, message in refusals.items():
        bot.transport.request("POST", page.url, {**bot.answer(), "q_age": typed})
        shown = visible_text(bot.reload().text)
        assert message in shown, (typed, shown)
    bot.transport.request("POST", page.url, {**bot.answer(), "q_age": "41"})
    assert bot.reload().kind == "debrief"
    with app.app_context():
        row = db.session.scalar(
            db.select(TaskResponse).where(TaskResponse.task_type == "demographics")
        )
        assert row.payload["answers"]["age"] == 41
