"""Fixtures of the rating and preference tests: the demo studies and in-process bots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# Shared fixtures: Chromium at 360 px from the e2e tests; the sentiment tests' study loader and
# in-process bot factory serve these task types as well.
from tests.e2e.conftest import browser_page  # noqa: F401
from tests.webapp.sentiment.conftest import bot_for, load  # noqa: F401

ROOT = Path(__file__).resolve().parents[3]
RATING_DEMO = ROOT / "stimuli" / "studies" / "rating-demo.yaml"
PREFERENCE_DEMO = ROOT / "stimuli" / "studies" / "preference-demo.yaml"


@pytest.fixture
def rating_demo(app) -> dict[str, Any]:
    """The rating demo study, loaded."""
    return load(app, RATING_DEMO)


@pytest.fixture
def preference_demo(app) -> dict[str, Any]:
    """The preference demo study, loaded."""
    return load(app, PREFERENCE_DEMO)


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
payment: {{base: 1}}
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
