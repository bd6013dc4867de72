"""Reading records and adapting generation records to each metric's input."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis.metrics.extraction import perspective_inputs
from analysis.metrics.overlap import pair_judgments
from analysis.metrics.position import position_input_from_records
from analysis.metrics.records import column, read_records, summary_pairs
from analysis.metrics.report import Section, render_html


def test_read_jsonl_lifts_input_keys(examples):
    records = read_records(examples / "records.jsonl")
    assert len(records) == 29
    assert "input.text" in records.columns and "input.pair_id" in records.columns
    assert column(records, "text") == "input.text"
    with pytest.raises(KeyError, match="'nope' not found"):
        column(records, "nope")


def test_read_csv_with_json_input(tmp_path):
    path = tmp_path / "r.csv"
    pd.DataFrame(
        {
            "item_id": ["1"],
            "task": ["summarize"],
            "input": [json.dumps({"text": "a b c"})],
            "output": ["a"],
        }  # fmt: skip
    ).to_csv(path, index=False)
    pairs = summary_pairs(read_records(path))
    assert pairs[["item_id", "source", "summary"]].values.tolist() == [["1", "a b c", "a"]]


def test_bad_json_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not valid JSON"):
        read_records(path)


def test_unknown_file_type(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("x")
    with pytest.raises(ValueError, match="unknown file type"):
        read_records(path)


def test_pair_judgments_from_records(examples):
    verdicts = pair_judgments(read_records(examples / "records.jsonl"))
    assert len(verdicts) == 6
    j2 = verdicts.loc[verdicts["item_id"] == "j2"]
    assert j2[["first", "second", "label"]].values.tolist() == [
        ["gt", "generated", "gt"],
        ["generated", "gt", "generated"],
    ]


def test_perspective_inputs_recover_sides_right_first():
    records = pd.DataFrame(
        [
            {
                "item_id": "w",
                "model": "m",
                "task": "perspective-summary",
                "order": "right_first",
                "input.left": "L one.\n\nL two.\n\nL three.",
                "input.right": "R one.",
                "output": "s",
            }
        ]
    )
    passages = perspective_inputs(records).iloc[0]["passages"]
    assert passages == [
        {"text": "R one.", "side": "right"},
        {"text": "L one.", "side": "left"},
        {"text": "L two.", "side": "left"},
        {"text": "L three.", "side": "left"},
    ]


def test_position_input_from_records_names_methods(examples):
    records = read_records(examples / "records.jsonl")
    extra = records.loc[records["task"] == "summarize"].head(1).assign(method="mit")
    data = position_input_from_records(pd.concat([records, extra], ignore_index=True))
    assert data["id"].tolist() == ["news/n1", "news/n2", "news/n3"]
    assert set(data.loc[0, "summaries"]) == {"m-lead", "m-tail", "m-lead/mit"}


def test_render_html_escapes_and_lists_sections():
    sec = Section("x", "Title <b>", "desc & more", tables={"t": pd.DataFrame({"a": ["<i>"]})})
    sec.notes.append("note <n>")
    page = render_html([sec], {})
    assert "Title &lt;b&gt;" in page and "desc &amp; more" in page and "&lt;i&gt;" in page
    assert "note &lt;n&gt;" in page and "<a href='t.csv'>" in page
    assert "no records any metric applies to" in render_html([], {})


def test_read_json_list(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps([{"item_id": "1", "input": {"text": "t"}}, {"item_id": "2"}]))
    records = read_records(path)
    assert records["item_id"].tolist() == ["1", "2"] and records.loc[0, "input.text"] == "t"
