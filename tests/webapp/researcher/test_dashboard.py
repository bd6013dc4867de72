"""The live dashboard's JSON, participant actions, and the exports from the console."""

from __future__ import annotations

import csv
import io

SLUG = "product-choice-demo"


def _owned(app, make_researcher):
    from .conftest import own_demo

    ana = make_researcher("ana")
    own_demo(app, "ana")
    return ana


def _act(client, code, action, reason=""):
    from .conftest import page_token

    token = page_token(client, f"/researcher/studies/{SLUG}")
    return client.post(
        f"/researcher/studies/{SLUG}/participants",
        data={"csrf_token": token, "participant": code, "action": action, "reason": reason},
    )


def test_live_json_counts(app, study, make_researcher, make_bot):
    ana = _owned(app, make_researcher)
    empty = ana.get(f"/researcher/studies/{SLUG}/live.json").get_json()
    assert empty["counts"]["arrivals"] == 0 and empty["median_duration_s"] is None
    for _ in range(3):
        make_bot().run()
    make_bot(fail_quiz=True).run()
    make_bot(abandon_at=3).run()
    data = ana.get(f"/researcher/studies/{SLUG}/live.json").get_json()
    c = data["counts"]
    assert (c["arrivals"], c["completed"], c["screened_out"], c["in_progress"]) == (5, 3, 1, 1)
    assert data["median_duration_s"] is not None and data["median_duration_s"] >= 0
    assert data["by_sequence"]["completed"]["total"] == 3
    from webapp.extensions import db
    from webapp.models import ChoiceResponse

    with app.app_context():
        n_choices = db.session.scalar(db.select(db.func.count()).select_from(ChoiceResponse))
    assert n_choices >= 30
    assert sum(v["original"] + v["summary"] for v in data["per_pair"].values()) == n_choices
    assert len(data["participants"]) == 5 and data["state"] == "live"


def test_mark_returned_and_exclude(app, study, make_researcher, make_bot):
    from webapp.extensions import db
    from webapp.models import Participant

    ana = _owned(app, make_researcher)
    make_bot(abandon_at=3).run()
    make_bot().run()
    with app.app_context():
        started, done = (
            p.code for p in db.session.scalars(db.select(Participant).order_by(Participant.id))
        )
    assert _act(ana, started, "timed_out").status_code == 302
    assert _act(ana, done, "returned").status_code == 302  # refused: already completed
    page = ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    assert "only started participants can be marked" in page
    _act(ana, done, "exclude")  # refused: no reason
    assert "give a reason" in ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    _act(ana, done, "exclude", "=cmd|' /C calc'!A0 straight-lining")
    data = ana.get(f"/researcher/studies/{SLUG}/live.json").get_json()
    assert data["counts"]["timed_out"] == 1 and data["counts"]["excluded"] == 1
    long_csv = ana.get(f"/researcher/studies/{SLUG}/export/long.csv").get_data(as_text=True)
    assert len(long_csv.strip().splitlines()) == 1  # the excluded one's 10 rows are left out
    kept_long = ana.get(f"/researcher/studies/{SLUG}/export/long.csv?include_excluded=1")
    assert len(kept_long.get_data(as_text=True).strip().splitlines()) == 1 + 10
    kept = ana.get(f"/researcher/studies/{SLUG}/export/wide.csv?include_excluded=1")
    rows = list(csv.DictReader(io.StringIO(kept.get_data(as_text=True))))
    assert sorted(r["excluded"] for r in rows) == ["0", "1"]


