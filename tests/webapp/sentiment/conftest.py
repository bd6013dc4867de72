"""Fixtures of the sentiment tests: the demo study and small generated studies."""

from __future__ import annotations

import csv
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.definition_cache import study_definition

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "stimuli" / "studies" / "sentiment-demo.yaml"


def write_study(
    folder: Path,
    *,
    slug: str = "sent-small",
    n_items: int = 4,
    k: int = 2,
    batch: int = 2,
    n_gold: int = 0,
    gold_rate: float = 0.0,
    n_qual: int = 2,
    qualification: str = "qual-small",
    reservation_minutes: float = 20,
    labels: str = "[Positive, Negative]",
) -> Path:
    """Write a sentiment study with generated items into ``folder``; return the YAML path."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{slug}-items.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "text", "base_sentiment", "source"])
        for i in range(n_items):
            base = "positive" if i % 2 == 0 else "negative"
            w.writerow([f"i{i:03d}", f"Statement number {i}.", base, f"src{i}"])
    with (folder / f"{slug}-qual.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "text", "base_sentiment"])
        for i in range(n_qual):
            w.writerow([f"q{i}", f"Qualification {i}.", "positive" if i % 2 else "negative"])
    gold = ""
    if n_gold:
        with (folder / f"{slug}-gold.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["item_id", "text", "base_sentiment", "gold_label"])
            for i in range(n_gold):
                w.writerow([f"g{i}", f"Gold {i}.", "positive", "positive"])
        gold = f"    gold_items: {slug}-gold.csv\n    gold_rate: {gold_rate}\n"
    path = folder / f"{slug}.yaml"
    path.write_text(
        f"""slug: {slug}
title: Small sentiment study
recruitment:
  completion_codes: {{completed: DONE1, screened_out: SCR1, study_full: FULL1}}
payment: {{base: 1}}
tasks:
  - type: consent
    text: Consent.
  - type: sentiment_qualification
    id: qual
    qualification: {qualification}
    items: {slug}-qual.csv
  - type: sentiment_annotation
    id: ann
    items: {slug}-items.csv
    labels: {labels}
    annotators_per_item: {k}
    items_per_participant: {batch}
    reservation_minutes: {reservation_minutes}
{gold}  - type: debrief
    text: Thanks.
"""
    )
    return path


def load(app, path: Path) -> dict[str, Any]:
    """Load a study file into ``app``; return its definition."""
    from webapp.services.studies import load_study

    with app.app_context():
        return study_definition(load_study(path).study)


@pytest.fixture
def demo(app) -> dict[str, Any]:
    """The sentiment demo study, loaded."""
    return load(app, DEMO)


@pytest.fixture
def small(app, tmp_path) -> Callable[..., dict[str, Any]]:
    """``small(**kw)`` writes and loads a small generated study (see :func:`write_study`)."""

    def factory(**kw: Any) -> dict[str, Any]:
        return load(app, write_study(tmp_path / "study", **kw))

    return factory


@pytest.fixture
def bot_for(app) -> Callable[..., Bot]:
    """``bot_for(definition, external_id, **behaviour)``: an in-process bot."""

    def factory(definition: dict[str, Any], external_id: str, **kw: Any) -> Bot:
        kw.setdefault("platform", "link")
        return Bot(
            FlaskTransport(app),
            definition,
            BotBehaviour(**kw),
            rng=random.Random(external_id),
            external_id=external_id,
        )

    return factory


def label_rows(app) -> list[Any]:
    """Every annotation row (gold items too) as ``(item_id, participant_id, state, label,
    platform ID)``: what the concurrency checks count."""
    from sqlalchemy import select

    from webapp.extensions import db
    from webapp.models import Annotation, AnnotationItem, PlatformIdentity

    with app.app_context():
        return db.session.execute(
            select(
                AnnotationItem.item_id,
                Annotation.participant_id,
                Annotation.state,
                Annotation.label,
                PlatformIdentity.external_id,
            )
            .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
            .join(PlatformIdentity, PlatformIdentity.participant_id == Annotation.participant_id)
        ).all()


def to_first_label(bot: Bot) -> Bot:
    """Open the study and answer consent and qualification: the batch is then reserved."""
    bot.open()
    while bot.page.kind in {"consent", "instructions", "sentiment_qualification"}:
        bot.step()
    return bot
