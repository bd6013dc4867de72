"""Console workflows: confirmed close and reopen/duplicate, loading a demo under one's own
slug, finding participants by recruiter ID, the overview's funnel and shares, automatic
time-outs and the preview's page list."""

from __future__ import annotations

import re
import statistics
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.webapp.conftest import DEMO
from webapp.definition_cache import study_definition

from .conftest import own_demo, page_token

SLUG = "product-choice-demo"


def _owned(app, make_researcher):
    ana = make_researcher("ana")
    own_demo(app, "ana")
    return ana


def _post(client, url, page, **data):
    return client.post(url, data={"csrf_token": page_token(client, page), **data})


def _state(app, slug=SLUG):
    from webapp.services.studies import get_study

    with app.app_context():
        return get_study(slug).state.value


# -- close needs a confirmation; reopen; duplicate ---------------------------------


@pytest.mark.demo_pairs(2)
def test_close_asks_first_naming_who_is_cut_off_and_a_closed_study_reopens(
    app, study, make_researcher, make_bot
):
    from webapp.extensions import db
    from webapp.models import AuditEvent

    ana = _owned(app, make_researcher)
    make_bot(abandon_at=3).run()  # one person mid-study
    page = ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    # Close is no longer a form button beside Pause: it is a separate, red link to a question.
    assert 'value="closed"' not in page
    assert re.search(r'<a class="button danger" href="[^"]+/close" data-transition="closed">', page)

    # A POST without the confirmation (one click, a script, an old form) closes nothing.
    url = f"/researcher/studies/{SLUG}/state"
    resp = _post(ana, url, f"/researcher/studies/{SLUG}", state="closed")
    assert resp.status_code == 302 and resp.headers["Location"].endswith(f"/{SLUG}/close")
    assert _state(app) == "live"
    question = ana.get(f"/researcher/studies/{SLUG}/close").get_data(as_text=True)
    assert "<strong data-in-progress>1</strong> participant(s)" in question
    assert "cannot finish or get their completion code" in question
    assert "pause</strong> it instead" in question

    resp = _post(ana, url, f"/researcher/studies/{SLUG}/close", state="closed", confirm="close")
    assert _state(app) == "closed"
    # Reopened (audited as a reopening), it takes participants again.
    _post(ana, url, f"/researcher/studies/{SLUG}", state="live")
    assert _state(app) == "live"
    assert make_bot().run().outcome == "completed"
    with app.app_context():
        details = [
            e.detail for e in db.session.scalars(db.select(AuditEvent)) if e.action == "study.state"
        ]
    assert {"from": "closed", "to": "live", "reopen": True} in details


def test_duplicate_copies_the_version_into_a_new_empty_draft(app, study, make_researcher, make_bot):
    from webapp.extensions import db
    from webapp.models import Participant, StudyFile
    from webapp.services.studies import get_study, load_study

    ana = _owned(app, make_researcher)
    with app.app_context():  # a bundle is stored with a (re)load
        load_study(DEMO, force=True)
    make_bot().run()
    page = ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    assert 'value="product-choice-demo-ana"' in page  # a free slug is suggested
    resp = _post(
        ana,
        f"/researcher/studies/{SLUG}/duplicate",
        f"/researcher/studies/{SLUG}",
        slug="pcd-wave-2",
    )
    assert resp.status_code == 302 and resp.headers["Location"].endswith("/studies/pcd-wave-2")
    with app.app_context():
        old, new = get_study(SLUG), get_study("pcd-wave-2")
        assert (new.state.value, new.version, new.owner_id) == ("draft", 1, old.owner_id)
        assert new.export_salt != old.export_salt
        assert replace(study_definition(new), slug=SLUG) == study_definition(old)
        n_people = db.session.scalar(
            db.select(db.func.count()).where(Participant.study_id == new.id)
        )
        names = set(
            db.session.scalars(db.select(StudyFile.name).where(StudyFile.study_id == new.id))
        )
    assert n_people == 0 and "product_pairs/demo.yaml" in names
    # The same slug twice is refused with a reason.
    resp = _post(
        ana,
        f"/researcher/studies/{SLUG}/duplicate",
        f"/researcher/studies/{SLUG}",
        slug="pcd-wave-2",
    )
    assert "already used" in ana.get(resp.headers["Location"]).get_data(as_text=True)


