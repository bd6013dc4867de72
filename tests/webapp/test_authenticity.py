"""Authenticity signals: what a page's script sends is read with care and stored per page; the
honeypot and the canary; the server-side checks; one score per participant with its reasons."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from sqlalchemy import select

from tests.webapp.conftest import DEMO, load_canary_demo
from webapp.definition import AuthenticitySettings
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import PageVisit, Participant, Platform, Study
from webapp.services import authenticity
from webapp.services.authenticity import WEIGHTS, assess, parse_script_field

SCRIPT = "pe=0;pc=0;ks=14;tc=12;hc=0;hm=0;ia=1;au=0;dv=9f3a01bc"


# -- the script's field ------------------------------------------------------------------------
def test_the_scripts_field_is_read_into_counts_and_a_device_hash():
    state, counts, device = parse_script_field(SCRIPT)
    assert state == "js" and device == "9f3a01bc"
    assert counts == {
        "paste_count": 0,
        "pasted_chars": 0,
        "keystrokes": 14,
        "text_chars": 12,
        "hidden_count": 0,
        "hidden_ms": 0,
        "interacted": 1,
        "automation": 0,
    }


def test_values_above_their_bound_are_clipped():
    state, counts, _ = parse_script_field(SCRIPT.replace("hc=0", "hc=999999999999"))
    assert state == "js" and counts["hidden_count"] == 10_000
    assert parse_script_field(SCRIPT.replace("au=0", "au=255"))[1]["automation"] == 0x3F


@pytest.mark.parametrize(
    "raw",
    [
        SCRIPT + ";pe=3",  # a key twice
        SCRIPT + ";zz=1",  # a key the script does not send
        SCRIPT.replace("ks=14", "ks=-1"),
        SCRIPT.replace("ks=14", "ks=1e3"),
        SCRIPT.replace("ks=14", "ks=²"),  # isdigit() but not ASCII
        SCRIPT.replace("ks=14", "ks=1234567890123"),  # more digits than a count has
        SCRIPT.replace("dv=9f3a01bc", "dv=<script>"),
        SCRIPT.replace(";ia=1", ""),  # a key missing
        "pe=0" + ";x" * 200,  # longer than the script writes
        "garbage",
    ],
)
def test_a_field_the_script_cannot_have_written_is_invalid_and_nothing_of_it_is_kept(raw):
    assert parse_script_field(raw) == ("invalid", {}, "")


def test_no_field_means_no_signals():
    assert parse_script_field(None) == ("none", {}, "")
    assert parse_script_field("") == ("none", {}, "")


def test_the_canary_word_is_fixed_per_study():
    assert authenticity.canary_word("a") == authenticity.canary_word("a")
    assert authenticity.canary_word("a") != authenticity.canary_word("b")


def test_page_words_count_the_text_between_tags():
    html = '<main><h1>Two words</h1><input name="x" value="not counted"><p>three more words</p>'
    assert authenticity.page_words(html + "</main>") == 5


# -- through the participant pages -------------------------------------------------------------
def _visits(query):
    return query(lambda: db.session.scalars(select(PageVisit).order_by(PageVisit.page_seq)).all())


def test_signals_travel_with_the_form_and_are_stored_per_page(make_bot, query):
    bot = make_bot()
    page = bot.open()
    page = bot.step()  # consent -> instructions
    form = page.forms[0]
    assert form.hidden()["signals"] == ""  # the script fills it in; a bot sends it empty
    assert 'data-signals="1"' in page.text
    data = {**bot.answer(), "signals": SCRIPT}
    bot.post(data)  # instructions, with the script's field
    bot.step()  # the quiz, as a client without JavaScript
    first, second = _visits(query)[:2]
    assert first.signals == "js" and (first.keystrokes, first.text_chars) == (14, 12)
    assert first.interacted is True and first.automation == 0
    assert first.honeypot is False and first.canary is False
    assert first.words > 20  # the instructions' text
    assert second.signals == "none" and second.keystrokes is None and second.interacted is None
    # The device hint is keyed and includes the script's hash: it differs with and without.
    assert first.device_hint and second.device_hint and first.device_hint != second.device_hint


@pytest.mark.parametrize(
    "hostile",
    ["x" * 100_000, "pe=" + "9" * 5000, "é€" * 50, "pe=1;" * 40, "=;=;="],
)
def test_a_hostile_signals_field_is_refused_never_trusted_never_a_500(make_bot, query, hostile):
    bot = make_bot()
    bot.open()
    bot.step()
    page = bot.post({**bot.answer(), "signals": hostile})
    assert page.status == 200 and page.kind == "quiz"  # the answer itself was taken
    visit = _visits(query)[0]
    assert visit.signals == "invalid" and visit.keystrokes is None


PASTED = "pe=1;pc=400;ks=0;tc=400;hc=1;hm=5000;ia=0;au=1;dv=1"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_app(request):
    """The app on SQLite and on PostgreSQL."""
    return request.getfixturevalue("app" if request.param == "sqlite" else "pg_app")


def test_signals_are_kept_only_for_a_page_rendered_to_the_participant_and_not_yet_answered(
    any_app,
):
    """Signals are stamped on the visit the page's rendering recorded, in the answer's locked
    transaction: a crafted POST for a page never rendered, or a replay of one answered, stores
    none of its signals."""
    from tests.webapp.conftest import in_app, load_demo
    from webapp.bots import Bot, BotBehaviour, FlaskTransport
    from webapp.services import flow

    app = any_app
    definition = load_demo(app)
    bot, other = (
        Bot(FlaskTransport(app), definition, BotBehaviour(), external_id=f"RENDER{i}")
        for i in range(2)
    )

    def query(fn):
        return in_app(app, fn)

    bot.open()
    bot.step()  # consent -> the instructions, rendered: the first page (0)
    answered = {**bot.answer(), "signals": SCRIPT}
    status, quiz_url, _ = bot.transport.request("POST", bot.page.url, answered)
    assert status == 302 and quiz_url  # answered; the quiz is not requested: never rendered
    other.open()
    other.step()
    quiz = other.step()  # the same quiz, rendered to another participant, for its fields
    assert quiz.kind == "quiz"

    def token() -> str:
        p = db.session.scalars(select(Participant).order_by(Participant.id)).first()
        return flow.page_token(p, app.config["SECRET_KEY"])

    crafted = {**other.answer(), "page": query(token), "signals": PASTED}
    assert bot.transport.request("POST", quiz_url, crafted)[0] == 302
    replay = bot.transport.request("POST", bot.page.url, {**answered, "signals": PASTED})
    assert replay[0] == 302  # "already answered": shown where they are now

    def mine() -> list[PageVisit]:
        first = select(Participant.id).order_by(Participant.id).limit(1).scalar_subquery()
        query = select(PageVisit).where(PageVisit.participant_id == first)
        return db.session.scalars(query.order_by(PageVisit.page_seq)).all()

    visits = query(mine)
    # The crafted answer itself was taken (the token was valid): only its signals are not.
    first = select(Participant.page_seq).order_by(Participant.id).limit(1)
    assert query(lambda: db.session.scalars(first).one()) == 2
    (instructions,) = visits  # no visit of the quiz: it was never rendered
    assert instructions.page_seq == 0 and instructions.submitted_at is not None
    assert (instructions.keystrokes, instructions.pasted_chars, instructions.automation) == (
        14,
        0,
        0,
    )


def test_an_oversized_signals_field_with_a_real_answer_is_refused_by_the_size_limit(make_bot):
    bot = make_bot()
    bot.open()
    bot.step()
    status, _, _ = bot.transport.request(
        "POST", bot.page.forms[0].action or bot.page.url, {**bot.answer(), "signals": "x" * 10**6}
    )
    assert status == 413


def test_honeypot_and_canary_are_hidden_from_people_and_recorded(app, tmp_path, query):
    from webapp.bots import Bot, BotBehaviour, FlaskTransport

    definition = load_canary_demo(app, tmp_path)
    assert definition.authenticity == AuthenticitySettings(canary=True, reading_wpm=900.0)
    word = authenticity.canary_word("canary-demo")
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(), external_id="CANARY1")
    bot.open()
    page = bot.step()
    box = page.text[page.text.index('<div class="fl-ref"') :]
    box = box[: box.index("</div>")]
    assert 'aria-hidden="true"' in box and 'tabindex="-1"' in box and "required" not in box
    assert word in box  # the canary sentence, in the hidden box only
    assert page.text.count(word) == 1
    bot.post({**bot.answer(), "fl_code": f"The word is {word.upper()}"})
    visit = _visits(query)[0]
    assert visit.honeypot is True and visit.canary is True


def test_a_study_without_a_canary_shows_none(make_bot):
    bot = make_bot()
    bot.open()
    page = bot.step()
    assert 'id="fl-code"' in page.text and "automated assistant" not in page.text


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"canary": "yes"}, "canary: expected true or false"),
        ({"reading_wpm": 10}, "reading_wpm: must be at least 100"),
        ({"wpm": 10}, "wpm"),
    ],
)
def test_the_authenticity_block_is_validated_with_located_reasons(raw, message):
    from webapp.studydef import load_study_file
    from webapp.validation import StudyDefinitionError

    text = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    text["authenticity"] = raw
    path = DEMO.parent / "authenticity-invalid.yaml"
    try:
        path.write_text(yaml.safe_dump(text, allow_unicode=True), encoding="utf-8")
        with pytest.raises(StudyDefinitionError, match=message):
            load_study_file(path)
    finally:
        path.unlink()


@pytest.mark.parametrize("language", ["en", "de", "es"])
def test_the_consent_page_says_what_is_recorded(client, app, language, tmp_path):
    from webapp.services.studies import load_study

    folder = tmp_path / "bundle"
    shutil.copytree(DEMO.parent, folder)
    raw = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    raw.update(slug=f"consent-{language}", language=language)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with app.app_context():
        load_study(path)
    html = client.get(f"/s/consent-{language}?participant=P1").get_data(as_text=True)
    said = {"en": "IP address", "de": "IP-Adresse", "es": "dirección IP"}[language]
    assert 'id="recorded"' in html and said in html


# -- the score ---------------------------------------------------------------------------------
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def add_participant(study_id: int, code: str, pages: list[dict]) -> int:
    """A participant of the study with pages built by hand (each dict: PageVisit columns and
    its `seconds`); returns the database id."""
    p = Participant(study_id=study_id, code=code, platform=Platform.link, seed=1, sequence="A")
    db.session.add(p)
    db.session.flush()
    for seq, page in enumerate(pages):
        seconds = page.pop("seconds", 60)
        db.session.add(
            PageVisit(
                participant_id=p.id,
                page_seq=seq,
                page=f"b/{seq}",
                shown_at=T0,
                submitted_at=T0 + timedelta(seconds=seconds),
                **page,
            )
        )
    db.session.commit()
    return p.id


JS = {"signals": "js", "paste_count": 0, "pasted_chars": 0, "keystrokes": 0, "text_chars": 0}
JS |= {"hidden_count": 0, "hidden_ms": 0, "interacted": True, "automation": 0}


def test_each_reason_is_found_and_weighed(app, study):
    """One participant per reason, on pages built by hand (times fixed, nothing by chance)."""
    cases = {
        "careful": [{**JS, "words": 240, "seconds": 30, "keystrokes": 60, "text_chars": 50}],
        "automation": [{**JS, "automation": authenticity.WEBDRIVER}],
        "honeypot": [{**JS, "honeypot": True}],
        "canary": [{**JS, "canary": True}],
        # 240 words in 2 s on one page of two: half of the reading pages too fast.
        "fast": [{**JS, "words": 240, "seconds": 2}, {**JS, "words": 240, "seconds": 40}],
        "paste": [
            {**JS, "paste_count": 1, "pasted_chars": 300, "text_chars": 310, "keystrokes": 12}
        ],
        "untyped": [{**JS, "text_chars": 80, "keystrokes": 3}],
        "no_interaction": [{**JS, "interacted": False}],
        "tampered": [{"signals": "invalid"}],
        "straightlining": [{**JS, "grid_items": 5, "straightlined": True}],
        "hidden": [
            {**JS, "hidden_count": 2, "hidden_ms": 9000, "keystrokes": 60, "text_chars": 50}
        ],
        "no_signals": [{"signals": "none", "words": 240, "seconds": 30}],
    }
    with app.app_context():
        s = db.session.scalars(select(Study)).one()
        ids = {
            name: add_participant(s.id, f"p_{i:016x}", pages)
            for i, (name, pages) in enumerate(cases.items())
        }
        result = assess(s)
    for name, pid in ids.items():
        a = result[pid]
        if name in ("careful", "no_signals"):
            assert a.score == 0 and a.reasons == (), name
        else:
            assert a.reasons == (name,), name
            assert a.score == WEIGHTS[name]
    assert result[ids["no_signals"]].signal_pages == 0  # "no signals": marked, never scored
    assert result[ids["careful"]].signal_pages == 1
    assert result[ids["fast"]].cells()["auth_fast_pages"] == 1
    assert result[ids["paste"]].cells()["auth_pasted_chars"] == 300


def test_the_same_text_and_the_same_device_across_ids(app, study):
    with app.app_context():
        s = db.session.scalars(select(Study)).one()
        a = add_participant(
            s.id, "p_a", [{**JS, "text_hash": "t1", "device_hint": "d1", "keystrokes": 9}]
        )
        b = add_participant(s.id, "p_b", [{**JS, "text_hash": "t1", "device_hint": "d1"}])
        c = add_participant(s.id, "p_c", [{**JS, "text_hash": "t2", "device_hint": "d2"}])
        result = assess(s)
        only_c = assess(s, [c])
    assert result[a].reasons == ("duplicate_text", "shared_device")
    assert result[a].score == WEIGHTS["duplicate_text"] + WEIGHTS["shared_device"]
    assert result[b].shared_device == 1 and result[c].reasons == ()
    assert set(only_c) == {c}
    counts = authenticity.flag_counts(result.values())
    assert counts == {
        "flagged": 2,
        "reasons": {"duplicate_text": 2, "shared_device": 2},
        "no_signals": 0,
    }


def test_an_automation_user_agent_is_an_automation_hint(make_bot, query, app):
    bot = make_bot()
    bot.transport.client.environ_base["HTTP_USER_AGENT"] = "python-httpx/0.28"
    bot.open()
    bot.step()
    bot.step()
    visit = _visits(query)[0]
    assert visit.automation == authenticity.SERVER_UA


# -- the exports -------------------------------------------------------------------------------
def test_the_exports_and_codebook_carry_the_score_and_a_column_per_signal(make_bot, app):
    from webapp.services.export import build_table

    careful, pasting = make_bot(), make_bot()
    for bot, signals in (
        (careful, SCRIPT),
        (pasting, "pe=1;pc=400;ks=0;tc=400;hc=1;hm=5000;ia=1;au=1;dv=1"),
    ):
        page = bot.open()
        while bot.verdict(page) is None:
            page = bot.post({**bot.answer(), "signals": signals})
    with app.app_context():
        s = db.session.scalars(select(Study)).one()
        long_rows, long_cols = build_table(s, "long", include_test=True)
        wide_rows, wide_cols = build_table(s, "wide", include_test=True)
        pages, page_cols = build_table(s, "page-times", include_test=True)
        book, _ = build_table(s, "codebook")
    assert set(authenticity.EXPORT_COLUMNS) <= set(long_cols) & set(wide_cols)
    by_person = {r["participant_id"]: r for r in wide_rows}
    assert len(by_person) == 2
    careful_row, pasting_row = sorted(by_person.values(), key=lambda r: r["auth_automation"])
    # Bots answer at once, faster than their pages can be read: "fast" (server time, so how
    # fast depends on the machine; the other reasons do not).
    assert set(careful_row["auth_reasons"].split(";")) <= {"fast"}
    reasons = pasting_row["auth_reasons"].split(";")
    assert [r for r in reasons if r != "fast"] == ["automation", "paste", "hidden"]
    assert pasting_row["auth_score"] >= 6 and pasting_row["auth_flagged"] == 1
    assert pasting_row["auth_pasted_chars"] == 400 * pasting_row["auth_pages"]
    assert all(r["auth_signal_pages"] == r["auth_pages"] > 20 for r in by_person.values())
    # long: the same participant cells in every row of a participant.
    for row in long_rows:
        assert row["auth_score"] == by_person[row["participant_id"]]["auth_score"]
    assert {"words", "signals", "pasted_chars", "honeypot"} <= set(page_cols)
    assert "device_hint" not in page_cols and "text_hash" not in page_cols
    assert {p["signals"] for p in pages} == {"js"}
    described = {(r["table"], r["column"]): r for r in book}
    for column in authenticity.EXPORT_COLUMNS:
        assert described["wide", column]["meaning"], column
        assert described["long", column]["meaning"], column
    assert described["page-times", "signals"]["allowed_values"] == "js|none|invalid"


QUESTIONS_ONLY = """slug: questions-only
title: A questionnaire
recruitment:
  completion_codes: {completed: DONE1, screened_out: SCR1}
