"""Typeset a report table in APA style, once for the HTML report and once as LaTeX.

Both outputs come from one ``great_tables.GT`` object per table, so the HTML a reader sees and
the LaTeX a paper inputs have the same cells, labels and notes. APA 7 (7.8-7.21) sets the
layout: a bold number (**Table 3**) above an italic title, rules only above and below the
column labels and below the body (booktabs' top, mid and bottom rules), no vertical lines, and
a note below that starts with *Note.* Statistical symbols in the column labels (p, N, SE, t...)
are italic; Greek letters and abbreviations (CI, OR, ICC) are not.

The cells arrive formatted (:func:`analysis.report.tables.report_table` rounds by the rule of
:mod:`analysis.report.numbers`); great_tables escapes them for HTML and for LaTeX. Labels, titles
and notes go through Markdown with every punctuation character escaped, so that a pair ID or a
formula such as ``(1 | pair_id)`` prints as written in both outputs and can never become markup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LATEX_PACKAGES", "ReportTable", "latex_file"]

# What the LaTeX tables need in the document's preamble.
LATEX_PACKAGES = ("array", "booktabs", "caption", "longtable")
# Latin-letter statistical symbols APA sets in italics when they stand as a word of a label.
_SYMBOLS = re.compile(r"(?<![\w'’])(p|N|n|M|SD|SE|t|z|b|d|df|r|F)(?![\w'’])")
# CommonMark's backslash escapes: every ASCII punctuation character.
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# Characters of the labels and cells that pdfLaTeX's default input encoding has no command for:
# the LaTeX written for them compiles under pdfLaTeX, XeLaTeX and LuaLaTeX alike.
_LATEX_CHARACTERS = {
    "χ": r"$\chi$",
    "²": r"\textsuperscript{2}",
    "−": r"$-$",
    "ρ": r"$\rho$",
    "κ": r"$\kappa$",
    "α": r"$\alpha$",
    "ψ": r"$\psi$",
    "φ": r"$\varphi$",
    "δ": r"$\delta$",
    "β": r"$\beta$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "×": r"$\times$",
    "±": r"$\pm$",
    "—": "---",
    "–": "--",
    "’": "'",
    # OT1, pdfLaTeX's default font encoding, prints \textbar as a dash and \textasciitilde as
    # an accent: a formula's "(1 | pair)" and "y ~ x" need the math symbols.
    "\\textbar{}": "$|$",
    "|": "$|$",
    # Column names and formulas (require_completed, pair_id) may break after an underscore in a
    # narrow column instead of running into the next one, format names after their colon
    # (mitigated:self-debias); the zero glue also lets TeX hyphenate the part after it, as
    # after a hyphen between letters (_HYPHEN), which TeX otherwise leaves whole.
    "\\_": "\\_\\hspace{0pt}",
    ":": ":\\hspace{0pt}",
    "\\textasciitilde{}": "$\\sim$",
    # great_tables writes a quote in a label as \textquotedbl, which pdfLaTeX's default (OT1)
    # font encoding lacks; a plain quote character prints in every encoding.
    "\\textquotedbl{}": '"',
}
_LATEX_PATTERN = re.compile("|".join(map(re.escape, _LATEX_CHARACTERS)))
# Tables of more lines than this (a long cell counts a line per 45 characters) become a LaTeX
# longtable, which breaks across pages; a float taller than the page would not print whole.
_LONGTABLE_LINES = 28
# A journal page's text block (article's \linewidth, pt) and a column's two \tabcolsep (6 pt
# each): a table wider than the line gets paragraph columns that wrap, each as wide as its
# longest content.
_LINE_PT = 345.0
_GAP_PT = 12.0
# Font sizes a table may shrink to when its longest words do not fit across at 9 pt (a word
# wider than its column would run into the next one), with the average width of a character
# at each (pt; Computer Modern's smaller sizes are relatively wider).
_CHAR_PT = {9.0: 4.6, 8.0: 4.3, 7.0: 4.0, 6.0: 3.75}
# A word of letters is hyphenated in a narrow column: it needs about this many characters.
_WORD_PIECE = 10
_CAPTION_SETUP = "\\captionsetup{justification=raggedright,singlelinecheck=false}"
# The column specification great_tables writes: tabular* (with the fill) or longtable.
_COLSPEC = re.compile(
    r"(\\begin\{tabular\*\}\{\\linewidth\}\{@\{\\extracolsep\{\\fill\}\}|"
    r"\\begin\{longtable\}\{)([lcr]+)\}"
)


def _escape(text: str) -> str:
    return _PUNCTUATION.sub(r"\\\1", text)


def _label(text: str) -> str:
    """Markdown of a column label: escaped, its statistical symbols in italics."""
    parts = _SYMBOLS.split(text)
    # re.split with one group: even indices are the text between, odd ones the symbols.
    return "".join(f"*{p}*" if i % 2 else _escape(p) for i, p in enumerate(parts))


_HYPHEN = re.compile(r"(?<=[A-Za-z])-(?=[A-Za-z])")


def _latex_text(latex: str) -> str:
    latex = _LATEX_PATTERN.sub(lambda m: _LATEX_CHARACTERS[m.group(0)], latex)
    return _HYPHEN.sub(lambda _: "-\\hspace{0pt}", latex)


@dataclass
class ReportTable:
    """A table ready to typeset: formatted cells, labelled columns, alignment and notes.

    Attributes
    ----------
    cells : pandas.DataFrame
        Every cell already a string (rounded by the report's rule), machine column names.
    labels : dict of str to str
        The reader's name of each column.
    right : set of str
        Columns of numbers (right-aligned, as APA aligns numbers); the others are text.
    notes : list of str
        Sentences of the table's note (what a dash means, rows left out, ...).
    label_column : str, optional
        A column whose cells are labels (a table on its side: one quantity per line), typeset
        as the column labels are, statistical symbols in italics.
    """

    cells: pd.DataFrame
    labels: dict[str, str]
    right: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    label_column: str | None = None

    def _gt(self, number: int, title: str, uid: str):
        from great_tables import GT, md

        cells = self.cells
        if self.label_column is not None:
            cells = cells.assign(**{self.label_column: cells[self.label_column].map(_label)})
        gt = (
            GT(cells, id=uid)
            .cols_label(**{c: md(_label(self.labels.get(c, c))) for c in self.cells.columns})
            .tab_header(title=md(f"**Table {number}**"), subtitle=md(f"*{_escape(title)}*"))
            .cols_align("left")
        )
        if self.label_column is not None:
            gt = gt.fmt_markdown(columns=self.label_column)
        if self.right:
            gt = gt.cols_align("right", columns=[c for c in self.cells.columns if c in self.right])
        if self.notes:
            gt = gt.tab_source_note(md("*Note.* " + _escape(" ".join(self.notes))))
        return gt

    def html(self, number: int, title: str) -> str:
        """The table as an HTML fragment that scrolls sideways in its own box when too wide.

        Parameters
        ----------
        number : int
            Its number in the report (``Table 3``).
        title : str
            Its title.

        Returns
        -------
        str
        """
        black = "#222222"
        gt = self._gt(number, title, f"table-{number}").tab_options(
            table_font_size="14px",
            heading_align="left",
            heading_title_font_size="100%",
            heading_subtitle_font_size="100%",
            heading_border_bottom_style="none",
            table_margin_left="0px",
            table_border_top_style="none",
            column_labels_border_top_color=black,
            column_labels_border_bottom_color=black,
            table_body_border_bottom_color=black,
            table_body_hlines_style="none",
            table_border_bottom_style="none",
            data_row_padding="3px",
            source_notes_font_size="90%",
        )
        return gt.as_raw_html(inline_css=False)

    def latex(self, number: int, title: str) -> str:
        """The table as a LaTeX float (booktabs rules; a longtable when it is long).

        Parameters
        ----------
        number : int
            Its number in the report (the same as in the HTML).
        title : str
            Its title.

        Returns
        -------
        str
            Needs :data:`LATEX_PACKAGES` in the preamble; no other package, whatever engine.
        """
        gt = self._gt(number, title, f"table-{number}").tab_options(table_font_size="9pt")
        lines = sum(
            max(1, -(-max(map(len, row)) // 45)) for row in self.cells.itertuples(index=False)
        )
        long = lines > _LONGTABLE_LINES
        latex = gt.as_latex(use_longtable=long, tbl_pos=None if long else "htbp")
        # APA sets the number and title flush left (caption's default centres them); the
        # setting stays inside the table's float or group.
        start = "\\begingroup" if long else "\\begin{table}[htbp]"
        latex = latex.replace(start, f"{start}\n{_CAPTION_SETUP}", 1)
        # A longtable's note is a minipage as wide as the line: without \noindent the
        # paragraph indent pushes it 15 pt into the margin.
        latex = latex.replace("\\begin{minipage}", "\\noindent\\begin{minipage}")
        return _latex_text(self._fit(latex))

    def _fit(self, latex: str) -> str:
        """Wrap the columns of a table too wide for the page, each as wide as it needs.

        great_tables gives every column ``l`` or ``r``, which never wraps: a 12-column table or
        a long formula would run into the margin. Paragraph columns (``p``, aligned as before)
        then share the line: each gets at least its longest word (a number is one word; a name
        breaks after its underscores), and the rest of the line goes to the columns whose text
        is longer, in proportion. When even the longest words do not fit across, the table's
        font shrinks until they do (to 6 pt at the least).
        """
        match = _COLSPEC.search(latex)
        if match is None:
            return latex
        least, want = [], []
        for c in self.cells.columns:
            label = self.labels.get(c, c)
            cells = list(self.cells[c])
            texts = [label, *([] if c in self.right else cells)]
            # LaTeX may break a cell after a space, an underscore, a colon or a hyphen between
            # letters; a number stays whole.
            words = [w for text in texts for w in re.split(r"[\s_:]+|(?<=[A-Za-z]-)", text) if w]
            # A minus sign is set as math, about two characters wide.
            numbers = [len(v) + v.count("−") for v in cells] if c in self.right else []
            # TeX hyphenates a word of letters only; anything else stays whole.
            pieces = [min(len(w), _WORD_PIECE) if w.isalpha() else len(w) for w in words]
            # Capitals and digits are wider than the average character: some to spare.
            least.append(1.3 * max([3, *numbers, *pieces]))
            want.append(max(least[-1], min(max([len(label), *map(len, cells)]), 60)))
        n = len(want)

        def room(size: float, chars: list[float]) -> float:
            """Characters of ``size`` pt left on the line after ``chars`` and the gaps (half
            as wide in a table set smaller than 9 pt)."""
            gap = _GAP_PT if size == sizes[0] else _GAP_PT / 2
            return (_LINE_PT - gap * n) / _CHAR_PT[size] - sum(chars)

        sizes = list(_CHAR_PT)
        if room(sizes[0], want) >= 0:
            return latex
        size = next((s for s in sizes if room(s, least) >= 0), sizes[-1])
        left = room(size, least)
        extra = sum(want) - sum(least)
        widths = [
            lo + (hi - lo) * min(max(left, 0) / extra, 1) if extra else lo
            for lo, hi in zip(least, want, strict=True)
        ]
        total = sum(widths)
        aligned = {"r": "raggedleft", "l": "raggedright", "c": "centering"}
        # \hspace{0pt} lets TeX hyphenate a cell's first word too (it hyphenates no word that
        # follows no glue).
        spec = "".join(
            f">{{\\{aligned[a]}\\arraybackslash\\hspace{{0pt}}}}"
            f"p{{\\dimexpr({w / total:.3f}\\linewidth"
            f"-{2 * n * w / total:.3f}\\tabcolsep)\\relax}}"
            for a, w in zip(match.group(2), widths, strict=True)
        )
        latex = latex[: match.start()] + match.group(1) + spec + "}" + latex[match.end() :]
        if size != sizes[0]:
            latex = latex.replace(
                "\\fontsize{9.0pt}{10.8pt}\\selectfont",
                f"\\fontsize{{{size:.1f}pt}}{{{1.2 * size:.1f}pt}}\\selectfont"
                "\\setlength{\\tabcolsep}{3pt}",
                1,
            )
        return latex


def latex_file(fragments: list[str], *, title: str, generated: str, command: str) -> str:
    """The text of ``tables.tex``: every table of a report, to ``\\input`` into a paper.

    Parameters
    ----------
    fragments : list of str
        :meth:`ReportTable.latex` of each table, in the report's order.
    title, generated, command : str
        The report's title, time and command line (in the file's header comment).

    Returns
    -------
    str
    """
    header = [
        f'% Tables of the report "{title}" ({generated}), from: {command}',
        "% Numbered and rounded as in report.html (full precision: results.json and the CSVs).",
        f"% Preamble: \\usepackage{{{','.join(LATEX_PACKAGES)}}}; compiles with pdfLaTeX,",
        "% XeLaTeX or LuaLaTeX. Use: \\input{tables} or copy one table environment.",
    ]
    lines = [line.replace("\n", " ") for line in header]
    return "\n".join(lines) + "\n\n" + "\n\n".join(f.strip() for f in fragments) + "\n"
