"""A task type is one folder: a throwaway ``slider`` type, written into a temporary folder as an
installed package (found through the ``framelab.tasks`` entry point), renders its page, passes a
bot and reaches the long export and the codebook without a file of the project changing
(docs/development.md, "Adding a task type", walks through the same type)."""

from __future__ import annotations

import importlib
import random
import sys
from pathlib import Path

import pytest
import yaml

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.definition_cache import study_definition

SLIDER = '''
"""A throwaway task type: one slider from 0 to 100 per page."""

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import selectinload
from wtforms import IntegerField
from wtforms.validators import InputRequired, NumberRange

from webapp.extensions import db
from webapp.models import Participant, TaskResponse
from webapp.tasks.base import NEXT, ExportTable, PageForm, TaskType
from webapp.validation import check_keys, get_str

COLUMNS = ["study_slug", "participant_id", "platform", "status", "slider_value", "rt_ms"]


class SliderForm(PageForm):
    value = IntegerField("Value", validators=[InputRequired(), NumberRange(0, 100)])


def long_table(scope, blocks):
    query = (
        select(TaskResponse, Participant)
        .join(Participant, Participant.id == TaskResponse.participant_id)
        .where(Participant.study_id == scope.study.id, TaskResponse.task_type == "slider")
        .options(selectinload(Participant.identity))
        .order_by(Participant.id, TaskResponse.id)
    )
    rows = [
        {**scope.who(p), "slider_value": r.payload["value"], "rt_ms": r.rt_ms}
        for r, p in db.session.execute(scope.where(query))
    ]
    return rows, list(COLUMNS)


class SliderTask(TaskType):
    name = "slider"
    template = "slider.html"
    form = SliderForm
    tables = (ExportTable("long", long_table),)
    codebook = {"slider_value": ("int", "where the participant left the slider", "0..100")}

    def validate(self, body, where):
        check_keys(body, {"question"}, where)
        return {"question": get_str(body, "question", where)}

    def save(self, ctx, form, rt_ms):
        db.session.add(
            TaskResponse(
                participant_id=ctx.participant.id,
                block_id=ctx.block.id,
                task_type=self.name,
                step=ctx.step,
                payload={"value": form.value.data},
                rt_ms=rt_ms,
                created_at=ctx.now,
            )
        )
        return NEXT

    def bot_answer(self, bot, page, block) -> dict[str, str]:
        return {"value": str(bot.rng.randint(0, 100))}

    def bot_saved(self, bot, page, data) -> None:
        bot.answers.append((page.main["data-block"], "value", data["value"]))
'''

TEMPLATE = """\
{% extends "base.html" %}
{% from "macros.html" import hidden %}
{% block main_attrs %}data-page="slider" data-block="{{ block.id }}"{% endblock %}
{% block content %}
  <h1>{{ block.params.question }}</h1>
  <form method="post" action="{{ action }}">
    {{ hidden(form) }}
    <input type="range" min="0" max="100" name="value" value="50">
    <button type="submit">Continue</button>
  </form>
{% endblock %}
"""

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def slider_installed(tmp_path, monkeypatch):
    """``framelab_slider`` as an installed distribution in a temporary folder of ``sys.path``."""
    from webapp.tasks import load_installed, unregister

    site = tmp_path / "site"
    package = site / "framelab_slider"
    (package / "templates").mkdir(parents=True)
    (package / "__init__.py").write_text(SLIDER, encoding="utf-8")
    (package / "templates" / "slider.html").write_text(TEMPLATE, encoding="utf-8")
    info = site / "framelab_slider-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: framelab-slider\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[framelab.tasks]\nslider = framelab_slider:SliderTask\n"
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    try:
        yield load_installed
    finally:
        unregister("slider")
        sys.modules.pop("framelab_slider", None)


def test_an_installed_package_adds_a_task_type_through_its_entry_point(slider_installed):
    from webapp.tasks import get_task_type

    assert get_task_type("slider") is None
    assert "slider" in slider_installed()
    task = get_task_type("slider")
    assert task.template_name == "slider/slider.html" and task.folder().name == "framelab_slider"


def test_an_installed_type_that_is_no_task_type_is_refused(slider_installed, tmp_path):
    info = next((tmp_path / "site").glob("*.dist-info"))
    (info / "entry_points.txt").write_text(
        "[framelab.tasks]\nslider = framelab_slider:long_table\n"
    )
    with pytest.raises(TypeError, match="slider = framelab_slider:long_table: not a TaskType"):
        slider_installed()


def test_a_name_taken_by_a_built_in_type_is_refused():
    from webapp.tasks import register
    from webapp.tasks.base import TaskType

    class Impostor(TaskType):
        name = "product_choice"
        template = "x.html"

    with pytest.raises(ValueError, match="'product_choice' is already registered"):
        register(Impostor())


def test_a_throwaway_type_renders_passes_a_bot_and_reaches_the_export(
    app, tmp_path, slider_installed
):
    from webapp.services.authenticity import EXPORT_COLUMNS
    from webapp.services.export import build_table
    from webapp.services.studies import get_study, load_study

    slider_installed()
    demo = yaml.safe_load((ROOT / "stimuli" / "studies" / "preference-demo.yaml").read_text())
    demo.update(slug="slider-demo", title="Slider")
    demo["tasks"] = [
        demo["tasks"][0],
        {"type": "slider", "id": "mood", "question": "How do you feel today?"},
        demo["tasks"][-1],
    ]
    path = tmp_path / "bundle" / "slider-demo.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(demo), encoding="utf-8")
    with app.app_context():
        definition = study_definition(load_study(path).study)

    bot = Bot(FlaskTransport(app), definition, BotBehaviour(), rng=random.Random(3))
    page = bot.open()
    page = bot.step()  # consent
    assert page.kind == "slider" and "How do you feel today?" in page.text
    assert [f["name"] for f in page.forms[0].fields if f.get("type") == "range"] == ["value"]
    bot.must_fail({"value": "101"}, expect_invalid=True)
    result = bot.run()
    assert result.outcome == "completed", result

    with app.app_context():
        study = get_study("slider-demo")
        rows, columns = build_table(study, "long")
        codebook, _ = build_table(study, "codebook")
    assert columns == [
        "study_slug",
        "participant_id",
        "platform",
        "status",
        "slider_value",
        "rt_ms",
        *EXPORT_COLUMNS,  # the export's participant columns, added to every long table
    ]
    assert len(rows) == 1 and 0 <= rows[0]["slider_value"] <= 100
    assert rows[0]["auth_pages"] == 2  # consent and the slider: its cells came with it
    described = {(r["table"], r["column"]): r for r in codebook}
    entry = described[("long", "slider_value")]
    assert (entry["type"], entry["allowed_values"]) == ("int", "0..100")
    assert entry["meaning"] == "where the participant left the slider"


def test_the_task_templates_are_each_in_their_types_folder():
    """No template is left in a shared folder: each registered type finds its page in its own."""
    from webapp.tasks import task_types

    for task in task_types():
        assert (task.folder() / "templates" / task.template).is_file(), task.name
    assert not (ROOT / "webapp" / "tasks" / "templates").exists()
