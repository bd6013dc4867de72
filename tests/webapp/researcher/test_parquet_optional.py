"""Parquet export is an optional extra: without pyarrow the console and ``framelab export`` say
how to get it, and CSV export works as before."""

from __future__ import annotations

import csv
import html
import io
import sys

import pytest

from .conftest import own_demo

SLUG = "product-choice-demo"
HOW = "pip install 'framelab[parquet]'"


@pytest.fixture
def no_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide pyarrow as if the ``parquet`` extra were not installed.

    ``None`` in ``sys.modules`` makes ``import pyarrow`` fail and ``find_spec`` find nothing.
    """
    loaded = [name for name in sys.modules if name.split(".")[0] == "pyarrow"]
    for name in {"pyarrow", "pyarrow.parquet", *loaded}:
        monkeypatch.setitem(sys.modules, name, None)


def test_console_without_pyarrow_offers_csv_and_says_how_to_get_parquet(
    app, study, make_researcher, make_bot, no_pyarrow
) -> None:
    ana = make_researcher("ana")
    own_demo(app, "ana")
    make_bot().run()
    page = html.unescape(ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True))
    assert 'data-export="long-csv"' in page and '-parquet"' not in page and ".parquet" not in page
    assert HOW in page

    resp = ana.get(f"/researcher/studies/{SLUG}/export/long.parquet")
    assert resp.status_code == 302 and resp.headers["Location"].endswith("#exports")
    shown = html.unescape(ana.get(resp.headers["Location"]).get_data(as_text=True))
    assert f"Parquet export needs pyarrow, which is not installed: {HOW}." in shown

    resp = ana.get(f"/researcher/studies/{SLUG}/export/long.csv")
    assert resp.status_code == 200
    assert len(list(csv.DictReader(io.StringIO(resp.get_data(as_text=True))))) == 10


def test_cli_parquet_without_pyarrow_is_a_clear_error_and_csv_still_works(
    runner, make_bot, tmp_path, no_pyarrow
) -> None:
    make_bot().run()
    out = tmp_path / "long.parquet"
    result = runner.invoke(args=["export", SLUG, "--out", str(out)])
    assert result.exit_code == 1
    assert HOW in result.output and "CSV export works without it" in result.output
    assert not isinstance(result.exception, ImportError)
    assert not out.exists()

    out = tmp_path / "long.csv"
    result = runner.invoke(args=["export", SLUG, "--out", str(out)])
    assert result.exit_code == 0, result.output
    with out.open(newline="", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == 10