# -- a fresh researcher loads a demo someone else loaded -------------------------


def test_a_fresh_researcher_loads_the_demo_under_a_slug_of_their_own(app, study, make_researcher):
    from webapp.services.accounts import get_researcher
    from webapp.services.studies import get_study

    alice = make_researcher("alice")  # `make run` loaded the demos unowned; alice is no admin
    resp = _post(alice, "/researcher/studies/load", "/researcher/", name="product-choice-demo.yaml")
    html = resp.get_data(as_text=True)
    assert resp.status_code == 422 and "taken by another researcher" in html
    assert 'value="product-choice-demo-alice"' in html  # the form offers a free slug
    resp = _post(
        alice,
        "/researcher/studies/load",
        "/researcher/",
        name="product-choice-demo.yaml",
        slug="product-choice-demo-alice",
    )
    assert resp.status_code == 302
    with app.app_context():
        mine = get_study("product-choice-demo-alice")
        assert mine.owner_id == get_researcher("alice").id and mine.state.value == "draft"
        assert study_definition(mine).slug == "product-choice-demo-alice"
        assert get_study(SLUG).owner_id is None  # the original is untouched
    assert alice.get("/researcher/studies/product-choice-demo-alice").status_code == 200
    bad = _post(
        alice,
        "/researcher/studies/load",
        "/researcher/",
        name="product-choice-demo.yaml",
        slug="Bad Slug",
    )
    assert bad.status_code == 422 and "is not a usable slug" in bad.get_data(as_text=True)


# -- find participants by their recruiter ID -------------------------------------


@pytest.mark.demo_pairs(2)
def test_participants_are_found_by_prolific_and_mturk_id(app, study, make_researcher, make_bot):
    ana = _owned(app, make_researcher)
    prolific = make_bot(abandon_at=4)
    prolific.run()
    worker = make_bot(platform="mturk")
    worker.run()
    make_bot().run()
    pid = prolific.external_id
    assert len(pid) == 24
    page = ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    assert pid not in page  # the table shows pseudonyms only
    assert 'id="participant" name="participant" required maxlength="128"' in page

    # The search box takes the ID as Prolific shows it (any case); the table narrows to one.
    found = ana.get(f"/researcher/studies/{SLUG}?q={pid.upper()}").get_data(as_text=True)
    assert found.count("<tr data-participant=") == 1
    resp = ana.get(f"/researcher/studies/{SLUG}/find?q={worker.external_id.lower()}")
    assert "/participants/p_" in resp.headers["Location"]
    detail = ana.get(resp.headers["Location"]).get_data(as_text=True)
    assert f"<code data-platform-id>{worker.external_id}</code>" in detail

    # Actions take the recruiter ID too (the box used to stop at 20 characters).
    _post(
        ana,
        f"/researcher/studies/{SLUG}/participants",
        f"/researcher/studies/{SLUG}",
        participant=pid,
        action="returned",
    )
    returned = ana.get(f"/researcher/studies/{SLUG}?status=returned").get_data(as_text=True)
    assert returned.count("<tr data-participant=") == 1
    # Another researcher learns nothing.
    bob = make_researcher("bob")
    code = re.search(r'data-participant="(p_[0-9a-f]+)"', returned).group(1)
    assert bob.get(f"/researcher/studies/{SLUG}/participants/{code}").status_code == 404
    assert bob.get(f"/researcher/studies/{SLUG}/find?q={pid}").status_code == 404


def test_participant_page_shows_path_answers_and_actions(app, study, make_researcher, make_bot):
    ana = _owned(app, make_researcher)
    bot = make_bot()
    bot.run()
    code = ana.get(f"/researcher/studies/{SLUG}/live.json").get_json()["participants"][0]
    html = ana.get(f"/researcher/studies/{SLUG}/participants/{code['participant_id']}").get_data(
        as_text=True
    )
    path = re.search(r"<tbody data-path>(.*?)</tbody>", html, re.S).group(1)
    # One row per page after consent (the consent form is the entry page, not a timed page).
    assert path.count("<tr>") == bot.submitted - 1
    assert "instructions/0" in path and "choices/9/wtp" in path
    assert html.count("<tr><td>") >= 10 and "data-choices" in html
    assert 'data-action="exclude"' in html and "Reason for excluding" in html


