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


def write_preference_study(folder: Path, *, n_pairs: int = 10, k: int = 4, batch: int = 2) -> Path:
    """A preference study with generated pairs (``a`` = human, ``b`` = model); its YAML path."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "pairs.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(n_pairs):
            rec = {
                "pair_id": f"pair{i:03d}",
                "source": f"Source text number {i}.",
                "a": {"system": "human", "text": f"Human summary {i}."},
                "b": {"system": "model", "text": f"Model summary {i}."},
            }
            fh.write(json.dumps(rec) + "\n")
    path = folder / "pref-small.yaml"
    path.write_text(
        f"""slug: pref-small
title: Small preference study
recruitment:
  completion_codes: {{completed: DONE1, screened_out: SCR1, study_full: FULL1}}
payment: {{base_usd: 1}}
tasks:
  - type: consent
    text: Consent.
  - type: pairwise_preference
    id: prefer
    items: pairs.jsonl
    raters_per_item: {k}
    items_per_participant: {batch}
  - type: debrief
    text: Thanks.
"""
    )
    return path
