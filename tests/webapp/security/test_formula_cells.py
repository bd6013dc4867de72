"""Formula neutralisation in every CSV the platform writes: exports and payment files."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable

import pytest

from webapp.models import Platform
from webapp.services import payments
from webapp.services.export import write_csv

HOSTILE = [
    " =1+1",  # leading space: spreadsheets skip it and run the rest
    "   @SUM(A1)",
    "\u00a0+1",  # no-break space
    "\u3000-1+cmd",  # ideographic space
    "\u200b=1+1",  # zero-width space
    "\uff1d1+1",  # full-width ＝
    "\uff0bcmd",  # ＋
    "\uff0d1+2",  # －
    "\uff20SUM(A1)",  # ＠
    "\t=1+1",
    "\r=1+1",
    "=cmd|' /C calc'!A0",
]


def _line(text: str) -> payments.BonusLine:
    return payments.BonusLine(
        participant_id=1,
        participant_code="p_1",
        worker_id=text,
        assignment_id=text,
        amount_cents=70,
        n_matching=7,
        reason=text,
        request_token="framelab-abc",
    )


def _export(text: str) -> list[list[str]]:
    out = io.StringIO()
    write_csv([{"a": text, "n": -2.5, "k": 3}], ["a", "n", "k"], out)
    return list(csv.reader(io.StringIO(out.getvalue(), newline="")))[1:]


def _writer(write: Callable[..., int]) -> Callable[[str], list[list[str]]]:
    def run(text: str) -> list[list[str]]:
        out = io.StringIO()
        write([_line(text)], out)
        rows = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
        return rows[1:] if write is payments.write_mturk else rows

    return run


WRITERS = {
    "export.write_csv": _export,
    "payments.write_prolific": _writer(payments.write_prolific),
    "payments.write_mturk": _writer(payments.write_mturk),
    "payments.write_bonus_file(prolific)": _writer(
        lambda lines, out: payments.write_bonus_file(lines, Platform.prolific, out)
    ),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("text", HOSTILE)
def test_every_csv_writer_quotes_what_a_spreadsheet_would_run(writer, text):
    (row,) = WRITERS[writer](text)
    # A lone carriage return would end the row in spreadsheets: it is stored as a newline.
    quoted = "'" + text.replace("\r", "\n")
    assert quoted in row, (writer, row)
    assert text not in row and text.replace("\r", "\n") not in row, (writer, row)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_numbers_and_plain_text_stay_as_they_are(writer):
    (row,) = WRITERS[writer]("5f1a2b3c4d5e6f7a8b9c0d1e")
    assert "5f1a2b3c4d5e6f7a8b9c0d1e" in row and not any(c.startswith("'") for c in row)
    if writer == "export.write_csv":
        assert row[1:] == ["-2.5", "3"]
    else:
        assert "0.70" in row
