"""Every report table goes through one path: APA-style HTML and LaTeX from the same cells."""

from __future__ import annotations

import re
import shutil
import subprocess

import pandas as pd
import pytest

from analysis.report.numbers import DASH, MINUS
from analysis.report.pipeline import analyze_choice
from analysis.report.tables import report_table
from analysis.report.writer import write_results
from analysis.simulate import simulate_choice_study


@pytest.fixture(scope="module")
def results():
    return analyze_choice(simulate_choice_study(n_participants=30, n_pairs=8, seed=8))


@pytest.fixture(scope="module")
def written(results, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    write_results(results, out, title="Choice study: <demo> & 50%", figures=False)
    return out


@pytest.fixture(scope="module")
def written_k(tmp_path_factory):
    """A report of four formats (five contrasts per model), random slopes included."""
    from pathlib import Path

    data = pd.read_csv(Path(__file__).parents[1] / "r" / "data" / "kformat_4x80x12.csv")
    out = tmp_path_factory.mktemp("report_k")
    write_results(analyze_choice(data), out, title="Four formats", figures=False)
    return out


def test_a_column_empty_in_every_row_is_left_out(results):
    rates = results.tables["selection_rates"]
    assert rates["p_val"].isna().all()  # the CSV keeps the pingouin-shaped column ...
    assert "p_val" not in report_table(rates, name="selection_rates").cells  # ... the report not
    assert report_table(rates, name="selection_rates").cells["estimate"].str.startswith(".").all()


def test_fisher_rows_name_their_test_instead_of_a_blank_statistic(results):
    by_pair = results.tables["by_pair"]
    assert (by_pair["test"] == "fisher_exact").any() and by_pair["statistic"].isna().any()
    table = report_table(by_pair, name="by_pair", ref="original", trt="summary")
    assert "statistic" not in table.cells
    tests = dict(zip(by_pair["test"], table.cells["test"], strict=True))
    assert tests["fisher_exact"] == "Fisher's exact"
    assert re.fullmatch(r"χ²\(1\) = \d+\.\d\d \(Yates\)", tests["pearson_yates"])
    assert not (table.cells == "").any().any()


def test_rows_of_a_mixed_table_are_rounded_by_their_own_kind(results):
    cells = report_table(results.tables["effects"], name="effects").cells.set_index("effect")
    # The risk difference cannot exceed 1 (no leading zero); the odds ratio can.
    assert cells.loc["Risk difference", "estimate"].startswith(".")
    assert re.fullmatch(r"\d+\.\d\d", cells.loc["Odds ratio", "estimate"])
    assert cells.loc["Odds ratio", "p_val"] == "< .001"


def test_a_wide_one_row_table_is_turned_on_its_side_and_dashes_are_explained():
    row = pd.DataFrame([{f"col_{i}": float(i) for i in range(8)} | {"se": float("nan")}])
    table = report_table(row, name="new_model")
    assert list(table.cells.columns) == ["quantity", "value"]
    assert table.cells.set_index("quantity").loc["col_3", "value"] == "3.00"
    assert "se" not in table.cells["quantity"].tolist()  # empty in its only row: left out
    narrow = report_table(pd.DataFrame({"estimate": [-1.5, None], "n": [1200, 3]}))
    assert narrow.cells["estimate"].tolist() == [f"{MINUS}1.50", DASH]
    assert narrow.cells["n"].tolist() == ["1,200", "3"]
    assert narrow.notes == [f"{DASH} = not applicable or not estimated."]
    assert report_table(pd.DataFrame({"n": range(70)}), name="items").notes == [
        "First 60 of 70 rows; all rows in items.csv."
    ]


def test_html_tables_are_apa_style_and_escape_what_they_show():
    data = pd.DataFrame({"pair_id": ["<script>alert(1)</script>"], "p_val": [0.0004]})
    table = report_table(data, name="by_pair")
    html = table.html(3, "Per-pair <tests> & 5%")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<strong>Table 3</strong>" in html and "<em>Per-pair &lt;tests&gt; &amp; 5%</em>" in html
    assert re.search(r"<th[^>]*><em>p</em> \(unadjusted\)</th>", html)  # symbols in italics
    assert "&lt; .001" in html
    latex = table.latex(3, "Per-pair <tests> & 5%")
    assert "\\textless{}script\\textgreater{}" in latex and "5\\%" in latex
    assert "\\textbf{Table 3}" in latex and "\\emph{p} (unadjusted)" in latex


def test_the_report_writes_every_table_as_latex_numbered_as_in_the_html(written):
    html = (written / "report.html").read_text(encoding="utf-8")
    latex = (written / "tables.tex").read_text(encoding="utf-8")
    numbers_html = re.findall(r"<strong>Table (\d+)</strong>", html)
    numbers_latex = re.findall(r"\\textbf\{Table (\d+)\}", latex)
    assert numbers_html == numbers_latex == [str(i) for i in range(1, len(numbers_html) + 1)]
    assert len(numbers_html) >= 12
    body = latex.split("\n", 4)[4]  # after the header comment
    # Compiles with pdfLaTeX's default input: no Greek letter, minus or dash left as Unicode.
    assert not re.search(r"[χ²−—ρκα≥×]", body)
    assert body.count("\\begin{table}") + body.count("\\begin{longtable}") == len(numbers_latex)
    assert body.count("\\begin{table}") == body.count("\\end{table}")
    # The wide per-pair table wraps in paragraph columns instead of running into the margin.
    per_pair = body[body.index("Per-\\hspace{0pt}pair tests of each contrast") :]
    assert "p{\\dimexpr" in per_pair[: per_pair.index("\\toprule")]


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex (texlive) not installed")
@pytest.mark.parametrize("report", ["written", "written_k"])
def test_the_latex_tables_compile_with_pdflatex(report, request, tmp_path):
    written = request.getfixturevalue(report)
    shutil.copy(written / "tables.tex", tmp_path / "tables.tex")
    document = (
        "\\documentclass{article}\n\\usepackage{array,booktabs,caption,longtable}\n"
        "\\begin{document}\n\\input{tables}\n\\end{document}\n"
    )
    (tmp_path / "paper.tex").write_text(document, encoding="utf-8")
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert (tmp_path / "paper.pdf").stat().st_size > 10_000
    # Nothing runs into the margin (TeX reports a line wider than the text block).
    overfull = re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", run.stdout)
    assert all(float(w) < 1.0 for w in overfull), overfull