payment: {base: 1.00, bonus: {amount: 0, rule: none}}
tasks:
  - {type: consent, id: consent, text: A short questionnaire.}
  - type: demographics
    id: demographics
    questions:
      - {id: age, text: Your age in years, kind: number, min: 18, max: 100}
  - {type: debrief, id: debrief, text: Thank you.}
"""


@pytest.mark.parametrize(
    "source",
    [
        "sentiment-demo.yaml",
        "rating-demo.yaml",
        "preference-demo.yaml",
        "product-choice-demo.yaml",
        QUESTIONS_ONLY,
    ],
)
def test_every_long_export_and_its_codebook_carry_the_authenticity_columns(app, tmp_path, source):
    """Whatever the task types, the long table ends its participant cells with the auth_*
    columns (the same values as wide), and the codebook describes them."""
    from webapp.bots import Bot, BotBehaviour, FlaskTransport
    from webapp.services.export import build_table
    from webapp.services.studies import get_study, load_study

    path = DEMO.parent / source
    if source == QUESTIONS_ONLY:
        path = tmp_path / "questions.yaml"
        path.write_text(source, encoding="utf-8")
    with app.app_context():
        definition = study_definition(load_study(path).study)
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="AUTH1")
    page = bot.open()
    while bot.verdict(page) is None:
        page = bot.post({**bot.answer(), "signals": SCRIPT.replace("au=0", "au=1")})
    with app.app_context():
        study = get_study(definition.slug)
        long_rows, long_cols = build_table(study, "long", include_test=True)
        wide_rows, _ = build_table(study, "wide", include_test=True)
        book, _ = build_table(study, "codebook")
    assert set(authenticity.EXPORT_COLUMNS) <= set(long_cols), source
    (person,) = wide_rows
    assert person["auth_automation"] and "automation" in person["auth_reasons"].split(";")
    if source != QUESTIONS_ONLY:  # a questionnaire has no long rows, only their columns
        assert long_rows, source
    for row in long_rows:
        assert {c: row[c] for c in authenticity.EXPORT_COLUMNS} == {
            c: person[c] for c in authenticity.EXPORT_COLUMNS
        }
    described = {(r["table"], r["column"]): r["meaning"] for r in book}
    assert all(described["long", c] for c in authenticity.EXPORT_COLUMNS), source
