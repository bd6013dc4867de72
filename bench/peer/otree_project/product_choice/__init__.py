"""The FrameLab product-choice demo written as an oTree app, for the peer benchmark.

Same pages, texts and form fields as ``stimuli/studies/product-choice-demo.yaml``: consent,
instructions, a three-question quiz (two attempts, then screened out), ten pairs each with a
choice page and a willingness-to-pay page, an attention check, demographics and a debrief.
Texts are read from FrameLab's own study files so both platforms show the same words. Written
in oTree's documented idiom (one app, ``NUM_ROUNDS`` = pairs, round-1/last-round pages).
"""

import os
import random
import re
from pathlib import Path

import yaml
from otree.api import (
    BaseConstants,
    BaseGroup,
    BasePlayer,
    BaseSubsession,
    Page,
    models,
    widgets,
)

_REPO = Path(os.environ.get("PEER_REPO", Path(__file__).resolve().parents[4]))
_STUDY = _REPO / "stimuli" / "studies" / "product-choice-demo.yaml"
STUDY = yaml.safe_load(_STUDY.read_text(encoding="utf-8"))
BLOCKS = {b["id"]: b for b in STUDY["tasks"]}
PAIRS = yaml.safe_load((_STUDY.parent / BLOCKS["choices"]["pairs"]).read_text(encoding="utf-8"))[
    "pairs"
]
QUIZ = BLOCKS["quiz"]["questions"]
ATTENTION = BLOCKS["attention"]["questions"][0]
DEMOGRAPHICS = {q["id"]: q for q in BLOCKS["demographics"]["questions"]}
WTP = BLOCKS["choices"]["wtp"]
_AMOUNT_RE = re.compile(r"^(\d+(\.\d{0,2})?|\.\d{1,2})$", re.ASCII)


class C(BaseConstants):
    NAME_IN_URL = "product_choice"
    PLAYERS_PER_GROUP = None
    NUM_ROUNDS = len(PAIRS)
    QUIZ_ATTEMPTS = BLOCKS["quiz"]["attempts"]


class Subsession(BaseSubsession):
    pass


class Group(BaseGroup):
    pass


def _radio(question):
    return models.StringField(
        label=question["text"], choices=question["options"], widget=widgets.RadioSelect
    )


class Player(BasePlayer):
    how_many = _radio(QUIZ[0])
    what_choose = _radio(QUIZ[1])
    price_question = _radio(QUIZ[2])
    quiz_attempts = models.IntegerField(initial=0)
    pair_id = models.StringField()
    format = models.StringField()
    target_side = models.StringField()
    side = models.StringField(
        label=BLOCKS["choices"]["prompt"], choices=["left", "right"], widget=widgets.RadioSelect
    )
    chose_target = models.BooleanField()
    premium = models.StringField(label="Additional amount in US dollars")
    premium_usd = models.FloatField()
    instructed = _radio(ATTENTION)
    age = models.IntegerField(
        label=DEMOGRAPHICS["age"]["text"],
        min=DEMOGRAPHICS["age"]["min"],
        max=DEMOGRAPHICS["age"]["max"],
        blank=True,
    )
    shopping = models.StringField(
        label=DEMOGRAPHICS["shopping"]["text"],
        choices=DEMOGRAPHICS["shopping"]["options"],
        widget=widgets.RadioSelect,
        blank=True,
    )


def creating_session(subsession: Subsession):
    """Counterbalance as FrameLab does: half the pairs by review, half by summary, sides random."""
    for player in subsession.get_players():
        pp = player.participant
        if subsession.round_number == 1:
            rng = random.Random(pp.id_in_session)
            order = list(range(len(PAIRS)))
            rng.shuffle(order)
            sequence = pp.id_in_session % 2
            pp.pair_order = order
            pp.formats = ["original" if (k + sequence) % 2 else "summary" for k in order]
            pp.target_sides = [rng.choice(["left", "right"]) for _ in order]
            pp.screened_out = False
        r = subsession.round_number - 1
        player.pair_id = PAIRS[pp.pair_order[r]]["id"]
        player.format = pp.formats[r]
        player.target_side = pp.target_sides[r]


def _pair(player: Player):
    return PAIRS[player.participant.pair_order[player.round_number - 1]]


