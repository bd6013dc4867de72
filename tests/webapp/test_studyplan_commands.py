"""``framelab prereg`` and ``framelab looks`` (the commands that use both halves): what they say
when there is nothing to record, or nothing they may record."""

from __future__ import annotations

import shutil
from pathlib import Path

from framelab.studyplan import looks, prereg
from tests.webapp.conftest import DEMO


def _load(app, path: Path) -> None:
    from webapp.services.studies import load_study

    with app.app_context():
        load_study(path)


def test_prereg_of_a_file_not_loaded_writes_the_document_and_says_it_is_not_recorded(app, tmp_path):
    result = app.test_cli_runner().invoke(prereg, [str(DEMO), "--out", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    assert "not recorded for the console: product-choice-demo is not loaded" in result.output
    assert (tmp_path / "p" / "prereg.md").is_file() and (tmp_path / "p" / "prereg.html").is_file()
    unknown = app.test_cli_runner().invoke(prereg, ["no-such-study", "--out", str(tmp_path)])
    assert unknown.exit_code == 1
    assert "neither a study file nor a loaded study's slug" in unknown.output


def test_prereg_of_other_files_than_the_loaded_version_is_not_recorded(app, tmp_path):
    _load(app, DEMO)
    folder = tmp_path / "edited"
    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs")
    (folder / DEMO.name).write_text(DEMO.read_text().replace("alpha: 0.025", "alpha: 0.01"))
    result = app.test_cli_runner().invoke(
        prereg, [str(folder / DEMO.name), "--out", str(tmp_path / "p")]
    )
    assert result.exit_code == 0, result.output
    assert "not recorded for the console: the pre-registration freezes other files" in (
        result.output
    )


def test_looks_needs_an_analysis_block_and_participants(app):
    _load(app, DEMO.parent / "sentiment-demo.yaml")
    refused = app.test_cli_runner().invoke(looks, ["sentiment-demo"])
    assert refused.exit_code == 1 and "has no analysis: block" in refused.output
    _load(app, DEMO)
    empty = app.test_cli_runner().invoke(looks, ["product-choice-demo"])
    assert empty.exit_code == 0, empty.output
    assert "has no pre-registration of its current files" in empty.output
    assert "no choices yet; look 1 needs 35 participants" in empty.output


def test_a_look_without_a_statistic_says_why(app, monkeypatch):
    """A model that does not converge leaves its look without a statistic, and the researcher
    reads the reason rather than a bare "no statistic"."""
    import analysis.plan.looks as looks_module
    from analysis.stats.crossed import ConvergenceError
    from webapp.bots import run_bots

    _load(app, DEMO)
    with app.app_context():
        from webapp.services.studies import get_study

        definition = get_study("product-choice-demo").definition
    # Five bots beyond look 1's 35: the plan's too-fast rule (0.3 of the median wall-clock
    # duration) can exclude bots that ran before a load spike.
    assert run_bots(app, definition, n=40, seed=3).counts == {"completed": 40}

    def diverges(sample, plan):
        raise ConvergenceError("the Laplace fit stopped after 200 iterations")

    monkeypatch.setattr(looks_module, "primary_test", diverges)
    result = app.test_cli_runner().invoke(looks, ["product-choice-demo"])
    assert result.exit_code == 0, result.output
    assert (
        "look 1 (35 analysed, new): no statistic (the Laplace fit stopped after 200 iterations)"
        in result.output
    )
