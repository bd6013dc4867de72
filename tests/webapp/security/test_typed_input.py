"""What participants type: free text is capped (visibly, and checked on the server), and
amounts and numbers must use the digits 0-9."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from tests.webapp.conftest import DEMO, ROOT
from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import ChoiceResponse, TaskResponse

NON_ASCII_DIGITS = ["\u0663", "\uff13", "\u00b2", "1\u0662.50", "\u0969", "\U0001d7d1"]


def _study_with_free_text(tmp_path: Path, max_length: int | None) -> Path:
    # The study's bundle: its folder, with the pairs file the demo names (product_pairs/).
    studies = tmp_path / "studies"
    pairs = studies / "product_pairs"
    pairs.mkdir(parents=True)
    shutil.copy(ROOT / "stimuli" / "studies" / "product_pairs" / "demo.yaml", pairs / "demo.yaml")
    doc = yaml.safe_load(DEMO.read_text())
    doc["slug"] = "free-text"
    question = {"id": "comments", "text": "Any comments?", "kind": "text"}
    if max_length is not None:
        question["max_length"] = max_length
    block = next(b for b in doc["tasks"] if b["type"] == "demographics")
    block["questions"].append(question)
    path = studies / "free-text.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _bot_at(app, tmp_path, kind: str, max_length: int | None = 40) -> Bot:
    from webapp.services.studies import load_study

    with app.app_context():
        definition = study_definition(load_study(_study_with_free_text(tmp_path, max_length)).study)
    bot = Bot(FlaskTransport(app), definition, BotBehaviour(platform="link"), external_id="t1")
    page = bot.open()
    while page.kind != kind:
        page = bot.step()
    return bot


def _demographics(app) -> list[TaskResponse]:
    with app.app_context():
        return list(
            db.session.scalars(select(TaskResponse).where(TaskResponse.task_type == "demographics"))
        )


def test_free_text_shows_its_limit_and_refuses_longer_answers(app, tmp_path):
    bot = _bot_at(app, tmp_path, "demographics", max_length=40)
    html = bot.page.text
    assert 'maxlength="40"' in html and "Up to 40 characters." in html
    assert 'data-counter-for="q_comments"' in html and "charcount.js" in html
    page = bot.must_fail({"q_comments": "x" * 41}, expect_invalid=True)
    assert "Please shorten your answer to at most 40 characters." in page.text
    assert _demographics(app) == []
    bot.post({**bot.answer(), "q_comments": "y" * 40})
    (saved,) = _demographics(app)
    assert saved.payload["answers"]["comments"] == "y" * 40


def test_free_text_has_a_cap_even_when_the_study_sets_none(app, tmp_path):
    from webapp.tasks.questions import TEXT_MAX_DEFAULT

    bot = _bot_at(app, tmp_path, "demographics", max_length=None)
    assert f'maxlength="{TEXT_MAX_DEFAULT}"' in bot.page.text
    bot.must_fail({"q_comments": "z" * (TEXT_MAX_DEFAULT + 1)}, expect_invalid=True)
    assert _demographics(app) == []


def test_a_study_cannot_lift_the_cap_beyond_the_limit(tmp_path):
    from webapp.studydef import load_study_file
    from webapp.tasks.questions import TEXT_MAX_LIMIT
    from webapp.validation import StudyDefinitionError

    with pytest.raises(StudyDefinitionError, match="max_length"):
        load_study_file(_study_with_free_text(tmp_path, TEXT_MAX_LIMIT + 1))


@pytest.mark.parametrize("typed", NON_ASCII_DIGITS)
def test_numbers_with_other_scripts_digits_are_refused(app, tmp_path, typed):
    bot = _bot_at(app, tmp_path, "demographics")
    page = bot.must_fail({"q_age": typed}, expect_invalid=True)
    assert "Please type the number with the digits 0 to 9." in page.text
    assert 'id="q_age-error"' in page.text  # next to the field
    assert _demographics(app) == []


@pytest.mark.parametrize("typed", NON_ASCII_DIGITS)
def test_amounts_with_other_scripts_digits_are_refused(app, tmp_path, typed):
    bot = _bot_at(app, tmp_path, "choice")
    bot.step()
    assert bot.page.kind == "wtp"
    page = bot.must_fail({"premium": typed}, expect_invalid=True)
    assert "Please type the amount with the digits 0 to 9" in page.text
    assert 'id="premium-error"' in page.text
    with app.app_context():
        assert db.session.scalars(select(ChoiceResponse)).one().wtp_premium_usd is None
    assert bot.post({**bot.answer(), "premium": "3"}).kind == "choice"
