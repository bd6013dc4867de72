"""The resumable JSONL store: append, skip done keys, survive a crash mid-write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.llm.store import (
    ResultStore,
    manifest_path,
    read_records,
    result_key,
    write_manifest,
)


def _record(item_id: str, **extra) -> dict:
    return {
        "model": "m",
        "task": "summarize",
        "method": "baseline",
        "template_hash": "abc",
        "item_id": item_id,
        "variant": "",
        "output": f"summary {item_id}",
        **extra,
    }


def test_append_then_reopen_knows_done_keys(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "out.jsonl"
    with ResultStore(out) as store:
        store.append(_record("1"))
        store.append(_record("2", variant="order=gt_first"))
    again = ResultStore(out)
    assert len(again) == 2
    assert result_key(_record("1")) in again
    assert result_key(_record("2", variant="order=gt_first")) in again
    assert result_key(_record("2")) not in again  # the variant is part of the key
    assert [r["item_id"] for r in read_records(out)] == ["1", "2"]


def test_partial_last_line_is_tolerated_and_cut_before_appending(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with ResultStore(out) as store:
        store.append(_record("1"))
    with out.open("a", encoding="utf-8") as fh:  # a crash in the middle of writing record 2
        fh.write(json.dumps(_record("2"))[:25])
    assert [r["item_id"] for r in read_records(out)] == ["1"]
    store = ResultStore(out)
    assert len(store) == 1
    store.append(_record("2"))
    store.close()
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["item_id"] for line in lines] == ["1", "2"]


def test_corrupt_middle_line_is_an_error(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps(_record("1")) + "\n{broken\n" + json.dumps(_record("3")) + "\n")
    with pytest.raises(ValueError, match=r"out\.jsonl:2"):
        ResultStore(out)


def test_manifest_keeps_every_run(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    write_manifest(out, {"counts": {"generated": 3}})
    path = write_manifest(out, {"counts": {"generated": 0}})
    assert path == manifest_path(out) == tmp_path / "out.jsonl.manifest.json"
    data = json.loads(path.read_text())
    assert data["output"] == "out.jsonl"
    assert [r["counts"]["generated"] for r in data["runs"]] == [3, 0]


def test_input_hash_ignores_key_order_and_integral_floats() -> None:
    from analysis.llm.store import input_hash

    assert input_hash({"item_id": "a", "n": 3, "x": {"b": 1.0}}) == input_hash(
        {"x": {"b": 1}, "n": 3.0, "item_id": "a"}
    )
    assert input_hash({"item_id": "a", "truth": True}) != input_hash(
        {"item_id": "a", "truth": False}
    )


def test_records_whose_input_changed_move_to_the_stale_file(tmp_path: Path) -> None:
    from analysis.llm.store import stale_path

    out = tmp_path / "out.jsonl"
    with ResultStore(out) as store:
        store.append(_record("1", input_hash="h1"))
        store.append(_record("2", input_hash="h2"))
        store.append(_record("3"))  # written before records carried the hash
    store = ResultStore(out)
    keys = {i: result_key(_record(i)) for i in "123"}
    gone = store.retire_changed({keys["1"]: "h1-new", keys["2"]: "h2", keys["3"]: "whatever"})
    assert gone == [keys["1"]]
    assert keys["1"] not in store and keys["2"] in store and keys["3"] in store
    assert [r["item_id"] for r in read_records(out)] == ["2", "3"]
    assert [r["input_hash"] for r in read_records(stale_path(out))] == ["h1"]
    assert stale_path(out).name == "out.stale.jsonl"
    store.append(_record("1", input_hash="h1-new"))
    store.close()
    assert len(ResultStore(out)) == 3
    assert ResultStore(out).retire_changed({keys["1"]: "h1-new"}) == []
