"""Concurrent enrolment into a three-format study on PostgreSQL stays balanced."""

from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import select

from webapp.bots import run_bots
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import ChoiceResponse, Participant

from ..conftest import ROOT

FORMATS_DEMO = ROOT / "stimuli" / "studies" / "product-choice-formats-demo.yaml"

pytestmark = pytest.mark.postgres


def test_concurrent_arrivals_stay_balanced_over_three_sequences(pg_app, serve_app):
    from webapp.services.studies import load_study

    with pg_app.app_context():
        definition = study_definition(load_study(FORMATS_DEMO).study)
    summary = run_bots(None, definition, n=12, url=serve_app(pg_app), concurrency=6, seed=2)
    assert summary.errors == [] and summary.counts == {"completed": 12}
    with pg_app.app_context():
        sequences = Counter(db.session.scalars(select(Participant.sequence)))
        cells = Counter(db.session.execute(select(ChoiceResponse.pair_id, ChoiceResponse.format)))
    assert sequences == {"A": 4, "B": 4, "C": 4}
    assert len(cells) == 6 * 3 and set(cells.values()) == {4}
