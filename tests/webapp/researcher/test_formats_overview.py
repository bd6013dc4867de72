"""The console overview of a three-format study: a column per format and per sequence."""

from __future__ import annotations

import random

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.definition_cache import study_definition

from ..conftest import ROOT

SLUG = "product-choice-formats-demo"
FORMATS = ["original", "summary", "mitigated:self-debias"]


def test_overview_and_live_json_show_every_format_and_sequence(app, make_researcher):
    from webapp.extensions import db
    from webapp.services.accounts import get_researcher
    from webapp.services.studies import load_study

    ana = make_researcher("ana")
    with app.app_context():
        study = load_study(ROOT / "stimuli" / "studies" / f"{SLUG}.yaml").study
        study.owner_id = get_researcher("ana").id
        definition = study_definition(study)
        db.session.commit()
    for i in range(3):
        bot = Bot(
            FlaskTransport(app),
            definition,
            BotBehaviour(platform="link"),
            rng=random.Random(i),
            external_id=f"FMT{i}",
        )
        assert bot.run().outcome == "completed"
    data = ana.get(f"/researcher/studies/{SLUG}/live.json").get_json()
    assert data["formats"] == FORMATS
    assert data["by_sequence"]["completed"] == {
        "A": 1,
        "B": 1,
        "C": 1,
        "total": 3,
    }
    assert len(data["shares"]) == 6
    for row in data["shares"]:
        assert sum(row[f]["n"] for f in FORMATS) == 3
    page = ana.get(f"/researcher/studies/{SLUG}").get_data(as_text=True)
    for fmt in FORMATS:
        assert f'<th scope="col">{fmt}</th>' in page
    assert 'data-seq="completed-C">1<' in page
    # The studies list: one column per sequence, each with its count.
    listing = ana.get("/researcher/").get_data(as_text=True)
    section = listing.split(f'data-study="{SLUG}"', 1)[1].split("</section>", 1)[0]
    header = section.split("<thead>", 1)[1].split("</thead>", 1)[0]
    assert [h for h in ("A", "B", "C", "D") if f'<th scope="col">{h}</th>' in header] == [
        "A",
        "B",
        "C",
    ]
    completed = section.split('data-status="completed"', 1)[1].split("</tr>", 1)[0]
    assert completed.count("<td>1</td>") == 3 and "<td>3</td>" in completed
