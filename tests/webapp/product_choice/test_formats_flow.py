"""A three-format study run by bots: balance, the per-format effect in the export, product
images served to participants, and two product-choice blocks in one study."""

from __future__ import annotations

import copy
import random
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from webapp.bots import Bot, BotBehaviour, FlaskTransport, parse_format_effects, run_bots
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import Participant

from ..conftest import ROOT

FORMATS_DEMO = ROOT / "stimuli" / "studies" / "product-choice-formats-demo.yaml"
SLUG = "product-choice-formats-demo"
MITIGATED = "mitigated:self-debias"


def _load(app, path: Path = FORMATS_DEMO) -> dict:
    from webapp.services.studies import load_study

    with app.app_context():
        return study_definition(load_study(path).study)


def _rows(app, slug: str = SLUG) -> list[dict]:
    from webapp.services.studies import get_study
    from webapp.tasks.product_choice.export import choice_rows

    with app.app_context():
        return choice_rows(get_study(slug), include_test=True)


def test_bots_state_an_effect_per_format_and_the_export_shows_it(app):
    definition = _load(app)
    effects = parse_format_effects(["original=0.2", "summary=0.9", f"{MITIGATED}=0.55"])
    summary = run_bots(app, definition, n=12, behaviour=BotBehaviour(p_target=effects), seed=4)
    assert summary.errors == [] and summary.counts == {"completed": 12}
    with app.app_context():
        sequences = Counter(db.session.scalars(select(Participant.sequence)))
    assert sequences == {"A": 4, "B": 4, "C": 4}
    rows = _rows(app)
    assert len(rows) == 12 * 6
    assert {r["block"] for r in rows} == {"choices"}
    cells = Counter((r["pair_id"], r["format"]) for r in rows)
    assert set(cells.values()) == {4} and len(cells) == 6 * 3  # every pair x format, 4 times
    per_person = Counter((r["participant_id"], r["format"]) for r in rows)
    assert set(per_person.values()) == {2}  # 6 pairs, 3 formats: two of each
    # Seeded bots and a seeded assignment: the same rows, so the same order, every run.
    rate = {
        f: sum(r["chose_target"] for r in rows if r["format"] == f) / 24
        for f in ("original", "summary", MITIGATED)
    }
    assert rate["original"] < rate[MITIGATED] < rate["summary"], rate
    assert all(r["wtp_premium"] is not None for r in rows)


def test_parse_format_effects_refuses_what_is_not_a_probability():
    for bad in ["summary", "summary=1.5", "=0.5", "summary=x"]:
        with pytest.raises(ValueError, match="FORMAT=P"):
            parse_format_effects([bad])


def _bot_on_image_page(app, definition) -> tuple[Bot, str]:
    """A bot on the choice page of the pair with images; returns the page's HTML."""
    for i in range(12):
        bot = Bot(
            FlaskTransport(app),
            definition,
            BotBehaviour(platform="link"),
            rng=random.Random(i),
            external_id=f"IMG{i}",
        )
        bot.open()
        while bot.page.kind not in ("choice", "completed"):
            bot.step()
        for _ in range(6):
            if bot.page.main.get("data-pair") == "kettle" and bot.page.kind == "choice":
                return bot, bot.page.text
            bot.step()
            if bot.page.kind == "wtp":
                bot.step()
    raise AssertionError("no bot reached the kettle pair")


def test_product_images_are_shown_with_alt_text_and_served_safely(app):
    definition = _load(app)
    _load(app, ROOT / "stimuli" / "studies" / "product-choice-demo.yaml")  # another study
    bot, html = _bot_on_image_page(app, definition)
    images = re.findall(r'<img class="product-image" src="([^"]+)" alt="([^"]+)">', html)
    assert len(images) == 2
    assert {alt for _, alt in images} == {
        "A squat teal kettle with a short spout",
        "A tall grey kettle with a long handle",
    }
    client = app.test_client()
    src = images[0][0]
    resp = client.get(src)
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "image/png"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["Cache-Control"].startswith("private")
    assert resp.data.startswith(b"\x89PNG")
    digest = src.rsplit("/", 1)[1]
    assert resp.headers["ETag"].strip('"') == digest
    page_url = src.rsplit("/image/", 1)[0]

    # Only the images the definition names, by their digest, for a participant of the study.
    import hashlib

    pairs_sha = hashlib.sha256(
        (ROOT / "stimuli/studies/product_pairs/formats-demo.yaml").read_bytes()
    ).hexdigest()
    for url in [
        f"{page_url}/image/{pairs_sha}",  # a file of the bundle that is no image
        f"{page_url}/image/{'0' * 64}",
        f"{page_url}/image/..%2F..%2Fstudy.yaml",
        f"{page_url}/image/{digest.upper()}",
        src.replace(f"/s/{SLUG}/p/", "/s/product-choice-demo/p/"),  # another study
        src.replace("/p/", "/p/x"),  # a made-up token
    ]:
        resp = client.get(url)
        assert resp.status_code == 404, url
        assert b"Traceback" not in resp.data


