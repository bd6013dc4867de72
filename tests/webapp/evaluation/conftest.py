"""Fixtures of the rating and preference tests: the demo studies and in-process bots."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from webapp.bots import Bot, BotBehaviour, FlaskTransport

ROOT = Path(__file__).resolve().parents[3]
RATING_DEMO = ROOT / "stimuli" / "studies" / "rating-demo.yaml"
PREFERENCE_DEMO = ROOT / "stimuli" / "studies" / "preference-demo.yaml"


def load(app, path: Path) -> dict[str, Any]:
    """Load a study file into ``app``; return its definition."""
    from webapp.services.studies import load_study

    with app.app_context():
        return load_study(path).study.definition


@pytest.fixture
def rating_demo(app) -> dict[str, Any]:
    """The rating demo study, loaded."""
    return load(app, RATING_DEMO)


@pytest.fixture
def preference_demo(app) -> dict[str, Any]:
    """The preference demo study, loaded."""
    return load(app, PREFERENCE_DEMO)


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


def export(app, slug: str, fmt: str = "long") -> tuple[list[dict[str, Any]], list[str]]:
    """Rows and columns of one export table of a study."""
    from webapp.services.export import build_table
    from webapp.services.studies import get_study

    with app.app_context():
        return build_table(get_study(slug), fmt)
