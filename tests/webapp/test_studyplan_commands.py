"""``framelab prereg`` and ``framelab looks`` (the commands that use both halves): what they say
when there is nothing to record, or nothing they may record."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

from click.testing import CliRunner

from framelab.studyplan import looks, prereg
from tests.webapp.conftest import DEMO, demo_copy
from webapp.definition_cache import study_definition


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


def test_a_look_without_a_statistic_says_why(app, clock, monkeypatch, tmp_path):
    """A model that does not converge leaves its look without a statistic, and the researcher
    reads the reason rather than a bare "no statistic"."""
    import analysis.plan.looks as looks_module
    from analysis.stats.crossed import ConvergenceError
    from webapp.bots import run_bots

    # A look counts participants: two pairs of the ten, and 8 participants planned (look 1 at
    # half of them), give it what it needs with a few short sessions.
    _load(app, demo_copy(tmp_path, pairs=2, planned_n=8))
    with app.app_context():
        from webapp.services.studies import get_study

        definition = study_definition(get_study("product-choice-demo"))
    assert run_bots(app, definition, n=4, seed=3).counts == {"completed": 4}

    def diverges(sample, plan):
        raise ConvergenceError("the Laplace fit stopped after 200 iterations")

    monkeypatch.setattr(looks_module, "primary_test", diverges)
    result = app.test_cli_runner().invoke(looks, ["product-choice-demo"])
    assert result.exit_code == 0, result.output
    assert (
        "look 1 (4 analysed, new): no statistic (the Laplace fit stopped after 200 iterations)"
        in result.output
    )


FORMATS_DEMO = DEMO.parent / "product-choice-formats-demo.yaml"
KEY = "3f9a7c1e5b2d8f4a6c0e9b3d7f1a5c8e2b6d0f4a9c3e7b1d5f8a2c6e0b4d9f3a"


def _copy_formats_demo(folder: Path) -> Path:
    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs")
    shutil.copy(FORMATS_DEMO, folder / FORMATS_DEMO.name)
    return folder / FORMATS_DEMO.name


def _record(out: Path) -> dict:
    from analysis.plan.prereg import read_prereg

    return read_prereg(out / "prereg.md")


def test_prereg_of_a_study_with_images_freezes_them_is_recorded_and_sees_a_swap(app, tmp_path):
    """The stored bundle, images included, is what is frozen: recorded for the console, and a
    swapped image is a changed bundle for the console and for `analyze --prereg`."""
    from analysis.plan.prereg import check_console
    from webapp.services import looks as looks_service
    from webapp.services.studies import get_study

    path = _copy_formats_demo(tmp_path / "study")
    _load(app, path)
    runner = app.test_cli_runner()
    by_slug = runner.invoke(prereg, ["product-choice-formats-demo", "--out", str(tmp_path / "a")])
    assert by_slug.exit_code == 0, by_slug.output
    assert "recorded: the console shows it" in by_slug.output
    record = _record(tmp_path / "a")
    names = [f["name"] for f in record["bundle"]]
    assert [n for n in names if n.endswith(".png")] == [
        "product_pairs/images/kettle-harbor.png",
        "product_pairs/images/kettle-stillwater.png",
    ]
    # From the file: the loader's files, the same as those stored, so the same hash.
    by_file = runner.invoke(prereg, [str(path), "--out", str(tmp_path / "b")])
    assert by_file.exit_code == 0, by_file.output
    assert _record(tmp_path / "b")["prereg_sha256"] == record["prereg_sha256"]
    # The text describes the design that runs.
    text = (tmp_path / "a" / "prereg.md").read_text()
    assert "two sequences" not in text and "3 sequences (A, B, C)" in text

    image = path.parent / "product_pairs" / "images" / "kettle-harbor.png"
    swapped = image.read_bytes().replace(b"IEND", b"IEND\x00", 1)
    image.write_bytes(swapped)
    _load(app, path)  # the image's hash is part of the definition: a new version
    with app.app_context():
        study = get_study("product-choice-formats-demo")
        assert study.version == 2
        console = looks_service.console_record(study)
    assert "stored files changed after the freeze (now version 2)" in check_console(record, console)
    again = runner.invoke(prereg, [str(path), "--out", str(tmp_path / "c")])
    assert again.exit_code == 0, again.output
    assert _record(tmp_path / "c")["bundle_sha256"] != record["bundle_sha256"]


def _a_participant_completes(app) -> None:
    import random

    from webapp.bots import Bot, BotBehaviour, FlaskTransport
    from webapp.services.studies import get_study

    with app.app_context():
        definition = study_definition(get_study("product-choice-demo"))
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(), rng=random.Random(1))
    assert bot.run().outcome == "completed"


def test_a_new_freeze_after_data_collection_began_is_an_amendment(app, clock, tmp_path):
    from webapp.extensions import db
    from webapp.models import AuditEvent
    from webapp.services import looks as looks_service
    from webapp.services.studies import get_study

    folder = tmp_path / "study"
    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs")
    shutil.copy(DEMO, folder / DEMO.name)
    _load(app, folder / DEMO.name)
    runner = app.test_cli_runner()
    early = runner.invoke(prereg, ["product-choice-demo", "--amend", "x", "--out", str(tmp_path)])
    assert early.exit_code == 2 and "data collection of product-choice-demo has not begun" in (
        early.output
    )
    first = runner.invoke(prereg, ["product-choice-demo", "--out", str(tmp_path / "v1")])
    assert first.exit_code == 0 and "recorded" in first.output, first.output
    original = _record(tmp_path / "v1")
    _a_participant_completes(app)

    # The same content again is the same pre-registration: nothing to amend.
    same = runner.invoke(prereg, ["product-choice-demo", "--out", str(tmp_path / "same")])
    assert same.exit_code == 0 and _record(tmp_path / "same") == original

    (folder / DEMO.name).write_text(
        (folder / DEMO.name).read_text().replace("alpha: 0.025", "alpha: 0.02")
    )
    _load(app, folder / DEMO.name)
    out = tmp_path / "v2"
    refused = runner.invoke(prereg, ["product-choice-demo", "--out", str(out)])
    assert refused.exit_code == 1
    seen = "1 participant(s) entered, the first at 2025-01-06 09:00 UTC; 1 completed"
    assert f"data collection of product-choice-demo has begun ({seen})" in refused.output
    assert "--amend REASON" in refused.output and not out.exists()
    with app.app_context():  # the service refuses it too, whoever calls it
        try:
            looks_service.record_preregistration(
                get_study("product-choice-demo"), {**original, "prereg_sha256": "ab" * 32,
                 "bundle_sha256": looks_service.bundle_sha256(get_study("product-choice-demo"))},
                "p.md", "cli",
            )  # fmt: skip
        except looks_service.LookError as exc:
            assert "a new pre-registration is an amendment" in str(exc)
        else:
            raise AssertionError("a freeze after data collection was recorded as no amendment")

    why = "The one-sided alpha is 0.02 as the grant states; 0.025 was a typo."
    amended = runner.invoke(prereg, ["product-choice-demo", "--amend", why, "--out", str(out)])
    assert amended.exit_code == 0, amended.output
    assert amended.output.startswith("amendment of product-choice-demo")
    assert "recorded: the console shows it" in amended.output
    record = _record(out)
    assert record["amendment"] == {
        "amends": [original["prereg_sha256"]],
        "reason": why,
        "seen": seen,
    }
    said = f"Amendment, written after data collection began ({seen}): {why}"
    assert said in (out / "prereg.md").read_text()
    with app.app_context():
        history = looks_service.console_record(get_study("product-choice-demo"))
        actions = [e.action for e in db.session.scalars(db.select(AuditEvent))]
    assert [h["prereg_sha256"] for h in history["preregistrations"]] == [
        original["prereg_sha256"],
        record["prereg_sha256"],
    ]
    assert actions.count("prereg.freeze") == 1 and actions.count("prereg.amend") == 1


def test_framelab_analyze_compares_the_document_with_the_console_record(app, tmp_path):
    """`framelab analyze --prereg` reads the hash the console recorded, through the web app's
    database, and refuses a document edited and hashed again; without a database it says so."""
    from analysis.plan.prereg import prereg_hash, render_markdown
    from analysis.simulate import simulate_choice_study
    from framelab.cli import main

    _load(app, DEMO)
    frozen = app.test_cli_runner().invoke(prereg, ["product-choice-demo", "--out", str(tmp_path)])
    assert "recorded: the console shows it" in frozen.output, frozen.output
    record, doc = _record(tmp_path), tmp_path / "prereg.md"
    export = tmp_path / "long.csv"
    # A small export: this test checks the document against the console, not the numbers.
    simulate_choice_study(
        24, 4, seed=4, rate_original=0.4, rate_summary=0.9, study_slug="product-choice-demo"
    ).to_csv(export, index=False)
    args = ["analyze", "choice", str(export), "--prereg", str(doc), "--no-figures", "--no-gee"]
    env = {
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "SECRET_KEY": KEY,
        "FRAMELAB_ENV": "testing",
    }
    cli = CliRunner()
    done = cli.invoke(main, [*args, "--out", str(tmp_path / "a")], env=env)
    assert done.exit_code == 0, done.output
    assert "Console record: matches the pre-registration the console recorded for " in done.output

    forged = {**record, "analysis": {**record["analysis"], "alpha": 0.05}}
    forged["prereg_sha256"] = prereg_hash(forged)
    doc.write_text(render_markdown(forged))
    refused = cli.invoke(main, [*args, "--out", str(tmp_path / "b")], env=env)
    assert refused.exit_code == 1 and "it is none of them" in refused.output

    missing = {**env, "DATABASE_URL": f"sqlite:///{tmp_path / 'none.sqlite'}"}
    unchecked = cli.invoke(main, [*args, "--out", str(tmp_path / "c")], env=missing)
    assert unchecked.exit_code == 0, unchecked.output
    assert "not compared with the console's record of product-choice-demo: no database at" in (
        unchecked.output
    )
    assert not (tmp_path / "none.sqlite").exists()


def test_prereg_cites_a_power_table_only_of_this_design_with_every_fit_converged(app, tmp_path):
    import json

    from analysis.plan.spec import read_study

    study = read_study(DEMO)
    row = {"n": 70, "n_sims": 20, "estimate": 0.9, "ci_low": 0.7, "ci_high": 0.99}
    summary = {
        "study": study.slug,
        "analysis": study.plan.as_dict(),
        "design": [block.as_dict() for block in study.blocks],
        "scenario": {"effect": 2.0, "baseline": 0.5},
        "table": [{**row, "expected_n": 50.0, "n_failed": 0}],
    }
    folder = tmp_path / "power"
    folder.mkdir()

    def run(**changes):
        (folder / "power.json").write_text(json.dumps({**summary, **changes}), encoding="utf-8")
        return app.test_cli_runner().invoke(
            prereg, [str(DEMO), "--out", str(tmp_path / "p"), "--power", str(folder)]
        )

    cited = run()
    assert cited.exit_code == 0, cited.output
    assert "N = 70: 0.900 [0.700, 0.990]" in (tmp_path / "p" / "prereg.md").read_text()
    failed = run(table=[{**row, "estimate": 0.0, "expected_n": 70.0, "n_failed": 20}])
    assert failed.exit_code == 1
    assert "20 of 20 fits at N = 70 did not converge" in failed.output
    other = run(design=[{**summary["design"][0], "formats": ["original", "summary", "x"]}])
    assert other.exit_code == 1 and "another analysis block or design" in other.output
    assert run(study="another").exit_code == 1


def test_a_first_freeze_after_a_real_participant_entered_says_so(app, clock, tmp_path):
    """A participant who has only entered (consented, nothing completed) is data collection
    begun: the first freeze is then an amendment stating how many had entered and when the
    first did, in the record, the document and on the console. Test participants are no data."""
    from sqlalchemy import func, select

    from tests.webapp.researcher.conftest import PASSWORD, login
    from webapp.bots import Bot, BotBehaviour, FlaskTransport, run_bots
    from webapp.extensions import db
    from webapp.models import Participant
    from webapp.services.researchers import set_researcher
    from webapp.services.studies import get_study

    folder = tmp_path / "study"
    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs")
    shutil.copy(DEMO, folder / DEMO.name)
    _load(app, folder / DEMO.name)
    with app.app_context():
        definition = study_definition(get_study("product-choice-demo"))
    secret = app.config["SECRET_KEY"]
    assert run_bots(app, definition, n=2, seed=1, test_secret=secret).counts == {"completed": 2}
    runner = app.test_cli_runner()
    pilot_only = runner.invoke(prereg, ["product-choice-demo", "--amend", "x", "--out", "-"])
    assert pilot_only.exit_code == 2 and "has not begun" in pilot_only.output

    real = Bot(FlaskTransport(app), definition, BotBehaviour(), rng=random.Random(2), clock=clock)
    real.open()
    while "consent" in real.history[-1:]:
        real.step()
    with app.app_context():
        entered, first = db.session.execute(
            select(func.count(), func.min(Participant.started_at)).where(
                Participant.is_test.is_(False)
            )
        ).one()
    assert entered == 1
    seen = f"1 participant(s) entered, the first at {first:%Y-%m-%d %H:%M} UTC; 0 completed"

    out = tmp_path / "p"
    refused = runner.invoke(prereg, ["product-choice-demo", "--out", str(out)])
    assert refused.exit_code == 1 and f"has begun ({seen})" in refused.output
    assert not out.exists()
    # From the study file, edited after loading (other files than the stored ones): no clean
    # document either.
    (folder / DEMO.name).write_text(
        (folder / DEMO.name).read_text().replace("alpha: 0.025", "alpha: 0.02")
    )
    by_file = runner.invoke(prereg, [str(folder / DEMO.name), "--out", str(out)])
    assert by_file.exit_code == 1 and f"has begun ({seen})" in by_file.output
    assert "framelab study load" in by_file.output and not out.exists()

    why = "Written late: the pilot went live before the plan was frozen."
    amended = runner.invoke(prereg, ["product-choice-demo", "--amend", why, "--out", str(out)])
    assert amended.exit_code == 0, amended.output
    assert amended.output.startswith("amendment of product-choice-demo")
    assert _record(out)["amendment"] == {"amends": [], "reason": why, "seen": seen}
    for name in ("prereg.md", "prereg.html"):
        text = (out / name).read_text()
        assert f"written after data collection began ({seen})" in text
        assert "Frozen before data collection" not in text
    with app.app_context():
        set_researcher("ana", PASSWORD, is_admin=True)
    console = app.test_client()
    assert login(console, "ana").status_code == 302
    page = console.get("/researcher/studies/product-choice-demo").get_data(as_text=True)
    assert "data-prereg-after-data" in page and seen in page
