"""Authenticity signals on every answered page (``webapp.services.authenticity``).

- ``page_visit``: the words on the page, the page script's counts (paste events and pasted
  characters, keystrokes and characters in text fields, times and milliseconds hidden, an
  interaction before the submit, automation hints) and the server's own checks (honeypot,
  canary word, device hint, a grid answered alike, a hash of the free text). All nullable:
  pages answered before, or without JavaScript, have none.

Written by hand.

Revision ID: 0017_authenticity_signals
Revises: 0016_currency_definitions
Create Date: 2026-12-01 09:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0017_authenticity_signals"
down_revision = "0016_currency_definitions"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("words", sa.Integer(), "words of text on the page"),
    (
        "signals",
        sa.String(length=7),
        "the page script's signals: js, none (no JavaScript) or invalid",
    ),
    ("paste_count", sa.Integer(), "paste events in text fields"),
    ("pasted_chars", sa.Integer(), "characters pasted"),
    ("keystrokes", sa.Integer(), "key presses in text fields"),
    ("text_chars", sa.Integer(), "characters in text fields"),
    ("hidden_count", sa.Integer(), "times the page was hidden"),
    ("hidden_ms", sa.Integer(), "time the page was hidden, ms"),
    ("interacted", sa.Boolean(), "a trusted pointer or key event before the submit"),
    ("automation", sa.Integer(), "automation hint bits"),
    ("honeypot", sa.Boolean(), "the invisible field was filled"),
    ("canary", sa.Boolean(), "an answer has the canary word"),
    (
        "device_hint",
        sa.String(length=16),
        "keyed hash of User-Agent, screen, time zone and languages",
    ),
    ("grid_items", sa.Integer(), "single-choice questions"),
    ("straightlined", sa.Boolean(), "every single-choice question answered alike"),
    ("text_hash", sa.String(length=16), "hash of the page's normalised free-text answers"),
)


def upgrade():
    # Plain ADD COLUMNs (nullable): batch mode would copy page_visit on SQLite.
    for name, type_, comment in _COLUMNS:
        op.add_column("page_visit", sa.Column(name, type_, nullable=True, comment=comment))


def downgrade():
    for name, _, _ in reversed(_COLUMNS):
        if op.get_bind().dialect.name == "sqlite":
            op.execute(sa.text(f"ALTER TABLE page_visit DROP COLUMN {name}"))
        else:
            op.drop_column("page_visit", name)
