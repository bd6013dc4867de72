"""The study page's pre-registration and looks: recorded once, shown, paused only on confirmation.

The numbers here are given as the commands record them (``framelab prereg`` / ``framelab
looks``); the web app itself never fits a model.
"""

from __future__ import annotations

import html
import re
import shutil

from tests.webapp.conftest import DEMO
from tests.webapp.researcher.conftest import csrf_from, own_demo

URL = "/researcher/studies/product-choice-demo"


def _look(k: int, *, z: float, crossed: bool, decision: str = "continue") -> dict:
    return {
        "look": k,
        "reached": True,
        "n_planned": 35 * k,
        "n_analysed": 35 * k,
        "fraction": 0.5 * k,
        "z": z,
        "estimate": z / 4,
        "se": 0.25,
        "p_val": 0.01,
        "efficacy_z": 2.9626,
        "futility_z": float("nan"),
        "decision": decision,
        "crossed": crossed,
        "participants": " ".join(f"p_{i:04d}" for i in range(35 * k)),
        "notes": "",
    }


def _record(app, looks) -> list:
    from webapp.services import looks as service
    from webapp.services.studies import get_study

    with app.app_context():
        return [
            row.look for row in service.record_looks(get_study("product-choice-demo"), looks, "cli")
        ]


def _audit(app) -> list[tuple[str, str]]:
    from webapp.extensions import db
    from webapp.models import AuditEvent

    with app.app_context():
        rows = db.session.scalars(db.select(AuditEvent).order_by(AuditEvent.id)).all()
        return [(r.actor, r.action) for r in rows]


def test_a_study_without_an_analysis_block_has_no_looks_section(app, make_researcher):
    from webapp.services.studies import load_study

    with app.app_context():
        load_study(DEMO.parent / "sentiment-demo.yaml")
    client = make_researcher("ana", admin=True)
    page = client.get("/researcher/studies/sentiment-demo").get_data(as_text=True)
    assert 'id="looks"' not in page


def test_prereg_is_recorded_only_for_the_stored_files_and_the_page_says_when_they_change(
    app, study, make_researcher, tmp_path
):
    from webapp.services import looks as service
    from webapp.services.studies import get_study, load_study

    client = make_researcher("ana")
    own_demo(app, "ana")
    page = client.get(URL).get_data(as_text=True)
    assert "data-prereg-missing" in page and "framelab prereg product-choice-demo" in page
    with app.app_context():
        s = get_study("product-choice-demo")
        bundle = service.bundle_sha256(s)
        record = {"prereg_sha256": "ab" * 32, "bundle_sha256": bundle, "analysis": {}}
        try:
            service.record_preregistration(s, {**record, "bundle_sha256": "00" * 32}, "p.md", "cli")
        except service.LookError as exc:
            assert "freezes other files than product-choice-demo version 1" in str(exc)
        else:
            raise AssertionError("a record of other files was accepted")
        row = service.record_preregistration(s, record, "prereg.md", "cli")
        assert service.record_preregistration(s, record, "prereg.md", "cli").id == row.id
    page = client.get(URL).get_data(as_text=True)
    assert (
        f"data-prereg-hash>{'ab' * 32}<" in page
        and "The study's files are the ones it froze" in page
    )
    assert ("cli", "prereg.freeze") in _audit(app)
    # A new version with other files: the page says the pre-registration no longer describes it.
    folder = tmp_path / "v2"
    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs")
    (folder / DEMO.name).write_text(DEMO.read_text().replace("Choosing between", "Picking"))
    with app.app_context():
        assert load_study(folder / DEMO.name).action == "updated"
    page = client.get(URL).get_data(as_text=True)
    assert "data-prereg-changed" in page and "describes version 1" in page


def test_looks_are_recorded_once_and_a_crossing_is_audited(app, study, make_researcher):
    client = make_researcher("ana")
    own_demo(app, "ana")
    waiting = dict(_look(2, z=0, crossed=False), reached=False)
    assert _record(app, [_look(1, z=1.2, crossed=False), waiting]) == [1]
    # Recomputed later with other numbers: the recorded look is what the researcher saw.
    assert _record(app, [_look(1, z=3.5, crossed=True, decision="efficacy")]) == []
    page = html.unescape(client.get(URL).get_data(as_text=True))
    assert "<td data-look-z>1.200</td>" in page
    assert "waiting for 53 completed, non-excluded participants" in page
    assert "data-boundary-crossed" not in page
    assert _record(app, [_look(2, z=3.1, crossed=True, decision="efficacy")]) == [2]
    page = html.unescape(client.get(URL).get_data(as_text=True))
    assert 'data-boundary-crossed="2"' in page and "Boundary crossed" in page
    assert "z = 3.100 against the efficacy bound 2.963" in page
    assert 'data-pause-look="2"' in page
    actions = [a for _, a in _audit(app) if a.startswith("look.")]
    assert actions == ["look.recorded", "look.recorded", "look.boundary_crossed"]