# -- overview: funnel, shares, progress, time-outs -----------------------------------------


@pytest.mark.demo_pairs(2)
def test_funnel_shares_and_automatic_timeouts(app, study, make_researcher, make_bot):
    from webapp.extensions import db
    from webapp.models import AuditEvent, ChoiceResponse, PageVisit, Participant

    ana = _owned(app, make_researcher)
    for i in range(4):
        make_bot(p_target={"original": 0.2, "summary": 0.9}, seed=i).run()
    make_bot(fail_quiz=True).run()
    quitter = make_bot(abandon_at=5)
    quitter.run()
    data = ana.get(f"/researcher/studies/{SLUG}/live.json").get_json()
    funnel = {row["page"]: row for row in data["funnel"]}
    pages = [row["page"] for row in data["funnel"]]
    assert pages[:2] == ["instructions/0", "quiz/0"] and pages.index(
        "choices/0/choice"
    ) < pages.index("choices/1/choice")
    assert funnel["instructions/0"]["reached"] == 6
    assert sum(r["screened_out"] for r in data["funnel"]) == 1
    assert (
        sum(r["in_progress"] for r in data["funnel"]) == 1
        and sum(r["left"] for r in data["funnel"]) == 0
    )

    # Per pair and format: the target share, counted independently from the stored choices.
    with app.app_context():
        rows = db.session.execute(
            db.select(ChoiceResponse.pair_id, ChoiceResponse.format, ChoiceResponse.chose_target)
        ).all()
        visits = db.session.execute(
            db.select(PageVisit.page, PageVisit.shown_at, PageVisit.submitted_at)
        ).all()
    for share in data["shares"]:
        for fmt in ("original", "summary"):
            picks = [t for p, f, t in rows if p == share["pair"] and f == fmt]
            assert share[fmt]["n"] == len(picks) and share[fmt]["target"] == sum(picks)
    times = [(s2 - s1).total_seconds() for p, s1, s2 in visits if p == "quiz/0" and s2 is not None]
    assert funnel["quiz/0"]["median_s"] == round(statistics.median(times), 1)

    # The quitter goes quiet for longer than the time limit (3 x 12 estimated minutes).
    assert data["time_limit_minutes"] == 36
    with app.app_context():
        p = db.session.scalars(db.select(Participant).where(Participant.status == "started")).one()
        p.last_seen_at -= timedelta(minutes=37)
        code = p.code
        db.session.commit()
    data = ana.get(f"/researcher/studies/{SLUG}/live.json").get_json()
    assert data["counts"]["timed_out"] == 1 and data["counts"]["idle"] == 0
    assert sum(r["left"] for r in data["funnel"]) == 1  # and the funnel shows where they left
    with app.app_context():
        events = [
            e
            for e in db.session.scalars(db.select(AuditEvent))
            if e.action == "participant.timeout"
        ]
    assert len(events) == 1 and events[0].actor == "system:timeout"
    assert events[0].detail["participants"] == [code]


def test_automatic_timeouts_can_be_switched_off(tmp_path):
    from tests.webapp.conftest import load_demo, make_app
    from webapp.bots import Bot, BotBehaviour, FlaskTransport
    from webapp.extensions import db
    from webapp.models import Participant, ParticipantStatus
    from webapp.services.researchers import set_researcher

    from .conftest import login

    app = make_app(f"sqlite:///{tmp_path / 'off.sqlite'}", AUTO_TIMEOUT=0)
    definition = load_demo(app)
    Bot(FlaskTransport(app), definition, BotBehaviour(abandon_at=3)).run()
    with app.app_context():
        set_researcher("root", "correct horse battery", is_admin=True)
        db.session.scalars(db.select(Participant)).one().last_seen_at -= timedelta(days=1)
        db.session.commit()
    client = app.test_client()
    login(client, "root")
    assert client.get(f"/researcher/studies/{SLUG}/live.json").get_json()["counts"]["idle"] == 1
    with app.app_context():
        assert db.session.scalars(db.select(Participant)).one().status is ParticipantStatus.started
    result = app.test_cli_runner().invoke(args=["study", "timeouts", SLUG])
    assert result.output.strip() == f"{SLUG}: 1 timed out"


