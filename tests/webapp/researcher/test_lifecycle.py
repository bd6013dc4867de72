"""Study lifecycle: upload with inline errors, draft → live → paused → closed, preview, links."""

from __future__ import annotations

import io

from tests.webapp.conftest import DEMO
from webapp.bots import Bot, FlaskTransport
from webapp.definition_cache import study_definition

from .conftest import page_token


def upload(client, text: str, filename: str = "study.yaml", stimuli: dict | None = None):
    """Upload a study bundle through the console form: the YAML and its stimulus files
    (default: the demo's pairs file, under the name the demo gives it)."""
    if stimuli is None:
        stimuli = {
            "product_pairs/demo.yaml": (DEMO.parent / "product_pairs/demo.yaml").read_bytes()
        }
    token = page_token(client, "/researcher/")
    return client.post(
        "/researcher/studies/upload",
        data={
            "csrf_token": token,
            "file": (io.BytesIO(text.encode()), filename),
            "stimuli": [(io.BytesIO(b), name) for name, b in stimuli.items()],
        },
        content_type="multipart/form-data",
    )


def set_state(client, slug: str, state: str, confirm: str = ""):
    token = page_token(client, f"/researcher/studies/{slug}")
    return client.post(
        f"/researcher/studies/{slug}/state",
        data={"csrf_token": token, "state": state, "confirm": confirm},
    )


def _state(app, slug="product-choice-demo") -> str:
    from webapp.services.studies import get_study

    with app.app_context():
        return get_study(slug).state.value


def test_invalid_upload_shows_the_error_inline(app, make_researcher):
    ana = make_researcher("ana")
    bad = DEMO.read_text().replace('correct: "10"', 'correct: "11"')
    resp = upload(ana, bad, "broken.yaml")
    html = resp.get_data(as_text=True)
    assert resp.status_code == 422
    assert "broken.yaml: tasks[2].questions[0].correct:" in html
    resp = upload(ana, "slug: [unclosed", "syntax.yaml")
    assert resp.status_code == 422 and "syntax.yaml: (top level): invalid YAML at line" in (
        resp.get_data(as_text=True)
    )
    unknown_rule = DEMO.read_text().replace("rule: majority_choice", "rule: lottery")
    resp = upload(ana, unknown_rule, "rule.yaml")
    assert "payment.bonus.rule: unknown rule &#39;lottery&#39;" in resp.get_data(as_text=True)


def test_an_upload_over_the_request_limit_names_the_limits_and_links_back(app, make_researcher):
    # Found by the outside walkthrough: a 20 MiB CSV picked with the YAML gave "That did not
    # work. Please try again." (E413), which names nothing and cannot work a second time.
    ana = make_researcher("ana")
    big = {"items.csv": b"a,b\n" + b"1,2\n" * (5 * 1024 * 1024)}
    resp = upload(ana, DEMO.read_text(), "demo.yaml", stimuli=big)
    # The test client spools a body this large to a temporary file, left open when the app
    # refuses the request unread (a real server drops the connection).
    resp.request.environ["wsgi.input"].close()
    html = resp.get_data(as_text=True)
    assert resp.status_code == 413 and "E413-TOO-LARGE" in html
    assert "16 MiB" in html and "8 MiB" in html and "try again." not in html
    assert 'href="/researcher/"' in html


def test_lifecycle_gates_participants(app, make_researcher):
    ana = make_researcher("ana")
    resp = upload(ana, DEMO.read_text(), "demo.yaml")
    assert resp.status_code == 302 and _state(app) == "draft"
    definition = DEMO.read_text()
    assert definition
    from webapp.services.studies import get_study

    with app.app_context():
        study = study_definition(get_study("product-choice-demo"))
        assert get_study("product-choice-demo").owner_id is not None

    def bot(i):
        return Bot(FlaskTransport(app), study, external_id=f"LIFE{i}")

    page = bot(0).open()
    # A draft is not open yet, which is not the same as "could not find this study".
    assert page.status == 403 and page.error_code == "E403-NOT-OPEN"
    assert set_state(ana, "product-choice-demo", "live").status_code == 302
    assert _state(app) == "live"
    walker = bot(1)
    walker.open()
    for _ in range(4):
        walker.step()
    assert walker.page.kind in {"quiz", "choice", "wtp"}
    set_state(ana, "product-choice-demo", "paused")
    assert _state(app) == "paused"
    page = bot(2).open()
    assert page.status == 403 and page.error_code == "E403-PAUSED"
    assert "paused" in page.text
    assert walker.run().outcome == "completed"  # people already in may finish
    set_state(ana, "product-choice-demo", "closed", confirm="close")
    page = bot(3).open()
    assert page.status == 410 and page.error_code == "E410-CLOSED"
    # A closed study can reopen; a draft can never be closed.
    set_state(ana, "product-choice-demo", "live")
    assert _state(app) == "live"


