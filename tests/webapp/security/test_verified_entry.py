"""Platform-verified entry: a recruited study may admit only entries that carry the IDs of the
listing FrameLab created for it (Prolific's STUDY_ID, MTurk's HIT), so IDs made up by anyone
who finds the study's address cannot enrol or hold slots."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import yaml

from webapp.bots import Bot, BotBehaviour, FlaskTransport
from webapp.definition_cache import study_definition
from webapp.studydef import load_study_file
from webapp.validation import StudyDefinitionError

from ..conftest import DEMO

PROLIFIC_STUDY = "65a1b2c3d4e5f60718293a4b"  # the Prolific study FrameLab created
MTURK_HIT = "3XYZHIT0123456789ABCDEFGHIJK"


def _study(tmp_path: Path, **recruitment) -> Path:
    """The demo study, recruited through ``recruiter`` with ``recruitment`` keys changed."""
    folder = tmp_path / "bundle"
    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs", dirs_exist_ok=True)
    raw = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    recruiter = recruitment.pop("recruiter", "prolific")
    raw["recruitment"].update(recruitment)
    if recruiter is not None:
        raw["recruiter"] = {"platform": recruiter, "places": 10, "reward": 2.0}
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def _refused(path: Path) -> StudyDefinitionError:
    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(path)
    return info.value


# -- the study option ---------------------------------------------------------------------------


def test_verified_entry_is_set_for_a_recruited_study_and_off_otherwise(tmp_path):
    d = load_study_file(_study(tmp_path, verified_entry=True, platforms=["prolific"]))
    assert d.recruitment.verified_entry is True
    assert load_study_file(DEMO).recruitment.verified_entry is False


def test_a_plain_link_study_cannot_ask_for_verified_entry(tmp_path):
    err = _refused(_study(tmp_path, verified_entry=True, platforms=["link"], recruiter=None))
    assert err.path == "recruitment.verified_entry" and err.line is not None
    assert "needs a 'recruiter:' block" in err.reason and "plain-link study" in err.reason


def test_every_platform_of_a_verified_study_must_be_its_listings(tmp_path):
    err = _refused(_study(tmp_path, verified_entry=True, platforms=["prolific", "link"]))
    assert err.path == "recruitment.verified_entry"
    assert "entries through ['link'] cannot be checked against the prolific listing" in err.reason
    assert "set recruitment.platforms to [prolific]" in err.reason


def test_verified_entry_is_true_or_false(tmp_path):
    err = _refused(_study(tmp_path, verified_entry="yes", platforms=["prolific"]))
    assert err.path == "recruitment.verified_entry"
    assert "expected true or false, got 'yes'" in err.reason


# -- entry --------------------------------------------------------------------------------------


def _load(app, path: Path) -> dict:
    from webapp.services.studies import load_study

    with app.app_context():
        return study_definition(load_study(path).study)


def _record_listing(app, slug: str, platform: str, external_id: str) -> None:
    from webapp.extensions import db
    from webapp.models import Platform, Recruitment
    from webapp.services.studies import get_study

    with app.app_context():
        db.session.add(
            Recruitment(
                study_id=get_study(slug).id,
                platform=Platform(platform),
                external_id=external_id,
                status="ACTIVE",
                external_url="https://example.org/",
                # A published HIT is recorded as the listing's id and its hit_id.
                extra={"hit_id": external_id} if platform == "mturk" else {},
                created_by="test",
            )
        )
        db.session.commit()


def _participants(app, slug: str) -> int:
    from webapp.services.studies import get_study

    with app.app_context():
        return len(get_study(slug).participants)


def _bot(app, definition, platform: str, name: str, *, test: bool = False) -> Bot:
    return Bot(
        FlaskTransport(app),
        definition,
        BotBehaviour(platform=platform, wait_s=0.0),
        rng=random.Random(name),
        external_id=name,
        test_secret=app.config["SECRET_KEY"] if test else None,
    )


@pytest.mark.parametrize(
    ("platform", "param", "issued", "other"),
    [
        ("prolific", "STUDY_ID", PROLIFIC_STUDY, "5f0000000000000000000000"),
        ("mturk", "hitId", MTURK_HIT, "3MADEUPHIT00000000000000000A"),
    ],
)
def test_only_the_listings_own_ids_enter_a_verified_study(
    app, tmp_path, platform, param, issued, other
):
    path = _study(tmp_path, verified_entry=True, platforms=[platform], recruiter=platform)
    definition = _load(app, path)
    slug = definition.slug
    made_up = _bot(app, definition, platform, "made-up")
    # Before FrameLab has created the listing nobody enters: no ID can match it yet.
    page = made_up.open(made_up.entry_url({param: issued}))
    assert page.status == 403 and page.error_code == "E403-UNVERIFIED"
    _record_listing(app, slug, platform, issued)
    for value in (other, "BOTSTUDY", ""):
        page = made_up.open(made_up.entry_url({param: value}))
        assert page.status in (400, 403) and page.error_code in ("E403-UNVERIFIED", "E400-PARAMS")
    assert "does not come from the study" in made_up.open(made_up.entry_url({param: other})).text
    # The consent form posted with another listing's ID enrols nobody either.
    genuine = _bot(app, definition, platform, "genuine")
    consent = genuine.open(genuine.entry_url({param: issued.lower()}))  # any spelling
    assert consent.status == 200 and consent.kind == "consent"
    refused = genuine.post({**genuine.answer(), param: other})
    assert refused.status == 403 and refused.error_code == "E403-UNVERIFIED"
    assert _participants(app, slug) == 0
    genuine.open(genuine.entry_url({param: issued}))
    assert genuine.post(genuine.answer()).status == 200
    assert _participants(app, slug) == 1


def test_a_genuine_participant_completes_and_test_runs_still_enter(app, tmp_path):
    definition = _load(app, _study(tmp_path, verified_entry=True, platforms=["prolific"]))
    slug = definition.slug
    _record_listing(app, slug, "prolific", PROLIFIC_STUDY)

    class Genuine(Bot):
        def entry_url(self, extra=None):
            return super().entry_url({"STUDY_ID": PROLIFIC_STUDY, **(extra or {})})

    genuine = Genuine(
        FlaskTransport(app), definition, BotBehaviour(wait_s=0.0), rng=random.Random(1)
    )
    assert genuine.run().outcome == "completed"
    # A bot's test entry (its own key, study ID "BOTSTUDY") is not a platform entry: it runs.
    assert _bot(app, definition, "prolific", "pilot", test=True).run().outcome == "completed"
    assert _participants(app, slug) == 2


def test_an_unverified_study_takes_any_well_formed_entry_as_before(app):
    from ..conftest import load_demo

    definition = load_demo(app)
    assert _bot(app, definition, "prolific", "anyone").open().kind == "consent"