def test_exports_wide_page_times_codebook_and_parquet(app, study, make_researcher, make_bot):
    import pyarrow.parquet as pq

    from webapp.extensions import db
    from webapp.models import TaskResponse

    ana = _owned(app, make_researcher)
    make_bot().run()
    make_bot().run()
    with app.app_context():  # a free-text answer that a spreadsheet would run as a formula
        r = db.session.scalars(
            db.select(TaskResponse).where(TaskResponse.task_type == "demographics")
        ).first()
        r.payload = {"answers": {**r.payload["answers"], "shopping": '=HYPERLINK("x")'}}
        db.session.commit()
    base = f"/researcher/studies/{SLUG}/export"
    wide = list(csv.DictReader(io.StringIO(ana.get(f"{base}/wide.csv").get_data(as_text=True))))
    assert len(wide) == 2
    assert {"chose_target__" in k for k in wide[0]} == {True, False}
    assert sum(int(w["n_choices"]) for w in wide) == 20
    assert any(w["demo_shopping"] == '\'=HYPERLINK("x")' for w in wide)  # neutralised
    pages = list(
        csv.DictReader(io.StringIO(ana.get(f"{base}/page-times.csv").get_data(as_text=True)))
    )
    with app.app_context():
        from webapp.models import PageVisit

        n_visits = db.session.scalar(db.select(db.func.count()).select_from(PageVisit))
    assert len(pages) == n_visits > 20
    assert {p["participant_id"] for p in pages} == {w["participant_id"] for w in wide}
    assert all(p["server_ms"] == "" or int(p["server_ms"]) >= 0 for p in pages)
    book = list(csv.DictReader(io.StringIO(ana.get(f"{base}/codebook.csv").get_data(as_text=True))))
    long_cols = [b for b in book if b["table"] == "long"]
    assert {"column", "type", "meaning", "allowed_values"} <= set(book[0])
    assert (
        next(b for b in long_cols if b["column"] == "format")["allowed_values"]
        == "original|summary"
    )
    assert all(b["meaning"] for b in book)
    resp = ana.get(f"{base}/wide.parquet")
    table = pq.read_table(io.BytesIO(resp.get_data()))
    assert table.num_rows == 2
    assert str(table.schema.field("n_choices").type) == "int64"
    assert str(table.schema.field("duration_s").type) == "double"
    assert ana.get(f"{base}/nonsense.csv").status_code == 404


def test_other_task_types_get_their_own_counts_and_formats(app, make_researcher):
    from .conftest import page_token

    ana = make_researcher("ana")
    token = page_token(ana, "/researcher/")
    resp = ana.post(
        "/researcher/studies/load", data={"csrf_token": token, "name": "sentiment-demo.yaml"}
    )
    assert resp.status_code == 302, resp.get_data(as_text=True)
    slug = resp.headers["Location"].rsplit("/", 1)[1]
    data = ana.get(f"/researcher/studies/{slug}/live.json").get_json()
    assert data["per_pair"] == {} and data["items"]
    assert {"item_id", "confirmed", "reserved", "needed"} <= set(data["items"][0])
    assert all(i["confirmed"] == 0 and i["needed"] > 0 for i in data["items"])
    page = ana.get(f"/researcher/studies/{slug}").get_data(as_text=True)
    assert 'data-export="items-csv"' in page and 'data-export="pairs-csv"' not in page
    assert ana.get(f"/researcher/studies/{slug}/export/pairs.csv").status_code == 404
    # No A/B format-sequence columns where formats are not counterbalanced.
    assert data["has_sequences"] is False and 'data-sequences="no"' in page
    assert 'data-seq="started-A"' not in page and 'data-seq="started-total"' in page
    listing = ana.get("/researcher/").get_data(as_text=True)
    assert "Participants by status and format sequence" not in listing
    # And the product-choice demo has no items table.
    token = page_token(ana, "/researcher/")
    ana.post(
        "/researcher/studies/load", data={"csrf_token": token, "name": "product-choice-demo.yaml"}
    )
    assert ana.get(f"/researcher/studies/{SLUG}/export/items.csv").status_code == 404
    choice_page = ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    assert 'data-sequences="yes"' in choice_page and 'data-seq="started-A"' in choice_page


def test_progress_is_full_only_for_completed_participants(app, study, make_researcher, make_bot):
    from webapp.extensions import db
    from webapp.models import Participant

    ana = _owned(app, make_researcher)
    make_bot().run()
    n_blocks = len(study.tasks)
    on_debrief = make_bot(abandon_at=10**6)
    page = on_debrief.open()
    while page.kind != "completed":  # stop on the debrief, before its last submit
        with app.app_context():
            p = db.session.scalars(db.select(Participant).order_by(Participant.id.desc())).first()
            at_debrief = p.block_index == n_blocks - 1
        if at_debrief:
            break
        page = on_debrief.step()
    assert at_debrief
    make_bot(abandon_at=3).run()
    rows = ana.get(f"/researcher/studies/{SLUG}/live.json").get_json()["participants"]
    by_status = sorted((r["status"], r["progress_pct"]) for r in rows)
    assert by_status[0] == ("completed", 100)
    started = sorted(pct for status, pct in by_status if status == "started")
    # three submissions: consent, instructions and quiz done, on the choices (block 3)
    assert started == [round(100 * 3 / n_blocks), round(100 * (n_blocks - 1) / n_blocks)]
    assert max(started) < 100
