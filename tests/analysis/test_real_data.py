"""Files shaped like the ones researchers bring: MTurk batch results, Prolific demographics,
model judgments with a label vocabulary nobody here chose.

The MTurk and Prolific files are written in the published formats (column set, order, value
spellings, empty cells) with invented content.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.demographics import (
    describe_demographics,
    join_demographics,
    load_id_map,
    load_prolific_demographics,
)
from analysis.external import label_mapping, load_mturk, load_predictions, parse_label_map
from analysis.io import ExportFormatError
from analysis.simulate import simulate_choice_study
from framelab.cli import main
from tests.analysis.annotation_data import simulate_annotation_study
from webapp.bots import platform_id

# The columns of a requester site "Download CSV" of batch results, in their order; the
# template's own Input.* and Answer.* columns sit between LifetimeApprovalRate-style metadata
# and the Approve/Reject columns.
MTURK_META = [
    "HITId",
    "HITTypeId",
    "Title",
    "Description",
    "Keywords",
    "Reward",
    "CreationTime",
    "MaxAssignments",
    "RequesterAnnotation",
    "AssignmentDurationInSeconds",
    "AutoApprovalDelayInSeconds",
    "Expiration",
    "NumberOfSimilarHITs",
    "LifetimeInSeconds",
    "AssignmentId",
    "WorkerId",
    "AssignmentStatus",
    "AcceptTime",
    "SubmitTime",
    "AutoApprovalTime",
    "ApprovalTime",
    "RejectionTime",
    "RequesterFeedback",
    "WorkTimeInSeconds",
    "LifetimeApprovalRate",
    "Last30DaysApprovalRate",
    "Last7DaysApprovalRate",
]


def mturk_batch(labels: pd.DataFrame, rejected: pd.DataFrame | None = None) -> pd.DataFrame:
    """A batch-results table for ``labels`` (one assignment per row) plus rejected ones."""
    rows = []
    frames = [(labels, "Approved")] + ([(rejected, "Rejected")] if rejected is not None else [])
    for frame, status in frames:
        for i, rec in enumerate(frame.itertuples(index=False)):
            worker = "A" + rec.participant_id.upper().replace("_", "")[:12]
            rows.append(
                {
                    "HITId": f"3X{rec.item_id:0>10}HIT",
                    "HITTypeId": "3SENTIMENTTYPE0000000",
                    "Title": "Read a short review and say its sentiment",
                    "Description": "One sentence, one click",
                    "Keywords": "sentiment, text, review",
                    "Reward": "$0.05",
                    "CreationTime": "Mon Nov 23 09:14:02 PST 2026",
                    "MaxAssignments": "5",
                    "RequesterAnnotation": "BatchId:5012345;OriginalHitTemplateId:928390;",
                    "AssignmentDurationInSeconds": "600",
                    "AutoApprovalDelayInSeconds": "259200",
                    "Expiration": "Mon Nov 30 09:14:02 PST 2026",
                    "NumberOfSimilarHITs": "",
                    "LifetimeInSeconds": "",
                    "AssignmentId": f"3ASG{status[0]}{i:08d}",
                    "WorkerId": worker,
                    "AssignmentStatus": status,
                    "AcceptTime": "Mon Nov 23 09:20:11 PST 2026",
                    "SubmitTime": "Mon Nov 23 09:20:40 PST 2026",
                    "AutoApprovalTime": "Thu Nov 26 09:20:40 PST 2026",
                    "ApprovalTime": "Mon Nov 23 12:00:00 PST 2026" if status == "Approved" else "",
                    "RejectionTime": "" if status == "Approved" else "Mon Nov 23 12:00:01 PST 2026",
                    "RequesterFeedback": "" if status == "Approved" else "Failed the gold item",
                    "WorkTimeInSeconds": "29",
                    "LifetimeApprovalRate": "0% (0/0)",
                    "Last30DaysApprovalRate": "0% (0/0)",
                    "Last7DaysApprovalRate": "0% (0/0)",
                    "Input.ID": rec.item_id,
                    "Input.text": 'It was, sadly, "great", said nobody, ever',
                    "Input.answer": rec.base_sentiment.title(),
                    "Answer.sentiment.label": rec.label.title(),
                    "Approve": "",
                    "Reject": "",
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture
def annotation_study():
    labels, preds = simulate_annotation_study(n_items=24, seed=11)
    return labels, preds


def test_mturk_batch_in_published_format_drops_rejected_and_keeps_pseudonyms(
    tmp_path, annotation_study
):
    labels, _ = annotation_study
    rejected = labels.iloc[:7].assign(label="positive")
    path = tmp_path / "Batch_5012345_batch_results.csv"
    mturk_batch(labels, rejected).to_csv(path, index=False)
    data = load_mturk(path, item_col="Input.ID", base_col="Input.answer")
    assert len(data) == len(labels)  # 7 rejected assignments dropped
    assert not data["participant_id"].str.match(r"^A[A-Z0-9]+$").any()  # worker IDs pseudonymised
    assert (data["label"].to_numpy() == labels["label"].to_numpy()).all()
    assert len(
        load_mturk(path, item_col="Input.ID", base_col="Input.answer", keep_rejected=True)
    ) == (len(labels) + 7)


def test_label_map_parsing_and_errors():
    assert parse_label_map(["Mixed = other", "pos=positive,neg=negative"]) == {
        "mixed": "other",
        "pos": "positive",
        "neg": "negative",
    }
    assert parse_label_map(None) == {}
    with pytest.raises(ValueError, match="write RAW=LABEL"):
        parse_label_map("mixed")
    with pytest.raises(ValueError, match="'happy' is not one of"):
        parse_label_map("mixed=happy")
    with pytest.raises(ValueError, match="mapped to 'other' and 'neutral'"):
        parse_label_map(["mixed=other", "MIXED=neutral"])


def test_predictions_with_an_unknown_vocabulary_load_and_are_reported(tmp_path):
    # One unknown label such as "mixed" must not refuse the whole file.
    path = tmp_path / "judgments.csv"
    path.write_text(
        "item_id,model,label\n1,m,Positive\n2,m,MIXED\n3,m,sarcastic\n4,m,negative\n",
        encoding="utf-8",
    )
    data = load_predictions(path, label_map={"mixed": "other"})
    assert data["label"].tolist() == ["positive", "other", "unmapped", "negative"]
    assert data["raw_label"].tolist() == ["Positive", "MIXED", "sarcastic", "negative"]
    table = label_mapping(data).set_index("raw_label")
    assert table.loc["MIXED", "how"] == "--label-map"
    assert table.loc["sarcastic", "how"] == "unknown: counted as no shift"
    assert table.loc["Positive", "how"] == "as is"
    empty = tmp_path / "empty.csv"
    empty.write_text("item_id,model,label\n1,m,\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match="'label': 1 empty cell"):
        load_predictions(empty)


def test_cli_takes_globbed_files_after_one_flag_and_reports_the_label_map(
    tmp_path, annotation_study
):
    labels, preds = annotation_study
    batches = []
    for k, part in enumerate(np.array_split(np.arange(len(labels)), 3)):
        path = tmp_path / f"Batch_{k}_batch_results.csv"
        mturk_batch(labels.iloc[part], labels.iloc[part[:2]]).to_csv(path, index=False)
        batches.append(str(path))
    models = sorted(preds["model"].unique())
    odd = preds.copy()
    # One model writes "mixed" for neutral and an unknown "sarcastic" for one item.
    first = odd["model"] == models[0]
    odd.loc[first & (odd["label"] == "neutral"), "label"] = "mixed"
    odd.loc[odd.index[first][0], "label"] = "sarcastic"
    pred_files = []
    for model in models:
        path = tmp_path / f"judgments_{model}.csv"
        odd[odd["model"] == model].to_csv(path, index=False)
        pred_files.append(str(path))
    out = tmp_path / "report"
    result = CliRunner().invoke(
        main,
        [
            "analyze",
            "annotations",
            "--mturk",
            *batches,  # what the shell makes of --mturk Batch_*_batch_results.csv
            "--item-col",
            "Input.ID",
            "--base-col",
            "Input.answer",
            f"--predictions={pred_files[0]}",
            *pred_files[1:],
            "--label-map",
            "mixed=neutral",
            "--out",
            str(out),
            "--no-figures",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "'sarcastic'" in result.output
    payload = json.loads((out / "results.json").read_text())
    assert payload["meta"]["n_labels_analysed"] == len(labels)  # rejected ones dropped
    assert payload["meta"]["models"] == models
    assert payload["meta"]["unmapped_model_labels"] == ["sarcastic"]
    mapping = pd.read_csv(out / "label_mapping.csv")
    assert set(mapping.loc[mapping["raw_label"] == "mixed", "label"]) == {"neutral"}
    html = (out / "report.html").read_text()
    assert "sarcastic" in html and "mixed" in html


# --- Prolific demographics ---------------------------------------------------------------

PROLIFIC_HEADER = [
    "Submission id",
    "Participant id",
    "Status",
    "Custom study tncs accepted at",
    "Started at",
    "Completed at",
    "Reviewed at",
    "Archived at",
    "Time taken",
    "Completion code",
    "Total approvals",
    "Age",
    "Sex",
    "Ethnicity simplified",
    "Country of birth",
    "Country of residence",
    "Nationality",
    "Language",
    "Student status",
    "Employment status",
]


def prolific_rows(pids: list[str]) -> list[dict[str, str]]:
    rng = np.random.default_rng(3)
    sexes = ["Female", "Male", "Prefer not to say"]
    countries = ["United Kingdom", "United States", "Germany", "South Africa"]
    rows = []
    for i, pid in enumerate(pids):
        rows.append(
            {
                "Submission id": f"{i:024x}"[-24:],
                "Participant id": pid,
                "Status": "APPROVED",
                "Custom study tncs accepted at": "Not Applicable",
                "Started at": "2026-11-20T10:00:00.000000Z",
                "Completed at": "2026-11-20T10:12:00.000000Z",
                "Reviewed at": "2026-11-21T08:00:00.000000Z",
                "Archived at": "2026-11-21T08:00:00.000000Z",
                "Time taken": str(700 + i),
                "Completion code": "C1A2B3C4",
                "Total approvals": str(int(rng.integers(10, 900))),
                "Age": str(int(rng.integers(18, 70))),
                "Sex": sexes[i % 3],
                "Ethnicity simplified": "White" if i % 2 else "Mixed",
                "Country of birth": countries[i % 4],
                "Country of residence": countries[(i + 1) % 4],
                "Nationality": countries[i % 4],
                "Language": "English",
                # One field past Prolific's retention period, the others fresh.
                "Student status": "DATA_EXPIRED" if i == 3 else "No",
                "Employment status": "Full-Time",
            }
        )
    return rows


@pytest.fixture
def choice_with_pids():
    data = simulate_choice_study(n_participants=12, n_pairs=10, seed=4)
    people = sorted(data["participant_id"].unique())
    pids = {p: platform_id("prolific", p) for p in people}
    return data.assign(platform_participant_id=data["participant_id"].map(pids)), pids


def write_prolific(path, pids: list[str]) -> None:
    rows = prolific_rows(pids)
    for col in PROLIFIC_HEADER[11:]:
        rows[0][col] = "CONSENT_REVOKED"  # a revoked participant: every demographic cell
    for col in ("Age", "Sex", "Country of residence"):
        rows[1][col] = "DATA_EXPIRED"
    # The same person twice: returned first, then completed (Prolific lists both submissions).
    returned = dict(rows[2], Status="RETURNED", Age="99", **{"Submission id": "f" * 24})
    blank = dict.fromkeys(PROLIFIC_HEADER, "")  # hand-edited files end in empty rows
    pd.DataFrame([returned, *rows, blank], columns=PROLIFIC_HEADER).to_csv(path, index=False)


def test_prolific_export_quirks(tmp_path, choice_with_pids):
    _, pids = choice_with_pids
    ids = list(pids.values())
    path = tmp_path / "prolific_export_6543.csv"
    write_prolific(path, ids)
    demo = load_prolific_demographics(path).set_index("platform_participant_id")
    assert len(demo) == len(ids)  # the returned submission gives way to the approved one
    assert demo.loc[ids[0], "demographics_status"] == "consent_revoked"
    assert np.isnan(demo.loc[ids[0], "age"]) and pd.isna(demo.loc[ids[0], "sex"])
    assert demo.loc[ids[1], "demographics_status"] == "data_expired"
    assert demo.loc[ids[3], "demographics_status"] == "data_expired"  # one field suffices
    assert demo.loc[ids[3], "sex"] == "Female" and pd.isna(demo.loc[ids[3], "student_status"])
    assert demo.loc[ids[2], "age"] != 99 and demo.loc[ids[2], "prolific_status"] == "APPROVED"
    assert demo["age"].dtype == float and demo.loc[ids[3], "country"] == "United Kingdom"
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"Participant id": ids[:1], "Age": ["twenty"]}).to_csv(bad, index=False)
    with pytest.raises(ExportFormatError, match="'age' is not numeric"):
        load_prolific_demographics(bad)
    no_id = tmp_path / "no_id.csv"
    pd.DataFrame({"Age": ["30"]}).to_csv(no_id, index=False)
    with pytest.raises(ExportFormatError, match=r"missing column\(s\): \['platform_participant"):
        load_prolific_demographics(no_id)


def test_join_by_export_platform_ids_or_by_a_researcher_map(tmp_path, choice_with_pids):
    data, pids = choice_with_pids
    ids = list(pids.values())
    path = tmp_path / "prolific.csv"
    write_prolific(path, ids[:-1])  # the last participant is not in Prolific's file
    demo = load_prolific_demographics(path)
    joined, summary = join_demographics(data, demo)
    assert len(joined) == len(data)  # a left join never drops trials
    assert summary["n_participants"] == 12 and summary["n_matched"] == 11
    assert summary["n_unmatched"] == 1 and summary["n_consent_revoked"] == 1
    assert summary["n_data_expired"] == 2 and summary["n_demographic_rows_unused"] == 0
    # The pseudonymous export with a researcher's map gives the same join.
    with pytest.raises(ExportFormatError, match="--include-platform-ids"):
        join_demographics(data.drop(columns="platform_participant_id"), demo)
    map_path = tmp_path / "ids.csv"
    pd.DataFrame(
        {"participant_id": list(pids), "platform_participant_id": [f" {v} " for v in ids]}
    ).to_csv(map_path, index=False)
    by_map, summary_map = join_demographics(
        data.drop(columns="platform_participant_id"), demo, id_map=load_id_map(map_path)
    )
    assert summary_map["n_matched"] == 11
    pd.testing.assert_series_equal(by_map["age"], joined["age"])
    table = describe_demographics(joined)
    age = table[table["variable"] == "age (years)"].iloc[0]
    people = joined.drop_duplicates("participant_id")
    assert age["n"] == people["age"].notna().sum() == 9
    assert age["mean"] == pytest.approx(people["age"].mean())
    sex = table[table["variable"] == "sex"].set_index("level")["n"]
    assert sex.sum() == 12 and sex["not available"] == 3


def test_choice_cli_with_demographics(tmp_path, choice_with_pids):
    data, pids = choice_with_pids
    export = tmp_path / "export.csv"
    data.to_csv(export, index=False)
    prolific = tmp_path / "prolific.csv"
    write_prolific(prolific, list(pids.values()))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        [
            "analyze",
            "choice",
            str(export),
            "--demographics",
            str(prolific),
            "--out",
            str(out),
            "--no-figures",
            "--no-gee",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "12 of 12 participants matched (1 consent revoked, 2 data expired" in result.output
    payload = json.loads((out / "results.json").read_text())
    assert payload["meta"]["demographics_join"]["n_matched"] == 12
    assert any(r["variable"] == "country of residence" for r in payload["tables"]["demographics"])
    assert "Participants" in (out / "report.html").read_text()
    # --id-map alone is a usage error, not a silent no-op.
    result = CliRunner().invoke(
        main, ["analyze", "choice", str(export), "--id-map", str(prolific), "--out", str(out)]
    )
    assert result.exit_code == 2 and "--id-map is only used with --demographics" in result.output


def test_choice_cli_adjusts_for_prolific_covariates(tmp_path, choice_with_pids):
    data, pids = choice_with_pids
    export = tmp_path / "export.csv"
    data.to_csv(export, index=False)
    prolific = tmp_path / "prolific.csv"
    write_prolific(prolific, list(pids.values()))
    out = tmp_path / "out"
    args = ["analyze", "choice", str(export), "--demographics", str(prolific), "--no-figures"]
    result = CliRunner().invoke(main, [*args, "--covariates", "age,sex", "--out", str(out)])
    assert result.exit_code == 0, result.output
    adjusted = pd.read_csv(out / "covariate_adjusted.csv")
    assert set(adjusted["model"]) == {"choice GEE (log odds)", "WTP LMM"}
    # Two participants have no age/sex (revoked, expired): their 20 trials are left out.
    assert (adjusted["n_rows_dropped"] == 20).all() and (adjusted["n_obs"] == 100).all()
    assert "age: numeric, centred" in adjusted["coding"].iloc[0]
    assert "adjusted for age,sex" in result.output
    page = (out / "report.html").read_text()
    assert "Adjusted for participant covariates" in page
    # A covariate the data do not have is refused before anything is fitted.
    result = CliRunner().invoke(main, [*args, "--covariates", "shoe_size", "--out", str(out)])
    assert result.exit_code == 2
    assert "shoe_size: not a column of the export" in result.output