def test_preview_of_a_draft_is_flagged_and_left_out_of_exports(app, make_researcher):
    from webapp.extensions import db
    from webapp.models import Participant
    from webapp.services.studies import get_study
    from webapp.tasks.product_choice.export import choice_rows

    ana = make_researcher("ana")
    upload(ana, DEMO.read_text(), "demo.yaml")
    token = page_token(ana, "/researcher/studies/product-choice-demo")
    resp = ana.post("/researcher/studies/product-choice-demo/preview", data={"csrf_token": token})
    assert resp.status_code == 302 and "participant=test-" in resp.headers["Location"]
    with app.app_context():
        definition = study_definition(get_study("product-choice-demo"))
    bot = Bot(FlaskTransport(app), definition)
    bot.transport.client = ana  # the researcher's browser, on a draft study
    assert bot.run().outcome == "completed"
    with app.app_context():
        p = db.session.scalars(db.select(Participant)).one()
        assert p.is_preview
        assert choice_rows(p.study) == []
        assert len(choice_rows(p.study, include_test=True)) == 10
    live = ana.get("/researcher/studies/product-choice-demo/live.json").get_json()
    assert live["counts"]["arrivals"] == 0


def test_recruitment_links(app, make_researcher, monkeypatch):
    ana = make_researcher("ana")
    upload(ana, DEMO.read_text(), "demo.yaml")
    monkeypatch.delenv("FRAMELAB_PUBLIC_URL", raising=False)
    html = ana.get("/researcher/studies/product-choice-demo").get_data(as_text=True)
    assert (
        'value="http://localhost/s/product-choice-demo?PROLIFIC_PID={{%PROLIFIC_PID%}}'
        "&amp;STUDY_ID={{%STUDY_ID%}}&amp;SESSION_ID={{%SESSION_ID%}}" in html
    )
    assert "product-choice-demo?participant=PARTICIPANT_ID" in html
    # MTurk frames only https pages: no ExternalQuestion the CLI would refuse, but the reason
    # in the console's own terms (the setting, not a command-line flag).
    assert "ExternalURL" not in html
    error = html.split('data-link-error="mturk">', 1)[1].split("</p>", 1)[0]
    assert "https://" in error and "FRAMELAB_PUBLIC_URL" in error
    assert not error.startswith("--url")

    # With the public address set, the links and the XML use it, as a listing would.
    monkeypatch.setenv("FRAMELAB_PUBLIC_URL", "https://lab.example.org")
    html = ana.get("/researcher/studies/product-choice-demo").get_data(as_text=True)
    assert (
        "&lt;ExternalURL&gt;https://lab.example.org/s/product-choice-demo&lt;/ExternalURL&gt;"
        in html
    )
    assert 'value="https://lab.example.org/s/product-choice-demo?PROLIFIC_PID=' in html
    assert "data-link-error" not in html


def test_mturk_external_question_is_valid_xml():
    import xml.etree.ElementTree as ET
    from dataclasses import replace

    from webapp.models import Study
    from webapp.services.researchers import recruitment_links
    from webapp.studydef import load_study_file

    demo = load_study_file(DEMO)
    mturk = replace(demo, slug="x-y", recruitment=replace(demo.recruitment, platforms=("mturk",)))
    s = Study(slug="x-y", definition=mturk.to_json())
    xml = recruitment_links(s, "https://lab.example.org/")["mturk_xml"]
    root = ET.fromstring(xml.split("\n", 1)[1])
    ns = "{http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd}"
    assert root.tag == f"{ns}ExternalQuestion"
    assert root.find(f"{ns}ExternalURL").text == "https://lab.example.org/s/x-y"
