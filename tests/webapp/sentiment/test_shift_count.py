"""The platform's shift count is the paper's: the console, the ``items`` export and
``analysis.stats.annotation.shift_counts`` count the votes for the sentiment opposite to the
base (WildFrame, 002 §2.3), so neutral votes are no shift, and agree item by item on one set of
labels."""

from __future__ import annotations

import csv
import re

import pytest
from sqlalchemy import insert, select

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

from ..researcher.conftest import PASSWORD, login

# Five confirmed votes per item; i000 is positive, i001 negative (write_study alternates).
VOTES = {
    "i000": ["negative", "neutral", "neutral", "positive", "positive"],
    "i001": ["positive", "positive", "neutral", "negative", "neutral"],
}
OPPOSITE_VOTES = {"i000": 1, "i001": 2}


@pytest.fixture
def labelled(app, small):
    """The small study with three labels, and :data:`VOTES` confirmed by five participants."""
    from webapp.services.allocation import sync_items
    from webapp.services.studies import get_study

    small(n_items=2, k=5, labels="[Positive, Negative, Neutral]")
    with app.app_context():
        study = get_study("sent-small")
        sync_items(study)
        now = utcnow()
        db.session.execute(
            insert(Participant),
            [
                {
                    "study_id": study.id,
                    "code": f"p_{i:06d}",
                    "platform": Platform.link,
                    "seed": i,
                    "sequence": "A",
                    "status": ParticipantStatus.completed,
                    "study_version": study.version,
                    "started_at": now,
                    "last_seen_at": now,
                }
                for i in range(5)
            ],
        )
        people = list(
            db.session.scalars(select(Participant.id).where(Participant.study_id == study.id))
        )
        pk = dict(
            db.session.execute(
                select(AnnotationItem.item_id, AnnotationItem.id).where(
                    AnnotationItem.study_id == study.id
                )
            ).all()
        )
        db.session.execute(
            insert(Annotation),
            [
                {
                    "item_pk": pk[item],
                    "participant_id": pid,
                    "trial_index": t,
                    "state": AnnotationState.confirmed,
                    "reserved_at": now,
                    "expires_at": now,
                    "answered_at": now,
                    "label": labels[n],
                    "surplus": False,
                }
                for t, (item, labels) in enumerate(VOTES.items())
                for n, pid in enumerate(people)
            ],
        )
        db.session.commit()


def _read(path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_the_items_export_and_the_analysis_count_opposite_votes_alike(runner, labelled, tmp_path):
    pytest.importorskip("pandas")
    from analysis.io import load_export
    from analysis.stats.annotation import shift_counts

    out = {}
    for fmt in ("items", "long"):
        out[fmt] = tmp_path / f"{fmt}.csv"
        args = ["export", "sent-small", "--format", fmt, "--out", str(out[fmt])]
        assert runner.invoke(args=args).exit_code == 0
    platform = {r["item_id"]: int(r["shift_count"]) for r in _read(out["items"])}
    analysed = shift_counts(load_export(out["long"]))
    assert platform == OPPOSITE_VOTES
    assert dict(zip(analysed["item_id"], analysed["shift_count"], strict=True)) == OPPOSITE_VOTES


def test_the_console_labels_its_shift_column_as_opposite_votes(app, client, labelled):
    from webapp.services.researchers import set_researcher

    with app.app_context():
        set_researcher("ann", PASSWORD, is_admin=True)
    assert login(client, "ann").status_code == 302
    page = client.get("/researcher/studies/sent-small/items").text
    assert "shift (opposite)" in page and "a neutral label is no shift" in page
    for item, n in OPPOSITE_VOTES.items():
        row = re.search(rf'<tr data-item="{item}">((?:<td>[^<]*</td>)+)', page).group(1)
        assert re.findall(r"<td>([^<]*)</td>", row)[5] == str(n)
