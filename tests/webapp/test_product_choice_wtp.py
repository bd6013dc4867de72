"""The WTP question is a template with a fixed set of named fields, never ``str.format``.

Before: ``{0}`` or ``{note}`` in the researcher's question made every WTP page a 500, and
``{price.__class__.__mro__}`` showed Python internals to participants.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import yaml

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.definition_cache import study_definition
from webapp.studydef import load_study_file
from webapp.tasks.product_choice import WTP_FIELDS, WTP_QUESTION
from webapp.validation import StudyDefinitionError

from .conftest import DEMO

EVIL = ["{0}", "{note}", "{price.__class__.__mro__}", "{price[0]}", "{price!r}", "{}", "{ price }"]


def _study_file(tmp_path: Path, question: str | None) -> Path:
    raw = yaml.safe_load(DEMO.read_text())
    # A study names files of its own bundle only: copy the pairs file next to the study.
    pairs = tmp_path / raw["tasks"][3]["pairs"]
    pairs.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(DEMO.parent / raw["tasks"][3]["pairs"], pairs)
    if question is None:
        raw["tasks"][3]["wtp"].pop("question")
    else:
        raw["tasks"][3]["wtp"]["question"] = question
    path = tmp_path / "wtp.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _wtp_page(app, definition, external_id: str = "wtp1"):
    """A participant's first WTP page (consent, instructions, quiz, choice answered)."""
    bot = Bot(
        FlaskTransport(app),
        definition,
        BotBehaviour(platform="link"),
        rng=random.Random(1),
        external_id=external_id,
    )
    bot.open()
    for _ in range(4):
        bot.step()
    assert bot.page.kind == "wtp", (bot.page.kind, bot.page.text[:300])
    return bot.page


@pytest.mark.parametrize("placeholder", EVIL)
def test_an_unknown_placeholder_is_refused_at_validation_with_its_line(tmp_path, placeholder):
    path = _study_file(tmp_path, f"The other one costs {{price}}. More? {placeholder}")
    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(path)
    err = info.value
    assert err.file == "wtp.yaml" and err.path == "tasks[3].wtp.question"
    assert "unknown placeholder" in err.reason and "{price}" in err.reason
    question_line = next(
        n for n, line in enumerate(path.read_text().splitlines(), 1) if "question:" in line
    )
    assert err.line == question_line


def test_every_named_field_is_filled_and_nothing_else(app, tmp_path):
    from webapp.services.studies import load_study

    question = "For the {product}: you chose {chosen} over {other} ({price}). {price} + how much?"
    with app.app_context():
        definition = study_definition(load_study(_study_file(tmp_path, question)).study)
    page = _wtp_page(app, definition)
    block = definition.tasks[3].params
    pair = next(p for p in block["pairs"] if p["id"] == page.main["data-pair"])
    manufacturers = {pair["target"]["manufacturer"], pair["control"]["manufacturer"]}
    chosen = page.text.split("You chose ", 1)[1].split("<", 1)[0].strip()
    (other,) = manufacturers - {chosen}
    other_price = next(
        p["price"] for p in (pair["target"], pair["control"]) if p["manufacturer"] == other
    )
    expected = (
        f"For the {pair['product_type']}: you chose {chosen} over {other} "
        f"(${other_price:,.2f}). ${other_price:,.2f} + how much?"
    )
    from html import escape

    assert f"<p>{escape(expected)}</p>" in page.text
    assert set(WTP_FIELDS) == {"price", "chosen", "other", "product"}


def test_the_demo_question_and_the_default_still_show_the_price(app, study, tmp_path):
    page = _wtp_page(app, study)
    assert "The other product costs $" in page.text and "{price}" not in page.text
    assert study.tasks[3].params["wtp"]["question"] == WTP_QUESTION
    default = load_study_file(_study_file(tmp_path, None))
    assert default.tasks[3].params["wtp"]["question"] == WTP_QUESTION


@pytest.mark.parametrize("placeholder", EVIL)
def test_a_stored_definition_from_before_shows_the_text_and_never_fails(
    app, study, query, placeholder
):
    # A definition stored before validation refused these placeholders: the page shows them
    # as written (no 500, no object internals).
    from webapp.extensions import db
    from webapp.models import Study

    def plant() -> None:
        s = db.session.scalar(db.select(Study).where(Study.slug == study.slug))
        definition = dict(s.definition)
        tasks = [dict(t) for t in definition["tasks"]]
        tasks[3] = {**tasks[3], "wtp": {**tasks[3]["wtp"], "question": f"Pay {placeholder}?"}}
        s.definition = {**definition, "tasks": tasks}
        db.session.commit()
        return study_definition(s)

    definition = query(plant)
    page = _wtp_page(app, definition, "wtp-old")
    assert page.status == 200
    from html import escape

    assert f"<p>Pay {escape(placeholder)}?</p>" in page.text
    assert "&lt;class" not in page.text and "<class" not in page.text


def test_the_trials_memo_follows_the_definition_and_the_participant():
    # ProductChoiceTask.trial keeps each participant's derived trials per process, keyed by
    # the definition's hash, seed, sequence and block: every key gets derive_sequence's
    # answer, and two definitions with one seed do not share.
    from types import SimpleNamespace

    from webapp.definition import TaskBlock
    from webapp.services.design import derive_sequence
    from webapp.tasks.product_choice import ProductChoiceTask

    task = ProductChoiceTask()
    for n_pairs, digest in ((4, "h4"), (6, "h6")):
        pairs = [{"id": f"p{i}"} for i in range(n_pairs)]
        block = TaskBlock.of("c", "product_choice", {"pairs": pairs})
        definition = SimpleNamespace(tasks=(block,))
        for seed, sequence in ((1, "A"), (1, "B"), (2, "A")):
            p = SimpleNamespace(seed=seed, sequence=sequence)
            study = SimpleNamespace(definition_hash=digest)
            want = derive_sequence(definition.tasks, seed, sequence, "c")
            for step in range(2 * n_pairs):
                ctx = SimpleNamespace(
                    participant=p, study=study, definition=definition, block=block, step=step
                )
                assert task.trial(ctx) == want[step // 2]


def test_a_task_may_set_only_its_own_participant_columns():
    # PageContext.set_participant carries quiz/attention columns with the answer; the position
    # (page_seq, status, ...) is the flow's. Refused at the call.
    from webapp.tasks.base import PageContext

    ctx = PageContext(
        study=None, definition=None, participant=None, block=None, block_index=0, step=0, now=None
    )
    ctx.set_participant(quiz_attempts=2, quiz_passed=True)
    assert ctx.participant_values == {"quiz_attempts": 2, "quiz_passed": True}
    for column in ("page_seq", "status", "id"):
        with pytest.raises(ValueError, match=column):
            ctx.set_participant(**{column: 1})
    assert ctx.participant_values == {"quiz_attempts": 2, "quiz_passed": True}
