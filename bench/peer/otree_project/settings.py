"""oTree settings of the peer benchmark: the FrameLab product-choice demo as an oTree project.

Written for bench/peer. Participants arrive through a room link carrying their
Prolific ID as ``participant_label``, the way oTree's documentation connects Prolific.
"""

from os import environ

SESSION_CONFIGS = [
    dict(
        name="product_choice",
        display_name="Choosing between products (FrameLab demo, oTree version)",
        app_sequence=["product_choice"],
        num_demo_participants=2,
    ),
]

SESSION_CONFIG_DEFAULTS = dict(real_world_currency_per_point=1.00, participation_fee=3.00, doc="")

PARTICIPANT_FIELDS = ["formats", "target_sides", "pair_order", "screened_out"]
SESSION_FIELDS = []

ROOMS = [dict(name="peer", display_name="Peer benchmark")]

LANGUAGE_CODE = "en"
REAL_WORLD_CURRENCY_CODE = "USD"
USE_POINTS = False

ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = environ.get("OTREE_ADMIN_PASSWORD")
DEMO_PAGE_INTRO_HTML = ""
SECRET_KEY = environ.get("OTREE_SECRET_KEY", "peer-benchmark-only")
