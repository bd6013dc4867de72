"""The console's live overview of an annotation study has a bounded cost: the same statements
and the same handful of item rows at 60 items as at 3,000, a paged item table, totals that
agree with the per-item counts, and one computation per study for many tabs polling at once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, insert, select

from webapp.extensions import db
from webapp.models import (
    Annotation,
    AnnotationItem,
    AnnotationState,
    Participant,
    ParticipantStatus,
    Platform,
    utcnow,
)
from webapp.services.researchers import OVERVIEW_ITEMS

from ..conftest import disposing, make_app
from ..sentiment.conftest import load, write_study


def _study(app, folder: Path, slug: str, n_items: int) -> None:
    """A sentiment study of ``n_items`` items, a third of them with labels and reservations."""
    from webapp.services.allocation import sync_items
    from webapp.services.studies import get_study

    load(app, write_study(folder / slug, slug=slug, n_items=n_items, k=2, batch=2))
    with app.app_context():
        study = get_study(slug)
        sync_items(study)
        now = utcnow()
        pks = list(db.session.scalars(select(AnnotationItem.id).where(_of(study))))
        people = [
            {
                "study_id": study.id,
                "code": f"p_{slug}{i:06d}",
                "platform": Platform.link,
                "seed": i,
                "sequence": "A",
                "status": ParticipantStatus.started,
                "block_index": 2,
                "step": 0,
                "page_seq": 4,
                "quiz_attempts": 0,
                "is_preview": i % 10 == 9,
                "is_test": i % 10 == 9,
                "study_version": study.version,
                "started_at": now,
                "last_seen_at": now,
                "excluded": False,
            }
            for i in range(n_items // 3)
        ]
        db.session.execute(insert(Participant), people)
        ids = list(
            db.session.scalars(select(Participant.id).where(Participant.study_id == study.id))
        )
        states = [AnnotationState.confirmed, AnnotationState.reserved, AnnotationState.surplus]
        db.session.execute(
            insert(Annotation),
            [
                {
                    "item_pk": pks[n],
                    "participant_id": pid,
                    "trial_index": 0,
                    "state": states[n % 3],
                    "reserved_at": now,
                    # every fourth reservation has expired
                    "expires_at": now + timedelta(minutes=-1 if n % 4 == 0 else 10),
                    "label": None if n % 3 == 1 else ("positive", "negative")[n % 2],
                    "surplus": n % 3 == 2,
                }
                for n, pid in enumerate(ids)
            ],
        )
        db.session.commit()


def _of(study):
    return (AnnotationItem.study_id == study.id) & AnnotationItem.is_gold.is_(False)


def _cost(app, client, url: str) -> tuple[int, int, int]:
    """SQL statements, item rows loaded as objects, and bytes of one GET of ``url``."""
    counts = [0, 0]

    def statement(*_):
        counts[0] += 1

    def loaded(*_):
        counts[1] += 1

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", statement)
    event.listen(AnnotationItem, "load", loaded)
    try:
        resp = client.get(url)
    finally:
        event.remove(engine, "before_cursor_execute", statement)
        event.remove(AnnotationItem, "load", loaded)
    assert resp.status_code == 200, url
    return counts[0], counts[1], len(resp.get_data())


@pytest.fixture(scope="module")
def two_studies(tmp_path_factory) -> Path:
    """A database with a study of 60 items and one of 3,000, built once for this module."""
    folder = tmp_path_factory.mktemp("overview")
    with disposing(make_app(f"sqlite:///{folder / 'two.sqlite'}")) as app:
        _study(app, folder, "small-ann", 60)
        _study(app, folder, "large-ann", 3_000)
    return folder / "two.sqlite"


@pytest.fixture
def app(two_studies, tmp_path):
    """A fresh app on its own copy of the two studies' database."""
    with disposing(make_app(f"sqlite:///{tmp_path / 'test.sqlite'}", template=two_studies)) as app:
        yield app


@pytest.fixture
def two_sizes(app, make_researcher):
    admin = make_researcher("admin", admin=True)
    for slug in ("small-ann", "large-ann"):  # first requests settle the per-process caches
        admin.get(f"/researcher/studies/{slug}/live.json")
    return admin


