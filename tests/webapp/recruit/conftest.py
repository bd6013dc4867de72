"""Recruiter fixtures: a fake Prolific on loopback, and the demo study with a recruiter block."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.webapp.conftest import demo_copy
from tests.webapp.recruit.fake_prolific import TOKEN, FakeProlific, FakeServer
from tests.webapp.researcher.conftest import make_researcher  # noqa: F401  (a fixture)
from webapp.definition_cache import study_definition

PROLIFIC_BLOCK = """
recruiter:
  platform: prolific
  places: 6
  reward: 3.00
  estimated_minutes: 12
  devices: [desktop]
  eligibility:
    - {filter_id: current-country-of-residence, selected_values: ["1", "2"]}
"""


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retries back off without sleeping; the waits asked for are recorded."""
    waits: list[float] = []
    monkeypatch.setattr("webapp.recruit.base._sleep", waits.append)
    return waits


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProlific]:
    """A fake Prolific on 127.0.0.1; PROLIFIC_API_URL and PROLIFIC_TOKEN point at it."""
    server = FakeServer()
    monkeypatch.setenv("PROLIFIC_API_URL", server.fake.url)
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    yield server.fake
    server.stop()


# Two of the demo's ten pairs at five times its bonus per matching choice (see study_with).
SHORT_DEMO = {"pairs": 2, "bonus_usd": 0.50}


def study_with(tmp_path: Path, block: str, name: str = "recruit-demo.yaml") -> Path:
    """The demo study bundle copied to ``tmp_path`` with ``block`` appended to its YAML.

    Two of its ten pairs at five times the bonus per matching choice: a participant's pages
    are a third as many, and every amount of money is the demo's ($1.00 of bonus at most).
    """
    path = demo_copy(tmp_path / "bundle", **SHORT_DEMO, name=name)
    path.write_text(path.read_text(encoding="utf-8") + block, encoding="utf-8")
    return path


@pytest.fixture
def load_recruit_study(app, tmp_path: Path) -> Callable[[str], dict[str, Any]]:
    """``load_recruit_study(block)``: the demo with a recruiter block, loaded; its definition."""

    def load(block: str = PROLIFIC_BLOCK) -> dict[str, Any]:
        from webapp.services.studies import load_study

        with app.app_context():
            return study_definition(load_study(study_with(tmp_path, block)).study)

    return load
