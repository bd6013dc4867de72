"""A bot run is repeatable: the server's assignment is seeded (``ASSIGNMENT_SEED``) and every
time it records comes from the simulated clock the bots spend their think time on."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.webapp.conftest import demo_copy, disposing, load_demo, make_app
from webapp.bots import PAGE_S, run_bots
from webapp.clock import SimulatedClock

START = datetime(2025, 1, 6, 9, tzinfo=UTC)


def _run(tmp_path, name: str, seed: int) -> list[dict]:
    from webapp.services.studies import get_study
    from webapp.tasks.product_choice.export import choice_rows

    app = make_app(
        f"sqlite:///{tmp_path / name}", ASSIGNMENT_SEED=seed, CLOCK=SimulatedClock(START)
    )
    with disposing(app):
        # Two of the demo's pairs: the rows and times of a few pages repeat as those of all.
        definition = load_demo(app, demo_copy(tmp_path / f"{name}-demo", pairs=2))
        assert run_bots(app, definition, n=2, seed=11).counts == {"completed": 2}
        with app.app_context():
            # Pseudonyms are salted per study (a new salt for each database): leave them out.
            rows = choice_rows(get_study(definition.slug))
    return [{k: v for k, v in r.items() if k != "participant_id"} for r in rows]


def test_the_same_seeds_give_the_same_rows_and_times(tmp_path):
    first = _run(tmp_path, "a.sqlite", seed=5)
    assert _run(tmp_path, "b.sqlite", seed=5) == first
    # Another assignment seed draws other participant seeds (the bots' own seed is unchanged).
    other = _run(tmp_path, "c.sqlite", seed=6)
    assert {r["seed"] for r in other}.isdisjoint({r["seed"] for r in first})


def test_a_duration_is_the_think_time_the_bot_spent(app, clock, study):
    """Every page takes the bot the response time it reports there (``PAGE_S`` where it reports
    none), to the millisecond, and a participant's duration is the sum over their pages."""
    from webapp.export_common import ExportScope
    from webapp.services.export import page_time_rows
    from webapp.services.studies import get_study
    from webapp.tasks.product_choice.export import choice_rows

    assert run_bots(app, study, n=2, seed=4).counts == {"completed": 2}
    with app.app_context():
        s = get_study(study.slug)
        pages = page_time_rows(ExportScope(s, include_test=True))
        durations = {r["participant_id"]: r["duration_s"] for r in choice_rows(s)}
    assert len(durations) == 2 and len(pages) > 20
    for p in pages:
        assert p["server_ms"] == (p["rt_ms"] if p["rt_ms"] is not None else PAGE_S * 1000), p
    for participant, duration in durations.items():
        spent = sum(p["server_ms"] for p in pages if p["participant_id"] == participant)
        assert duration == spent / 1000
    # And nothing else moved the clock but the consent page each bot read first.
    elapsed = (clock() - START).total_seconds()
    assert elapsed == pytest.approx(sum(durations.values()) + 2 * PAGE_S, abs=1e-6)