def test_target_progress_bar(app, make_researcher, make_bot, tmp_path):
    from webapp.services.studies import get_study, load_study

    text = DEMO.read_text().replace("  exclude_ids: []", "  exclude_ids: []\n  target_n: 4", 1)
    path = tmp_path / "demo.yaml"  # a bundle of its own: the YAML and the pairs file it names
    path.write_text(text)
    (tmp_path / "product_pairs").mkdir()
    (tmp_path / "product_pairs" / "demo.yaml").write_bytes(
        (DEMO.parent / "product_pairs" / "demo.yaml").read_bytes()
    )
    with app.app_context():
        load_study(path)
    ana = _owned(app, make_researcher)
    with app.app_context():
        definition = study_definition(get_study(SLUG))
    assert definition.recruitment.target_n == 4
    make_bot().run()
    data = ana.get(f"/researcher/studies/{SLUG}/live.json").get_json()
    assert data["target"] == {"completed": 1, "target": 4, "pct": 25.0}
    assert 'max="4" value="1" data-target-bar' in ana.get(f"/researcher/studies/{SLUG}").get_data(
        as_text=True
    )


# -- preview ---------------------------------------------------------------------------------


def test_preview_has_a_banner_a_page_list_and_a_way_back(app, study, make_researcher):
    from webapp.extensions import db
    from webapp.models import Participant

    ana = _owned(app, make_researcher)
    resp = _post(
        ana, f"/researcher/studies/{SLUG}/preview", f"/researcher/studies/{SLUG}", block="choices"
    )
    assert resp.status_code == 302 and "/s/product-choice-demo/p/" in resp.headers["Location"]
    html = ana.get(resp.headers["Location"]).get_data(as_text=True)
    assert 'data-page="choice"' in html and ">PREVIEW<" in html
    assert f'href="/researcher/studies/{SLUG}" data-back-to-console' in html
    assert f'href="/researcher/studies/{SLUG}#preview-pages" data-page-list' in html
    console = ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    assert console.count("data-preview-block=") == len(study.tasks)
    with app.app_context():
        p = db.session.scalars(db.select(Participant)).one()
        assert p.is_preview and p.block_index == [b.id for b in study.tasks].index("choices")
    # Every block of the list opens a page (consent is the study link's own page).
    for block in study.tasks:
        resp = _post(
            ana,
            f"/researcher/studies/{SLUG}/preview",
            f"/researcher/studies/{SLUG}",
            block=block.id,
        )
        shown = ana.get(resp.headers["Location"])
        assert shown.status_code == 200 and ">PREVIEW<" in shown.get_data(as_text=True), block
    # Real participants never see the bar.
    anonymous = (
        app.test_client().get("/s/product-choice-demo?participant=someone").get_data(as_text=True)
    )
    assert "data-preview-bar" not in anonymous


def test_a_timed_out_annotator_gives_their_reserved_slots_back(app, clock):
    """The sweep frees what the person held: their open reservations return to the pool.
    The app's clock stands still, so "25 minutes ago" is exactly that when the sweep runs."""
    from tests.webapp.conftest import ROOT
    from webapp.bots import Bot, BotBehaviour, FlaskTransport
    from webapp.extensions import db
    from webapp.models import Annotation, AnnotationState, Participant, utcnow
    from webapp.services import timeouts
    from webapp.services.slot_report import idle_holds
    from webapp.services.studies import get_study, load_study

    with app.app_context():
        definition = study_definition(
            load_study(ROOT / "stimuli/studies/sentiment-demo.yaml").study
        )
    Bot(FlaskTransport(app), definition, BotBehaviour(abandon_at=4)).run()  # holds a batch
    with app.app_context():
        study = get_study("sentiment-demo")
        held = db.session.scalar(
            db.select(db.func.count()).where(Annotation.state == AnnotationState.reserved)
        )
        assert held > 0
        p = db.session.scalars(db.select(Participant)).one()
        p.last_seen_at = utcnow() - timedelta(minutes=3 * 8 + 1)
        db.session.commit()
        assert timeouts.sweep(study, utcnow()) == [p.code]
        reserved = db.session.scalar(
            db.select(db.func.count()).where(Annotation.state == AnnotationState.reserved)
        )
        assert reserved == 0 and idle_holds(study, utcnow()).slots == 0