# PAGES
class _FirstRound(Page):
    @staticmethod
    def is_displayed(player: Player):
        return player.round_number == 1 and not player.participant.screened_out


class Consent(_FirstRound):
    @staticmethod
    def vars_for_template(player: Player):
        return dict(text=BLOCKS["consent"]["text"])


class Instructions(_FirstRound):
    @staticmethod
    def vars_for_template(player: Player):
        return dict(text=BLOCKS["instructions"]["text"])


class Quiz(_FirstRound):
    form_model = "player"
    form_fields = [q["id"] for q in QUIZ]

    @staticmethod
    def error_message(player: Player, values):
        wrong = [q["id"] for q in QUIZ if values[q["id"]] != q["correct"]]
        if not wrong:
            return None
        player.quiz_attempts += 1
        if player.quiz_attempts >= C.QUIZ_ATTEMPTS:
            player.participant.screened_out = True
            return None
        left = C.QUIZ_ATTEMPTS - player.quiz_attempts
        return {w: f"Not quite; {left} attempt left." for w in wrong}


class ScreenedOut(Page):
    @staticmethod
    def is_displayed(player: Player):
        return player.participant.screened_out and player.round_number == 1

    @staticmethod
    def vars_for_template(player: Player):
        return dict(code=STUDY["recruitment"]["completion_codes"]["screened_out"])


class _Trial(Page):
    @staticmethod
    def is_displayed(player: Player):
        return not player.participant.screened_out


class Choice(_Trial):
    form_model = "player"
    form_fields = ["side"]

    @staticmethod
    def vars_for_template(player: Player):
        pair = _pair(player)
        first, second = (
            (pair["target"], pair["control"])
            if player.target_side == "left"
            else (pair["control"], pair["target"])
        )
        key = "review" if player.format == "original" else "summary"
        return dict(
            product_type=pair["product_type"],
            label=BLOCKS["choices"]["labels"][player.format],
            left=dict(manufacturer=first["manufacturer"], text=first[key]),
            right=dict(manufacturer=second["manufacturer"], text=second[key]),
        )

    @staticmethod
    def before_next_page(player: Player, timeout_happened):
        player.chose_target = player.side == player.target_side


class Wtp(_Trial):
    form_model = "player"
    form_fields = ["premium"]

    @staticmethod
    def vars_for_template(player: Player):
        pair = _pair(player)
        chosen, other = (
            (pair["target"], pair["control"])
            if player.chose_target
            else (pair["control"], pair["target"])
        )
        price = f"${other['price_usd']:,.2f}"
        question = WTP["question"].replace("{price}", price)
        question = question.replace("{chosen}", chosen["manufacturer"])
        return dict(question=question, chosen=chosen["manufacturer"], price=price)

    @staticmethod
    def error_message(player: Player, values):
        text = (values["premium"] or "").strip().removeprefix("$").strip().replace(" ", "")
        if not _AMOUNT_RE.match(text):
            return {"premium": "Please enter a number of dollars, for example 5 or 12.50."}
        if float(text) > WTP["max_premium_usd"]:
            return {"premium": f"Please enter at most ${WTP['max_premium_usd']:,.2f}."}
        return None

    @staticmethod
    def before_next_page(player: Player, timeout_happened):
        player.premium_usd = float(player.premium.strip().removeprefix("$").strip())


class _LastRound(Page):
    @staticmethod
    def is_displayed(player: Player):
        return player.round_number == C.NUM_ROUNDS and not player.participant.screened_out


class Attention(_LastRound):
    form_model = "player"
    form_fields = ["instructed"]


class Demographics(_LastRound):
    form_model = "player"
    form_fields = ["age", "shopping"]

    @staticmethod
    def vars_for_template(player: Player):
        return dict(text=BLOCKS["demographics"]["text"])


class Debrief(_LastRound):
    @staticmethod
    def vars_for_template(player: Player):
        return dict(text=BLOCKS["debrief"]["text"])


class Finished(_LastRound):
    @staticmethod
    def vars_for_template(player: Player):
        return dict(code=STUDY["recruitment"]["completion_codes"]["completed"])


page_sequence = [
    Consent,
    Instructions,
    Quiz,
    ScreenedOut,
    Choice,
    Wtp,
    Attention,
    Demographics,
    Debrief,
    Finished,
]
