"""Spreadsheet-safe CSVs: formula-like text from outside (a model named ``=1+1``, a scraped
``=HYPERLINK(...)``) comes out inert in every CSV the research package writes, numbers stay
numbers, and the sheets it reads back come back as they were written."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from analysis.safecsv import read_csv, spreadsheet_safe, unquote, write_csv

MODEL = "=1+1"
SCRAPED = '=HYPERLINK("http://x","y")'
# OWASP's payloads and the variants spreadsheets also run: after spaces or zero-width
# characters, full-width signs, a leading tab or carriage return.
PAYLOADS = [MODEL, SCRAPED, "+1+1", "-1+1", "@SUM(A1)", " =1+1", "\u200b=1+1", "\uff1d1+1",
            "\t=1+1", "\r=1+1", "=cmd|' /C calc'!A0"]  # fmt: skip
# Written independently of the implementation: what a spreadsheet would run.
_RUNS = re.compile(r"[\s\u200b\u200c\u200d\u2060\ufeff]*[=+\-@\uff1d\uff0b\uff0d\uff20]")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def inert(cell: str) -> bool:
    """A cell a spreadsheet shows as text or a plain number, never runs."""
    if cell.startswith("'") or _NUMBER.fullmatch(cell):
        return True
    return not cell.startswith(("\t", "\r")) and not _RUNS.match(cell)


def cells_of(folder: Path) -> dict[str, list[str]]:
    """Every cell (header included) of every CSV below ``folder``, by file name."""
    out = {}
    for path in sorted(folder.rglob("*.csv")):
        with path.open(newline="", encoding="utf-8") as fh:
            out[path.name] = [cell for row in csv.reader(fh) for cell in row]
    assert out, f"no CSV written below {folder}"
    return out


def assert_inert(folder: Path, *expected: str) -> None:
    files = cells_of(folder)
    for name, cells in files.items():
        bad = [c for c in cells if not inert(c)]
        assert not bad, (name, bad[:5])
    every = {c for cells in files.values() for c in cells}
    for payload in expected:  # it did reach a file, neutralised
        assert "'" + payload in every, (payload, sorted(files))


@pytest.mark.parametrize("payload", PAYLOADS)
def test_each_payload_is_neutralised_and_reads_back(payload):
    written = spreadsheet_safe(payload)
    assert written.startswith("'") and inert(written)
    assert unquote(written) == payload.replace("\r", "\n")


def test_numbers_stay_numbers_and_plain_text_stays_as_it_is():
    frame = pd.DataFrame({"=score": [-0.5, 2.0], "n": [-3, 4], "ok": [True, False],
                          "text": ["-0.25", "a=b"], "note": ["x\ry", None]})  # fmt: skip
    text = write_csv(frame)
    assert text.splitlines()[:3] == ["'=score,n,ok,text,note", '-0.5,-3,True,-0.25,"x', 'y"']
    back = read_csv(io.StringIO(text))
    assert list(back.columns) == ["=score", "n", "ok", "text", "note"]
    assert back["=score"].tolist() == [-0.5, 2.0] and back["n"].tolist() == [-3, 4]
    assert back["text"].tolist() == ["-0.25", "a=b"] and back["note"][0] == "x\ny"


@given(st.text())
def test_any_text_is_written_inert_and_read_back_exactly(text):
    written = spreadsheet_safe(text)
    assert inert(written) and "\r" not in written
    assert unquote(written) == text.replace("\r\n", "\n").replace("\r", "\n")


def test_no_csv_is_written_around_the_safe_writer():
    """Every CSV writer of the package goes through analysis.safecsv (drift guard): the one
    exception is the annotation item file, a stimulus the platform shows verbatim."""
    root = Path(__file__).resolve().parents[2] / "analysis"
    raw = re.compile(r"\.to_csv\(|csv\.writer\(|csv\.DictWriter\(")
    found = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if raw.search(path.read_text(encoding="utf-8"))
    }
    assert found == {"safecsv.py", "llm/builders.py"}
    builders = (root / "llm" / "builders.py").read_text(encoding="utf-8")
    assert len(raw.findall(builders)) == 1 and "def write_items_csv" in builders


# --- every writer path ---


def test_metrics_report_tables(tmp_path):
    from analysis.cli.metrics import metrics

    examples = Path(__file__).parent / "metrics" / "examples"
    records = []
    for line in (examples / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["model"] = {"m-lead": MODEL}.get(rec["model"], rec["model"])
        if rec["item_id"] == "j1":
            rec["item_id"] = SCRAPED
        records.append(json.dumps(rec))
    source = tmp_path / "records.jsonl"
    source.write_text("\n".join(records) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        metrics, ["report", "-i", str(source), "-o", str(out), "--no-primacy", "--no-figures",
                  "--lexicon", str(examples / "vad.txt")], catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # The tables are what this test reads: --no-figures leaves out the PNGs and their images.
    assert not list(out.glob("*.png")) and "<img" not in (out / "index.html").read_text()
    assert_inert(out, MODEL, SCRAPED)
    holding = [name for name, cells in cells_of(out).items() if "'" + MODEL in cells]
    back = read_csv(out / holding[0])  # the package's reader gives the name back as it was
    assert MODEL in set(back.astype(str).to_numpy().ravel())


def test_analysis_report_tables(tmp_path):
    from analysis.report.pipeline import analyze_choice
    from analysis.report.writer import write_results
    from analysis.simulate import simulate_choice_study

    data = simulate_choice_study(n_participants=40, n_pairs=10, seed=8)
    # identifiers that came in with a study export: a pair named like a formula
    data["pair_id"] = data["pair_id"].replace({"pair10": SCRAPED, "pair08": MODEL})
    results = analyze_choice(data)
    write_results(results, tmp_path, title="t", figures=False)
    assert_inert(tmp_path, MODEL, SCRAPED)
    rates = pd.read_csv(tmp_path / "selection_rates.csv")
    assert rates["estimate"].tolist() == results.tables["selection_rates"]["estimate"].tolist()


def test_rating_set_metrics(tmp_path):
    from framelab.cli import main

    refs = tmp_path / "refs.csv"
    refs.write_text("item_id,perspective,text\nd1,left,People on the left of d1.\n")
    gen = tmp_path / "gen.jsonl"
    rec = {"item_id": "d1", "task": "perspective-summary", "model": MODEL,
           "perspective": "left", "order": "left_first",
           "variant": "order=left_first,perspective=left",
           "input": {"item_id": "d1", "left": "Left passage.", "right": "Right passage."},
           "output": SCRAPED}  # fmt: skip
    gen.write_text(json.dumps(rec) + "\n")
    metrics_out = tmp_path / "m" / "metrics.csv"
    metrics_out.parent.mkdir()
    result = CliRunner().invoke(
        main, ["generate", "rating-set", "--input", str(gen), "--references", str(refs),
               "--out", str(tmp_path / "rating.jsonl"), "--metrics-out", str(metrics_out)],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # System names reach this file as slugs ("1-1"), so nothing formula-like gets this far
    # today; the check keeps the path inert if that changes.
    assert_inert(metrics_out.parent)


def test_news_validation_sheet(tmp_path):
    from analysis.news.falsify import read_validation, write_validation

    (tmp_path / "falsified").mkdir()
    checked = pd.DataFrame({
        "article_id": ["a"], "model": MODEL, "template_hash": "h",
        "authentic": [SCRAPED], "falsified": ["@not " + SCRAPED[1:]],
        "embed_cosine": [0.9], "word_change": [-0.0], "auto_check": "differs",
    })  # fmt: skip
    path = write_validation(tmp_path, checked)
    assert_inert(path.parent, MODEL, SCRAPED)
    # the researcher fills in a verdict in a spreadsheet; a rerun keeps it (the key holds MODEL)
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    rows[1][rows[0].index("manual_valid")] = "yes"
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    write_validation(tmp_path, checked)
    sheet = read_validation(tmp_path)
    assert sheet.loc[0, "model"] == MODEL and sheet.loc[0, "authentic"] == SCRAPED
    assert sheet.loc[0, "manual_valid"] is True and len(sheet) == 1


def test_examples():
    import doctest

    import analysis.safecsv

    result = doctest.testmod(analysis.safecsv, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
