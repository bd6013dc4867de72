"""The console shows each participant's authenticity: a line in the live overview, a column and a
filter in the participant table, and the score, reasons and per-page signals on their page."""

from __future__ import annotations

from sqlalchemy import select

from tests.webapp.test_authenticity import JS, add_participant
from webapp.extensions import db
from webapp.models import Study

SLUG = "product-choice-demo"


def _crowd(app) -> dict[str, str]:
    """Five participants, pages built by hand: two flagged, one with a weak reason only, one
    without JavaScript, one clean."""
    people = {
        "p_honeypot000000": [{**JS, "honeypot": True}],
        "p_canarypaste000": [
            {**JS, "canary": True, "pasted_chars": 90, "text_chars": 90, "paste_count": 1}
        ],
        "p_pasteonly00000": [{**JS, "pasted_chars": 90, "text_chars": 90, "paste_count": 1}],
        "p_nojavascript00": [{"signals": "none"}],
        "p_careful0000000": [{**JS, "keystrokes": 40, "text_chars": 35}],
    }
    with app.app_context():
        s = db.session.scalars(select(Study).where(Study.slug == SLUG)).one()
        for code, pages in people.items():
            add_participant(s.id, code, pages)
    return people


def test_overview_table_filter_and_participant_page(app, study, make_researcher):
    from .conftest import own_demo

    ana = make_researcher("ana")
    own_demo(app, "ana")
    _crowd(app)
    data = ana.get(f"/researcher/studies/{SLUG}/live.json").get_json()
    assert data["authenticity"]["text"] == (
        "2 sessions flagged: 1 honeypot, 1 canary, 1 paste; "
        "1 without signals (no JavaScript; not a reason)"
    )
    rows = {r["participant_id"]: r for r in data["participants"]}
    assert rows["p_canarypaste000"]["authenticity"] == "5: canary, paste"
    assert rows["p_pasteonly00000"]["auth_score"] == 2
    assert rows["p_nojavascript00"]["authenticity"] == "no signals"
    assert rows["p_careful0000000"]["authenticity"] == "0"

    def shown(flag: str) -> set[str]:
        got = ana.get(f"/researcher/studies/{SLUG}/live.json?flag={flag}").get_json()
        return {r["participant_id"] for r in got["participants"]}

    assert shown("flagged") == {"p_honeypot000000", "p_canarypaste000"}
    assert shown("paste") == {"p_canarypaste000", "p_pasteonly00000"}
    assert shown("no_signals") == {"p_nojavascript00"}
    assert len(shown("made-up")) == 5  # an unknown filter shows everyone
    html = ana.get(f"/researcher/studies/{SLUG}?flag=flagged").get_data(as_text=True)
    assert html.count("<tr data-participant=") == 2
    assert "2 sessions flagged: 1 honeypot, 1 canary, 1 paste" in html
    assert '<option value="flagged" selected>' in html
    page = ana.get(f"/researcher/studies/{SLUG}/participants/p_canarypaste000").get_data(
        as_text=True
    )
    assert "Score 5 (flagged): canary, paste." in page
    assert "pasted 90" in page and "canary" in page
