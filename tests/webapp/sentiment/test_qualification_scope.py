"""Qualification results are scoped by the owner of the study they were taken in: another
researcher's study with the same qualification name can neither fail nor pass anyone."""

from __future__ import annotations

from sqlalchemy import select

from webapp.extensions import db
from webapp.models import QualificationResult, Researcher, Study


def _own(app, slug: str, username: str | None) -> None:
    """Give the study ``slug`` to ``username`` (created if needed); ``None`` leaves it unowned."""
    with app.app_context():
        study = db.session.scalars(select(Study).where(Study.slug == slug)).one()
        if username is None:
            study.owner_id = None
        else:
            who = db.session.scalars(select(Researcher).where(Researcher.username == username))
            researcher = who.one_or_none()
            if researcher is None:
                researcher = Researcher(username=username, password_hash="x")
                db.session.add(researcher)
                db.session.flush()
            study.owner_id = researcher.id
        db.session.commit()


def test_another_researchers_qualification_of_the_same_name_neither_fails_nor_passes(
    app, small, bot_for
):
    mallory = small(slug="sent-mallory", qualification="shared-pool")
    _own(app, "sent-mallory", "mallory")
    # Mallory's study fails w1 on purpose and passes w2 (any answers would do).
    assert bot_for(mallory, "w1", fail_quiz=True).run().outcome == "screened_out"
    assert bot_for(mallory, "w2").run().outcome == "completed"
    ana = small(slug="sent-ana", qualification="shared-pool")
    _own(app, "sent-ana", "ana")
    # In Ana's study both take Ana's qualification themselves.
    failed_elsewhere = bot_for(ana, "w1")
    assert failed_elsewhere.run().outcome == "completed"
    assert "sentiment_qualification" in failed_elsewhere.history
    passed_elsewhere = bot_for(ana, "w2", fail_quiz=True)
    assert passed_elsewhere.run().outcome == "screened_out"
    assert "sentiment_qualification" in passed_elsewhere.history
    # Ana's second study of the same name reuses Ana's results, not Mallory's.
    ana_two = small(slug="sent-ana-two", qualification="shared-pool")
    _own(app, "sent-ana-two", "ana")
    again = bot_for(ana_two, "w2")
    assert again.run().outcome == "screened_out"
    assert "sentiment_qualification" not in again.history
    with app.app_context():
        rows = db.session.scalars(
            select(QualificationResult).order_by(QualificationResult.id)
        ).all()
        assert [(r.external_id, r.passed) for r in rows] == [
            ("w1", False),
            ("w2", True),
            ("w1", True),
            ("w2", False),
        ]