def _two_block_study(tmp_path: Path) -> Path:
    folder = tmp_path / "studies"
    shutil.copytree(ROOT / "stimuli" / "studies", folder)
    pairs = yaml.safe_load((folder / "product_pairs" / "formats-demo.yaml").read_text())
    second = {"pairs": copy.deepcopy(pairs["pairs"][:3])}
    for pair in second["pairs"]:
        pair["id"] = f"{pair['id']}-b"
        for side in ("target", "control"):
            pair[side].pop("image", None), pair[side].pop("image_alt", None)
    (folder / "product_pairs" / "second.yaml").write_text(yaml.safe_dump(second))
    study = yaml.safe_load((folder / "product-choice-formats-demo.yaml").read_text())
    block = copy.deepcopy(study["tasks"][2])
    block.update(id="more", pairs="product_pairs/second.yaml")
    study["tasks"].insert(3, block)
    study["slug"] = "two-blocks"
    path = folder / "two-blocks.yaml"
    path.write_text(yaml.safe_dump(study, allow_unicode=True))
    return path


def test_two_product_choice_blocks_keep_their_answers_apart(app, tmp_path):
    definition = _load(app, _two_block_study(tmp_path))
    summary = run_bots(app, definition, n=6, seed=8)
    assert summary.errors == [] and summary.counts == {"completed": 6}
    rows = _rows(app, "two-blocks")
    assert len(rows) == 6 * (6 + 3)
    by_block = Counter(r["block"] for r in rows)
    assert by_block == {"choices": 36, "more": 18}
    # Both blocks have a trial 0, 1, 2: each trial's WTP answer sits on its own block's row.
    keys = Counter((r["participant_id"], r["block"], r["trial_index"]) for r in rows)
    assert set(keys.values()) == {1}
    assert all(r["wtp_premium"] is not None for r in rows)
    assert all(r["pair_id"].endswith("-b") == (r["block"] == "more") for r in rows)
    # Rows follow the answers: the first block's trials, then the second's.
    first = [r["block"] for r in rows if r["participant_id"] == rows[0]["participant_id"]]
    assert first == ["choices"] * 6 + ["more"] * 3
    # The same sequence is one Latin-square row in both blocks.
    for pid in {r["participant_id"] for r in rows}:
        mine = [r for r in rows if r["participant_id"] == pid]
        assert mine[0]["format"] == mine[6]["format"]


def _study_with_sources(tmp_path: Path) -> Path:
    """The demo with each product's texts traced to (made-up) generation records."""
    folder = tmp_path / "studies"
    shutil.copytree(ROOT / "stimuli" / "studies", folder)
    path = folder / "product_pairs" / "formats-demo.yaml"
    pairs = yaml.safe_load(path.read_text())
    for pair in pairs["pairs"]:
        for side in ("target", "control"):
            pair[side]["sources"] = {
                "original": f"item:{pair['id']}-{side}",
                "summary": f"m|summarize|plain|h1|{pair['id']}-{side}|",
                MITIGATED: f"m|mitigate|self-debias|h2|{pair['id']}-{side}|",
            }
    path.write_text(yaml.safe_dump(pairs, allow_unicode=True))
    return folder / FORMATS_DEMO.name


def test_each_export_row_names_the_generation_records_of_the_texts_it_showed(app, tmp_path):
    definition = _load(app, _study_with_sources(tmp_path))
    summary = run_bots(app, definition, n=3, seed=2)
    assert summary.errors == [] and summary.counts == {"completed": 3}
    rows = _rows(app)
    assert len(rows) == 3 * 6
    method = {"original": None, "summary": "plain", MITIGATED: "self-debias"}
    for row in rows:
        for side in ("target", "control"):
            record = row[f"{side}_source_record"]
            expected = f"{row['pair_id']}-{side}"
            if row["format"] == "original":
                assert record == f"item:{expected}"
            else:
                assert record.split("|")[2] == method[row["format"]]
                assert record.split("|")[4] == expected


def test_export_rows_without_sources_leave_the_record_columns_empty(app):
    definition = _load(app)
    assert run_bots(app, definition, n=1, seed=3).counts == {"completed": 1}
    rows = _rows(app)
    assert {r["target_source_record"] for r in rows} == {None}
    assert {r["control_source_record"] for r in rows} == {None}