def test_the_overview_costs_the_same_at_3000_items_as_at_60(app, two_sizes):
    small = _cost(app, two_sizes, "/researcher/studies/small-ann/live.json")
    large = _cost(app, two_sizes, "/researcher/studies/large-ann/live.json")
    assert large[0] == small[0]  # the same statements
    assert small[1] == large[1] == OVERVIEW_ITEMS  # the first page of items, never them all
    assert large[2] < 2 * small[2]  # the JSON does not grow with the items
    page = _cost(app, two_sizes, "/researcher/studies/large-ann")
    assert (
        page[1] == OVERVIEW_ITEMS
        and page[0] == _cost(app, two_sizes, "/researcher/studies/small-ann")[0]
    )
    items = "/researcher/studies/{}/items?page={}"
    first, later = (
        _cost(app, two_sizes, items.format("large-ann", 1)),
        _cost(app, two_sizes, items.format("large-ann", 27)),
    )
    assert first[1] == later[1] == 100  # one page of items
    assert first[0] == _cost(app, two_sizes, items.format("small-ann", 1))[0]
    assert later[0] == _cost(app, two_sizes, items.format("large-ann", 2))[0]


def test_totals_and_pages_agree_with_every_items_own_counts(app, two_sizes):
    from webapp.services import slot_report
    from webapp.services.studies import get_study

    with app.app_context():
        study, now = get_study("large-ann"), utcnow()
        every = slot_report.item_status(study, now)  # the export's view: all items at once
        totals = slot_report.slot_totals(study, now)
        paged = [
            row
            for page in range(30)
            for row in slot_report.item_status(study, now, offset=100 * page, limit=100)
        ]
    assert [r.item.item_id for r in paged] == [r.item.item_id for r in every]
    assert [(r.n_labels, r.n_reserved, r.n_surplus, r.needed, r.shift_count) for r in paged] == [
        (r.n_labels, r.n_reserved, r.n_surplus, r.needed, r.shift_count) for r in every
    ]
    assert totals == {
        "items": 3_000,
        "confirmed": sum(r.n_labels for r in every),
        "reserved": sum(r.n_reserved for r in every),
        "needed": sum(r.needed for r in every),
        "surplus": sum(r.n_surplus for r in every),
    }
    # Previews count for nothing, expired reservations are not open, surplus never counts.
    assert 0 < totals["confirmed"] < 1_000 // 3 and 0 < totals["reserved"] < 1_000 // 3
    assert totals["needed"] == 2 * 3_000 - totals["confirmed"]
    html = two_sizes.get("/researcher/studies/large-ann/items?page=30").get_data(as_text=True)
    assert "Page 30 of 30" in html and html.count("<tr data-item=") == 100
    assert f"{totals['items']} items: {totals['confirmed']} labels confirmed" in html


def test_tabs_polling_at_once_share_one_computation(app, two_sizes, monkeypatch):
    from webapp.services import researchers

    app.config["OVERVIEW_CACHE_SECONDS"] = 5.0
    app.extensions.pop("framelab_overview_cache", None)
    calls = []
    real = researchers.dashboard
    gate = threading.Event()

    def counted(*args, **kwargs):
        calls.append(1)
        gate.wait(5)  # slow enough that every tab asks while it is being computed
        return real(*args, **kwargs)

    monkeypatch.setattr(researchers, "dashboard", counted)
    url = "/researcher/studies/large-ann/live.json"
    cookie = two_sizes.get_cookie("framelab_console").value
    tabs = []
    for _ in range(3):
        tab = app.test_client()
        tab.set_cookie("framelab_console", cookie, domain="localhost")
        tabs.append(tab)
    with ThreadPoolExecutor(3) as pool:
        polls = [pool.submit(tab.get, url) for tab in tabs]
        threading.Timer(0.5, gate.set).start()
        answers = [p.result().get_json() for p in polls]
    assert len(calls) == 1 and all(a["slots"] == answers[0]["slots"] for a in answers)
    assert two_sizes.get(url).get_json()["updated_at"] == answers[0]["updated_at"]
    assert len(calls) == 1  # a later poll within the time reuses it too
    two_sizes.get("/researcher/studies/large-ann")  # the study page computes afresh
    assert len(calls) == 2