def test_pause_shows_what_it_does_first_and_happens_once_on_confirmation(
    app, study, make_researcher
):
    from webapp.models import StudyState
    from webapp.services.studies import get_study

    client = make_researcher("ana")
    own_demo(app, "ana")
    _record(app, [_look(1, z=3.4, crossed=True, decision="efficacy")])
    token = csrf_from(client.get(URL).get_data(as_text=True))
    first = client.post(f"{URL}/looks/1/pause", data={"csrf_token": token})
    text = html.unescape(first.get_data(as_text=True))
    assert first.status_code == 200 and "data-pause-plan" in text
    assert "pause product-choice-demo here: new participants are turned away" in text
    with app.app_context():
        assert get_study("product-choice-demo").state is StudyState.live
    assert not [a for _, a in _audit(app) if a in ("look.pause", "study.state")]
    done = client.post(f"{URL}/looks/1/pause", data={"csrf_token": token, "confirm": "yes"})
    assert done.status_code == 302 and done.headers["Location"].endswith("#looks")
    with app.app_context():
        assert get_study("product-choice-demo").state is StudyState.paused
    assert [x for x in _audit(app) if x[1] in ("look.pause", "study.state")] == [
        ("ana", "look.pause"),
        ("ana", "study.state"),
    ]
    again = client.post(f"{URL}/looks/1/pause", data={"csrf_token": token, "confirm": "yes"})
    page = client.get(again.headers["Location"]).get_data(as_text=True)
    assert "already paused for look 1 by ana" in page and "data-look-paused" in page


def test_only_a_crossed_look_of_ones_own_study_can_be_paused(app, study, make_researcher):
    client = make_researcher("ana")
    own_demo(app, "ana")
    _record(app, [_look(1, z=1.0, crossed=False)])
    token = csrf_from(client.get(URL).get_data(as_text=True))
    refused = client.post(f"{URL}/looks/1/pause", data={"csrf_token": token, "confirm": "yes"})
    page = client.get(refused.headers["Location"]).get_data(as_text=True)
    assert "Look 1 crossed no bound" in page
    eve = make_researcher("eve")
    eve_token = csrf_from(eve.get("/researcher/").get_data(as_text=True))
    other = eve.post(f"{URL}/looks/1/pause", data={"csrf_token": eve_token, "confirm": "yes"})
    assert other.status_code == 404
    anonymous = app.test_client().post(f"{URL}/looks/1/pause", data={"confirm": "yes"})
    assert anonymous.status_code in (302, 400)
    assert not [a for _, a in _audit(app) if a == "look.pause"]


def test_an_amendment_is_recorded_only_after_data_and_the_page_shows_the_history(
    app, clock, study, make_researcher, make_bot
):
    from webapp.services import looks as service
    from webapp.services.studies import get_study

    client = make_researcher("ana")
    own_demo(app, "ana")
    with app.app_context():
        bundle = service.bundle_sha256(get_study("product-choice-demo"))
    first = {"prereg_sha256": "ab" * 32, "bundle_sha256": bundle, "amendment": None}
    with app.app_context():
        service.record_preregistration(get_study("product-choice-demo"), first, "p.md", "cli")
    page = client.get(URL).get_data(as_text=True)
    assert "data-prereg-history" not in page  # one freeze before data: nothing to list
    assert make_bot().run().outcome == "completed"
    why = "Attention checks were not shown to the first 40 people."
    with app.app_context():
        seen = service.data_seen(get_study("product-choice-demo"))
    assert re.fullmatch(
        r"1 participant\(s\) entered, the first at 2025-01-06 09:\d\d UTC; 1 completed", seen
    )
    change = {"amends": ["cd" * 32], "reason": why, "seen": seen}
    second = {"prereg_sha256": "ef" * 32, "bundle_sha256": bundle, "amendment": change}
    with app.app_context():
        s = get_study("product-choice-demo")
        for record, refusal in (
            ({**second, "amendment": None}, "a new pre-registration is an amendment"),
            (second, f"amends {'cd' * 6}, but the console recorded {'ab' * 6}"),
        ):
            try:
                service.record_preregistration(s, record, "p.md", "cli")
            except service.LookError as exc:
                assert refusal in str(exc)
            else:
                raise AssertionError(f"recorded: {record}")
        change["amends"] = ["ab" * 32]
        service.record_preregistration(s, second, "p.md", "cli")
    page = html.unescape(client.get(URL).get_data(as_text=True))
    assert f"data-prereg-hash>{'ef' * 32}<" in page and "data-prereg-history" in page
    assert 'data-prereg-row="2"' in page and f"data-prereg-amendment>{why}<" in page
    assert (
        "before data collection" in page and f"Frozen after data collection began: {seen}" in page
    )
    assert ("cli", "prereg.amend") in _audit(app)


def test_the_bounds_frozen_in_advance_show_for_looks_not_reached(app, study, make_researcher):
    from webapp.services import looks as service
    from webapp.services.studies import get_study

    client = make_researcher("ana")
    own_demo(app, "ana")
    page = html.unescape(client.get(URL).get_data(as_text=True))
    assert page.count("fixed by <code>framelab prereg</code>") == 3  # nothing frozen yet
    bounds = [(2.963, None), (2.359, 0.5), (2.014, None)]
    with app.app_context():
        s = get_study("product-choice-demo")
        record = {
            "prereg_sha256": "cd" * 32,
            "bundle_sha256": service.bundle_sha256(s),
            "analysis": {},
            "looks": [
                {"look": k, "efficacy_z": e, "futility_z": f}
                for k, (e, f) in enumerate(bounds, start=1)
            ],
        }
        service.record_preregistration(s, record, "prereg.md", "cli")
    assert _record(app, [_look(1, z=1.2, crossed=False)]) == [1]
    page = html.unescape(client.get(URL).get_data(as_text=True))
    rows = page.split("<table data-looks>", 1)[1].split("</table>", 1)[0].split('<tr data-look="')
    look2, look3 = (re.sub(r">\s+<", "><", row) for row in rows[2:4])
    assert "waiting for 53" in look2 and "<td data-look-bound>2.359</td><td>0.500</td>" in look2
    assert "<td data-look-bound>2.014</td><td></td>" in look3 and "not reached" in look3
