"""PoliSum shuffles the passages of each perspective before they alternate; the seed is recorded
and the extraction metrics rebuild exactly the passages the model saw."""

from __future__ import annotations

import random
from pathlib import Path

from analysis.llm.tasks import TaskOptions, mix_passages, run_task
from analysis.metrics.extraction import perspective_inputs
from analysis.metrics.records import read_records

LEFT = "\n".join(f"Left passage {i} argues for the plan." for i in range(1, 7))
RIGHT = "\n".join(f"Right passage {i} argues against it." for i in range(1, 7))
ITEM = {"item_id": "p1", "left": LEFT, "right": RIGHT}


def test_mixing_shuffles_each_side_with_the_seed_then_alternates():
    units = mix_passages(LEFT, RIGHT, seed=7).split("\n\n")
    left, right = LEFT.splitlines(), RIGHT.splitlines()
    random.Random(7).shuffle(left)
    random.Random(7).shuffle(right)
    assert units == [u for pair in zip(left, right, strict=True) for u in pair]
    assert units[0::2] != LEFT.splitlines()  # not the source order
    assert mix_passages(LEFT, RIGHT) == mix_passages(LEFT, RIGHT, seed=None)  # unshuffled


def test_each_record_carries_its_seed_and_extraction_recovers_the_sides(
    tmp_path: Path, fake_backend
) -> None:
    out = tmp_path / "p.jsonl"
    shown_texts: list[str] = []

    def answer(req):
        shown_texts.append(req.messages[-1]["content"])
        return "A summary."

    backend = fake_backend(answer)
    run_task("perspective-summary", [ITEM], backend, out, progress=False)
    records = read_records(out)
    seeds = set(records["passage_seed"].astype(str))
    assert len(seeds) == 1  # both orders and both perspectives show the same shuffle
    seed = int(seeds.pop())
    assert all(t.count(" argues ") == 12 for t in shown_texts)
    shown = perspective_inputs(records)
    row = shown.loc[shown["order"] == "left_first"].iloc[0]
    assert [p["text"] for p in row["passages"]] == mix_passages(LEFT, RIGHT, seed).split("\n\n")
    assert any(mix_passages(LEFT, RIGHT, seed) in t for t in shown_texts)  # what the model saw
    assert [p["side"] for p in row["passages"]] == ["left", "right"] * 6
    for p in row["passages"]:
        assert p["text"].startswith(p["side"].capitalize())
    # Another run seed gives another, equally recorded, order.
    other = tmp_path / "q.jsonl"
    run_task("perspective-summary", [ITEM], fake_backend(lambda req: "A summary."), other,
             options=TaskOptions(passage_seed=1), progress=False)  # fmt: skip
    assert set(read_records(other)["passage_seed"].astype(str)) != {str(seed)}
