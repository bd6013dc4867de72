"""The readers: platform exports, tidy CSVs, MTurk batches and model judgments."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis.external import load_mturk, load_predictions
from analysis.io import (
    CHOICE_LONG_COLUMNS,
    ExportFormatError,
    load_annotations,
    load_choice,
    load_export,
)
from analysis.simulate import simulate_choice_study
from tests.analysis.annotation_data import simulate_annotation_study


@pytest.fixture
def choice_csv(tmp_path):
    path = tmp_path / "choice.csv"
    simulate_choice_study(n_participants=6, n_pairs=10, seed=0).to_csv(path, index=False)
    return path


def test_long_choice_export_round_trips_with_types(choice_csv):
    data = load_export(choice_csv)
    assert list(data.columns) == list(CHOICE_LONG_COLUMNS)
    assert data["chose_target"].isin([0, 1]).all()
    assert data["wtp_premium_pct"].dtype == float
    assert set(data["format"]) == {"original", "summary"}
    assert data["participant_id"].str.startswith("p_").all()
    assert load_choice(choice_csv).shape == data.shape


def test_long_export_parquet(tmp_path):
    path = tmp_path / "choice.parquet"
    simulate_choice_study(n_participants=3, n_pairs=4, seed=1).to_parquet(path)
    assert len(load_choice(path)) == 12


def test_missing_and_renamed_columns_are_named(choice_csv, tmp_path):
    df = pd.read_csv(choice_csv).rename(columns={"wtp_premium_pct": "wtp_pct"})
    df = df.drop(columns=["rt_ms"])
    bad = tmp_path / "bad.csv"
    df.to_csv(bad, index=False)
    with pytest.raises(ExportFormatError) as info:
        load_export(bad, "choice")
    message = str(info.value)
    assert "'wtp_premium_pct'" in message and "'rt_ms'" in message
    assert "unexpected column(s): ['wtp_pct']" in message


def test_wrong_values_are_named(choice_csv, tmp_path):
    df = pd.read_csv(choice_csv, dtype=str)
    df.loc[0, "format"] = "tl;dr"
    df.loc[1, "chose_target"] = "2"
    df.loc[2, "wtp_premium_pct"] = "ten"
    bad = tmp_path / "bad.csv"
    df.to_csv(bad, index=False)
    with pytest.raises(ExportFormatError) as info:
        load_choice(bad)
    message = str(info.value)
    assert "'format'" in message and "'tl;dr'" in message
    assert "'chose_target': must be 0/1" in message
    assert "'wtp_premium_pct': not numeric ('ten')" in message


def test_latin_square_sequences_beyond_a_and_b(choice_csv, tmp_path):
    # A k-format study's participants follow the rows A, B, C, ... of its Latin square, and
    # its formats carry the block's own names.
    df = pd.read_csv(choice_csv, dtype=str)
    letters = list("ABCDEFGH")
    df["sequence"] = [letters[i % 8] for i in range(len(df))]
    df.loc[0, "sequence"] = "c"
    df.loc[1, "format"] = "mitigated:self-debias"
    df.loc[2, "format"] = "neutral-summary"
    path = tmp_path / "eight.csv"
    df.to_csv(path, index=False)
    data = load_choice(path)
    assert set(data["sequence"]) == set(letters)
    assert data.loc[0, "sequence"] == "C"
    assert data.loc[1:2, "format"].tolist() == ["mitigated:self-debias", "neutral-summary"]


@pytest.mark.parametrize("bad", ["I", "AB", "1"])
def test_sequence_outside_the_latin_square_is_named(choice_csv, tmp_path, bad):
    df = pd.read_csv(choice_csv, dtype=str)
    df.loc[3, "sequence"] = bad
    path = tmp_path / "bad.csv"
    df.to_csv(path, index=False)
    with pytest.raises(ExportFormatError) as info:
        load_choice(path)
    message = str(info.value)
    assert f"'sequence': unexpected value(s) {bad!r}" in message
    assert "one letter A to H" in message


def test_tidy_choice_csv_with_optional_columns_absent(tmp_path):
    path = tmp_path / "tidy.csv"
    path.write_text(
        "participant_id,pair_id,format,chose_target,wtp_premium_pct\n"
        "007,p1,Original,1,10.5\n007,p2,summary,0,\n008,p1,summary,1,3\n",
        encoding="utf-8",
    )
    data = load_choice(path)
    assert data["participant_id"].tolist() == ["007", "007", "008"]  # leading zeros kept
    assert data["format"].tolist() == ["original", "summary", "summary"]
    assert pd.isna(data.loc[1, "wtp_premium_pct"])
    assert {"status", "quiz_passed", "attention_passed", "duration_s"} <= set(data.columns)
    assert data["status"].isna().all()


def test_tidy_choice_csv_missing_required(tmp_path):
    path = tmp_path / "tidy.csv"
    path.write_text("participant_id,pair,format,chose_target\n1,a,original,1\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"missing column\(s\): \['pair_id', 'wtp_premium"):
        load_choice(path)


def test_long_export_without_study_slug_names_every_missing_column(tmp_path):
    # A long export that lost columns is no tidy CSV: its other columns (rt_ms here) would
    # reach the statistics untyped.
    data = simulate_choice_study(n_participants=6, n_pairs=4, seed=1)
    path = tmp_path / "choice_long.csv"
    data.drop(columns=["study_slug", "seed"]).to_csv(path, index=False)
    with pytest.raises(ExportFormatError) as info:
        load_choice(path)
    assert "missing column(s): ['study_slug', 'seed']" in str(info.value)
    assert "choice_long.csv" in str(info.value)


def test_annotation_export(tmp_path):
    labels, _ = simulate_annotation_study(n_items=10, seed=0)
    path = tmp_path / "labels.csv"
    labels.to_csv(path, index=False)
    data = load_annotations(path)
    assert len(data) == 50
    assert set(data["label"]) <= {"positive", "negative", "neutral"}
    assert data["gold_correct"].isna().all()


def write_mturk(path, rows):
    header = [
        "HITId",
        "WorkerId",
        "AssignmentStatus",
        "Input.ID",
        "Input.text",
        "Input.answer",
        "Answer.sentiment.label",
    ]
    pd.DataFrame(rows, columns=header).to_csv(path, index=False)


def test_mturk_batches_with_mapping_and_case(tmp_path):
    first, second = tmp_path / "batch1.csv", tmp_path / "batch2.csv"
    write_mturk(
        first,
        [
            ("h1", "A1B2", "Approved", "17", "good, sadly", "Positive", "Negative"),
            ("h1", "A9", "Rejected", "17", "good, sadly", "Positive", "Positive"),
        ],
    )
    write_mturk(second, [("h2", "A1B2", "Submitted", "18", "bad", "negative", "NEUTRAL")])
    # The seed study's batch files name their columns Input.ID / Input.answer.
    data = load_mturk([first, second], item_col="Input.ID", base_col="Input.answer")
    assert data["item_id"].tolist() == ["17", "18"]  # the rejected assignment is dropped
    assert data["label"].tolist() == ["negative", "neutral"]
    assert data["base_sentiment"].tolist() == ["positive", "negative"]
    assert data["participant_id"].nunique() == 1
    assert not data["participant_id"].str.contains("A1B2").any()  # worker IDs pseudonymised
    assert (data["platform"] == "mturk_batch").all()
    mapped = {"item_col": "Input.ID", "base_col": "Input.answer"}
    assert len(load_mturk(first, keep_rejected=True, **mapped)) == 2


def test_mturk_custom_columns_and_errors(tmp_path):
    path = tmp_path / "b.csv"
    pd.DataFrame(
        {"WorkerId": ["w"], "Input.item": ["x"], "Answer.s": ["happy"], "Input.base": ["positive"]}
    ).to_csv(path, index=False)
    with pytest.raises(ExportFormatError, match=r"missing column\(s\): \['Input.item_id'"):
        load_mturk(path)
    with pytest.raises(ExportFormatError, match="'label': unexpected value"):
        load_mturk(path, item_col="Input.item", label_col="Answer.s", base_col="Input.base")


def test_mturk_missing_columns_point_at_the_inputs_and_answers_only(tmp_path):
    # Found by the outside walkthrough: MTurk's own columns (HITId, AssignmentId, …) were listed
    # as "unexpected" beside the flags' missing ones; the candidates are Input.* and Answer.*.
    path = tmp_path / "b.csv"
    pd.DataFrame(
        {
            "HITId": ["h"],
            "AssignmentId": ["a"],
            "WorkerId": ["w"],
            "AssignmentStatus": ["Submitted"],
            "Input.item_id": ["x"],
            "Input.base_sentiment": ["positive"],
            "Answer.sentiment.label": ["Positive"],
        }
    ).to_csv(path, index=False)
    with pytest.raises(ExportFormatError) as info:
        load_mturk(path, item_col="Input.ID", base_col="Input.answer")
    assert str(info.value).endswith(
        "missing column(s): ['Input.ID', 'Input.answer']; "
        "unexpected column(s): ['Input.item_id', 'Input.base_sentiment']"
    )


def test_predictions_csv_and_jsonl(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("item_id,model,label\n1,gpt,Positive\n2,gpt,other\n", encoding="utf-8")
    jsonl = tmp_path / "judge.jsonl"
    records = [
        {"item_id": "1", "model": "llama", "task": "judge-framing", "label": "negative"},
        {"item_id": "1", "model": "llama", "task": "summarize", "label": None},
    ]
    jsonl.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    data = load_predictions([csv, jsonl])
    assert data[["item_id", "model", "label"]].to_dict("records") == [
        {"item_id": "1", "model": "gpt", "label": "positive"},
        {"item_id": "2", "model": "gpt", "label": "other"},
        {"item_id": "1", "model": "llama", "label": "negative"},
    ]
    assert data["raw_label"].tolist() == ["Positive", "other", "negative"]
    with pytest.raises(ExportFormatError, match="repeat a"):
        load_predictions([csv, csv])
    bad = tmp_path / "bad.csv"
    bad.write_text("item,model,label\n1,gpt,positive\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"\['item_id'\]"):
        load_predictions(bad)


def test_long_choice_export_is_read_once(choice_csv, monkeypatch):
    """load_choice validates the frame it read; it used to read a long export twice."""
    import analysis.io as io

    calls = []
    real = io.read_table
    monkeypatch.setattr(io, "read_table", lambda path: calls.append(path) or real(path))
    data = load_choice(choice_csv)
    assert len(calls) == 1
    pd.testing.assert_frame_equal(data, load_export(choice_csv))


def test_text_columns_are_the_same_from_csv_and_from_typed_parquet(tmp_path):
    """CSV text columns take the vectorised path, non-text parquet columns str() per value."""
    frame = simulate_choice_study(n_participants=4, n_pairs=10, seed=1)
    frame.loc[frame.index[:3], "product_type"] = None  # empty cells must stay None
    csv_path, pq_path = tmp_path / "c.csv", tmp_path / "c.parquet"
    frame.to_csv(csv_path, index=False)
    typed = frame.copy()
    typed["answered_at"] = range(len(typed))  # an integer column where the schema wants text
    typed.to_parquet(pq_path, index=False)
    typed.assign(answered_at=typed["answered_at"].astype(str)).to_csv(csv_path, index=False)
    from_csv, from_pq = load_export(csv_path), load_export(pq_path)
    for col in ("participant_id", "answered_at", "product_type"):
        assert from_csv[col].dtype == object
        assert from_csv[col].tolist() == from_pq[col].tolist()
    assert from_csv["product_type"].iloc[:3].tolist() == [None] * 3
    assert from_pq["answered_at"].iloc[:2].tolist() == ["0", "1"]


def test_amounts_in_the_study_currency_and_older_dollar_columns(choice_csv, tmp_path):
    """Exports name the amounts' currency beside them; an older export's `_usd` columns are
    read as those amounts in USD, so both load into one shape."""
    current = pd.read_csv(choice_csv, dtype=str)
    assert {"currency", "other_price", "wtp_premium"} <= set(current.columns)
    older = current.drop(columns="currency").rename(
        columns={"other_price": "other_price_usd", "wtp_premium": "wtp_premium_usd"}
    )
    older_path, path = tmp_path / "dollars.csv", tmp_path / "euros.csv"
    older.to_csv(older_path, index=False)
    current.assign(currency="EUR").to_csv(path, index=False)
    from_older, from_current = load_export(older_path), load_export(path)
    assert list(from_older.columns) == list(from_current.columns) == list(CHOICE_LONG_COLUMNS)
    assert set(from_older["currency"]) == {"USD"} and set(from_current["currency"]) == {"EUR"}
    pd.testing.assert_frame_equal(
        from_older.drop(columns="currency"), from_current.drop(columns="currency")
    )
    both = older.assign(other_price=older["other_price_usd"])
    both.to_csv(path, index=False)
    with pytest.raises(ExportFormatError, match="keep one spelling of each amount"):
        load_export(path)
