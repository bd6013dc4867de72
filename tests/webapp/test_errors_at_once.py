"""A study's mistakes come in one round: the study file, its pairs file, its images and its
``analysis:`` block together (bounded as every list of errors is); a misspelt format gives one
message where it is misspelt, with the name it was meant to be; mitigation methods are the
ones ``framelab mitigate list`` prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.webapp.eur_study import STUDY, pairs_text, write_study
from webapp.validation import StudyDefinitionError, StudyDefinitionErrors, error_lines


def _errors(path: Path) -> list[StudyDefinitionError]:
    from webapp.studydef import load_study_file

    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(path)
    err = info.value
    return err.errors if isinstance(err, StudyDefinitionErrors) else [err]


def _three_mistakes(folder: Path) -> Path:
    """The German EUR study with a price comma, a missing image and a misspelt level."""
    pairs = pairs_text()
    pairs = pairs.replace("price: 84.50", "price: 84,50", 1)
    pairs = pairs.replace("image: bilder/kettle-stillwater.png", "image: bilder/fehlt.png", 1)
    study = STUDY.replace(
        'levels: [summary, "mitigated:self-debias"]', 'levels: [summary, "mitigated:self-debais"]'
    )
    return write_study(folder, study=study, pairs=pairs)


def test_three_independent_mistakes_come_in_one_round(tmp_path, runner):
    errors = _errors(_three_mistakes(tmp_path / "s"))
    assert [(e.file, e.path) for e in errors] == [
        ("paare.yaml", "pairs[0].target.price"),
        ("paare.yaml", "pairs[0].control.image"),
        ("studie.yaml", "analysis.levels[1]"),
    ]
    price, image, level = (e.reason for e in errors)
    assert price == "expected a number, got '84,50'"
    assert "fehlt.png" in image
    assert level.startswith("'mitigated:self-debais' is not one of ")
    assert all(e.line for e in errors)
    # The command line says the same in one run, without storing anything.
    result = runner.invoke(args=["study", "load", "--check", str(tmp_path / "s" / "studie.yaml")])
    assert result.exit_code == 1
    assert [line for line in result.output.splitlines() if line.startswith("error: ")] == [
        f"error: {line}" for line in error_lines(StudyDefinitionErrors(errors))
    ]


def test_a_misspelt_method_in_formats_is_one_message_at_the_misspelling(tmp_path):
    study = STUDY.replace(
        'formats: [original, summary, "mitigated:self-debias"]',
        'formats: [original, summary, "mitigated:self-debais"]',
    )
    (error,) = _errors(write_study(tmp_path / "s", study=study))
    assert (error.file, error.path) == ("studie.yaml", "tasks[1].formats[2]")
    assert error.reason == (
        "'self-debais' is not a mitigation method (`framelab mitigate list` prints them); "
        "did you mean 'mitigated:self-debias'?"
    )
    assert error.line == 32  # the `formats:` line


def test_a_format_misspelt_in_the_pairs_file_is_one_message_there(tmp_path):
    pairs = pairs_text().replace("mitigated:self-debias:", "mitigated:self-debais:")
    (error,) = _errors(write_study(tmp_path / "s", pairs=pairs))
    assert (error.file, error.path) == (
        "paare.yaml",
        "pairs[0].target.texts.mitigated:self-debais",
    )
    assert error.reason == (
        "'mitigated:self-debais' is not one of the block's formats ['original', 'summary', "
        "'mitigated:self-debias'] (6 product(s) name it); did you mean 'mitigated:self-debias'?"
    )


def test_a_format_no_product_has_is_named_once_at_formats(tmp_path):
    study = STUDY.replace(
        'formats: [original, summary, "mitigated:self-debias"]',
        'formats: [original, summary, "mitigated:self-debias", tldr]',
    ).replace(
        "      original: Kundenbewertung\n", "      original: Kundenbewertung\n      tldr: Kurz\n"
    )
    (error,) = _errors(write_study(tmp_path / "s", study=study))
    assert (error.file, error.path) == ("studie.yaml", "tasks[1].formats[3]")
    assert error.reason == (
        "no product of paare.yaml has a text for format 'tldr': add one under each product's "
        "'texts'"
    )


def test_the_web_app_knows_the_methods_framelab_mitigate_list_prints(runner):
    """The names come from one data file both halves read; the web app never imports the
    research package (an import-linter contract)."""
    from click.testing import CliRunner

    from framelab.cli import main
    from webapp.tasks.product_choice.pairs import mitigation_methods

    result = CliRunner().invoke(main, ["mitigate", "list", "--format", "csv"])
    assert result.exit_code == 0, result.output
    printed = [line.split(",")[0] for line in result.output.splitlines()[1:] if line]
    assert printed == list(mitigation_methods())
    assert len(printed) == 18 and "self-debias" in printed
    assert re.fullmatch(r"[a-z-]+", "".join(printed))


def test_a_method_name_far_from_every_method_gets_no_guess():
    from webapp.tasks.product_choice.pairs import check_methods, meant_formats
    from webapp.validation import Where

    formats = ["original", "mitigated:m0", "mitigated:self-debais", "mitigated:self-debiass"]
    with pytest.raises(StudyDefinitionErrors) as info:
        check_methods(formats, Where("s.yaml", "formats"))
    assert [e.reason.split("(`")[1] for e in info.value.errors] == [
        "framelab mitigate list` prints them)",
        "framelab mitigate list` prints them); did you mean 'mitigated:self-debias'?",
        "framelab mitigate list` prints them); did you mean 'mitigated:self-debias'?",
    ]
    # Checked further as meant: one method once, the rest as written.
    assert meant_formats(formats) == [
        "original",
        "mitigated:m0",
        "mitigated:self-debias",
        "mitigated:self-debiass",
    ]
