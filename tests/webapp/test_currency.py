"""Each study pays and prices in its own currency (``payment.currency``): what participants
read and type, the export, bonuses and the recruiters' amounts; the keys of older files that
named dollars keep loading, with a note (docs/platform.md, "Currency")."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.webapp.conftest import ROOT
from tests.webapp.eur_study import STUDY, write_study
from tests.webapp.test_translations import visible_text
from webapp.definition import Bonus, Payment
from webapp.definition_cache import study_definition
from webapp.validation import StudyDefinitionError

GERMAN_DEMO = ROOT / "stimuli" / "studies" / "product-choice-demo-de.yaml"
# The currency-neutral keys and the dollar keys they replace, as a file spells them.
OLDER_KEYS = [
    (r"^(\s+)price:", r"\1price_usd:"),
    (r"^(\s+)base:", r"\1base_usd:"),
    (r"^(\s+)max_premium:", r"\1max_premium_usd:"),
]


def _load(app, path: Path) -> dict:
    from webapp.services.studies import load_study

    with app.app_context():
        return study_definition(load_study(path).study)


def _bot(app, definition: dict, name: str):
    from webapp.bots import Bot, BotBehaviour, FlaskTransport

    return Bot(
        FlaskTransport(app),
        definition,
        BotBehaviour(platform="link"),
        rng=random.Random(name),
        external_id=name,
    )


def test_a_german_participant_of_a_euro_study_reads_and_types_euros(app, tmp_path):
    from webapp.extensions import db
    from webapp.models import Study
    from webapp.services.export import build_table

    definition = _load(app, write_study(tmp_path / "eur"))
    bot = _bot(app, definition, "euro-1")
    page = bot.open()
    while page.kind != "wtp":
        page = bot.step()
    text = visible_text(page.text)
    assert re.search(r"Das andere Produkt kostet (84,50|79,00) €", text), text
    assert "Aufpreis in Euro" in text and "höchstens 200,00 €" in text
    assert "$" not in text and "Dollar" not in text
    refusals = {
        "-5": "Bitte geben Sie einen Betrag von 0,00 € oder mehr ein.",
        "5 $": "Bitte geben Sie einen Betrag in Euro ein, zum Beispiel 5 oder 12,50.",
        "300": "Bitte geben Sie höchstens 200,00 € ein.",
    }
    for typed, message in refusals.items():
        bot.transport.request("POST", page.url, {**bot.answer(), "premium": typed})
        assert message in visible_text(bot.reload().text), typed
    status, _, _ = bot.transport.request("POST", page.url, {**bot.answer(), "premium": "12,50 €"})
    assert status in {302, 303}
    with app.app_context():
        study = db.session.scalar(db.select(Study).where(Study.slug == "preise-in-euro"))
        rows, columns = build_table(study, "long", include_test=True)
        assert "currency" in columns and not any(c.endswith("_usd") for c in columns)
        assert [(r["currency"], r["other_price"], r["wtp_premium"]) for r in rows][:1] in (
            [("EUR", 84.5, 12.5)],
            [("EUR", 79.0, 12.5)],
        )
        codebook, _ = build_table(study, "codebook")
        assert any(r["column"] == "currency" for r in codebook)


def test_bonuses_and_recruiter_amounts_are_in_the_study_currency(app, tmp_path):
    from webapp.extensions import db
    from webapp.models import Platform, Study
    from webapp.recruit.results import Cost
    from webapp.services.payments import PaymentError, bonus_plan

    _load(app, write_study(tmp_path / "eur"))
    with app.app_context():
        study = db.session.scalar(db.select(Study).where(Study.slug == "preise-in-euro"))
        assert bonus_plan(study, Platform.prolific).lines == []  # nobody finished yet
        with pytest.raises(PaymentError, match="MTurk pays in US dollars only"):
            bonus_plan(study, Platform.mturk)
    cost = Cost(rewards=25000, reward_fees=8333, bonuses=0, bonus_fees=0, fee_rate=1 / 3)
    assert cost.lines()[0] == "rewards   $250.00"
    gbp = Cost(25000, 8333, 70, 23, 1 / 3, currency="GBP").lines()
    assert gbp[0] == "rewards   £250.00"
    assert gbp[1] == "fees      £83.56 (£83.33 on rewards, £0.23 on bonuses)"


def test_the_currency_is_one_a_recruiter_pays_in(tmp_path):
    from webapp.studydef import load_study_file

    with pytest.raises(StudyDefinitionError, match=r"payment.currency: 'JPY' is not a currency"):
        load_study_file(write_study(tmp_path / "a", study=STUDY.replace("EUR", "JPY")))
    mturk = STUDY.replace("platforms: [prolific, link]", "platforms: [prolific, mturk]")
    with pytest.raises(StudyDefinitionError, match=r"platforms\[1\]: MTurk pays in US dollars"):
        load_study_file(write_study(tmp_path / "b", study=mturk))
    # Naming no platforms: those that pay in the study's currency.
    default = re.sub(r"  platforms: .*\n", "", STUDY)
    default_study = load_study_file(write_study(tmp_path / "c", study=default))
    assert default_study.recruitment.platforms == ("prolific", "link")
    assert load_study_file(ROOT / "stimuli/studies/product-choice-demo.yaml").payment == Payment(
        currency="USD", base=3.0, bonus=Bonus(amount=0.1, rule="majority_choice", max=None)
    )


def _older_copy(tmp_path: Path) -> Path:
    """The German demo and its pairs file with the dollar keys of earlier versions."""
    folder = tmp_path / "older"
    folder.mkdir()
    (folder / "product_pairs").mkdir()
    for name in (GERMAN_DEMO.name, "product_pairs/demo-de.yaml"):
        text = (GERMAN_DEMO.parent / name).read_text()
        for new, old in OLDER_KEYS:
            text = re.sub(new, old, text, flags=re.M)
        (folder / name).write_text(text.replace("  currency: EUR\n", ""))
    return folder / GERMAN_DEMO.name


def test_older_dollar_keys_load_as_before_with_one_note_per_file_and_key(tmp_path):
    from webapp.studydef import folder_bundle, load_bundle, load_study_file

    older = _older_copy(tmp_path)
    notes: list[str] = []
    definition = load_bundle(folder_bundle(older), notes)
    current = load_study_file(GERMAN_DEMO)
    assert definition == replace(current, payment=replace(current.payment, currency="USD"))
    unit = "(amounts are in the study's payment.currency, USD unless it says otherwise)"
    assert notes == [  # in the order validation meets them: blocks, then payment
        "product_pairs/demo-de.yaml: pairs[0].target.price_usd: 'price_usd' is deprecated: "
        f"write 'price' {unit} (line 9) (and 7 more in this file)",
        "product-choice-demo-de.yaml: tasks[3].wtp.max_premium_usd: 'max_premium_usd' is "
        f"deprecated: write 'max_premium' {unit} (line 68)",
        "product-choice-demo-de.yaml: payment.base_usd: 'base_usd' is deprecated: write 'base' "
        f"{unit} (line 20)",
    ]
    both = older.read_text().replace("  base_usd: 1.50", "  base_usd: 1.50\n  base: 1.50")
    older.write_text(both)
    with pytest.raises(StudyDefinitionError, match="give 'base' or the older 'base_usd', not both"):
        load_study_file(older)


def test_study_load_prints_the_notes_and_check_stores_nothing(app, runner, tmp_path):
    from webapp.extensions import db
    from webapp.models import Study

    older = _older_copy(tmp_path)
    result = runner.invoke(args=["study", "load", "--check", str(older)])
    assert result.exit_code == 0, result.output
    assert "valid: produktwahl-demo" in result.output and "(not stored)" in result.output
    assert result.output.count("note: ") == 3
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(Study)) == 0
    result = runner.invoke(args=["study", "load", str(older)])
    assert result.exit_code == 0 and "created: produktwahl-demo" in result.output
    assert result.output.count("note: ") == 3
    bad = write_study(tmp_path / "bad", study=STUDY.replace("base: 2.50", "base: zwei"))
    result = runner.invoke(args=["study", "load", "--check", str(bad)])
    assert result.exit_code == 1 and "payment.base: expected a number" in result.output
