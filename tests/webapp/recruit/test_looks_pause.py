"""A bot run with a strong effect crosses the efficacy bound at the first look; the console shows
it, and the recruiter (a fake Prolific on loopback) is paused only after the researcher confirms.

The whole path as a researcher meets it: ``framelab prereg SLUG`` freezes the demo's
pre-registration, bots complete the study through the real pages, ``framelab looks SLUG`` runs
the pre-registered choice GLMM on the export at look 1 (35 of 70 participants) and records it,
and the study page offers the pause.
"""

from __future__ import annotations

import html

import pytest

from tests.webapp.recruit.test_prolific import in_app
from tests.webapp.researcher.conftest import csrf_from, own_demo

URL = "/researcher/studies/product-choice-demo"


@pytest.mark.slow
def test_strong_effect_stops_at_look_one_and_pauses_prolific_only_when_confirmed(
    app, clock, fake, load_recruit_study, make_researcher, tmp_path
):
    from framelab.studyplan import looks, prereg
    from webapp.bots import BotBehaviour, run_bots
    from webapp.models import StudyState
    from webapp.services.studies import get_study

    definition = load_recruit_study()
    client = make_researcher("ana")
    own_demo(app, "ana")
    in_app(app, lambda r: r.create("http://localhost"))
    in_app(app, lambda r: r.publish())
    (listing,) = fake.studies.values()
    assert listing["status"] == "PUBLISHING"  # Prolific publishes asynchronously
    fake.publishing_done()
    assert listing["status"] == "ACTIVE"

    runner = app.test_cli_runner()
    frozen = runner.invoke(prereg, ["product-choice-demo", "--out", str(tmp_path / "prereg")])
    assert frozen.exit_code == 0, frozen.output
    assert "recorded: the console shows it" in frozen.output
    prereg_hash = frozen.output.split("hash ", 1)[1].split(" ", 1)[0]

    # Strong but not extreme: with every summary trial on target the GLMM has no finite
    # estimate (no statistic). The seeded assignment and the simulated clock (the plan's
    # too-fast rule reads durations) make the look the same on every run.
    behaviour = BotBehaviour(p_target={"original": 0.3, "summary": 0.85})
    summary = run_bots(app, definition, n=35, behaviour=behaviour, seed=5)
    assert summary.counts == {"completed": 35}, summary.errors

    ran = runner.invoke(looks, ["product-choice-demo"])
    assert ran.exit_code == 0, ran.output
    assert "look 1 (35 analysed, new):" in ran.output and "BOUNDARY CROSSED, efficacy" in ran.output
    assert "look 2 at N = 53: not reached yet" in ran.output
    again = runner.invoke(looks, ["product-choice-demo"])
    assert "look 1 (35 analysed, recorded earlier)" in again.output

    page = html.unescape(client.get(URL).get_data(as_text=True))
    assert f"data-prereg-hash>{prereg_hash}<" in page
    assert 'data-boundary-crossed="1"' in page and 'data-pause-look="1"' in page
    calls = len(fake.calls)

    # First press: what pausing does, here and on Prolific; nothing sent, nothing paused.
    confirm = client.post(f"{URL}/looks/1/pause", data={"csrf_token": csrf_from(page)})
    text = html.unescape(confirm.get_data(as_text=True))
    assert "pause the prolific listing" in text and 'data-pause-confirm="1"' in text
    assert len(fake.calls) == calls and listing["status"] == "ACTIVE"
    with app.app_context():
        assert get_study("product-choice-demo").state is StudyState.live

    # Confirmed: paused here and on the fake Prolific, once.
    done = client.post(
        f"{URL}/looks/1/pause", data={"csrf_token": csrf_from(text), "confirm": "yes"}
    )
    assert done.status_code == 302
    assert listing["status"] == "PAUSED"
    transitions = [c for c in fake.calls[calls:] if c[1].endswith("/transition/")]
    assert len(transitions) == 1
    with app.app_context():
        assert get_study("product-choice-demo").state is StudyState.paused
        from webapp.extensions import db
        from webapp.models import AuditEvent

        actions = [
            (e.actor, e.action)
            for e in db.session.scalars(db.select(AuditEvent).order_by(AuditEvent.id))
        ]
    assert ("cli", "look.boundary_crossed") in actions
    crossed_at = actions.index(("cli", "look.boundary_crossed"))
    assert actions.index(("ana", "look.pause")) > crossed_at
    assert actions.index(("ana", "recruit.pause")) > actions.index(("ana", "look.pause"))
    page = client.get(URL).get_data(as_text=True)
    assert "data-look-paused" in page and 'data-pause-look="1"' not in page
