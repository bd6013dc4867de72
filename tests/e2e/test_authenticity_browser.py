"""Simulated populations in Chromium against the authenticity signals
(bench/authenticity_populations.py): a person's pace is not flagged; speeders, paste-bots, HTTP
bots and an LLM agent driving the browser through SmolLM2 are.

The clock is real (time scale 1): the reading floor is 1,000 words a minute, the scripted person
reads at 200-400. Machine load only slows every session down, which keeps the person above the
floor; the scripted populations answer a page in well under a second, an eighth of their floor.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import authenticity_populations as bench  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_person_is_not_flagged_and_scripted_populations_are(chromium_path):
    result = bench.run(
        chromium=chromium_path,
        n=1,
        n_agents=0,
        n_http=2,
        scale=1.0,
        seed=7,
        populations=("human", "speeder", "paste", "http"),
    )["populations"]
    assert {name: r["completed"] for name, r in result.items()} == {
        "human": 1,
        "speeder": 1,
        "paste": 1,
        "http": 2,
    }
    human = result["human"]
    assert human["flagged"] == 0 and human["median_score"] <= 1
    assert set(human["reasons"]) <= {"shared_device"}  # a screen and zone drawn alike, at most
    assert result["speeder"]["flagged"] == 1 and "fast" in result["speeder"]["reasons"]
    assert result["paste"]["flagged"] == 1
    assert {"fast", "paste"} <= set(result["paste"]["reasons"])
    http = result["http"]
    assert http["flagged"] == 2
    assert {"automation", "fast", "shared_device"} <= set(http["reasons"])


def test_an_llm_agent_in_the_browser_answers_and_is_scored(chromium_path):
    """The tier's slowest test (the model's load, then one CPU call per page), kept to the
    least that shows the agent flagged: one session, seeded, greedy decoding, through the
    benchmark's study, whose two pairs are the fewest a product-choice block takes."""
    from tests.analysis.smollm2 import smollm2_dir

    smollm2_dir()  # skips (or fails in CI) without the model's package
    run = bench.run(
        chromium=chromium_path,
        n=0,
        n_agents=1,
        n_http=0,
        scale=1.0,
        seed=3,
        populations=("agent",),
    )
    agent = run["populations"]["agent"]
    assert agent["sessions"] == 1 and agent["completed"] == 1
    assert run["agent_calls"] >= 5  # one model call per page with a form to fill
    # It fills every text field it finds in the page's form without typing, the invisible one
    # too, so it is flagged whatever its model answered; whether it also follows the canary
    # depends on what the model writes (docs/benchmarks.md).
    assert {"honeypot", "untyped"} <= set(agent["reasons"]) and agent["flagged"] == 1
